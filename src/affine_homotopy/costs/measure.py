"""Time the cost model's stages: ``python -m affine_homotopy.costs measure stages`` (run from the
repository root, with ``OMP_WAIT_POLICY=PASSIVE``).

``measure stages`` times every pairwise stage with one thread (torch and numpy's BLAS; CPU seconds,
``time.process_time``) on real data (:mod:`.measure_data`): all-MiniLM-L6-v2 embeddings (mean pooling)
of the SST-2 training sentences, layers 4, 5 and 6 as three "encoders" (6 ordered pairs), at several N
(D = 384), and D = 768 (two layers side by side, or ``--wide-model mpnet``: a real 768-wide encoder) at
two sizes. The stages: factorisation (per encoder), d_aff and d_lin (jacobi, tol 1e-3, per ordered
pair), the intrinsic baselines (per pair), the task probe (per encoder), the random-label probes (per
classifier), d_psi (per pair), d_worst (per random classifier of a pair) and d_worst_search (per pair,
at the default budget its coefficient is scaled from); and the same three extrinsic stages on exact
pairs (each encoder and an invertible affine image of it, both ways). A K = 6 run checks that the
per-pair cost of d_aff does not depend on K. Rows are appended to ``data/cost_measurements.csv`` with
the machine, thread count, load average, date and speed probe. :mod:`.measure_jobs` measures what a
job costs besides its stages.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import time
from collections import defaultdict

import numpy as np

from .fit import MEASUREMENTS, append_rows
from .measure_data import cpu_seconds, glue_training_head, say, sst2_training_set


def measure_solver(reps: list[np.ndarray]) -> dict[str, tuple[float, int, str]]:
    """Per-unit CPU seconds of the factorisation and the d_aff solver alone (``measure --only-solver``)."""
    from ..core.intrinsic import IntrinsicSettings, pairwise_intrinsic
    from ..core.linalg import factorise

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
    which pairs are exact by construction: :func:`affine_homotopy.costs.study.affine_pairs`)."""
    from ..core.intrinsic import IntrinsicSettings, pairwise_intrinsic
    from ..models.derived import random_affine

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
    from ..core.extrinsic import ExtrinsicSettings, extrinsic_distances
    from ..core.intrinsic import MEASURES, IntrinsicSettings, pairwise_intrinsic
    from ..core.linalg import factorise
    from ..core.probes import fit_random_probes_sgd, fit_softmax_probe, random_labels

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
    gaps = [row[column] for row in result.diagnostics for column in ("d_psi_gap", "d_worst_gap", "d_worst_search_gap")
            if np.isfinite(row.get(column, np.nan))]
    say(f"    certified extrinsic: largest relative gap {max(gaps, default=0.0):.2e} over {len(gaps)} intervals")
    return out


# the stages measure --narrow-ranks records: the certified extrinsic stages of inexact pairs, which the
# projection prices at the source's rank (an exact pair's close at their first LP at any rank), and d_aff,
# priced at the pair's mean rank: below D = 384 its cost does not fall as its growth above 384 does (its
# passes over the N x D target do not shrink with the source's rank), and SVD-truncated copies are common
NARROW_STAGES = ("d_aff", "d_psi", "d_worst", "d_worst_search")


def narrow_copies(layers: list[np.ndarray], n: int, rank: int) -> list[np.ndarray]:
    """The first ``n`` rows of each layer projected onto its top ``rank`` directions: the workflow's
    ``svd_truncate`` (models/derived.py) with the fraction that keeps exactly ``rank``, the rows as both splits."""
    from ..core.linalg import factorise
    from ..models.derived import svd_truncate

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
    from ..core.extrinsic import ExtrinsicSettings, extrinsic_distances
    from ..core.intrinsic import IntrinsicSettings, pairwise_intrinsic
    from ..core.probes import fit_random_probes_sgd, fit_softmax_probe, random_labels
    from ..models.derived import random_affine

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


def measure_stages(args: argparse.Namespace) -> None:
    """Time every stage on one thread and append the rows to ``cost_measurements.csv``."""
    import scipy.linalg  # noqa: F401  (scipy's own OpenBLAS, loaded now so that the limit below reaches it)
    import scipy.optimize  # noqa: F401
    from threadpoolctl import threadpool_info, threadpool_limits

    # one thread for numpy's BLAS as for torch, as a workflow job has (Snakemake sets its BLAS thread
    # variables to the job's threads): more threads on a busy machine slow the probes' fits many times over
    import torch

    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        say("thread pools: " + ", ".join(f"{pool['internal_api']} {pool['num_threads']}" for pool in threadpool_info()))
        measure_all(args)


def measurement_runs(args: argparse.Namespace, embedded: np.ndarray, labels_all: np.ndarray) -> list[tuple]:
    """The runs ``measure stages`` times: (N, D, encoders, data, labels) each. K = 3 at D = 384 (6 ordered
    pairs; K = 2 at the full training set, to keep the run short), D = 768 (a real wide encoder's layers,
    or two MiniLM layers side by side), a K = 6 run (per-pair cost independent of K) and the narrow ranks."""
    full = len(labels_all)
    sizes = [2000, 8000] if args.quick else [2000, 8000, 20000, full]
    wide_sizes = [2000] if args.quick else [2000, 8000]
    if args.sizes:
        sizes = [min(n, full) for n in args.sizes]
        wide_sizes = [n for n in wide_sizes if n in sizes]
    if args.wide_sizes is not None:
        wide_sizes = [min(n, full) for n in args.wide_sizes]
    runs = [] if args.wide_only or args.narrow_only else [
        (n, 384, [embedded[3], embedded[4], embedded[5]] if n < 50000 else [embedded[4], embedded[5]], "", labels_all)
        for n in sizes]
    if args.narrow_only:
        wide_sizes = []
    # the D = 384 and narrow runs' three layers: MiniLM-L6's 4-6 of SST-2's training set, or of another
    # task's first examples, their rows named by it
    base, base_labels, base_name = [embedded[3], embedded[4], embedded[5]], labels_all, ""
    if args.data_task != "sst2":
        head, base_labels = glue_training_head(args.glue_dir, args.data_task, max(sizes + args.narrow_sizes), "minilm",
                                               (4, 5, 6))
        base, base_name = [head[0], head[1], head[2]], f", {args.data_task}"
        runs = [(n, 384, base, f"all-MiniLM-L6-v2 layers 4, 5, 6{base_name}", base_labels)
                for n in sorted({min(n, len(base_labels)) for n in sizes})] if runs else []
    if args.wide_model == "mpnet" and wide_sizes:  # a real 768-wide encoder: three of its layers
        mpnet, wide_labels = glue_training_head(args.glue_dir, args.wide_task, max(wide_sizes))
        wide_sizes = [min(n, len(wide_labels)) for n in wide_sizes]  # a small task may have fewer examples
        # SST-2's rows keep the name they were first measured under; another task's name it (fit: a mean over tasks)
        data = "all-mpnet-base-v2 layers 4, 8, 12" + ("" if args.wide_task == "sst2" else f", {args.wide_task}")
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
    return runs


def measure_all(args: argparse.Namespace) -> None:
    from ..jobs.cost_record import speed_probe_seconds

    embedded, labels_all = sst2_training_set(args.glue_dir)
    say(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores, 1 thread; data: "
        f"all-MiniLM-L6-v2 mean-pooled SST-2 training sentences (layers 1-6) {embedded.shape}")
    measured, probes = [], []
    for n, d, full_reps, data, labels in measurement_runs(args, embedded, labels_all):
        reps = [np.ascontiguousarray(r[:n]) for r in full_reps]
        # d_worst's cost per classifier depends on how many classifiers share a block (the working
        # set is shared): the paper's 100 per target up to N = 8,000, fewer beyond (time)
        n_random = args.n_random or (100 if n <= 8000 else 25)
        tick = time.perf_counter()
        probe = speed_probe_seconds()
        say(f"N = {n}, D = {d}, K = {len(reps)}{', ' + data if data else ''}, {n_random} random classifiers "
            f"({time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.2f}, speed probe {probe:.4f} s)")
        search = args.search_sizes is None or n in args.search_sizes
        narrow = d < 384
        stages = (measure_solver(reps) if args.only_solver
                  else measure_exact_extrinsic(reps, labels[:n], n_random, search) if args.only_exact and not narrow
                  else measure_one(reps, labels[:n], n_random, args.only_extrinsic, search=search))
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
    # taken while another process shares the core moves a lot, which would turn ratios measured side by
    # side into ratios of two probes
    probe = statistics.median(probes) if probes else math.nan
    append_rows([{**row, "speed_probe_seconds": f"{probe:.6g}"} for row in measured])
    say(f"appended {len(measured)} rows to {MEASUREMENTS} with the run's median speed probe {probe:.4f} s (of "
        f"{', '.join(f'{value:.4f}' for value in probes)}); now run: python -m affine_homotopy.costs fit")
