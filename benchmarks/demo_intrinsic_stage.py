"""The demo's intrinsic stage before and after measures by choice, side by side on the same embeddings.

Run from the repository root (2-core machine: keep OpenMP threads from spinning)::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.demo_intrinsic_stage [--embeddings results/demo/embeddings]

For every task x layer of the demo config (``config/config.yaml``), ``pairwise_intrinsic`` over all 42
ordered pairs of its 7 encoders, with the intrinsic rule's 2 threads, twice in a row:

* **before**: every intrinsic measure (d_lin included), ``max_iter`` 100, no working set;
* **after**: the config's ``intrinsic.measures`` (d_lin opt-in) and ``max_iter`` (the default 1000,
  so that every d_aff pair reaches ``tol``), with the working set where it applies.

Prints wall and CPU seconds per task x layer and in total, their ratio, the d_aff pairs that missed
``tol`` in each, and whether the two settings' certified d_aff intervals overlap on every pair.
Embeddings come from ``--embeddings`` (a finished demo's ``results/demo/embeddings``), else are
built with the library (cached under /tmp; see :mod:`benchmarks.demo_tolerance_benchmark`).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

from benchmarks.common import REPO, SCHEMA, say

import numpy as np  # noqa: E402  (after benchmarks.common: its environment defaults come first)
import torch  # noqa: E402
import yaml  # noqa: E402

from affine_homotopy.core.intrinsic import MEASURES, IntrinsicSettings, pairwise_intrinsic  # noqa: E402
from affine_homotopy.jobs.io import read_embeddings  # noqa: E402
from affine_homotopy.study.layers import layer_label  # noqa: E402
from affine_homotopy.study.validation import check_config  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=REPO / "config" / "config.yaml")
    parser.add_argument("--embeddings", type=Path, help="a finished demo's results/<run>/embeddings folder")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", choices=("before", "after"), help="run one setting only (no ratio)")
    args = parser.parse_args()
    config = check_config(yaml.safe_load(args.config.read_text()), SCHEMA)
    torch.set_num_threads(args.threads)
    intrinsic = config["intrinsic"]
    settings = {
        "before": dict(measures=MEASURES, max_iter=100, working_set=False),
        "after": dict(measures=tuple(config["intrinsic"]["measures"]), max_iter=intrinsic["max_iter"],
                      working_set=intrinsic["working_set"]),
    }
    if args.only:
        settings = {args.only: settings[args.only]}
    say(f"{platform.node()}: {os.cpu_count()} CPUs (shared with other jobs), {args.threads} torch threads, torch "
        f"{torch.__version__}, load {os.getloadavg()[0]:.2f}; tol {intrinsic['tol']}; before = every measure, max_iter "
        f"100; after = {list(settings['after']['measures'])}, max_iter {intrinsic['max_iter']}")
    totals = {label: [0.0, 0.0] for label in settings}
    missed = dict.fromkeys(settings, 0)
    overlap_all = True
    names = list(config["encoders"])
    for task in config["tasks"]:
        if args.embeddings:
            per_encoder = {name: [read_embeddings(args.embeddings / name / task / "train.npy", layer_label(layer))
                                  for layer in config["layers"]] for name in names}
        else:
            from benchmarks.demo_tolerance_benchmark import task_embeddings

            per_encoder = task_embeddings(config, task)[0]
        for slot, layer in enumerate(config["layers"]):
            reps = [per_encoder[name][slot] for name in names]
            results = {}
            parts = []
            for label, options in settings.items():
                wall, cpu = time.perf_counter(), time.process_time()
                result = pairwise_intrinsic(reps, names, IntrinsicSettings(tol=intrinsic["tol"], keep_weights=True,
                                                                        **options))
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                results[label] = result
                totals[label][0] += wall
                totals[label][1] += cpu
                off = ~np.eye(len(names), dtype=bool)
                misses = int((~result.converged[off]).sum())
                missed[label] += misses
                parts.append(f"{label} {wall:5.1f} s wall / {cpu:5.1f} s CPU (d_aff {result.seconds['d_aff']:.1f} s, "
                             f"d_lin {result.seconds['d_lin']:.1f} s; d_aff fits max {result.iterations[off].max()}, "
                             f"{misses} missed tol)")
            if len(results) < 2:
                say(f"{task} layer {layer}: " + "; ".join(parts))
                continue
            off = ~np.eye(len(names), dtype=bool)
            a, b = results["before"].matrices, results["after"].matrices
            overlap = bool(np.all(a["d_aff_lower"][off] <= b["d_aff"][off] * (1 + 1e-9))
                           and np.all(b["d_aff_lower"][off] <= a["d_aff"][off] * (1 + 1e-9)))
            overlap_all &= overlap
            say(f"{task} layer {layer}: " + "; ".join(parts) + f"; intervals overlap {overlap}")
    for label, (wall, cpu) in totals.items():
        say(f"{label}: intrinsic stage {wall:.1f} s wall, {cpu:.1f} s CPU; d_aff pairs missing tol {missed[label]}")
    if len(totals) < 2:
        return
    say(f"after / before: wall {totals['after'][0] / totals['before'][0]:.2f}, CPU "
        f"{totals['after'][1] / totals['before'][1]:.2f}; d_aff intervals overlap everywhere: {overlap_all}; "
        f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
