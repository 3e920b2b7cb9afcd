"""The worst-case search's ascent-direction temperature: what each temperature's d_worst_search is
worth and how much it moves under jitter and threads, side by side in one process.

Run from the repository root (2-core machine: keep OpenMP threads from spinning)::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.search_temperature [--glue-dir DIR] \\
        [--temperatures 0.003 0.03 0.1] [--sizes 2000] [--demo results/demo] [--jitters 3]

The search steps along the gradient of a smooth maximum of the errors, taken at the map of the best
classifier so far (``ExtrinsicSettings.search_temperature``, ``extrinsic.worst_search.temperature``).
That map is any map within ``tol`` of the inner optimum, so a direction that weighs only the
examples within a fraction of a percent of the largest error can turn with the last bits of the
inputs, and a step is then accepted in one run and rejected in another.

Data: the inputs of ``benchmarks/worst_search_budget.py`` (all-MiniLM-L6-v2 layers 4-6 on the first
N SST-2 training sentences, 6 ordered pairs; with ``--demo``, every ordered pair of its four
encoders at layer 6 of each demo task). Per temperature and data set, at the default budget, one
torch thread: the run as it is, ``--jitters`` runs on jittered inputs (every entry times
``1 + 1e-7 eps``, rounded to float32, seeds 0, 1, ...) and one with 2 torch threads. Printed: the
mean d_worst_search over the pairs (higher is a better lower estimate of Eq. 23's supremum), each
pair's value and largest relative change (pairs at most ``atol`` skipped: exact pairs), the largest
change, and the search's CPU over d_psi's. The machine, thread counts and load are printed too.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from dataclasses import replace
from pathlib import Path

from benchmarks.common import add_glue_dir, load_text, say, sst2_training_set

import numpy as np  # noqa: E402
import torch  # noqa: E402

from affine_homotopy.core.extrinsic import ExtrinsicSettings  # noqa: E402
from benchmarks.worst_search_budget import DEMO_ENCODERS, demo_inputs, inputs, jittered, run, short  # noqa: E402


def compare(data, title: str, temperatures: list[float], jitters: int) -> dict[float, float]:
    """Every temperature on ``data``: its lines printed; returns the largest change per temperature."""
    names, pairs = data[1], data[2]
    say(f"\n## {title}: encoders {names}, {len(pairs)} ordered pairs ({load_text()})")
    largest = {}
    for temperature in temperatures:
        settings = replace(ExtrinsicSettings(), search_temperature=temperature)
        base = run(data, settings)
        others = [run(data, settings, reps=jittered(data[0], seed=seed)) for seed in range(jitters)]
        others.append(run(data, settings, threads=2))
        value = base.values.d_worst_search
        kept = [(i, j) for i, j in pairs if value[i, j] > settings.atol]
        changes = {(i, j): max(abs(o.values.d_worst_search[i, j] - value[i, j]) / value[i, j] for o in others)
                   for i, j in kept}
        largest[temperature] = max(changes.values(), default=0.0)
        ratio = base.seconds["cpu_d_worst_search"] / base.seconds["cpu_d_psi"]
        say(f"  temperature {temperature:<6g} mean d_worst_search {np.mean([value[p] for p in kept]):.5f} "
            f"(mean d_worst {np.mean([base.values.d_worst[p] for p in kept]):.5f}); largest change "
            f"{largest[temperature]:.2e} ({sum(c > 0.01 for c in changes.values())} of {len(kept)} pairs above 1 %); "
            f"search / d_psi CPU {ratio:.2f}")
        say("    " + "  ".join(f"{short(names[i])}->{short(names[j])} {value[i, j]:.4f} ({changes[(i, j)]:.1e})"
                              for i, j in kept))
    return largest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_glue_dir(parser, "SST-2/train.tsv")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.003, 0.03, 0.1])
    parser.add_argument("--sizes", type=int, nargs="*", default=[2000], help="SST-2 sizes (none: the demo only)")
    parser.add_argument("--demo", type=Path, help="a finished demo run (results/demo) to compare on too")
    parser.add_argument("--demo-tasks", nargs="*", default=["sentiment", "paraphrase"])
    parser.add_argument("--jitters", type=int, default=3, help="jittered runs per temperature (seeds 0, 1, ...)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    default = ExtrinsicSettings()
    say(f"machine: {platform.machine()}, {os.cpu_count()} cores; torch {torch.__version__}, 1 torch thread "
        f"(2 in the thread run); {load_text()}")
    say(f"default budget: {default.search_candidates} aimed classifiers, {default.search_steps} steps, accept_rtol "
        f"{default.search_accept_rtol}, tol {default.tol}; default temperature {default.search_temperature}; "
        f"{args.jitters} jitters (1e-7, float32) and 2 threads per temperature")
    largest: dict[float, float] = {}
    runs = []
    if args.sizes:
        embedded, labels = sst2_training_set(args.glue_dir)
        runs += [(inputs(embedded, labels, n), f"SST-2, N = {n}, D = {embedded.shape[2]}") for n in args.sizes]
    for task in args.demo_tasks if args.demo else []:
        data = demo_inputs(args.demo, task, "layer6", DEMO_ENCODERS)
        runs.append((data, f"demo {task} layer6, N = {data[0][0].shape[0]}"))
    for data, title in runs:
        for temperature, change in compare(data, title, args.temperatures, args.jitters).items():
            largest[temperature] = max(largest.get(temperature, 0.0), change)
    say("\nlargest change of any pair, every data set: "
        + ", ".join(f"temperature {t:g}: {c:.2e}" for t, c in largest.items()) + f"; {load_text()}")
    if default.search_temperature in largest:
        record_goal(largest, default, [title for _, title in runs], args.jitters)
    return 0


def record_goal(largest: dict[float, float], default: ExtrinsicSettings, titles: list[str], jitters: int) -> None:
    """The goal row ``search_stability`` (benchmarks/goal_measurements.csv): the default temperature's
    largest change of any pair, the other temperatures' beside it."""
    from benchmarks.goals import record

    others = ", ".join(f"temperature {t:g}: {100 * c:.3g} %" for t, c in largest.items() if t != default.search_temperature)
    record("search_stability", 100 * largest[default.search_temperature], "%",
           f"benchmarks.search_temperature on {'; '.join(titles)} ({default.search_candidates} aimed classifiers, "
           f"{default.search_steps} steps, temperature {default.search_temperature:g}): largest relative change of "
           f"d_worst_search of any pair under {jitters} float32 jitters (1e-7) and 2 threads; {others}")


if __name__ == "__main__":
    sys.exit(main())
