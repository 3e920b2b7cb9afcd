"""Each workflow job's cost record: what the job cost, written by the runner when its work ends.

Every workflow job has a Snakemake benchmark file ``results/<run>/benchmarks/<name>.tsv``, named as
its log ``results/<run>/logs/<name>.log`` is (``job_log`` and ``job_benchmark`` in
workflow/rules/common.smk). Snakemake samples its ``cpu_time`` coarsely, so a long job can lose CPU
at its end. Hence the job's own count: the runner writes the job's cost record beside the benchmark
file (``<name>.json``, :func:`write_job_record`), with its rule and wildcards, the fingerprint of the
config it ran under (:func:`~affine_homotopy.jobs.provenance.config_hash`) and its process CPU seconds
counted exactly: before its work (interpreter, Snakemake's script preamble, imports), of its work, and
in total; and, after its work, the machine's speed: :func:`speed_probe_seconds`, a fixed
single-thread computation that makes a run on one machine comparable with a cost model measured on
another. :mod:`affine_homotopy.costs.check` reads the records.
"""

from __future__ import annotations

import math
import os
import resource
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

LOG_DIR, BENCHMARK_DIR = "logs", "benchmarks"
# the speed probe: float64 rows x columns, its Gram matrix, the Gram's Cholesky factor and rows x Gram
SPEED_PROBE_SHAPE = (3072, 320)


def job_record_path(log_path: str | os.PathLike[str]) -> Path | None:
    """Where a job writes its cost record: its log's path with the last ``logs`` folder replaced by
    ``benchmarks`` and the suffix ``.json`` (beside the benchmark file ``<name>.tsv``); None for a
    log outside a ``logs`` folder."""
    parts = Path(log_path).parts
    if LOG_DIR not in parts[:-1]:
        return None
    at = len(parts) - 1 - parts[::-1].index(LOG_DIR)
    return Path(*parts[:at], BENCHMARK_DIR, *parts[at + 1:]).with_suffix(".json")


def process_cpu_seconds() -> float:
    """User + system CPU seconds of this process (all its threads) and of its children that ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def speed_probe_seconds(repeats: int = 3) -> float:
    """CPU seconds of a fixed float64 computation on one BLAS thread, the least of ``repeats``: a
    3072 x 320 matrix (seeded), its Gram matrix, the Gram's Cholesky factor and the matrix times its Gram
    (about 1.3 GFLOP, the products and factorisations the pairwise stages are made of). A smaller value is
    a faster machine; the least of a few runs is the machine's speed, not another process's share of it."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    data = np.random.default_rng(0).standard_normal(SPEED_PROBE_SHAPE)
    best = math.inf
    with threadpool_limits(limits=1):
        for _ in range(repeats):
            started = time.process_time()
            gram = data.T @ data
            np.linalg.cholesky(gram)
            data @ gram
            best = min(best, time.process_time() - started)
    return best


def write_job_record(log_path: str | os.PathLike[str], rule: str, wildcards: Mapping[str, Any],
                     config: Mapping[str, Any], startup_cpu: float, work_cpu: float, work_wall: float,
                     threads: int) -> Path | None:
    """Write the job's cost record (see the module docstring); called by the runner when the work ends."""
    from .io import write_json
    from .provenance import config_hash

    path = job_record_path(log_path)
    if path is None:
        return None
    cpu_seconds = process_cpu_seconds()  # the job's own count, before the speed probe adds to it
    write_json(path, {"rule": rule, "wildcards": dict(wildcards), "config_sha256": config_hash(config),
                      "cpu_seconds": round(cpu_seconds, 3), "startup_cpu_seconds": round(startup_cpu, 3),
                      "work_cpu_seconds": round(work_cpu, 3), "work_wall_seconds": round(work_wall, 3),
                      "threads": int(threads), "load_1min": round(os.getloadavg()[0], 2),
                      "speed_probe_cpu_seconds": round(speed_probe_seconds(), 5),
                      "finished": time.strftime("%Y-%m-%dT%H:%M:%S")})
    return path
