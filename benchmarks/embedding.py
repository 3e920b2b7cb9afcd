"""Embedding throughput of a config's model encoders on its tasks, and the embed stage it implies.

    python -m benchmarks embedding [config/real_models.yaml] [--n 256] [--threads 2]

For every model encoder (not derived) and task of the config: a seeded sample of ``--n`` training
examples embedded at all of the config's layer positions in one pass, with its pooling, max_length
and batch size, as the embed job does (staged models from resources/models/: stage first). Printed:
examples per wall second and per CPU second (their ratio: the threads the encoder kept busy), the
mean token count, and the training split's embed time at that rate, all encoders side by side.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

from benchmarks.common import REPO, SCHEMA, ratio, say, setup_line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks embedding", description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path, nargs="?", default=REPO / "config" / "config.yaml",
                        help="a study config (default: the demo's)")
    parser.add_argument("--n", type=int, default=256, help="examples per model and task (default 256)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the embed rule uses 2)")
    args = parser.parse_args(argv)

    import numpy as np
    import torch

    from affine_homotopy.models.encoders import embed_texts, load_encoder
    from affine_homotopy.models.task_data import load_task_split
    from affine_homotopy.study.layers import layer_positions, resolve_layers
    from affine_homotopy.study.validation import load_config

    config_path = args.config.resolve()
    os.chdir(REPO)  # the config's relative paths (GLUE folder, resources/) are relative to the repository root
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(args.threads)
    config = load_config(config_path, SCHEMA)
    settings, positions = config["embedding"], layer_positions(config["layers"])
    frames = {task: load_task_split(task, spec, "train", f"resources/data/{task}") for task, spec in config["tasks"].items()}
    samples = {task: frame.iloc[np.sort(np.random.default_rng(0).choice(len(frame), min(args.n, len(frame)), replace=False))]
               for task, frame in frames.items()}
    say(setup_line(f"{args.config}'s tasks ({', '.join(samples)}), {args.n} training examples each",
                   f"batch {settings['batch_size']}, max_length {settings['max_length']}", "float32"))
    say(f"{'encoder':14s} {'task':10s} {'ex/s':>7s} {'ex/CPU-s':>9s} {'CPU/wall':>8s} {'tokens':>7s} {'N':>6s} {'embed':>9s}")
    total = 0.0
    for name, spec in config["encoders"].items():
        if spec["source"] == "derived":
            continue
        encoder = load_encoder(name, spec, "cpu", f"resources/models/{name}" if spec["source"] in ("hf", "pypi") else None)
        layers, pooling = resolve_layers(positions, encoder.depth), spec.get("pooling") or settings["pooling"]
        for task, frame in samples.items():
            texts_a = frame["text_a"].tolist()
            texts_b = None if frame["text_b"].isna().all() else frame["text_b"].tolist()
            tokens = encoder.tokenizer(texts_a, texts_b, truncation=True, max_length=settings["max_length"])
            wall, cpu = time.perf_counter(), time.process_time()
            embed_texts(encoder, texts_a, texts_b, layers, pooling, settings["max_length"], settings["batch_size"], "cpu", name)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            projected = len(frames[task]) * wall / len(frame)
            total += projected
            say(f"{name:14s} {task:10s} {len(frame) / wall:7.1f} {len(frame) / cpu:9.1f} {ratio(cpu, wall):>8s} "
                f"{np.mean([len(t) for t in tokens['input_ids']]):7.1f} {len(frames[task]):6d} {projected / 60:6.1f} min")
    say(f"training splits at these rates, one job at a time: {total / 60:.1f} min; load average after {os.getloadavg()[0]:.2f}")
    return 0
