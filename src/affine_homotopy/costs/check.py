"""The cost model against a finished run: each job's benchmark file and cost record
(:mod:`affine_homotopy.jobs.cost_record`), per rule, beside the projection of the run's config
(``python -m affine_homotopy.costs check results/<run>``).

Of a benchmark file's columns, ``s`` is the job's wall time, interpreter start-up included, and
``cpu_time`` the CPU seconds of the job's processes as Snakemake samples them; the cost record holds
the exact count. The cost coefficients carry the speed probe of the machine that measured them
(``speed_reference``), and :func:`compare` scales each rule's projection by the ratio of its jobs'
probe (the median) to that reference, the *speed factor*, before the ratio is taken: machines of the
same kind differ by more than the check's tolerance.

:func:`read_run` reads every benchmark file with its record and refuses a record of another config
than the run's (``config_sha256`` of ``provenance.json``) and a benchmark file without a record;
:func:`compare` sets the measured CPU per rule beside the projection
(:func:`affine_homotopy.costs.study.job_projection`) and :func:`check` prints the comparison.
"""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..jobs.cost_record import BENCHMARK_DIR, LOG_DIR

# the share by which a rule's measured CPU may differ from its projection and still count as within it
TOLERANCE = 0.25


@dataclass(frozen=True)
class JobMeasurement:
    """One job's benchmark file and cost record."""

    rule: str
    benchmark: Path
    wildcards: Mapping[str, Any]
    cpu_seconds: float  # the record's exact count: start-up and work
    startup_cpu_seconds: float
    wall_seconds: float  # the benchmark file's ``s``
    sampled_cpu_seconds: float  # the benchmark file's ``cpu_time`` (NaN where Snakemake wrote NA)
    load_1min: float  # the machine's load average when the job ended
    speed_probe_seconds: float = math.nan  # the machine's speed after the job (NaN: a record without it)
    threads: int = 1  # the threads the job ran its work on (its CPU count is all of theirs)


def read_benchmark_file(path: str | os.PathLike[str]) -> dict[str, float]:
    """The first record of a Snakemake benchmark TSV: ``s`` and ``cpu_time`` (NaN for NA), ``max_rss``."""
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    if not rows or not {"s", "cpu_time"} <= set(rows[0]):
        raise DataError(f"{path} is not a Snakemake benchmark file: it needs a header with the columns s and "
                        f"cpu_time and one record. Fix: rerun the job (snakemake --forcerun <its rule>)")

    def number(text: str | None) -> float:
        try:
            return float(text) if text not in (None, "", "NA", "-") else math.nan
        except ValueError:
            return math.nan

    return {key: number(rows[0].get(key)) for key in ("s", "cpu_time", "max_rss")}


def run_fingerprint(run: str | os.PathLike[str]) -> tuple[str, dict[str, Any]]:
    """The config fingerprint and the config of a finished run, from its ``provenance.json``."""
    path = Path(run) / "provenance.json"
    if not path.is_file():
        raise DataError(f"{run} is not a finished run: it has no provenance.json, which holds the run's config "
                        f"and its fingerprint. Fix: finish the run (snakemake --cores N) or name another folder")
    record = json.loads(path.read_text(encoding="utf-8"))
    return record["config_sha256"], record["config"]


@dataclass(frozen=True)
class RunMeasurements:
    fingerprint: str
    config: dict[str, Any]
    jobs: list[JobMeasurement]
    logged_rules: set[str]  # the rules whose jobs left an environment record beside their logs


def read_run(run: str | os.PathLike[str]) -> RunMeasurements:
    """Every benchmark file of a finished run with its cost record, checked against the run's config.

    Raises :class:`~affine_homotopy.errors.DataError` naming the file for a benchmark file without its
    record, and for a record whose config fingerprint is not the run's (naming both fingerprints)."""
    run = Path(run)
    fingerprint, config = run_fingerprint(run)
    jobs = []
    for tsv in sorted((run / BENCHMARK_DIR).rglob("*.tsv")):
        record_file = tsv.with_suffix(".json")
        if not record_file.is_file():
            raise DataError(f"{tsv} has no cost record beside it ({record_file.name}), so neither its rule nor the "
                            f"config it ran under is known. Fix: rerun its job (snakemake --forcerun <its rule>)")
        record = json.loads(record_file.read_text(encoding="utf-8"))
        if record["config_sha256"] != fingerprint:
            raise DataError(f"{tsv} was measured under another config than the run's: its record {record_file.name} "
                            f"has the config fingerprint {record['config_sha256']}, {run / 'provenance.json'} has "
                            f"{fingerprint}. Fix: rerun that job under this config (snakemake --forcerun "
                            f"{record['rule']}), or check the run of that config")
        bench = read_benchmark_file(tsv)
        jobs.append(JobMeasurement(record["rule"], tsv, record.get("wildcards", {}), float(record["cpu_seconds"]),
                                   float(record["startup_cpu_seconds"]), bench["s"], bench["cpu_time"],
                                   float(record.get("load_1min", math.nan)),
                                   float(record.get("speed_probe_cpu_seconds", math.nan)),
                                   int(record.get("threads", 1))))
    logged = set()
    for path in (run / LOG_DIR).rglob("*.env.json"):
        logged.add(json.loads(path.read_text(encoding="utf-8"))["rule"])
    return RunMeasurements(fingerprint, config, jobs, logged)


@dataclass(frozen=True)
class RuleComparison:
    """One rule's projected and measured CPU seconds (sums over its jobs)."""

    rule: str
    jobs_projected: int
    jobs_measured: int
    projected: float  # NaN: the cost model does not project this rule
    measured: float
    startup_measured: float
    wall_measured: float
    sampled_measured: float
    # the rule's jobs' speed probe (median) over the cost model's reference: 1 where either is unknown
    speed_factor: float = 1.0
    # the most threads any of its jobs ran on: the projection is single-thread CPU, and a job on more
    # threads counts their overhead too, so its ratio is not a like-for-like check of the model
    threads: int = 1

    @property
    def ratio(self) -> float:
        """Measured CPU seconds over the projection on the jobs' machine (projected x speed_factor)."""
        return self.measured / (self.projected * self.speed_factor) if self.projected > 0 else math.nan

    @property
    def unscaled_ratio(self) -> float:
        """Measured CPU seconds over the projection on the machine that measured the cost model."""
        return self.measured / self.projected if self.projected > 0 else math.nan

    @property
    def within(self) -> bool:
        return bool(abs(self.ratio - 1.0) <= TOLERANCE)


def prepared_tokens(run: str | os.PathLike[str], config: Mapping[str, Any]) -> dict[str, float]:
    """Task -> mean tokens per example (:func:`affine_homotopy.costs.model.approximate_tokens` at the
    config's ``embedding.max_length``) over both splits of a finished run's prepared data
    (``RUN/data/<task>/{train,dev}.parquet``, what its embed jobs embedded); a task without both files is
    left out (its embed jobs are then priced at the measured sentences' length)."""
    import pandas as pd

    from .model import approximate_tokens

    out = {}
    for task in config["tasks"]:
        files = [Path(run) / "data" / task / f"{split}.parquet" for split in ("train", "dev")]
        if not all(path.is_file() for path in files):
            continue
        max_length = int(config["embedding"]["max_length"])
        counts = [approximate_tokens(a, b if isinstance(b, str) else None, max_length)
                  for path in files for a, b in pd.read_parquet(path, columns=["text_a", "text_b"]).itertuples(index=False)]
        if counts:
            out[task] = sum(counts) / len(counts)
    return out


def run_widths(run: str | os.PathLike[str], config: Mapping[str, Any]) -> dict[str, int]:
    """Encoder -> width (last axis) of the embeddings a finished run stored for it
    (``RUN/embeddings/<encoder>/<task>/train.npy``, the first task that has the file), for every
    encoder that is not derived; an encoder without such a file is left out. The check prices a run at
    the widths it ran at: a model's config on this machine (a staged model under ``resources/``, a hub
    cache) may be absent or another model's, and would change the projection."""
    import numpy as np

    out = {}
    for name, spec in config["encoders"].items():
        if spec["source"] == "derived":
            continue
        for task in config["tasks"]:
            path = Path(run) / "embeddings" / name / task / "train.npy"
            if path.is_file():
                out[name] = int(np.load(path, mmap_mode="r").shape[-1])
                break
    return out


def missing_benchmarks(planned: Mapping[str, int], measured: RunMeasurements) -> list[str]:
    """The rules with planned jobs or logged jobs and not a single benchmark file."""
    with_files = {job.rule for job in measured.jobs}
    expected = {rule for rule, jobs in planned.items() if jobs} | measured.logged_rules
    return sorted(expected - with_files)


def speed_factor(jobs: Sequence[JobMeasurement], reference_probe: float | None) -> float:
    """The median speed probe of ``jobs`` over ``reference_probe``; 1 where either is unknown."""
    probes = [j.speed_probe_seconds for j in jobs if math.isfinite(j.speed_probe_seconds)]
    if not probes or not reference_probe:
        return 1.0
    return statistics.median(probes) / reference_probe


def compare(projected: Mapping[str, tuple[int, float]], measured: Sequence[JobMeasurement],
            reference_probe: float | None = None) -> list[RuleComparison]:
    """Per rule (projected ones first, in their order, then the others by name) and a ``total`` row.

    ``projected``: rule -> (jobs, CPU seconds of all of them; NaN where the rule is not projected).
    ``reference_probe``: the speed probe of the machine the cost model was measured on (the coefficient
    file's ``speed_reference``); each rule's projection is then scaled by its speed factor
    (:func:`speed_factor`). The total row sums the rules that have both a projection and measurements;
    its speed factor is their scaled projections' sum over their projections' sum."""
    by_rule: dict[str, list[JobMeasurement]] = {}
    for job in measured:
        by_rule.setdefault(job.rule, []).append(job)
    rows = []
    for rule in [*projected, *sorted(set(by_rule) - set(projected))]:
        jobs = by_rule.get(rule, [])
        count, seconds = projected.get(rule, (0, math.nan))
        rows.append(RuleComparison(
            rule, count, len(jobs), seconds, sum(j.cpu_seconds for j in jobs), sum(j.startup_cpu_seconds for j in jobs),
            sum(j.wall_seconds for j in jobs), sum(j.sampled_cpu_seconds for j in jobs),
            speed_factor(jobs, reference_probe), max((j.threads for j in jobs), default=1)))
    both = [r for r in rows if r.jobs_measured and not math.isnan(r.projected)]
    projected_sum = sum(r.projected for r in both)
    total_factor = sum(r.projected * r.speed_factor for r in both) / projected_sum if projected_sum > 0 else 1.0
    rows.append(RuleComparison("total", sum(r.jobs_projected for r in both), sum(r.jobs_measured for r in both),
                               projected_sum, sum(r.measured for r in both),
                               sum(r.startup_measured for r in both), sum(r.wall_measured for r in both),
                               sum(r.sampled_measured for r in both), total_factor,
                               max((r.threads for r in both), default=1)))
    return rows


def comparison_table(rows: Sequence[RuleComparison]) -> str:
    """The comparison as plain text, one line per rule."""
    head = (f"{'rule':30s} {'jobs':>9s} {'projected CPU s':>16s} {'measured CPU s':>15s} {'per job proj/meas':>18s} "
            f"{'ratio':>6s} {f'within {TOLERANCE:.0%}':>11s} {'start-up s':>11s} {'sampled s':>10s} {'wall s':>8s} "
            f"{'speed':>6s} {'unscaled':>8s} {'threads':>7s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        jobs = f"{r.jobs_measured}/{r.jobs_projected}" if r.jobs_projected else f"{r.jobs_measured}/-"
        projected = f"{r.projected:16.1f}" if not math.isnan(r.projected) else f"{'not projected':>16s}"
        per_job = (f"{r.projected / r.jobs_projected:8.2f}/{r.measured / r.jobs_measured:<9.2f}"
                   if r.jobs_projected and r.jobs_measured and not math.isnan(r.projected) else f"{'-':>18s}")
        ratio = f"{r.ratio:6.2f}" if not math.isnan(r.ratio) else f"{'-':>6s}"
        within = ("yes" if r.within else "no") if not math.isnan(r.ratio) else "-"
        unscaled = f"{r.unscaled_ratio:8.2f}" if not math.isnan(r.unscaled_ratio) else f"{'-':>8s}"
        lines.append(f"{r.rule:30s} {jobs:>9s} {projected} {r.measured:15.1f} {per_job:>18s} {ratio} {within:>11s} "
                     f"{r.startup_measured:11.1f} {r.sampled_measured:10.1f} {r.wall_measured:8.1f} "
                     f"{r.speed_factor:6.2f} {unscaled} {r.threads:7d}")
    return "\n".join(lines)


def speed_line(measured: RunMeasurements, reference: float | None) -> str:
    """How the check scales the projection to the jobs' machine, as one line."""
    import numpy as np

    probes = sorted(job.speed_probe_seconds for job in measured.jobs if math.isfinite(job.speed_probe_seconds))
    if reference and probes:
        return (f"machine speed: the jobs' speed probe {probes[0]:.4f}-{probes[-1]:.4f} CPU s (median "
                f"{np.median(probes):.4f}), the cost model's machine {reference:.4f} s: each rule's projection is "
                "scaled by its jobs' median probe over that (speed)")
    return "machine speed: " + ("the jobs recorded no speed probe" if reference else
                                "the coefficients have no speed_reference (python -m affine_homotopy.costs measure "
                                "calibrate, then fit)") + ", so the projection is not scaled (speed 1)"


def run_lines(run: Path, measured: RunMeasurements, tokens: Mapping[str, float], widths: Mapping[str, int]) -> list[str]:
    """What the check read from a run besides its jobs: the loads, the embedded tokens and the widths."""
    from .model import job_costs

    loads = [job.load_1min for job in measured.jobs]
    lines = [f"run {run} (config {measured.config['run_name']!r}, fingerprint {measured.fingerprint[:12]}): "
             f"{len(measured.jobs)} jobs with benchmark files; load average at their ends {min(loads):.2f}-"
             f"{max(loads):.2f}; now {os.getloadavg()[0]:.2f}"]
    if tokens:
        lines.append("embed: priced per token of each task's prepared examples (mean tokens per example: "
                     + ", ".join(f"{task} {count:.1f}" for task, count in tokens.items())
                     + f"; the measured SST-2 sentences: {job_costs().embed_tokens:.1f})")
    if widths:
        lines.append("widths: the run's stored embeddings' (" + ", ".join(f"{name} {d}" for name, d in widths.items())
                     + "), not this machine's model files")
    return lines


def check(run: Path, cores: int, snakefile: str | os.PathLike[str] = "workflow/Snakefile") -> list[RuleComparison]:
    """Print the projection of a finished run's config beside what its jobs measured, per rule; the rows.
    Raises :class:`~affine_homotopy.errors.DataError` for a run without a benchmark file."""
    from .model import speed_reference
    from .study import job_projection, planned_jobs

    measured = read_run(run)
    planned = planned_jobs(measured.config, snakefile)
    missing = missing_benchmarks(planned, measured)
    if not measured.jobs:
        raise DataError(f"{run} has no benchmark files (RUN/benchmarks/<rule>/...tsv), so nothing was measured; the "
                        f"rules without them: {', '.join(missing)}. Fix: run the study with this workflow, whose rules "
                        "write them (snakemake --forceall, or a fresh results folder)")
    reference = speed_reference()
    tokens, widths = prepared_tokens(run, measured.config), run_widths(run, measured.config)
    rows = compare(job_projection(measured.config, planned, tokens, widths), measured.jobs, reference)
    lines = [*run_lines(run, measured, tokens, widths), speed_line(measured, reference),
             "projected: single-thread CPU s of start-up and work on the cost model's machine; measured: the jobs' "
             "own CPU count (cost records beside the benchmark files); sampled: Snakemake's cpu_time column; "
             "ratio = measured / (projected x speed); unscaled = measured / projected", comparison_table(rows)]
    threaded = [f"{row.rule} ({row.threads})" for row in rows[:-1] if row.threads > 1]
    if threaded:
        lines.append(f"rules with jobs on more than one thread (the most per job): {', '.join(threaded)}: their CPU "
                     "counts every thread's, overhead included, against a single-thread projection, so their ratios "
                     "are not like for like; for a check of the model, run with threads: 1 (embedding.threads, "
                     "intrinsic.threads)")
    if missing:
        lines.append(f"rules without benchmark files: {', '.join(missing)}")
    work = rows[-1].measured - rows[-1].startup_measured
    lines.append(f"the jobs' work alone (their CPU less their start-up): {work:.1f} CPU s, so on {cores} cores the run "
                 f"takes at least {work / cores:.1f} s of wall time however little its jobs' start-up costs")
    print("\n".join(lines), flush=True)
    return rows
