"""Embedding throughput of a config's model encoders on its tasks, and the embed stage it implies.

For every model encoder (not derived) and task of a config: embed a random sample of ``--n``
training examples (a seeded sample, so long and short examples are mixed as in a whole split), all
of the config's layer positions in one pass, with the config's pooling, max_length and batch size;
print examples per second of wall time and per CPU-second, the mean token count, and the time the
config's embed jobs would take at that rate (train cap + dev set). The models are read as the embed
job reads them (staged ones from resources/models/, so stage first). One process, one thread count,
models and tasks measured side by side; the load average is printed before and after, because a
shared machine's rate moves with its load.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.embedding_throughput config/real_models.yaml [--n 256] [--threads 2]
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

from benchmarks.common import REPO, SCHEMA


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", type=Path)
    parser.add_argument("--n", type=int, default=256, help="examples per model and task (default 256)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the embed rule uses 2)")
    args = parser.parse_args()

    import numpy as np
    import torch

    from affine_homotopy.study.validation import load_config
    from affine_homotopy.models.encoders import embed_texts, load_encoder
    from affine_homotopy.study.layers import layer_positions, resolve_layers
    from affine_homotopy.jobs.resources import task_size
    from affine_homotopy.models.task_data import load_task_split

    config_path = args.config.resolve()
    os.chdir(REPO)  # the config's relative paths (GLUE folder, resources/) are relative to the repository root
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(args.threads)
    config = load_config(config_path, SCHEMA)
    settings = config["embedding"]
    positions = layer_positions(config["layers"])
    print(f"config {args.config}; torch threads {torch.get_num_threads()}; sample {args.n} training examples "
          f"per task; batch {settings['batch_size']}, max_length {settings['max_length']}; "
          f"load average before {os.getloadavg()[0]:.2f}")
    samples = {}
    for task, spec in config["tasks"].items():
        frame = load_task_split(task, spec, "train", f"resources/data/{task}")
        rng = np.random.default_rng(0)
        samples[task] = frame.iloc[np.sort(rng.choice(len(frame), size=min(args.n, len(frame)), replace=False))]
    print(f"{'encoder':14s} {'task':6s} {'ex/s':>7s} {'ex/CPU-s':>9s} {'tokens':>7s} {'N':>6s} {'projected':>10s}")
    total = 0.0
    for name, spec in config["encoders"].items():
        if spec["source"] == "derived":
            continue
        staged = f"resources/models/{name}" if spec["source"] in ("hf", "pypi") else None
        encoder = load_encoder(name, spec, "cpu", staged)
        layers = resolve_layers(positions, encoder.depth)
        pooling = spec.get("pooling") or settings["pooling"]
        for task, frame in samples.items():
            texts_b = None if frame["text_b"].isna().all() else frame["text_b"].tolist()
            tokens = encoder.tokenizer(frame["text_a"].tolist(), texts_b, truncation=True, max_length=settings["max_length"])
            wall, cpu = time.perf_counter(), time.process_time()
            embed_texts(encoder, frame["text_a"].tolist(), texts_b, layers, pooling, settings["max_length"],
                        settings["batch_size"], "cpu", name)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            n = task_size(config["tasks"][task], "train") + task_size(config["tasks"][task], "dev")
            projected = n * wall / len(frame)
            total += projected
            print(f"{name:14s} {task:6s} {len(frame) / wall:7.1f} {len(frame) / cpu:9.1f} "
                  f"{np.mean([len(t) for t in tokens['input_ids']]):7.1f} {n:6d} {projected / 60:8.1f} min", flush=True)
    print(f"embed stage at these rates, one job at a time: {total / 60:.1f} min; "
          f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
