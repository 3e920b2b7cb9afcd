"""d_aff and the extrinsic measures on a GPU against one CPU thread, side by side in one run on one
machine, with the values each device reports compared.

Two steps, because a lent GPU machine cannot read the GLUE files or the embedding cache:

1. here, write the data the run needs into a git-ignored folder small enough to travel with the
   working tree (``--rows`` rows of two encoders, float32: 18,000 rows are 55 MB; and the WordPiece
   tokenizer of the package all-MiniLM-L6-v2)::

       OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.device_ratio --prepare .device_data [--rows 18000]

2. on the GPU machine, from the repository root (the package's sources on ``PYTHONPATH``; the LPs need
   ``highspy``)::

       PYTHONPATH=src python3 -m benchmarks.device_ratio --data .device_data --commit REV [--out DIR]

Data: SST-2's training sentences (``<glue-dir>/SST-2/train.tsv``, file order, the first ``--rows``)
embedded by all-MiniLM-L6-v2 with mean pooling (:func:`benchmarks.common.sst2_training_set`), its
layers 3 and 6 as two encoders, and the sentences' labels. The two ordered pairs (layer 3 -> layer 6
and back) are the hard pairs of ``benchmarks/daff_passes.py``.

What runs, each on the CPU with one torch thread and on the GPU (one CPU thread beside it), one
after the other in this process, the GPU warmed up first (CUDA's start and the libraries' handles
are not counted); wall seconds, the GPU synchronised before each clock reading:

* **d_aff** (the engine as the workflow calls it: :func:`pairwise_intrinsic`, factorisation
  included, ``tol`` 1e-3, float64, jacobi, working set) on both pairs at N = 2,000, at ``--rows`` and
  at 67,349 (SST-2's training-set size) made of the ``--rows`` rows repeated in order: a problem of
  the full set's size, each data pass costing what one over the full set costs. Its value is not the
  ``--rows`` rows' own: the rank rule's threshold grows with N, so at 67,349 rows it drops directions
  it keeps at 18,000. Printed per pair: seconds, fits, the data passes (solver seconds over one
  residual pass ``[X, 1] B - Y`` with its row norms, timed on the same device) and d_aff.
* **extrinsic** (:func:`extrinsic_distances` at its default settings: certified d_psi, d_worst,
  and d_worst_search at the default search budget) on both pairs at N = 2,000 (and at ``--rows``
  with ``--extrinsic-rows``), with the task probes and 100 random-label SGD probes per encoder fitted
  once on the CPU and shared by both runs. Printed per measure: seconds per pair on each device.

* **job** (``--sections job``, on a file of several layers: ``--prepare DIR --rows 4000 --layers 1 2 3 4
  5 6``): d_aff on every ordered pair of the file's layers in one engine call, the intrinsic job's
  form, where the engine solves all targets of one source together and a GPU's fixed cost per fit
  is shared by them.
* **api** (``--sections api``): the library on the GPU, every measure of the registry
  (:func:`affine_homotopy.distances`) and :func:`affine_homotopy.d_psi` on layer 3 mapped onto layer
  6 at N = 2,000 with ``device='cuda'`` against ``device='cpu'``: each value and their relative
  difference.
* **embed** (:func:`embed_texts` as the embed job calls it: every layer from one forward pass,
  mean pooling, ``max_length`` 128, batches of 64, float32) with two randomly initialised BERT
  encoders, one of all-MiniLM-L6-v2's shape (6 layers, 384 wide) and one of BERT-base's, the shape
  of every encoder of the paper (12 layers, 768 wide), all-MiniLM-L6-v2's WordPiece tokenizer, on
  the package's synthetic paraphrase pairs (MRPC-like; no download): a forward pass costs the same
  whatever the weights. The CPU embeds ``--embed-cpu`` pairs; the GPU the same pairs (their
  embeddings compared) and ``--embed-gpu`` pairs, its throughput, in batches of 64 (the config's
  default) and of 512. Printed: examples per second.

The two devices' values are compared: a certified d_aff or d_psi is within ``tol`` (relative) of
its optimum on either device, so the two agree to about ``tol``; a larger difference is a bug.

Output: the table on stdout, and with ``--out`` the rows as ``device_ratio.csv`` (the columns of
``benchmarks/device_measurements.csv``, the committed record, which these rows are appended to).
The machine (GPU name, CUDA, CPU model and count), torch's version, the dtypes, the float32 matrix
product's TF32 setting, the sizes and the data's fingerprints are printed first.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import hashlib
import json
import os
import platform
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import add_glue_dir, say

import numpy as np  # noqa: E402  (after benchmarks.common: its environment defaults come first)
import torch  # noqa: E402

from affine_homotopy.core.extrinsic import ExtrinsicSettings, extrinsic_distances  # noqa: E402
from affine_homotopy.core.intrinsic import IntrinsicSettings, pairwise_intrinsic  # noqa: E402
from affine_homotopy.core.linalg import factorise  # noqa: E402
from affine_homotopy.core.probes import fit_random_probes_sgd, fit_softmax_probe, random_labels  # noqa: E402

LAYERS = (3, 6)  # all-MiniLM-L6-v2's layers 3 and 6: the hard pairs of benchmarks/daff_passes.py
NAMES = [f"MiniLM-L6 L{layer}" for layer in LAYERS]
PAIRS = [(0, 1), (1, 0)]
FULL_SET = 67349  # SST-2's training set
SMALL = 2000
N_RANDOM = 100
TOL = 1e-3
DATA_FILE = "sst2_minilm_l6_layers.npz"
TOKENIZER = "minilm_tokenizer"
# (name, layers, width, attention heads, feed-forward width) of the randomly initialised encoders
ENCODER_SHAPES = (("MiniLM-L6 shape", 6, 384, 12, 1536), ("BERT-base shape", 12, 768, 12, 3072))
SECTIONS = ("daff", "extrinsic", "job", "api", "embed")
EMBED_BATCH = 64  # the config's embedding.batch_size
LARGE_BATCH = 512
FIELDS = ["date", "commit", "gpu", "cpu", "torch", "benchmark", "n", "d", "what", "dtype", "cpu_seconds",
          "gpu_seconds", "ratio", "cpu_value", "gpu_value", "relative_difference", "note"]


def layer_keys(data: dict[str, np.ndarray]) -> list[str]:
    """The data file's encoders (``layer3``, ...), in layer order."""
    return sorted((key for key in data if key.startswith("layer")), key=lambda key: int(key.removeprefix("layer")))


def fingerprint(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:12]


def prepare(folder: Path, rows: int, glue_dir: Path, layers: Sequence[int] = LAYERS) -> None:
    """Write the run's data (module docstring, step 1) into ``folder``: ``rows`` rows of ``layers``."""
    from benchmarks.common import sst2_training_set

    embedded, labels = sst2_training_set(glue_dir)  # layers 1-6 (the cache the other benchmarks share)
    arrays = {f"layer{layer}": np.ascontiguousarray(embedded[layer - 1][:rows], dtype=np.float32) for layer in layers}
    arrays["labels"] = labels[:rows].astype(np.int64)
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / DATA_FILE, **arrays)
    about = {"source": "SST-2 train.tsv, first rows in file order, all-MiniLM-L6-v2 mean pooling",
             "rows": rows, "fingerprints": {name: fingerprint(a) for name, a in arrays.items()}}
    (folder / "about.json").write_text(json.dumps(about, indent=2) + "\n")
    from benchmarks.common import minilm_encoder

    minilm_encoder().tokenizer.save_pretrained(folder / TOKENIZER)
    size = (folder / DATA_FILE).stat().st_size
    say(f"wrote {folder / DATA_FILE} ({size / 1e6:.1f} MB): {rows} rows of layers {tuple(layers)} and the labels; "
        f"fingerprints {about['fingerprints']}")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class Timer:
    """Wall seconds of a block on ``device``, the device synchronised at both ends."""

    def __init__(self, device: str) -> None:
        self.device = device

    def _sync(self) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()

    def __enter__(self) -> Timer:
        self._sync()
        self.start = time.perf_counter()
        return self

    def __exit__(self, *_: object) -> None:
        self._sync()
        self.seconds = time.perf_counter() - self.start


def pass_seconds(source: np.ndarray, target: np.ndarray, device: str, repeats: int = 5) -> float:
    """Wall seconds of one residual pass ``[Q, 1/sqrt(N)] B - Q diag(s)`` with its row norms, float64, on
    ``device`` (the median of ``repeats``): the unit a certificate cannot avoid."""
    fx, fy = factorise(source, device=device), factorise(target, device=device)
    design, y = fx.affine_design(), fy.Q * fy.s
    coef = torch.randn(design.shape[1], y.shape[1], dtype=design.dtype, generator=torch.Generator().manual_seed(0))
    coef = coef.to(device)
    times = []
    for _ in range(repeats):
        with Timer(device) as clock:
            torch.linalg.vector_norm(y - design @ coef, dim=1).max().item()
        times.append(clock.seconds)
    return float(np.median(times))


def daff_on(reps: list[np.ndarray], device: str, pairs: list[tuple[int, int]], keep_weights: bool = False):
    """The engine on ``pairs``; and its wall seconds, the device synchronised."""
    settings = IntrinsicSettings(measures=("d_aff",), tol=TOL, device=device, keep_weights=keep_weights)
    with Timer(device) as clock:
        result = pairwise_intrinsic(reps, NAMES, settings, pairs=pairs)
    return result, clock.seconds


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


class Run:
    """The rows of this run, printed as they come and written to ``out`` at once (a run stopped early
    keeps what it measured)."""

    def __init__(self, out: Path | None, context: dict[str, str]) -> None:
        self.rows: list[dict[str, Any]] = []
        self.out, self.context = out, context

    def add(self, **row: Any) -> None:
        self.rows.append({**self.context, **row})
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            with (self.out / "device_ratio.csv").open("w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=FIELDS)
                writer.writeheader()
                for r in self.rows:
                    writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def daff_section(data: dict[str, np.ndarray], sizes: list[int], gpu: str, run: Run) -> None:
    """d_aff on each pair at each size, one engine call per pair and device, CPU then GPU."""
    stored = data["labels"].shape[0]
    say(f"\nd_aff: pairwise_intrinsic, one call per pair, tol {TOL:g}, float64, jacobi, working set; wall seconds "
        f"(call: factorising both encoders and solving; solve: the solver alone, the engine's phase clock)")
    say(f"{'N':>6}  {'pair':<27} | {'CPU: call':>9} {'solve':>6} {'fits':>5} {'passes':>6} | {'GPU: call':>9} "
        f"{'solve':>6} {'fits':>5} {'passes':>6} | {'CPU/GPU':>7} | {'d_aff CPU':>10} {'d_aff GPU':>10} "
        f"{'rel diff':>8}")
    for n in sizes:
        reps = [np.ascontiguousarray(data[f"layer{layer}"][np.arange(n) % stored]) for layer in LAYERS]
        repeated = f"; rows 0-{stored - 1} repeated in order" if n > stored else ""
        for i, j in PAIRS:
            measured = {}
            for side, device in (("cpu", "cpu"), ("gpu", gpu)):
                result, call = daff_on(reps, device, [(i, j)])
                unit = pass_seconds(reps[i], reps[j], device)
                measured[side] = (call, result.seconds["d_aff"], int(result.iterations[i, j]),
                                    result.seconds["d_aff"] / unit, float(result.matrices["d_aff"][i, j]), unit)
            (cpu_call, cpu_solve, cpu_fits, cpu_passes, cpu_value, cpu_unit) = measured["cpu"]
            (gpu_call, gpu_solve, gpu_fits, gpu_passes, gpu_value, gpu_unit) = measured["gpu"]
            pair = f"{NAMES[i]} -> {NAMES[j]}"
            say(f"{n:6d}  {pair:<27} | {cpu_call:9.2f} {cpu_solve:6.2f} {cpu_fits:5d} {cpu_passes:6.1f} | "
                f"{gpu_call:9.2f} {gpu_solve:6.2f} {gpu_fits:5d} {gpu_passes:6.1f} | {cpu_call / gpu_call:7.1f} | "
                f"{cpu_value:10.6f} {gpu_value:10.6f} {relative(cpu_value, gpu_value):8.1e}")
            run.add(benchmark="d_aff", n=n, d=reps[0].shape[1], what=pair, dtype="float64",
                    cpu_seconds=cpu_call, gpu_seconds=gpu_call, ratio=cpu_call / gpu_call, cpu_value=cpu_value,
                    gpu_value=gpu_value, relative_difference=relative(cpu_value, gpu_value),
                    note=(f"engine call (factorisation included); solver alone {cpu_solve:.3f}/{gpu_solve:.3f} s "
                          f"(CPU/GPU, {cpu_solve / gpu_solve:.1f}x); fits {cpu_fits}/{gpu_fits}; passes "
                          f"{cpu_passes:.1f}/{gpu_passes:.1f}; one pass {cpu_unit:.4f}/{gpu_unit:.5f} s{repeated}"))
        if repeated:
            say(f"{'':6}  (N = {n}: the first {stored} rows repeated in order)")


def extrinsic_section(data: dict[str, np.ndarray], n: int, gpu: str, run: Run) -> None:
    """The extrinsic measures on both pairs at size ``n``, CPU then GPU, on inputs fitted once."""
    reps = [np.ascontiguousarray(data[f"layer{layer}"][:n]) for layer in LAYERS]
    labels = data["labels"][:n]
    cores = os.cpu_count() or 1
    torch.set_num_threads(cores)  # the inputs are fitted once, on every core, and not timed
    try:
        tick = time.perf_counter()
        probes = [fit_softmax_probe(r, labels, 2) for r in reps]
        randoms = [fit_random_probes_sgd(r, random_labels(n, 2, range(N_RANDOM)), 2) for r in reps]
        intrinsic, _ = daff_on(reps, "cpu", PAIRS, keep_weights=True)
        say(f"\nextrinsic at N = {n}: inputs (task probes, {N_RANDOM} random-label probes per encoder, d_aff "
            f"weights) fitted on the CPU in {time.perf_counter() - tick:.0f} s, shared by both runs")
    finally:
        torch.set_num_threads(1)
    results = {}
    for side, device in (("cpu", "cpu"), ("gpu", gpu)):
        settings = ExtrinsicSettings(device=device)
        with Timer(device) as clock:
            results[side] = extrinsic_distances(reps, probes, NAMES, intrinsic.weights, randoms, settings,
                                                  intrinsic.matrices["d_aff"], PAIRS)
        results[side].seconds["call"] = clock.seconds
    cpu, dev = results["cpu"], results["gpu"]
    say(f"{'measure':<15} | {'CPU s/pair':>10} | {'GPU s/pair':>10} | {'CPU/GPU':>7} | "
        f"values CPU -> GPU (largest rel diff)")
    for measure in ("d_psi", "d_worst", "d_worst_search", "call"):
        seconds_cpu, seconds_gpu = cpu.seconds[measure] / len(PAIRS), dev.seconds[measure] / len(PAIRS)
        if measure == "call":
            values, diff, what = "", "", "whole call"
        else:
            a, b = (np.array([r.matrices()[measure][p] for p in PAIRS]) for r in (cpu, dev))
            diff = max(relative(x, y) for x, y in zip(a, b))
            values = f"{np.array2string(a, precision=6)} -> {np.array2string(b, precision=6)} ({diff:.1e})"
            what = measure
        say(f"{measure:<15} | {seconds_cpu:10.2f} | {seconds_gpu:10.2f} | {seconds_cpu / seconds_gpu:7.1f} | {values}")
        run.add(benchmark="extrinsic", n=n, d=reps[0].shape[1], what=what, dtype="float64",
                cpu_seconds=seconds_cpu, gpu_seconds=seconds_gpu, ratio=seconds_cpu / seconds_gpu,
                cpu_value="" if measure == "call" else float(max(cpu.matrices()[measure][p] for p in PAIRS)),
                gpu_value="" if measure == "call" else float(max(dev.matrices()[measure][p] for p in PAIRS)),
                relative_difference=diff,
                note=(f"wall seconds per pair ({len(PAIRS)} pairs), the engine's phase clock; default settings "
                      f"(certified, search budget {ExtrinsicSettings().search_candidates} aimed classifiers, "
                      f"{ExtrinsicSettings().search_steps} steps); values: the largest over the pairs"))


def random_encoder(tokenizer, layers: int, width: int, heads: int, feed_forward: int):
    """A BERT encoder of the given shape with seeded random weights (no download), wrapped as the
    embed job wraps a loaded model."""
    from transformers import BertConfig, BertModel

    from affine_homotopy.models.encoders import wrap_model

    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=width, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=feed_forward, max_position_embeddings=512)
    return wrap_model(BertModel(config), tokenizer, f"random BERT {layers}x{width}")


def job_section(data: dict[str, np.ndarray], gpu: str, run: Run) -> None:
    """The intrinsic job's form: every ordered pair of the file's layers in one engine call (the engine
    solves all targets of a source together), CPU then GPU."""
    layers = layer_keys(data)
    reps = [np.ascontiguousarray(data[key]) for key in layers]
    names = [f"MiniLM-L6 L{key.removeprefix('layer')}" for key in layers]
    pairs = len(reps) * (len(reps) - 1)
    measured = {}
    for side, device in (("cpu", "cpu"), ("gpu", gpu)):
        settings = IntrinsicSettings(measures=("d_aff",), tol=TOL, device=device)
        with Timer(device) as clock:
            result = pairwise_intrinsic(reps, names, settings)
        measured[side] = (result, clock.seconds)
    (cpu, cpu_s), (dev, dev_s) = measured["cpu"], measured["gpu"]
    off = ~np.eye(len(reps), dtype=bool)
    a, b = cpu.matrices["d_aff"][off], dev.matrices["d_aff"][off]
    difference = float(np.max(np.abs(a - b) / np.maximum(np.abs(a), np.abs(b))))
    fits_cpu, fits_gpu = int(cpu.iterations[off].sum()), int(dev.iterations[off].sum())
    n = reps[0].shape[0]
    say(f"\nthe intrinsic job's form: d_aff on all {pairs} ordered pairs of {len(reps)} encoders ({', '.join(names)}) "
        f"in one engine call, N = {n}: CPU {cpu_s:.2f} s ({fits_cpu} fits), GPU {dev_s:.2f} s ({fits_gpu} fits), "
        f"{cpu_s / dev_s:.1f}x; per pair {cpu_s / pairs:.3f} s against {dev_s / pairs:.4f} s; d_aff's largest "
        f"relative difference {difference:.1e}")
    run.add(benchmark="d_aff job", n=n, d=reps[0].shape[1], what=f"{pairs} ordered pairs of {len(reps)} encoders",
            dtype="float64", cpu_seconds=cpu_s / pairs, gpu_seconds=dev_s / pairs, ratio=cpu_s / dev_s,
            cpu_value=float(a.max()), gpu_value=float(b.max()), relative_difference=difference,
            note=(f"seconds per pair of one pairwise_intrinsic call over every ordered pair (factorisation included); "
                  f"fits {fits_cpu}/{fits_gpu}; values: the largest d_aff; relative_difference: the largest over "
                  f"the pairs; layers {', '.join(key.removeprefix('layer') for key in layers)}"))


def api_section(data: dict[str, np.ndarray], gpu: str, run: Run) -> None:
    """The library on the GPU: every measure of the registry and d_psi on CUDA tensors against the
    same call on the CPU (layer 3 mapped onto layer 6, N = 2,000)."""
    import affine_homotopy as ah

    x, y = (np.ascontiguousarray(data[f"layer{layer}"][:SMALL]) for layer in LAYERS)
    probe = fit_softmax_probe(y, data["labels"][:SMALL], 2)
    results = {}
    for side, device in (("cpu", "cpu"), ("gpu", gpu)):
        with Timer(device) as clock:
            values = ah.distances(x, y, measures=ah.MEASURES, tol=TOL, device=device)
            values["d_psi"] = float(ah.d_psi(x, y, (probe.weight, probe.bias), tol=TOL, device=device).value)
        results[side] = (values, clock.seconds)
    (cpu, cpu_s), (dev, dev_s) = results["cpu"], results["gpu"]
    say(f"\nthe library: affine_homotopy.distances (every measure of the registry) and d_psi, {NAMES[0]} -> "
        f"{NAMES[1]}, N = {SMALL}, device='cpu' against device='{gpu}': CPU {cpu_s:.1f} s, GPU {dev_s:.1f} s")
    say(f"{'measure':<12} | {'CPU':>12} | {'GPU':>12} | relative difference")
    for measure in (*ah.MEASURES, "d_psi"):
        a, b = float(cpu[measure]), float(dev[measure])
        difference = relative(a, b)
        say(f"{measure:<12} | {a:12.8f} | {b:12.8f} | {difference:.1e}")
        run.add(benchmark="library", n=SMALL, d=x.shape[1], what=measure, dtype="float64", cpu_seconds=cpu_s,
                gpu_seconds=dev_s, ratio=cpu_s / dev_s, cpu_value=a, gpu_value=b, relative_difference=difference,
                note=f"affine_homotopy.distances (every measure) and d_psi on {NAMES[0]} -> {NAMES[1]}; seconds: "
                     f"the whole call, every measure")


def embed_section(folder: Path, cpu_pairs: int, gpu_pairs: int, gpu: str, run: Run) -> None:
    """Embedding throughput of two encoder shapes, CPU (one thread) against the GPU."""
    from transformers import AutoTokenizer

    from affine_homotopy.models.encoders import embed_texts
    from affine_homotopy.models.task_data import load_task_split

    tokenizer = AutoTokenizer.from_pretrained(folder / TOKENIZER)
    spec = {"source": "synthetic", "generator": "synthetic_paraphrase", "seed": 0, "n_train": max(cpu_pairs, gpu_pairs),
            "n_dev": 10, "label_noise": 0.0}
    frame = load_task_split("paraphrase", spec, "train")
    texts_a, texts_b = frame["text_a"].tolist(), frame["text_b"].tolist()
    tokens = np.mean([len(ids) for ids in tokenizer(texts_a, texts_b, truncation=True, max_length=128)["input_ids"]])
    say(f"\nembed: synthetic paraphrase pairs, {tokens:.1f} tokens per pair on average; every layer, mean pooling, "
        f"max_length 128, float32, examples per second; CPU: {cpu_pairs} pairs in batches of {EMBED_BATCH} (the "
        f"config's default); GPU: the same, then {gpu_pairs} pairs in batches of {EMBED_BATCH} and of {LARGE_BATCH}")
    say(f"{'encoder':<43} | {'CPU':>6} | {'GPU, same':>9} | {'GPU, ' + str(gpu_pairs):>9} | "
        f"{'batch ' + str(LARGE_BATCH):>9} | {'GPU/CPU':>7} | largest difference / largest entry")
    for name, layers, width, heads, feed_forward in ENCODER_SHAPES:
        encoder = random_encoder(tokenizer, layers, width, heads, feed_forward)
        every_layer = list(range(layers + 1))

        def rate(count: int, device: str, batch: int = EMBED_BATCH) -> tuple[np.ndarray, float]:
            encoder.model.to(device)
            with Timer(device) as clock:
                out = embed_texts(encoder, texts_a[:count], texts_b[:count], every_layer, batch_size=batch,
                                  device=device, name=name)
            return out, count / clock.seconds

        on_cpu, cpu_rate = rate(cpu_pairs, "cpu")
        rate(EMBED_BATCH, gpu)  # the GPU's kernels loaded and tuned before any clock
        on_gpu, gpu_same_rate = rate(cpu_pairs, gpu)
        _, gpu_rate = rate(gpu_pairs, gpu)
        _, gpu_large_rate = rate(gpu_pairs, gpu, LARGE_BATCH)
        difference = float(np.abs(on_cpu - on_gpu).max() / np.abs(on_cpu).max())
        label = f"{name} ({layers} x {width}, random weights)"
        say(f"{label:<43} | {cpu_rate:6.1f} | {gpu_same_rate:9.1f} | {gpu_rate:9.1f} | {gpu_large_rate:9.1f} | "
            f"{gpu_rate / cpu_rate:7.0f} | {difference:.1e}")
        run.add(benchmark="embed", n=gpu_pairs, d=width, what=label, dtype="float32",
                cpu_seconds=1 / cpu_rate, gpu_seconds=1 / gpu_rate, ratio=gpu_rate / cpu_rate,
                cpu_value="", gpu_value="", relative_difference=difference,
                note=(f"seconds per example, batches of {EMBED_BATCH}; CPU {cpu_pairs} pairs, GPU {gpu_pairs} "
                      f"({gpu_same_rate:.1f} ex/s on the CPU's {cpu_pairs}, {gpu_large_rate:.1f} ex/s in batches of "
                      f"{LARGE_BATCH}); synthetic paraphrase pairs, {tokens:.1f} tokens on average; every layer; "
                      f"relative_difference: largest |CPU - GPU| over the largest entry, the same {cpu_pairs} pairs"))


def guarded(name: str, step: Callable[[], Any]) -> Any:
    """Run one section; a failure is printed with its traceback and the run goes on to the next."""
    try:
        return step()
    except Exception:  # noqa: BLE001  (a device run reports every failure and keeps what it measured)
        say(f"\n{name} FAILED:\n{traceback.format_exc()}")
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_glue_dir(parser, "SST-2/train.tsv (--prepare)")
    parser.add_argument("--prepare", type=Path, help="write the run's data into this folder and stop")
    parser.add_argument("--rows", type=int, default=18000, help="rows written by --prepare")
    parser.add_argument("--layers", type=int, nargs="+", default=list(LAYERS),
                        help=f"all-MiniLM-L6-v2's layers written by --prepare (default {LAYERS}; daff and extrinsic "
                             f"need them, job uses every layer of the file)")
    parser.add_argument("--data", type=Path, help="the folder --prepare wrote")
    parser.add_argument("--commit", default="", help="the commit the run's code is at (recorded in each row)")
    parser.add_argument("--out", type=Path, help="write the rows to OUT/device_ratio.csv")
    parser.add_argument("--device", default="cuda", help="the accelerator (default cuda); cpu runs both sides "
                                                         "on the CPU, to check the script where no GPU is")
    parser.add_argument("--sizes", type=int, nargs="*", help=f"d_aff sizes (default {SMALL}, --rows, {FULL_SET})")
    parser.add_argument("--extrinsic-rows", action="store_true", help="extrinsic at --rows too, not only 2,000")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=["daff", "extrinsic", "embed"],
                        help="what to run (default daff, extrinsic, embed; job needs a file of several layers)")
    parser.add_argument("--embed-cpu", type=int, default=256, help="pairs the CPU embeds (default 256)")
    parser.add_argument("--embed-gpu", type=int, default=4096, help="pairs the GPU embeds for its rate (default 4096)")
    args = parser.parse_args(argv)
    if args.prepare:
        prepare(args.prepare, args.rows, args.glue_dir, args.layers)
        return 0
    if args.data is None:
        parser.error("--data (the folder --prepare wrote) or --prepare")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here (run with --device cpu to check the script)")
    loaded = np.load(args.data / DATA_FILE)
    data = {name: loaded[name] for name in loaded.files}
    missing = [f"layer{layer}" for layer in LAYERS if f"layer{layer}" not in data]
    if missing and {"daff", "extrinsic", "api"} & set(args.sections):
        parser.error(f"--sections daff, extrinsic and api need layers {LAYERS}; {args.data / DATA_FILE} lacks "
                     f"{', '.join(missing)} (prepare it with --layers 3 6, or choose --sections job embed)")
    rows = data["labels"].shape[0]
    torch.set_num_threads(1)
    gpu_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "none (--device cpu)"
    context = {"date": datetime.date.today().isoformat(), "commit": args.commit, "gpu": gpu_name,
               "cpu": f"{cpu_model()} ({os.cpu_count()} cores)", "torch": torch.__version__}
    say(f"GPU: {gpu_name}, CUDA {torch.version.cuda}; CPU: {context['cpu']}; torch {torch.__version__}, "
        f"1 torch thread on each side; commit {args.commit or '?'}")
    say(f"float32 matrix products on the GPU in TF32: {torch.backends.cuda.matmul.allow_tf32} "
        f"(float32 matmul precision {torch.get_float32_matmul_precision()})")
    say(f"data: {args.data / DATA_FILE}: {rows} rows x {data[layer_keys(data)[0]].shape[1]} of "
        f"{', '.join(layer_keys(data))}; fingerprints "
        + ", ".join(f"{k} {fingerprint(v)}" for k, v in data.items()))
    if args.device.startswith("cuda") and {"daff", "job"} & set(args.sections):  # CUDA's start, library handles
        warm = [np.ascontiguousarray(data[key][:500]) for key in layer_keys(data)[:2]]
        with Timer(args.device) as clock:
            daff_on(warm, args.device, PAIRS)
        say(f"GPU warm-up (one d_aff call at N = 500): {clock.seconds:.1f} s, not counted")
    run = Run(args.out, context)
    sizes = [SMALL, rows, FULL_SET] if args.sizes is None else args.sizes
    if "daff" in args.sections:
        guarded("d_aff", lambda: daff_section(data, sizes, args.device, run))
    if "extrinsic" in args.sections:
        guarded("extrinsic", lambda: extrinsic_section(data, SMALL, args.device, run))
    if "job" in args.sections:
        guarded("the intrinsic job's form", lambda: job_section(data, args.device, run))
    if "api" in args.sections:
        guarded("the library", lambda: api_section(data, args.device, run))
    if "embed" in args.sections:
        guarded("embed", lambda: embed_section(args.data, args.embed_cpu, args.embed_gpu, args.device, run))
    if args.extrinsic_rows:
        guarded("extrinsic (rows)", lambda: extrinsic_section(data, rows, args.device, run))
    say(f"\n{len(run.rows)} rows" + (f" in {args.out / 'device_ratio.csv'}" if args.out else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
