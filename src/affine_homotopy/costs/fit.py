"""Fit the cost model to its measurements: ``python -m affine_homotopy.costs fit``.

The measurements are the CSV records in this package's ``data/`` folder, appended by
:mod:`affine_homotopy.costs.measure`: ``cost_measurements.csv`` (per stage, N and D: CPU seconds per
unit), ``job_measurements.csv`` (per-job start-up, the embed forward pass, the Table 1
correlations, the work of the rules the config does not size) and ``speed_calibration.csv`` (the speed
probe of the machine that measured the rows). :func:`fitted_coefficients` turns them into the document
of ``data/cost_coefficients.json``, which :mod:`affine_homotopy.costs.model` reads; a test checks that
the file is what the fit computes, so refit rather than edit it.
"""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np

from .model import COEFFICIENTS_FILE, D_REF, N_REF, WORKING_SET_STAGES, fit_stage, fit_width_factors, solver_stage

DATA_DIR = Path(__file__).resolve().parent / "data"
COEFFICIENTS = DATA_DIR / COEFFICIENTS_FILE
MEASUREMENTS = DATA_DIR / "cost_measurements.csv"
# fit: how ``fit`` uses the row: "measured" (as measured) or "no" (kept beside the model, not fitted)
# speed_probe_seconds: the machine's speed probe when the row was measured (empty: a row of the machine
# speed_calibration.csv calibrates, the reference machine)
FIELDS = ["stage", "n", "d", "k", "units", "seconds_per_unit", "unit", "threads", "load_1min", "machine", "date",
          "fit", "speed_probe_seconds", "data"]
JOB_MEASUREMENTS = DATA_DIR / "job_measurements.csv"
# quantity: "startup" (CPU s per job of the rule), "load" (the embed job's model load), "example"
# (the embed job's forward pass, CPU s per example at width d), "tokens" (the mean tokens per example of
# the example row's sentences), "cell" (correlate: one Table 1 correlation of n encoders at the schema's
# permutations and resamples), "first_call" (a correlate job's one-off cost) or "work" (CPU s of one
# job's work of a rule the config does not size, the median over a reference run's jobs; n: its jobs);
# speed_probe_seconds: the measuring machine's speed probe (empty: the reference machine's)
JOB_FIELDS = ["rule", "quantity", "seconds", "n", "d", "repeats", "threads", "load_1min", "machine", "date", "note",
              "speed_probe_seconds"]
CALIBRATION = DATA_DIR / "speed_calibration.csv"
CALIBRATION_FIELDS = ["stage", "n", "d", "recorded_seconds", "recorded_date", "measured_seconds",
                      "speed_probe_seconds", "threads", "load_1min", "machine", "date"]
ABOUT = ("Single-thread CPU seconds per unit of each pairwise stage: seconds = seconds_ref (N / n_ref)^n_exponent "
         "f(D), f(d_ref) = 1, f through each measured width's factor (d_factors: [D, factor], piecewise linear in "
         "log D and log cost, the outer slopes beyond), or (D / d_ref)^d_exponent where none is measured. Written by "
         "`python -m affine_homotopy.costs fit` from the measurements beside it; speed_reference (the speed probe of "
         "the machine that measured them) from speed_calibration.csv; refit instead of editing it (a test compares "
         "the two).")


def read_measurements(path: Path = MEASUREMENTS) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def append_rows(rows: list[dict[str, object]], path: Path = MEASUREMENTS, fields: list[str] = FIELDS) -> None:
    """Append ``rows`` to the CSV record ``path`` (its header first when the file is new)."""
    new = not path.is_file()
    with open(path, "a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        if new:
            writer.writeheader()
        writer.writerows(rows)


def significant(value: float, digits: int = 3) -> float:
    return float(f"{value:.{digits}g}")


def real_width_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """``rows`` less those that a real encoder of their width supersedes: above D_REF, a stage's rows
    measured on an encoder of that width (``data`` names it) replace its rows of that width built from
    narrower layers side by side (``data`` empty), at every N: two layers side by side are not a wide
    encoder's layer, and its extrinsic linear programmes cost more."""
    real = {(row["stage"], row["d"]) for row in rows if int(row["d"]) > D_REF and row.get("data")}
    return [row for row in rows if row.get("data") or (row["stage"], row["d"]) not in real]


def fitted_rows(measurements: Path) -> dict[str, list[dict[str, str]]]:
    """Stage -> the rows its fit uses: K = 3 rows whose ``fit`` is not "no" (the K = 6 rows check that the
    per-pair cost does not depend on K; the K = 2 rows, at the full training set, count only for a
    working-set stage); a ``d_aff`` or ``d_lin`` row where the solver takes its working-set path counts for
    that path's stage (:func:`affine_homotopy.costs.model.solver_stage`); of several rows of one (stage, N,
    D, K) and data the last one counts; rows of a real encoder of a width replace those of layers side by
    side at that width (:func:`real_width_rows`)."""
    latest = {(r["stage"], r["n"], r["d"], r["k"], r.get("data") or ""): r
              for r in real_width_rows(read_measurements(measurements)) if r["fit"] != "no"}
    rows: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in latest.values():
        stage = solver_stage(row["stage"], int(row["n"]), int(row["d"]))
        if int(row["k"]) == 3 or (int(row["k"]) == 2 and stage in WORKING_SET_STAGES.values()):
            rows[stage].append(row)
    return rows


def fitted_stage(stage: str, chosen: list[dict[str, str]], speed: dict | None, source: str) -> dict:
    """One stage's entry of the coefficient document from its rows: each row at the reference machine's
    speed (its seconds times the reference probe over its own, where it carries one), the rows of one
    (N, D, K) on different data as their mean; then :func:`~affine_homotopy.costs.model.fit_stage`, ``seconds_ref`` to 3
    significant digits and the exponents to 2 decimals, with the dates, loads and N of the rows."""
    by_shape: dict[tuple[int, int, str], list[float]] = defaultdict(list)
    for row in chosen:
        seconds = float(row["seconds_per_unit"])
        if row.get("speed_probe_seconds"):  # measured on another machine: at the reference machine's speed
            seconds *= speed["speed_probe_seconds"] / float(row["speed_probe_seconds"])
        by_shape[(int(row["n"]), int(row["d"]), row["k"])].append(seconds)
    # the rows of one (N, D, K) on different data (several tasks' embeddings): their mean, the expected cost
    # of a pair over those tasks, which the projection sums (a pair's extrinsic LPs cost what its data make them)
    points = [(n, d, statistics.fmean(values)) for (n, d, _), values in by_shape.items()]
    seconds_ref, n_exponent, d_exponent, residual = fit_stage(points)
    units = {row["unit"] for row in chosen}
    if len(units) != 1:
        raise ValueError(f"{source}: the {stage} rows name several units {sorted(units)}")
    loads = [float(row["load_1min"]) for row in chosen]
    return {
        "seconds_ref": significant(seconds_ref), "n_exponent": round(n_exponent, 2),
        "d_exponent": round(d_exponent, 2),
        "d_factors": [[d, significant(factor)] for d, factor in fit_width_factors(points).items()],
        "unit": units.pop(), "rms_log_residual": round(residual, 3),
        "n": sorted({int(row["n"]) for row in chosen}), "d": sorted({int(row["d"]) for row in chosen}),
        "dates": sorted({row["date"] for row in chosen}), "load_1min": [min(loads), max(loads)],
    }


def fitted_coefficients(measurements: Path = MEASUREMENTS, jobs: Path | None = None,
                        calibration: Path | None = None) -> dict:
    """The cost model's coefficients as ``fit`` writes them (the document of cost_coefficients.json):
    per stage :func:`fitted_stage` of its :func:`fitted_rows`; ``jobs``, the per-job costs
    (:func:`fitted_job_costs`); ``speed_reference``, the speed probe of the reference machine, the one
    whose rows carry no probe (:func:`fitted_speed_reference`; where none is calibrated, the median probe
    of the rows that carry one), or None."""
    jobs = JOB_MEASUREMENTS if jobs is None else jobs
    speed = fitted_speed_reference(CALIBRATION if calibration is None else calibration, measurements)
    rows = fitted_rows(measurements)
    probed = [float(row["speed_probe_seconds"]) for chosen in rows.values() for row in chosen
              if row.get("speed_probe_seconds")]
    if probed and speed is None:  # no calibrated machine: the rows' own probes define the reference
        speed = {"speed_probe_seconds": significant(float(np.median(probed))),
                 "spread": [significant(min(probed)), significant(max(probed))], "rows": len(probed),
                 "transfer": "the rows' own probes"}
    stages = {stage: fitted_stage(stage, chosen, speed, measurements.name) for stage, chosen in rows.items()}
    return {"about": ABOUT, "n_ref": N_REF, "d_ref": D_REF, "stages": stages,
            "jobs": fitted_job_costs(jobs, speed["speed_probe_seconds"] if speed else None),
            "speed_reference": speed}


def coefficients_text(document: dict) -> str:
    """The JSON text of cost_coefficients.json: one key a line, lists of numbers and dates on one line."""
    text = json.dumps(document, indent=1)
    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + re.sub(r",\s+", ", ", m[1]) + "]", text) + "\n"


def fit() -> dict:
    """Fit the measurements, print the coefficients and write ``data/cost_coefficients.json``."""
    document = fitted_coefficients()
    print("stage            seconds at N=10,000 D=384   N exponent   D exponent   rms log residual   width factors"
          "        unit")
    for stage, c in document["stages"].items():
        factors = ", ".join(f"{factor:.3g} at {d}" for d, factor in c["d_factors"]) or "-"
        print(f"{stage:16s} {c['seconds_ref']:12.4g}                {c['n_exponent']:8.2f}     {c['d_exponent']:8.2f}"
              f"       {c['rms_log_residual']:8.3f}          {factors:20s} {c['unit']}")
    jobs = document["jobs"]
    print(f"per job: start-up of {len(jobs['startup'])} rules, {min(jobs['startup'].values()):.2f}-"
          f"{max(jobs['startup'].values()):.2f} CPU s; embed: load {jobs['embed_load']:.2f} s, "
          f"{jobs['embed_example'] * 1000:.2f} ms per example at D = 384, D exponent {jobs['embed_d_exponent']}")
    correlation, work = jobs["correlation"], jobs["work"]
    print("correlate: one correlation " + ", ".join(f"{seconds:.3g} CPU s at K = {k}" for k, seconds in
                                                    zip(correlation["k"], correlation["seconds"]))
          + f"; a job's first correlation {correlation['first_call']:.3g} CPU s more")
    print(f"work per job of {len(work)} unsized rules: "
          + (f"{min(work.values()):.2f}-{max(work.values()):.2f} CPU s" if work
             else "none measured (python -m affine_homotopy.costs measure work RUN, then fit)"))
    COEFFICIENTS.write_text(coefficients_text(document))
    print(f"wrote {COEFFICIENTS}")
    return document


def job_rows(path: Path) -> dict[str, object]:
    """The rows of the job measurements that :func:`fitted_job_costs` uses, checked complete: the latest of
    each (rule, quantity, d) (``latest``), the latest work row of each rule (``work``), the latest
    correlation cell of each K (``cells``), the first-call rows, the two embed example rows taken from the
    embedding benchmark (``recorded``: width -> seconds), the measured example rows and their tokens row."""
    rows = read_measurements(path)
    latest = {(r["rule"], r["quantity"], r["d"]): r for r in rows}
    cells = {int(r["n"]): r for r in rows if (r["rule"], r["quantity"]) == ("correlate", "cell")}
    if len(cells) < 2:
        raise ValueError(f"{path.name} lacks the correlation cells at two or more K: run python -m "
                         "affine_homotopy.costs measure jobs --only-correlation")
    first_calls = [r for r in rows if (r["rule"], r["quantity"]) == ("correlate", "first_call")]
    if not first_calls:
        raise ValueError(f"{path.name} lacks a correlate job's first-call cost: run python -m "
                         "affine_homotopy.costs measure jobs --only-correlation")
    recorded = {int(r["d"]): float(r["seconds"]) for r in rows
                if (r["rule"], r["quantity"]) == ("embed", "example") and r["note"].startswith("embedding_throughput")}
    measured = [r for r in rows if (r["rule"], r["quantity"], r["d"]) == ("embed", "example", "384") and not r["note"]]
    startup = [r for r in rows if r["quantity"] == "startup"]
    if not startup or ("embed", "load", "384") not in latest or not measured or set(recorded) != {384, 768}:
        raise ValueError(f"{path.name} lacks the start-up rows, the embed load and example rows or the two "
                         "embedding_throughput rows: run python -m affine_homotopy.costs measure jobs")
    tokens = latest.get(("embed", "tokens", "384"))
    if tokens is None or tokens["n"] != measured[-1]["n"]:
        raise ValueError(f"{path.name} lacks the length (embed, tokens) of the sentences of its latest embed example "
                         "row: run python -m affine_homotopy.costs measure jobs")
    return {"latest": latest, "work": {r["rule"]: r for r in rows if r["quantity"] == "work"}, "cells": cells,
            "first_call": first_calls[-1], "recorded": recorded, "example": measured[-1], "tokens": tokens,
            "startup": startup}


def fitted_job_costs(path: Path = JOB_MEASUREMENTS, speed: float | None = None) -> dict:
    """The ``jobs`` document of cost_coefficients.json (:class:`affine_homotopy.costs.model.JobCosts`)
    from :func:`job_rows`: the embed forward pass's D exponent from the two rows taken from the embedding
    benchmark (all-mpnet-base-v2 against all-MiniLM-L6-v2), its value at D = 384 from the latest measured
    row, ``embed_tokens`` from that row's tokens row; ``work``: the latest row of each rule;
    ``correlation``: the latest cell of each K and the latest first call. A row that carries its
    machine's speed probe counts at the reference machine's speed ``speed`` (its seconds times ``speed``
    over its probe; as measured without ``speed``)."""
    def at_reference(row: dict[str, str]) -> float:
        seconds = float(row["seconds"])
        if speed and row.get("speed_probe_seconds"):
            seconds *= speed / float(row["speed_probe_seconds"])
        return seconds

    found = job_rows(path)
    latest, cells, work_rows, recorded = found["latest"], found["cells"], found["work"], found["recorded"]
    settings = {r["note"] for r in cells.values()}
    if len(settings) != 1:
        raise ValueError(f"{path.name}: the latest correlation cells were measured at several settings {sorted(settings)}")
    sizes = sorted(cells)
    resamples = [int(word) for word in settings.pop().replace(",", "").split() if word.isdigit()]
    load_row = latest[("embed", "load", "384")]
    used = [load_row, found["example"], *found["startup"], *work_rows.values(), *cells.values(), found["first_call"]]
    loads = [float(r["load_1min"]) for r in used]
    return {
        "startup": {rule: significant(float(r["seconds"])) for (rule, quantity, _), r in sorted(latest.items())
                    if quantity == "startup"},
        "embed_load": significant(float(load_row["seconds"])),
        "embed_example": significant(float(found["example"]["seconds"])),
        "embed_d_exponent": round(math.log(recorded[768] / recorded[384]) / math.log(2), 2),
        "embed_tokens": significant(float(found["tokens"]["seconds"])),
        "work": {rule: significant(at_reference(row)) for rule, row in sorted(work_rows.items())},
        "work_reference": sorted({row["note"].removeprefix("measure-work: ") for row in work_rows.values()}),
        "correlation": {"k": sizes, "seconds": [significant(at_reference(cells[k])) for k in sizes],
                        "resamples": resamples, "first_call": significant(at_reference(found["first_call"]))},
        "dates": sorted({r["date"] for r in used}), "load_1min": [min(loads), max(loads)],
    }


def latest_factorisation_rows(measurements: Path = MEASUREMENTS) -> list[dict[str, str]]:
    """The factorisation rows ``fit`` uses (the last of each (N, D) at K = 3, ``fit`` not "no")."""
    latest = {(r["n"], r["d"]): r for r in read_measurements(measurements)
              if r["stage"] == "factorise" and r["k"] == "3" and r["fit"] != "no"}
    return [latest[key] for key in sorted(latest, key=lambda key: (int(key[1]), int(key[0])))]


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
