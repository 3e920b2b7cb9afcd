"""The extrinsic measures' cost: CPU seconds per ordered pair of d_psi, d_worst and d_worst_search.

    python -m benchmarks extrinsic [--quick] [--width 384|768] [--n 2000] [--randoms 100] [--glue-dir DIR]
    python -m benchmarks extrinsic --run results/demo

Data: all-MiniLM-L6-v2 (mean pooling) of a seeded sample of ``--n`` SST-2 training sentences of
``--glue-dir`` when present, else synthetic encoders (:func:`benchmarks.common.synthetic_encoders`)
with labels a linear probe can mostly learn. At ``--width 384`` the encoders are MiniLM's layers 3
and 6; at ``--width 768`` two side-by-side pairs, layers 1 and 2 (source) and 3 and 4 (target), the
width of every encoder of the paper. Both ordered pairs are measured.

The inputs (task probes, ``--randoms`` random-label classifiers per encoder by the paper's SGD
protocol, d_aff and its solver weights) are fitted first and timed apart; then
:func:`extrinsic_distances` at its default settings (certified d_psi, d_worst, the worst-case search)
with ``--threads`` torch threads. Printed: each measure's CPU seconds per pair and its ratio to
d_psi, and the values.

``--run`` reads a finished workflow run instead: each extrinsic job's phase clocks (the last
``seconds: {...}`` line of ``logs/extrinsic/<job>.log``) beside its job record
(``benchmarks/extrinsic/<job>.json``), and prints the measures' CPU and search / d_psi per job.
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

from benchmarks.common import (Clock, add_glue_dir, load_text, minilm_embeddings, ratio, say, setup_line,
                               sst2_sentences, synthetic_encoders, synthetic_labels)

import numpy as np  # noqa: E402  (after benchmarks.common: its environment defaults come first)
import torch  # noqa: E402

from affine_homotopy.core.extrinsic import ExtrinsicSettings, extrinsic_distances  # noqa: E402
from affine_homotopy.core.intrinsic import IntrinsicSettings, pairwise_intrinsic  # noqa: E402
from affine_homotopy.core.probes import fit_random_probes_sgd, fit_softmax_probe, random_labels  # noqa: E402

MEASURES = ("d_psi", "d_worst", "d_worst_search")


def encoders(args: argparse.Namespace) -> tuple[list[np.ndarray], list[str], np.ndarray, str]:
    """The two encoders, their names, the labels and a description of the data."""
    sst2 = args.glue_dir / "SST-2" / "train.tsv"
    if sst2.is_file() and not args.quick:
        layers = (1, 2, 3, 4) if args.width == 768 else (3, 6)
        embedded = minilm_embeddings(sst2, args.n, layers)[0]
        labels = np.array([int(label) for label in sst2_sentences(sst2, args.n, column_name="label")])
        if args.width == 768:
            reps = [np.concatenate([embedded[0], embedded[1]], axis=1), np.concatenate([embedded[2], embedded[3]], axis=1)]
            names = ["MiniLM L1|L2", "MiniLM L3|L4"]
        else:
            reps, names = [embedded[0], embedded[1]], ["MiniLM L3", "MiniLM L6"]
        return reps, names, labels, f"all-MiniLM-L6-v2 of {args.n} SST-2 training sentences ({sst2})"
    reps, names = synthetic_encoders(2, args.n, args.width)
    why = "--quick" if args.quick else f"{sst2} is missing"
    return reps, names, synthetic_labels(reps[1]), f"synthetic encoders ({why})"


def measure(args: argparse.Namespace) -> None:
    reps, names, labels, data = encoders(args)
    pairs = [(0, 1), (1, 0)]
    say(setup_line(data, f"N = {reps[0].shape[0]}, D = {reps[0].shape[1]}, {len(pairs)} ordered pairs, "
                         f"{args.randoms} random classifiers per encoder", "float32 inputs, float64 solves"))
    with Clock() as inputs_clock:
        probes = [fit_softmax_probe(rep, labels, 2) for rep in reps]
        randoms = [fit_random_probes_sgd(rep, random_labels(len(labels), 2, range(args.randoms)), 2) for rep in reps]
        intrinsic = pairwise_intrinsic(reps, names, IntrinsicSettings(measures=("d_aff",), keep_weights=True))
    torch.set_num_threads(args.threads)
    settings = ExtrinsicSettings()
    with Clock() as clock:
        result = extrinsic_distances(reps, probes, names, intrinsic.weights, randoms, settings,
                                     intrinsic.matrices["d_aff"], pairs)
    say(f"inputs (task probes, random classifiers, d_aff and its weights): {inputs_clock.cpu:.1f} CPU s, not counted")
    say(f"extrinsic_distances, default settings (search: {settings.search_candidates} aimed classifiers, "
        f"{settings.search_steps} steps), {args.threads} torch thread(s): {clock.cpu:.1f} CPU s, {clock.wall:.1f} s wall")
    matrices = result.matrices()
    per_psi = result.seconds["cpu_d_psi"] / len(pairs)
    say(f"{'measure':<15} {'CPU s/pair':>10} {'/ d_psi':>8}   values ({', '.join(f'{names[i]} -> {names[j]}' for i, j in pairs)})")
    for name in MEASURES:
        per_pair = result.seconds[f"cpu_{name}"] / len(pairs)
        values = ", ".join(f"{matrices[name][i, j]:.5f}" for i, j in pairs)
        say(f"{name:<15} {per_pair:10.2f} {ratio(per_pair, per_psi):>8}   {values}")
    say(load_text())


def job_clocks(run: Path) -> dict[str, dict[str, float]]:
    """Each extrinsic job's phase clocks: ``{job: {phase: seconds}}`` from its log's last ``seconds: {`` line."""
    clocks = {}
    for log in sorted((run / "logs" / "extrinsic").glob("*.log")):
        lines = [line for line in log.read_text(encoding="utf-8").splitlines() if "seconds: {" in line]
        if lines:
            clocks[log.stem] = ast.literal_eval(lines[-1].split("seconds: ", 1)[1])
    return clocks


def report_run(run: Path) -> int:
    clocks = job_clocks(run)
    if not clocks:
        say(f"{run / 'logs' / 'extrinsic'}: no extrinsic job log with its phase seconds; name a finished run's "
            f"results folder (results/<run_name>)")
        return 1
    say(f"run {run}: {len(clocks)} extrinsic jobs; CPU s of each measure over the job's pairs; work: the job "
        f"record's work CPU s (benchmarks/extrinsic/<job>.json)")
    say(f"{'job':<24} {'d_psi':>8} {'d_worst':>8} {'search':>8} {'work':>8} {'threads':>7} {'search/d_psi':>13}")
    ratios = []
    for job, clock in clocks.items():
        record_path = run / "benchmarks" / "extrinsic" / f"{job}.json"
        record = json.loads(record_path.read_text()) if record_path.is_file() else {}
        psi, search = clock.get("cpu_d_psi", np.nan), clock.get("cpu_d_worst_search", np.nan)
        if psi > 0 and search >= 0:
            ratios.append(search / psi)
        say(f"{job:<24} {psi:8.1f} {clock.get('cpu_d_worst', np.nan):8.1f} {search:8.1f} "
            f"{record.get('work_cpu_seconds', np.nan):8.1f} {record.get('threads', '-'):>7} {ratio(search, psi):>13}")
    if ratios:
        say(f"search / d_psi over {len(ratios)} jobs: median {np.median(ratios):.2f}x, range "
            f"{min(ratios):.2f}x-{max(ratios):.2f}x")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks extrinsic", description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, help="a finished run's results folder: per-job figures instead")
    parser.add_argument("--quick", action="store_true", help="synthetic data, N = 400, 10 random classifiers")
    parser.add_argument("--width", type=int, choices=(384, 768), default=384)
    parser.add_argument("--n", type=int, default=2000, help="examples (default 2000)")
    parser.add_argument("--randoms", type=int, default=100, help="random-label classifiers per encoder (default 100)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the measured call (default 1)")
    add_glue_dir(parser, "SST-2/train.tsv (synthetic encoders without it)")
    args = parser.parse_args(argv)
    if args.run is not None:
        return report_run(args.run)
    if args.quick:
        args.n, args.randoms = 400, 10
    measure(args)
    return 0
