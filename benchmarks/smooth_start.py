"""The two-class certified path's smoothed-maximum start: its objective through scipy.special against
the one-exponential form of ``core/extrinsic/binary.py``, side by side in one process.

Run from the repository root (2-core machine: keep OpenMP threads from spinning)::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.smooth_start [--glue-dir DIR] [--size 2000] [--repeats 3]

Data (as ``benchmarks/worst_search_budget.py``): all-MiniLM-L6-v2 (mean pooling) of the first N
SST-2 training sentences, layers 4, 5 and 6 as three encoders (6 ordered pairs), with their d_aff
weights, task probes and 100 random-label probes each (:func:`benchmarks.worst_search_budget.inputs`).

Printed, one torch thread, CPU seconds by ``time.process_time``:

* one objective call (value and gradient) on a real pair's design ``[Z, 1]`` and its task probe's
  class-one probabilities, in both forms (medians of 200 calls), and their largest difference;
* the whole extrinsic stage at its default budget (d_psi, d_worst with 100 random classifiers,
  d_worst_search) with each form, alternating, ``--repeats`` times: the engine's CPU per phase, and the
  largest relative difference between the two forms' reported values (the start is speed only: the
  certified intervals do not rest on it, so the values may differ within their tolerance).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import time

from benchmarks.common import add_glue_dir, load_text, say, sst2_training_set

import numpy as np  # noqa: E402  (after benchmarks.common: its environment defaults come first)
import torch  # noqa: E402

from affine_homotopy.core.extrinsic import ExtrinsicSettings, binary  # noqa: E402
from affine_homotopy.core.linalg import factorise  # noqa: E402
from benchmarks.worst_search_budget import MEASURES, inputs, run  # noqa: E402


def scipy_objective(w: np.ndarray, A: np.ndarray, q: np.ndarray, scale: float) -> tuple[float, np.ndarray]:
    """The objective as it was written with scipy.special's logsumexp and softmax (the reference)."""
    from scipy.special import expit, logsumexp, softmax

    sigma = expit(A @ w)
    e = sigma - q
    z = e * e / scale
    return scale * float(logsumexp(z)), A.T @ (softmax(z) * 2.0 * e * sigma * (1.0 - sigma))


def call_seconds(objective, w, A, q, scale, calls: int = 200) -> float:
    times = []
    for _ in range(calls):
        tick = time.process_time()
        objective(w, A, q, scale)
        times.append(time.process_time() - tick)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_glue_dir(parser, "SST-2/train.tsv")
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    say(f"machine: {platform.machine()}, {os.cpu_count()} cores (shared), 1 torch thread, {load_text()}")
    embedded, labels = sst2_training_set(args.glue_dir)
    data = inputs(embedded, labels, args.size)
    reps, probes = data[0], data[5]

    # one objective call on a real pair: layer 4's design, layer 6's task probe
    # the engine's design: the source's rank-ruled orthonormal basis, whitened, and a constant column
    basis = factorise(reps[0]).Q.numpy()
    A = np.hstack([basis * math.sqrt(len(basis)), np.ones((len(basis), 1))])
    q = probes[2].predict_proba(reps[2])[:, 0]
    w = np.linalg.lstsq(A, np.log(q) - np.log1p(-q), rcond=None)[0]
    scale = float(((1 / (1 + np.exp(-A @ w)) - q) ** 2).max()) * 0.01
    reference, current = (call_seconds(f, w, A, q, scale) for f in (scipy_objective, binary.smooth_max_objective))
    (v_ref, g_ref), (v_cur, g_cur) = scipy_objective(w, A, q, scale), binary.smooth_max_objective(w, A, q, scale)
    say(f"N = {args.size}, design {A.shape[0]} x {A.shape[1]}: one objective call {reference * 1e3:.2f} ms (scipy.special) "
        f"-> {current * 1e3:.2f} ms (one exponential): {reference / current:.2f}x; value differs by "
        f"{abs(v_ref - v_cur) / abs(v_ref):.1e} (relative), gradient by {np.abs(g_ref - g_cur).max() / np.abs(g_ref).max():.1e}")

    # the whole stage with each form, alternating
    settings = ExtrinsicSettings()
    seconds: dict[str, dict[str, list[float]]] = {"scipy.special": {}, "one exponential": {}}
    values: dict[str, object] = {}
    kept = binary.smooth_max_objective
    try:
        for _ in range(args.repeats):
            for label, objective in (("scipy.special", scipy_objective), ("one exponential", kept)):
                binary.smooth_max_objective = objective
                result = run(data, settings)
                for phase in MEASURES:
                    seconds[label].setdefault(phase, []).append(result.seconds["cpu_" + phase])
                values[label] = result
    finally:
        binary.smooth_max_objective = kept
    pairs = len(data[2])
    for label, phases in seconds.items():
        say(f"  {label:<16} CPU per pair (median of {args.repeats}): " + ", ".join(
            f"{phase} {statistics.median(times) / pairs:.3f} s" for phase, times in phases.items())
            + f"; the stage {sum(statistics.median(t) for t in phases.values()) / pairs:.3f} s")
    total = {label: sum(statistics.median(t) for t in phases.values()) for label, phases in seconds.items()}
    say(f"  the stage, scipy.special / one exponential: {total['scipy.special'] / total['one exponential']:.3f}x")
    before, after = values["scipy.special"].values, values["one exponential"].values
    for phase in MEASURES:
        a, b = getattr(before, phase), getattr(after, phase)
        off = ~np.eye(len(a), dtype=bool)
        change = float((np.abs(a - b)[off] / np.maximum(np.abs(a)[off], 1e-12)).max())
        say(f"  {phase}: largest relative difference between the two forms' values {change:.1e} (tol {settings.tol:g})")
    say(load_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
