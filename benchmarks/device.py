"""The workflow's stages on a GPU against one CPU thread, side by side in one process on one machine,
with the values each device reports compared.

    python -m benchmarks device [--quick] [--data DIR] [--sizes 2000 18000] [--sections daff extrinsic embed]
    python -m benchmarks device --prepare DIR [--rows 18000]     # here: real data for a lent GPU machine

Without CUDA the CPU side runs alone (it says so), which checks the suite anywhere.

Data: ``--data``, a folder ``--prepare`` wrote (the first ``--rows`` SST-2 training sentences,
all-MiniLM-L6-v2 mean pooling, layers 3 and 6 as two encoders, their labels and MiniLM's tokenizer:
small enough to travel to a machine that cannot read the GLUE files); without it synthetic encoders.
Sections, each on the CPU with one torch thread and on the GPU, the GPU warmed up first and
synchronised before each clock reading (wall seconds):

* **daff**: :func:`pairwise_intrinsic` (factorisation included, tol 1e-3, float64) on both ordered
  pairs at each of ``--sizes`` (rows repeated in order beyond the data's);
* **extrinsic**: :func:`extrinsic_distances` at its default settings on both pairs at N = 2,000 (the
  task probes, 100 random-label probes per encoder and the d_aff weights fitted once on the CPU);
* **embed**: :func:`embed_texts` as the embed job calls it (every layer, mean pooling, max_length 128,
  batches of 64, float32) with a randomly initialised encoder of MiniLM's shape and one of BERT-base's
  on the package's synthetic paraphrase pairs (a forward pass costs the same whatever the weights).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks.common import add_glue_dir, ratio, say, setup_line, synthetic_encoders, synthetic_labels

import numpy as np  # noqa: E402  (after benchmarks.common: its environment defaults come first)
import torch  # noqa: E402

from affine_homotopy.core.extrinsic import ExtrinsicSettings, extrinsic_distances  # noqa: E402
from affine_homotopy.core.intrinsic import IntrinsicSettings, pairwise_intrinsic  # noqa: E402
from affine_homotopy.core.probes import fit_random_probes_sgd, fit_softmax_probe, random_labels  # noqa: E402

LAYERS = (3, 6)
PAIRS = [(0, 1), (1, 0)]
DATA_FILE, TOKENIZER = "sst2_minilm_layers.npz", "minilm_tokenizer"
# (name, layers, width, attention heads, feed-forward width) of the randomly initialised encoders
ENCODER_SHAPES = (("MiniLM-L6 shape", 6, 384, 12, 1536), ("BERT-base shape", 12, 768, 12, 3072))


def prepare(folder: Path, rows: int, glue_dir: Path) -> None:
    """Write ``--data``'s folder: ``rows`` rows of MiniLM's layers 3 and 6 of SST-2, the labels, the tokenizer."""
    from benchmarks.common import minilm_encoder, sst2_training_set

    embedded, labels = sst2_training_set(glue_dir)
    arrays = {f"layer{layer}": np.ascontiguousarray(embedded[layer - 1][:rows]) for layer in LAYERS}
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / DATA_FILE, labels=labels[:rows].astype(np.int64), **arrays)
    minilm_encoder().tokenizer.save_pretrained(folder / TOKENIZER)
    say(f"wrote {folder / DATA_FILE} ({(folder / DATA_FILE).stat().st_size / 1e6:.1f} MB) and {folder / TOKENIZER}")


class Timer:
    """Wall seconds of a block on ``device``, the device synchronised at both ends."""

    def __init__(self, device: str) -> None:
        self.device = device

    def __enter__(self) -> Timer:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        self.start = time.perf_counter()
        return self

    def __exit__(self, *_: object) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        self.seconds = time.perf_counter() - self.start


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


def side_by_side(label: str, seconds: dict[str, float], values: dict[str, float] | None = None) -> None:
    """One row: CPU and GPU seconds, CPU/GPU, and the values' relative difference where both ran."""
    cpu, gpu = seconds["cpu"], seconds.get("gpu", float("nan"))
    compared = values is not None and "gpu" in values
    say(f"{label:<40} {cpu:9.2f} {gpu:9.2f} {ratio(cpu, gpu) if 'gpu' in seconds else '-':>8} "
        + (f"{values['cpu']:.6f} / {values['gpu']:.6f} ({relative(values['cpu'], values['gpu']):.1e})" if compared
           else f"{values['cpu']:.6f}" if values else ""))


def daff_section(reps: list[np.ndarray], names: list[str], sizes: list[int], devices: dict[str, str]) -> None:
    say("\nd_aff: pairwise_intrinsic per ordered pair, tol 1e-3, float64, factorisation included")
    say(f"{'N, pair':<40} {'CPU s':>9} {'GPU s':>9} {'CPU/GPU':>8} d_aff CPU / GPU (relative difference)")
    stored = reps[0].shape[0]
    for n in sizes:
        sized = [np.ascontiguousarray(rep[np.arange(n) % stored]) for rep in reps]
        for i, j in PAIRS:
            seconds, values = {}, {}
            for side, device in devices.items():
                with Timer(device) as clock:
                    result = pairwise_intrinsic(sized, names, IntrinsicSettings(measures=("d_aff",), device=device),
                                                pairs=[(i, j)])
                seconds[side], values[side] = clock.seconds, float(result.matrices["d_aff"][i, j])
            side_by_side(f"{n}, {names[i]} -> {names[j]}", seconds, values)


def extrinsic_section(reps: list[np.ndarray], names: list[str], labels: np.ndarray, devices: dict[str, str]) -> None:
    n = min(2000, reps[0].shape[0])
    reps, labels = [np.ascontiguousarray(rep[:n]) for rep in reps], labels[:n]
    probes = [fit_softmax_probe(rep, labels, 2) for rep in reps]
    randoms = [fit_random_probes_sgd(rep, random_labels(n, 2, range(100)), 2) for rep in reps]
    intrinsic = pairwise_intrinsic(reps, names, IntrinsicSettings(measures=("d_aff",), keep_weights=True))
    results, seconds = {}, {}
    for side, device in devices.items():
        with Timer(device) as clock:
            results[side] = extrinsic_distances(reps, probes, names, intrinsic.weights, randoms,
                                                ExtrinsicSettings(device=device), intrinsic.matrices["d_aff"], PAIRS)
        seconds[side] = clock.seconds
    say(f"\nextrinsic: extrinsic_distances at its default settings, N = {n}, {len(PAIRS)} pairs, seconds per pair")
    say(f"{'measure':<40} {'CPU s':>9} {'GPU s':>9} {'CPU/GPU':>8} largest value CPU / GPU (relative difference)")
    for measure in ("d_psi", "d_worst", "d_worst_search"):
        per_pair = {side: result.seconds[measure] / len(PAIRS) for side, result in results.items()}
        values = {side: float(max(result.matrices()[measure][p] for p in PAIRS)) for side, result in results.items()}
        side_by_side(measure, per_pair, values)
    side_by_side("whole call", {side: s / len(PAIRS) for side, s in seconds.items()})


def embed_section(tokenizer_folder: Path | None, count: int, devices: dict[str, str]) -> None:
    from transformers import AutoTokenizer, BertConfig, BertModel

    from affine_homotopy.models.encoders import embed_texts, wrap_model
    from affine_homotopy.models.task_data import load_task_split

    if tokenizer_folder is None:
        from benchmarks.common import minilm_encoder

        tokenizer = minilm_encoder().tokenizer
    else:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
    spec = {"source": "synthetic", "generator": "synthetic_paraphrase", "seed": 0, "n_train": count, "n_dev": 10,
            "label_noise": 0.0}
    frame = load_task_split("paraphrase", spec, "train")
    say(f"\nembed: {count} synthetic paraphrase pairs, every layer, mean pooling, max_length 128, batches of 64, "
        f"float32; seconds per 1,000 examples")
    say(f"{'encoder':<40} {'CPU s':>9} {'GPU s':>9} {'CPU/GPU':>8} largest difference / largest entry")
    for name, layers, width, heads, feed_forward in ENCODER_SHAPES:
        torch.manual_seed(0)
        model = BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=width, num_hidden_layers=layers,
                                     num_attention_heads=heads, intermediate_size=feed_forward))
        encoder = wrap_model(model, tokenizer, name)
        seconds, outputs = {}, {}
        for side, device in devices.items():
            encoder.model.to(device)
            embed = lambda: embed_texts(encoder, frame["text_a"].tolist(), frame["text_b"].tolist(),  # noqa: E731
                                        list(range(layers + 1)), batch_size=64, device=device, name=name)
            if side == "gpu":
                embed()  # the GPU's kernels loaded before the clock
            with Timer(device) as clock:
                outputs[side] = embed()
            seconds[side] = 1000 * clock.seconds / count
        difference = (f"{np.abs(outputs['cpu'] - outputs['gpu']).max() / np.abs(outputs['cpu']).max():.1e}"
                      if "gpu" in outputs else "")
        say(f"{name + f' ({layers} x {width})':<40} {seconds['cpu']:9.2f} {seconds.get('gpu', float('nan')):9.2f} "
            f"{ratio(seconds['cpu'], seconds['gpu']) if 'gpu' in seconds else '-':>8} {difference}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks device", description=__doc__.split("\n\n")[0])
    add_glue_dir(parser, "SST-2/train.tsv (--prepare)")
    parser.add_argument("--prepare", type=Path, help="write the data into this folder and stop")
    parser.add_argument("--rows", type=int, default=18000, help="rows written by --prepare")
    parser.add_argument("--data", type=Path, help="the folder --prepare wrote (default: synthetic encoders)")
    parser.add_argument("--device", default="cuda", help="the accelerator (default cuda)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 18000], help="d_aff's sizes")
    parser.add_argument("--sections", nargs="+", choices=("daff", "extrinsic", "embed"),
                        default=["daff", "extrinsic", "embed"])
    parser.add_argument("--embed", type=int, default=256, help="examples embedded (default 256)")
    parser.add_argument("--quick", action="store_true", help="N = 1,000 synthetic rows, 64 examples embedded")
    args = parser.parse_args(argv)
    if args.prepare:
        prepare(args.prepare, args.rows, args.glue_dir)
        return 0
    if args.quick:
        args.sizes, args.embed = [1000], 64
    devices = {"cpu": "cpu"}
    if torch.cuda.is_available() or not args.device.startswith("cuda"):
        devices["gpu"] = args.device
    else:
        say("no CUDA device here: the CPU side alone (ratios need a GPU; --device names another accelerator)")
    if args.data is not None:
        loaded = np.load(args.data / DATA_FILE)
        reps, labels = [loaded[f"layer{layer}"] for layer in LAYERS], loaded["labels"]
        names, data = [f"MiniLM L{layer}" for layer in LAYERS], f"{args.data / DATA_FILE} (SST-2, all-MiniLM-L6-v2)"
    else:
        reps, names = synthetic_encoders(2, min(max(args.sizes), 2000), 384)
        labels, data = synthetic_labels(reps[1]), "synthetic encoders"
    torch.set_num_threads(1)
    gpu = torch.cuda.get_device_name(0) if "gpu" in devices and args.device.startswith("cuda") else devices.get("gpu", "none")
    say(setup_line(data, f"N = {args.sizes} (d_aff), {reps[0].shape[0]} stored rows, D = {reps[0].shape[1]}",
                   "float64 solves, float32 embeddings", f"CPU against {gpu} (torch {torch.__version__})"))
    if "gpu" in devices and "daff" in args.sections:
        pairwise_intrinsic([rep[:500] for rep in reps], names, IntrinsicSettings(measures=("d_aff",), device=args.device))
    if "daff" in args.sections:
        daff_section(reps, names, args.sizes, devices)
    if "extrinsic" in args.sections:
        extrinsic_section(reps, names, labels, devices)
    if "embed" in args.sections:
        embed_section(args.data / TOKENIZER if args.data else None, args.embed, devices)
    return 0
