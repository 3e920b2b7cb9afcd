"""Reproducibility of the extrinsic stage on a finished run: the same job three ways.

For every (task, layer) of a finished run (or those given), this loads the extrinsic job's inputs
(embeddings, probe files, ``d_aff`` and its solver weights) and runs
:func:`affine_homotopy.core.extrinsic.extrinsic_distances` three times with the study's settings:

* **base**: as it is, with ``--threads`` torch threads (default 1);
* **jitter**: every embedding multiplied by ``1 + 1e-7 eps`` (eps standard normal, one draw per
  entry, seed 0), then rounded to float32 as the stored embeddings are: smaller than the difference
  between a CPU and a GPU forward pass;
* **threads**: the base inputs with ``--other-threads`` torch threads (default 2).

Per measure (``d_psi``, ``d_worst``, ``d_worst_search``) it prints, over the ordered pairs whose base
value is above ``--floor`` (default 1e-6, the certified solver's absolute floor), the median and the
largest relative change and the number of pairs changing by more than 1 % and by more than ``tol``;
and the certified gaps (largest relative gap, pairs above ``tol``). ``--local`` adds the same table
for the local estimator (``certified=False``: the local search on two-class tasks too), run side by
side, and the ratio of the two estimators' values and CPU time.

Run from the repository root::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.extrinsic_stability results/demo \\
        [--configfile config/config.yaml] [--tasks sentiment] [--layers layer6] [--encoders a b c] [--local]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.common import REPO, SCHEMA

import numpy as np  # noqa: E402  (after benchmarks.common: its environment defaults come first)
import torch  # noqa: E402

from affine_homotopy.core.extrinsic import ExtrinsicSettings, extrinsic_distances  # noqa: E402
from affine_homotopy.jobs.io import read_embeddings, read_matrix  # noqa: E402
from affine_homotopy.jobs.probe_files import load_probe_file  # noqa: E402
from affine_homotopy.study.validation import load_config  # noqa: E402

MEASURES = ("d_psi", "d_worst", "d_worst_search")


def load_inputs(results: Path, task: str, layer: str, names: list[str]):
    reps = [np.asarray(read_embeddings(results / "embeddings" / e / task / "train.npy", layer)) for e in names]
    probes, randoms = zip(*(load_probe_file(results / "probes" / task / "weights" / e / f"{layer}.npz") for e in names))
    d_aff = read_matrix(results / "intrinsic" / task / layer / "d_aff.csv")
    order = [list(d_aff.index).index(name) for name in names]  # the stored (K, K, N) weights follow d_aff's order
    weights = np.load(results / "intrinsic" / task / layer / "d_aff_weights.npy")[np.ix_(order, order)]
    d_aff = d_aff.loc[names, names].to_numpy()
    return reps, list(probes), list(randoms), d_aff, weights


def run_once(inputs, names, settings, threads: int):
    reps, probes, randoms, d_aff, weights = inputs
    torch.set_num_threads(threads)
    start = time.process_time()
    result = extrinsic_distances(reps, probes, names, weights, randoms, settings, d_aff)
    return result, time.process_time() - start


def jittered(reps: list[np.ndarray], seed: int = 0, size: float = 1e-7) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rep.astype(np.float64) * (1 + size * rng.standard_normal(rep.shape))).astype(np.float32) for rep in reps]


def changes(base: np.ndarray, other: np.ndarray, floor: float) -> np.ndarray:
    off = ~np.eye(len(base), dtype=bool) & (base > floor)
    return np.abs(other[off] - base[off]) / base[off]


def gaps(result, measure: str, atol: float) -> np.ndarray:
    """Relative gaps of the computed pairs; 0 where the interval closed by the floor (value <= atol)."""
    value, lower = getattr(result.values, measure), getattr(result.lower, measure)
    off = ~np.eye(len(value), dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(value[off] > atol, (value[off] - lower[off]) / value[off], 0.0)


def report(label: str, base, jitter, other, tol: float, floor: float, threads: tuple[int, int], atol: float,
           measures=MEASURES) -> list[str]:
    lines = []
    for measure in measures:
        b = getattr(base.values, measure)
        row = [f"{label:<18} {measure:<15}"]
        for name, result in (("jitter", jitter), (f"threads {threads[0]}->{threads[1]}", other)):
            c = changes(b, getattr(result.values, measure), floor)
            row.append(f"{name}: median {np.median(c):.1e} max {c.max():.1e} >1% {int((c > 0.01).sum())}/{c.size} "
                       f">tol {int((c > tol).sum())}")
        if base.certified:
            g = gaps(base, measure, atol)
            finite = g[np.isfinite(g)]
            row.append(f"gap max {finite.max() if finite.size else float('nan'):.1e} above tol {int((finite > tol).sum())}")
        lines.append(" | ".join(row))
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a finished run's results folder, e.g. results/demo")
    parser.add_argument("--configfile", type=Path, default=REPO / "config" / "config.yaml")
    parser.add_argument("--tasks", nargs="*")
    parser.add_argument("--encoders", nargs="*", help="a subset of the study's encoders (default: all)")
    parser.add_argument("--layers", nargs="*")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--other-threads", type=int, default=2)
    parser.add_argument("--floor", type=float, default=1e-6)
    parser.add_argument("--local", action="store_true", help="also run the local estimator side by side")
    parser.add_argument("--reference", type=Path, help="a results folder whose extrinsic matrices another version of "
                        "the code wrote from the same inputs: prints this version's values over those, per measure")
    parser.add_argument("--base-only", action="store_true", help="only the base run (with --reference: the change)")
    parser.add_argument("--measures", nargs="+", default=list(MEASURES), choices=MEASURES,
                        help="the extrinsic measures run (default all three, whatever the config selects)")
    args = parser.parse_args(argv)
    measures = [m for m in MEASURES if m in args.measures]
    config = load_config(args.configfile, SCHEMA)
    names = args.encoders or list(config["encoders"])
    tasks = args.tasks or sorted(p.name for p in (args.results / "intrinsic").iterdir() if p.is_dir())
    settings = replace(ExtrinsicSettings.from_config(config), measures=tuple(measures))
    print(f"measures {measures}; worst-case search: {settings.search_candidates} aimed classifiers, "
          f"{settings.search_steps} steps, accept_rtol {settings.search_accept_rtol}")
    print(f"results {args.results}, {len(names)} encoders, tol {settings.tol}, atol {settings.atol}, "
          f"torch {torch.__version__}, threads {args.threads} vs {args.other_threads}; changes relative, over "
          f"ordered pairs with base value > {args.floor:g}")
    totals = {"certified": 0.0, "local": 0.0}
    phase_totals = {label: dict.fromkeys(measures, 0.0) for label in totals}
    for task in tasks:
        layers = args.layers or sorted(p.name for p in (args.results / "intrinsic" / task).iterdir() if p.is_dir())
        for layer in layers:
            inputs = load_inputs(args.results, task, layer, names)
            n = inputs[0][0].shape[0]
            print(f"\n## {task} {layer} (N = {n}, {inputs[1][0].weight.shape[1]} classes, "
                  f"{inputs[2][0].weight.shape[0]} random classifiers)")
            variants = [("certified", settings)]
            if args.local:
                variants.append(("local", replace(settings, certified=False)))
            results = {}
            for label, variant in variants:
                base, cpu = run_once(inputs, names, variant, args.threads)
                totals[label] += cpu
                results[label] = base
                phases = ", ".join(f"{m} {base.seconds['cpu_' + m]:.1f}" for m in measures)
                print(f"{label}: {cpu:.1f} CPU s (base run; phases: {phases})", flush=True)
                for m in measures:
                    phase_totals[label][m] += base.seconds["cpu_" + m]
                if base.certified:
                    for measure in measures:
                        g = gaps(base, measure, variant.atol)
                        print(f"{label} {measure:<15} certified gap: max {np.nanmax(g):.1e}, above tol "
                              f"{int((g > variant.tol).sum())} of {g.size}")
                if args.base_only:
                    continue
                jitter, _ = run_once((jittered(inputs[0]), *inputs[1:]), names, variant, args.threads)
                other, _ = run_once(inputs, names, variant, args.other_threads)
                for line in report(label, base, jitter, other, variant.tol, args.floor,
                                   (args.threads, args.other_threads), variant.atol, measures):
                    print(line, flush=True)
            if args.reference is not None:
                for measure in measures:
                    old = read_matrix(args.reference / "extrinsic" / task / layer / f"{measure}.csv").loc[names, names]
                    new = getattr(results["certified"].values, measure)
                    off = ~np.eye(len(names), dtype=bool) & (old.to_numpy() > args.floor)
                    ratio = new[off] / old.to_numpy()[off]
                    print(f"this version / {args.reference} {measure:<15} median {np.median(ratio):.4f}, range "
                          f"{ratio.min():.4f}-{ratio.max():.4f} over {ratio.size} pairs", flush=True)
            if "local" in results:
                for measure in measures:
                    b, l = getattr(results["certified"].values, measure), getattr(results["local"].values, measure)
                    off = ~np.eye(len(b), dtype=bool) & (b > args.floor)
                    ratio = l[off] / b[off]
                    print(f"local / certified {measure:<15} median {np.median(ratio):.4f} max {ratio.max():.4f} "
                          f"min {ratio.min():.4f}")
    if totals["local"]:
        print(f"\nCPU seconds of the base runs: certified {totals['certified']:.1f}, local {totals['local']:.1f}, "
              f"ratio certified / local {totals['certified'] / totals['local']:.2f}")
        for m in measures:
            c, l = phase_totals["certified"][m], phase_totals["local"][m]
            print(f"    phase {m}: certified {c:.1f}, local {l:.1f} CPU s, ratio {c / l if l else float('nan'):.2f}")


if __name__ == "__main__":
    sys.exit(main())
