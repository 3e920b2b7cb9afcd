"""The worst-case search's budget on real pairs: what d_worst_search costs beside the certified d_psi,
what its aimed classifiers and ascent steps buy, and how much it moves under jitter and threads.

Run from the repository root (2-core machine: keep OpenMP threads from spinning)::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.worst_search_budget [--glue-dir DIR] \\
        [--sizes 2000 67349] [--large 16 10] [--large-sizes 2000] [--no-stability] \\
        [--demo results/demo [--demo-encoders minilm minilm_svd80 ...]]

Data (as ``benchmarks/cost_model.py``): all-MiniLM-L6-v2 (mean pooling) of the SST-2 training
sentences of ``<glue-dir>/SST-2/train.tsv`` (:func:`benchmarks.common.sst2_training_set`); below
50,000 rows its layers 4, 5 and 6 on the first N sentences as three encoders (6 ordered pairs), on
the full set (N = 67,349) layer 5 mapped onto layer 6 (one ordered pair). Per size: d_aff (tol
1e-3) and its solver weights, the task probes (default L2 grid) and the paper's SGD random-label
probes (100 per encoder up to N = 8,000, 25 beyond, as the cost model). ``--demo`` adds the same
comparison on a finished demo run's inputs (``snakemake --cores 2``: every ordered pair of
``--demo-encoders`` at ``--demo-layer`` of each task, with its embeddings, probes and d_aff weights;
``--sizes`` with no size skips SST-2).

Printed per size (and demo task), one torch thread, CPU seconds by ``time.process_time`` (the engine's phase clock):

* the default budget (``ExtrinsicSettings()``) and ``--large`` (aimed classifiers, ascent steps;
  default 16 and 10) side by side in one process: CPU per pair of d_psi, d_worst and
  d_worst_search, and d_worst_search / d_psi;
* per ordered pair: d_psi, d_worst, d_worst_search at both budgets and the share the default loses,
  and each search's path (the value after the aimed classifiers, then after each ascent step);
* stability of the default run (``--no-stability`` skips it): the same inputs jittered (every entry
  times ``1 + 1e-7 eps``, rounded to float32, as ``benchmarks/extrinsic_stability.py``) and with 2
  torch threads; each measure's relative change per pair.

The machine, thread counts, sizes and the load average (start, each size, end) are printed: on a
shared machine the absolute seconds move with the load, the ratios measured side by side much less.

``--run results/<run>`` instead reads a finished workflow run: each extrinsic job's phase clocks (the
last ``phase seconds`` line of ``logs/extrinsic/*.log``, the CPU of each measure over all the job's
pairs) and prints d_worst_search / d_psi per job, the jobs' own pairs at the run's settings; the goal
row ``search_ratio`` is the largest.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.common import add_glue_dir, load_text, say, sst2_training_set

import numpy as np  # noqa: E402  (after benchmarks.common: its environment defaults come first)
import torch  # noqa: E402

from affine_homotopy.core.extrinsic import ExtrinsicSettings, extrinsic_distances  # noqa: E402
from affine_homotopy.core.intrinsic import IntrinsicSettings, pairwise_intrinsic  # noqa: E402
from affine_homotopy.core.probes import fit_random_probes_sgd, fit_softmax_probe, random_labels  # noqa: E402

MEASURES = ("d_psi", "d_worst", "d_worst_search")
DEMO_ENCODERS = ["minilm", "minilm_svd80", "minilm_affine", "minilm_noise"]  # as docs/performance.md's stability runs
FULL_SET = 50_000  # from this size on, one pair of two layers (as the cost model's full-set rows)


def inputs(embedded: np.ndarray, labels: np.ndarray, n: int):
    """Encoders, names, pairs, d_aff and its weights, task and random-label probes at size ``n``."""
    layers = [3, 4, 5] if n < FULL_SET else [4, 5]
    names = [f"layer{layer + 1}" for layer in layers]
    reps = [np.ascontiguousarray(embedded[layer][:n]) for layer in layers]
    pairs = [(i, j) for i in range(len(reps)) for j in range(len(reps)) if i != j] if n < FULL_SET else [(0, 1)]
    n_random = 100 if n <= 8000 else 25
    tick = time.process_time()
    intrinsic = pairwise_intrinsic(reps, names, IntrinsicSettings(measures=("d_aff",), keep_weights=True, tol=1e-3))
    probes = [fit_softmax_probe(r, labels[:n], 2) for r in reps]
    randoms = [fit_random_probes_sgd(r, random_labels(n, 2, range(n_random)), 2) for r in reps]
    say(f"  inputs: d_aff, task probes and {n_random} random-label probes per encoder in "
        f"{time.process_time() - tick:.0f} CPU s")
    return reps, names, pairs, intrinsic.matrices["d_aff"], intrinsic.weights, probes, randoms


def demo_inputs(results: Path, task: str, layer: str, names: list[str]):
    """A finished run's extrinsic inputs for ``names`` at one (task, layer), as :func:`inputs` returns them."""
    from benchmarks.extrinsic_stability import load_inputs

    reps, probes, randoms, d_aff, weights = load_inputs(results, task, layer, names)
    pairs = [(i, j) for i in range(len(names)) for j in range(len(names)) if i != j]
    return reps, names, pairs, d_aff, weights, probes, randoms


def run(data, settings: ExtrinsicSettings, threads: int = 1, reps=None):
    """The extrinsic stage on ``data``'s pairs (``reps`` replacing its encoders) with ``threads`` torch threads."""
    base, names, pairs, d_aff, weights, probes, randoms = data
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return extrinsic_distances(base if reps is None else reps, probes, names, weights, randoms, settings, d_aff,
                                   pairs)
    finally:
        torch.set_num_threads(before)


def jittered(reps: list[np.ndarray], seed: int = 0, size: float = 1e-7) -> list[np.ndarray]:
    """Every entry times ``1 + size eps`` (eps standard normal), rounded to float32 (the stored embeddings' type)."""
    rng = np.random.default_rng(seed)
    return [(rep.astype(np.float64) * (1 + size * rng.standard_normal(rep.shape))).astype(np.float32) for rep in reps]


def per_pair(result, phase: str, pairs: int) -> float:
    return result.seconds["cpu_" + phase] / pairs


def budget_line(label: str, result, pairs: int) -> str:
    psi, worst, search = (per_pair(result, phase, pairs) for phase in MEASURES)
    return (f"  {label:<28} CPU per pair: d_psi {psi:7.2f} s, d_worst {worst:7.2f} s, d_worst_search {search:7.2f} s; "
            f"d_worst_search / d_psi = {search / psi:6.2f}")


def short(name: str) -> str:
    """A name for the per-pair tables: ``layer4`` -> ``L4``, ``minilm_svd80`` -> ``svd80``, ``minilm`` as it is."""
    return name.replace("layer", "L").split("_", 1)[-1]


def pair_lines(data, default, large, large_label: str) -> list[str]:
    names, pairs = data[1], data[2]
    header = (f"  {'pair':<16}{'d_psi':>9}{'d_worst':>9}{'search':>9}{large_label:>10}{'lost':>8}   "
              "path (default | large): after the aimed classifiers, then each step")
    lines = [header]
    for i, j in pairs:
        value = default.values.d_worst_search[i, j]
        row = f"  {short(names[i]) + ' -> ' + short(names[j]):<16}"
        row += f"{default.values.d_psi[i, j]:9.4f}{default.values.d_worst[i, j]:9.4f}{value:9.4f}"
        paths = [" ".join(f"{v:.4f}" for v in default.worst_case.searched[(i, j)].path[1:])]
        if large is not None:
            big = large.values.d_worst_search[i, j]
            row += f"{big:10.4f}{(big - value) / big if big > 0 else 0.0:8.1%}"
            paths.append(" ".join(f"{v:.4f}" for v in large.worst_case.searched[(i, j)].path[1:]))
        else:
            row += f"{'':>10}{'':>8}"
        lines.append(row + "   " + " | ".join(paths))
    return lines


def stability_lines(data, base, settings: ExtrinsicSettings, largest: dict[str, float] | None = None) -> list[str]:
    """The default run again on jittered inputs and with 2 threads: each measure's change per pair
    (``largest[measure]``: the largest change of any pair, both checks, updated)."""
    names, pairs = data[1], data[2]
    jitter = run(data, settings, reps=jittered(data[0]))
    threads = run(data, settings, threads=2)
    lines = [(f"  stability of the default run (relative change per pair; values at most atol = {settings.atol:g} "
              "skipped):")]
    for label, other in (("jitter 1e-7 (float32)", jitter), ("threads 1 -> 2", threads)):
        for measure in MEASURES:
            a, b = getattr(base.values, measure), getattr(other.values, measure)
            kept = [(i, j) for i, j in pairs if a[i, j] > settings.atol]
            changes = [abs(b[i, j] - a[i, j]) / a[i, j] for i, j in kept]
            if largest is not None:
                largest[measure] = max(largest.get(measure, 0.0), *changes, 0.0)
            text = " ".join(f"{short(names[i])}->{short(names[j])} {c:.1e}" for (i, j), c in zip(kept, changes))
            lines.append(f"    {label:<22} {measure:<15} largest {max(changes, default=0.0):.1e} "
                         f"({sum(c > 0.01 for c in changes)} of {len(changes)} pairs above 1 %): {text}")
    return lines


def compare(data, title: str, default: ExtrinsicSettings, large: ExtrinsicSettings | None, stability: bool,
            summary: dict[str, dict[str, float]] | None = None) -> None:
    """Both budgets on ``data`` side by side, the per-pair values and paths, and the default's stability
    (``summary``: the default's search / d_psi CPU ratio per title and the largest changes, filled in)."""
    pairs = len(data[2])
    say(f"\n## {title}: encoders {data[1]}, {pairs} ordered pairs ({load_text()})")
    base = run(data, default)
    say(budget_line(f"default ({default.search_candidates}, {default.search_steps})", base, pairs))
    if summary is not None:
        summary["ratio"][title] = base.seconds["cpu_d_worst_search"] / base.seconds["cpu_d_psi"]
    big = None
    if large is not None:
        big = run(data, large)
        say(budget_line(f"large ({large.search_candidates}, {large.search_steps})", big, pairs))
        say(f"  large / default search CPU: "
            f"{big.seconds['cpu_d_worst_search'] / base.seconds['cpu_d_worst_search']:.2f}x ({load_text()})")
    budget = f"{(large or default).search_candidates}/{(large or default).search_steps}"
    for line in pair_lines(data, base, big, budget):
        say(line)
    values, lower = base.values.d_worst_search, base.lower.d_worst_search
    gaps = [(values[i, j] - lower[i, j]) / values[i, j] for i, j in data[2] if values[i, j] > default.atol]
    say(f"  default run's largest certified gap of d_worst_search: {max(gaps, default=0.0):.1e} (tol {default.tol})")
    if stability:
        for line in stability_lines(data, base, default, None if summary is None else summary["change"]):
            say(line)


def run_phase_seconds(run: Path) -> dict[str, dict[str, float]]:
    """Each extrinsic job's phase clocks in a finished run: ``{log name: {phase: seconds}}`` from the last
    ``phase seconds: {...}`` line of ``<run>/logs/extrinsic/<name>.log``; a run without such logs is
    refused, naming the folder."""
    folder = Path(run) / "logs" / "extrinsic"
    clocks = {}
    for log in sorted(folder.glob("*.log")):
        lines = [line for line in log.read_text(encoding="utf-8").splitlines() if "phase seconds: {" in line]
        if lines:
            clocks[log.stem] = ast.literal_eval(lines[-1].split("phase seconds: ", 1)[1])
    if not clocks:
        raise SystemExit(f"{folder}: no extrinsic job log with its phase seconds; name a finished run's results "
                         f"folder (results/<run_name>)")
    return clocks


def run_search_ratios(run: Path) -> dict[str, float]:
    """d_worst_search / d_psi CPU per extrinsic job of a finished run (:func:`run_phase_seconds`); jobs
    without both clocks (a selection without the search) are left out."""
    return {name: clock["cpu_d_worst_search"] / clock["cpu_d_psi"] for name, clock in run_phase_seconds(run).items()
            if clock.get("cpu_d_psi", 0) > 0 and "cpu_d_worst_search" in clock}


def report_run(run: Path) -> None:
    from benchmarks.goals import record

    clocks = run_phase_seconds(run)
    ratios = run_search_ratios(run)
    if not ratios:
        raise SystemExit(f"{run}: no extrinsic job ran both d_psi and d_worst_search")
    say(f"run {run}: {len(clocks)} extrinsic jobs; CPU s of each measure over the job's pairs, one thread a job")
    say(f"{'job':24s} {'d_psi':>9s} {'d_worst':>9s} {'search':>9s} {'search / d_psi':>15s}")
    for name, clock in clocks.items():
        ratio = f"{ratios[name]:14.2f}x" if name in ratios else f"{'-':>15s}"
        say(f"{name:24s} {clock.get('cpu_d_psi', math.nan):9.1f} {clock.get('cpu_d_worst', math.nan):9.1f} "
            f"{clock.get('cpu_d_worst_search', math.nan):9.1f} {ratio}")
    worst = max(ratios, key=ratios.get)
    say(f"largest: {worst} {ratios[worst]:.2f}x; median {float(np.median(list(ratios.values()))):.2f}x; {load_text()}")
    provenance = Path(run) / "provenance.json"
    code = json.loads(provenance.read_text())["code"] if provenance.is_file() else {}
    revision = f"the run's code {code['commit'][:7]}{'+dirty' if code.get('dirty') else ''}" if code else "unfinished run"
    record("search_ratio", ratios[worst], "x",
           f"benchmarks.worst_search_budget --run results/{Path(run).name} ({revision}): CPU of d_worst_search / d_psi "
           f"per extrinsic job "
           f"(the jobs' phase clocks), {len(ratios)} jobs, {min(ratios.values()):.2f}-{ratios[worst]:.2f}x, "
           f"largest {worst}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_glue_dir(parser, "SST-2/train.tsv")
    parser.add_argument("--sizes", type=int, nargs="*", default=[2000, 67349],
                        help="N (first N training sentences; the full set's 67,349 is capped to its size)")
    parser.add_argument("--large", type=int, nargs=2, default=[16, 10], metavar=("CANDIDATES", "STEPS"),
                        help="the larger budget run beside the default (default: 16 aimed classifiers, 10 steps)")
    parser.add_argument("--large-sizes", type=int, nargs="*", default=None,
                        help="sizes at which the larger budget runs (default: every size and the demo)")
    parser.add_argument("--no-stability", action="store_true", help="skip the jitter and thread runs")
    parser.add_argument("--demo", type=Path, help="a finished demo run (results/demo) to compare on too")
    parser.add_argument("--demo-tasks", nargs="*", default=["sentiment", "paraphrase"])
    parser.add_argument("--demo-layer", default="layer6")
    parser.add_argument("--demo-encoders", nargs="*", default=DEMO_ENCODERS)
    parser.add_argument("--run", type=Path, help="only read a finished run's extrinsic jobs (module docstring)")
    args = parser.parse_args(argv)
    if args.run:
        report_run(args.run)
        return 0
    torch.set_num_threads(1)
    default = ExtrinsicSettings()
    large = replace(default, search_candidates=args.large[0], search_steps=args.large[1])
    say(f"machine: {platform.machine()}, {os.cpu_count()} cores; torch {torch.__version__}, 1 torch thread "
        f"(2 in the thread check); {load_text()}")
    say(f"budgets: default {default.search_candidates} aimed classifiers and {default.search_steps} ascent steps "
        f"per pair, large {large.search_candidates} and {large.search_steps}; accept_rtol "
        f"{default.search_accept_rtol}, tol {default.tol}")
    summary: dict[str, dict[str, float]] = {"ratio": {}, "change": {}}
    if args.sizes:
        embedded, labels = sst2_training_set(args.glue_dir)
        say(f"data: all-MiniLM-L6-v2 mean-pooled SST-2 training sentences {embedded.shape} (layers, N, D)")
        for n in sorted({min(n, embedded.shape[1]) for n in args.sizes}):
            data = inputs(embedded, labels, n)
            with_large = args.large_sizes is None or n in args.large_sizes
            compare(data, f"SST-2, N = {n}, D = {embedded.shape[2]}", default, large if with_large else None,
                    not args.no_stability, summary)
    for task in args.demo_tasks if args.demo else []:
        data = demo_inputs(args.demo, task, args.demo_layer, args.demo_encoders)
        compare(data, f"demo {task} {args.demo_layer}, N = {data[0][0].shape[0]}", default,
                large if args.large_sizes is None else None, not args.no_stability, summary)
    say(f"\n{load_text()}")
    record_goals(summary, default, args)
    return 0


def record_goals(summary: dict[str, dict[str, float]], default: ExtrinsicSettings, args: argparse.Namespace) -> None:
    """The goal rows (benchmarks/goal_measurements.csv) of a run at the default budget: the largest
    search / d_psi ratio of its sizes (and demo tasks) and, with the stability checks, the largest
    change of d_worst_search of any pair."""
    from benchmarks.goals import record

    budget = f"{default.search_candidates} aimed classifiers, {default.search_steps} steps"
    sst2 = {title: ratio for title, ratio in summary["ratio"].items() if title.startswith("SST-2")}
    ratios = ", ".join(f"{title}: {ratio:.2f}x" for title, ratio in summary["ratio"].items())
    if sst2:  # the goal is stated on real SST-2 pairs; a demo-only run reports its ratios in the stability row
        record("search_ratio", max(sst2.values()), "x",
               f"benchmarks.worst_search_budget --sizes {' '.join(map(str, args.sizes))} ({budget}): CPU of "
               f"d_worst_search / d_psi per pair, one torch thread; {ratios}")
    if "d_worst_search" in summary["change"]:
        changes = ", ".join(f"{m} {v:.2%}" for m, v in summary["change"].items())
        record("search_stability", 100 * summary["change"]["d_worst_search"], "%",
               f"benchmarks.worst_search_budget on {', '.join(summary['ratio'])} ({budget}): largest relative "
               f"change of any pair under a 1e-7 float32 jitter and 2 threads; {changes}; search / d_psi CPU: {ratios}")


if __name__ == "__main__":
    sys.exit(main())
