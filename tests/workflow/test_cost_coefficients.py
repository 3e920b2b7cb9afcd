"""The cost model's coefficients are data: src/affine_homotopy/costs/data/cost_coefficients.json is what
``python -m affine_homotopy.costs fit`` computes from the measurements beside it (so a hand edit of
either side fails here), it ships with the package, and affine_homotopy.costs.model reads its numbers."""

from __future__ import annotations

import csv
import fnmatch
import json
import tomllib
from pathlib import Path

import pytest

from affine_homotopy.costs import model as cost
from affine_homotopy.costs.fit import (CALIBRATION_FIELDS, FIELDS, JOB_FIELDS, coefficients_text, fitted_coefficients,
                                       fitted_job_costs, fitted_speed_reference)

from tests.helpers import REPO

COEFFICIENTS = REPO / "src" / "affine_homotopy" / "costs" / "data" / cost.COEFFICIENTS_FILE


def test_the_coefficient_file_is_what_fit_computes_from_the_measurements() -> None:
    from affine_homotopy.costs.fit import COEFFICIENTS as written_by_fit

    assert written_by_fit == COEFFICIENTS
    refitted = fitted_coefficients()
    on_file = json.loads(COEFFICIENTS.read_text(encoding="utf-8"))
    assert on_file == refitted, ("cost_coefficients.json is not what `python -m affine_homotopy.costs fit` computes "
                                 "from the measurements: refit it instead of editing it")
    assert COEFFICIENTS.read_text(encoding="utf-8") == coefficients_text(refitted)  # and written as fit writes it
    for stage, entry in on_file["stages"].items():  # the rows' dates and loads travel with the coefficients
        assert entry["dates"] and entry["load_1min"][0] <= entry["load_1min"][1], stage


def test_the_package_reads_the_file() -> None:
    on_file = json.loads(COEFFICIENTS.read_text(encoding="utf-8"))["stages"]
    costs = cost.stage_costs()
    assert cost.stage_costs() is costs  # read once
    assert set(costs) == set(on_file) == set(cost.STAGE_UNITS)
    for stage, entry in on_file.items():
        assert costs[stage] == cost.StageCost(entry["seconds_ref"], entry["n_exponent"], entry["d_exponent"],
                                              entry["unit"], tuple(tuple(pair) for pair in entry["d_factors"])), stage
    with pytest.raises(TypeError):
        costs["d_aff"] = costs["d_psi"]  # the cached mapping is read-only


def test_the_file_is_package_data() -> None:
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    relative = COEFFICIENTS.relative_to(REPO / "src" / "affine_homotopy").as_posix()
    assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns["affine_homotopy"]), patterns


def write_rows(path: Path, fields: list[str], rows: list[dict[str, object]]) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_fit_keeps_the_last_row_of_a_size_and_skips_no_rows(tmp_path: Path) -> None:
    """Exact rules on made-up timings: a stage growing as N at D = 384 and as D^2, with a stale row of
    one size, an unfitted row and a K = 6 row that must not count."""
    def row(stage: str, n: int, d: int, seconds: float, fit: str = "measured", k: int = 3, date: str = "2030-01-02",
            load: float = 1.0) -> dict[str, object]:
        return {"stage": stage, "n": n, "d": d, "k": k, "units": 6, "seconds_per_unit": seconds, "unit": "ordered pair",
                "threads": 1, "load_1min": load, "machine": "test", "date": date, "fit": fit}

    rows = [row("d_aff", 10_000, 384, 99.0, date="2030-01-01"),  # replaced by the later row of that size
            row("d_aff", 5_000, 384, 2.0, load=3.0), row("d_aff", 10_000, 384, 4.0), row("d_aff", 5_000, 768, 8.0),
            row("d_aff", 12_000, 384, 1e6, fit="no"), row("d_aff", 5_000, 384, 1e6, k=6),
            # the working-set path (N >= 10 x 4 x 385 at D = 384): its own power law, K = 2 rows included
            row("d_aff", 20_000, 384, 3.0), row("d_aff", 80_000, 384, 6.0, k=2)]
    measurements = write_rows(tmp_path / "m.csv", FIELDS, rows)
    stages = fitted_coefficients(measurements)["stages"]
    assert {k: stages["d_aff"][k] for k in ("seconds_ref", "n_exponent", "d_exponent", "n", "d", "dates")} == {
        "seconds_ref": 4.0, "n_exponent": 1.0, "d_exponent": 2.0, "n": [5_000, 10_000], "d": [384, 768],
        "dates": ["2030-01-02"]}
    working = stages["d_aff_working_set"]  # 3 s at 20,000 and 6 s at 80,000: sqrt(N), 3 / sqrt(2) at 10,000
    assert (working["n"], working["n_exponent"], working["seconds_ref"]) == ([20_000, 80_000], 0.5, 2.12)
    assert stages["d_aff"]["load_1min"] == [1.0, 3.0]


def test_the_speed_reference_is_the_median_transfer_of_the_current_factorisation_rows(tmp_path: Path) -> None:
    """speed_reference on made-up rows: each calibration row estimates the rows' machine's probe as
    probe x recorded / measured; a calibration row whose recorded value differs from the fitted row's
    (the stage measured again since) and rows of other K or of other stages do not count."""
    def row(n: int, d: int, seconds: float, k: int = 3, stage: str = "factorise") -> dict[str, object]:
        return {"stage": stage, "n": n, "d": d, "k": k, "units": 3, "seconds_per_unit": seconds, "unit": "encoder",
                "threads": 1, "load_1min": 1.0, "machine": "test", "date": "2030-01-02", "fit": "measured"}

    measurements = write_rows(tmp_path / "m.csv", FIELDS, [
        row(2000, 384, 9.0), row(2000, 384, 0.1), row(8000, 384, 0.4), row(8000, 768, 1.2), row(2000, 384, 5.0, k=6),
        row(2000, 384, 7.0, stage="d_aff")])

    def calibration(n: int, d: int, recorded: float, measured: float, probe: float) -> dict[str, object]:
        return {"stage": "factorise", "n": n, "d": d, "recorded_seconds": recorded, "recorded_date": "2030-01-02",
                "measured_seconds": measured, "speed_probe_seconds": probe, "threads": 1, "load_1min": 0.5,
                "machine": "here", "date": "2030-02-01"}

    assert fitted_speed_reference(tmp_path / "absent.csv", measurements) is None
    rows = [calibration(2000, 384, 0.1, 0.2, 0.05),  # the rows' machine twice as fast: 0.025
            calibration(8000, 384, 0.4, 0.4, 0.05),  # as fast: 0.05
            calibration(8000, 768, 1.2, 0.4, 0.05),  # three times slower: 0.15
            calibration(2000, 384, 9.0, 0.2, 0.05)]  # stale: the 9.0 row was measured again (0.1)
    reference = fitted_speed_reference(write_rows(tmp_path / "c.csv", CALIBRATION_FIELDS, rows), measurements)
    assert reference["speed_probe_seconds"] == 0.05 and reference["spread"] == [0.025, 0.15]
    assert reference["rows"] == 3 and reference["dates"] == ["2030-02-01"]
    stale = write_rows(tmp_path / "s.csv", CALIBRATION_FIELDS, rows[3:])
    assert fitted_speed_reference(stale, measurements) is None


def test_a_row_measured_on_another_machine_counts_at_the_reference_machines_speed(tmp_path: Path) -> None:
    """A row with its machine's speed probe counts as seconds x reference probe / its probe: a stage
    measured at 5,000 rows on the reference machine (no probe) and at 10,000 on a machine twice as slow
    (probe 0.1 against 0.05) fits as if both were measured on the reference machine. Without a calibrated
    reference, the rows' own median probe is the reference."""
    def row(stage: str, n: int, seconds: float, probe: str = "") -> dict[str, object]:
        return {"stage": stage, "n": n, "d": 384, "k": 3, "units": 3, "seconds_per_unit": seconds,
                "unit": "encoder" if stage == "factorise" else "ordered pair", "threads": 1, "load_1min": 1.0,
                "machine": "test", "date": "2030-01-02", "fit": "measured", "speed_probe_seconds": probe}

    measurements = write_rows(tmp_path / "m.csv", FIELDS, [
        row("factorise", 2000, 0.1), row("factorise", 8000, 0.4), row("d_psi", 5_000, 2.0),
        row("d_psi", 10_000, 8.0, probe="0.1")])
    calibration = write_rows(tmp_path / "c.csv", CALIBRATION_FIELDS, [
        {"stage": "factorise", "n": 2000, "d": 384, "recorded_seconds": 0.1, "recorded_date": "2030-01-02",
         "measured_seconds": 0.2, "speed_probe_seconds": 0.1, "threads": 1, "load_1min": 0.5, "machine": "here",
         "date": "2030-02-01"}])
    document = fitted_coefficients(measurements, calibration=calibration)
    assert document["speed_reference"]["speed_probe_seconds"] == 0.05  # 0.1 x 0.1 / 0.2
    # 8 s on the slow machine is 4 s on the reference machine: 2 s at 5,000, 4 s at 10,000, linear in N
    d_psi = document["stages"]["d_psi"]
    assert (d_psi["seconds_ref"], d_psi["n_exponent"]) == (4.0, 1.0)
    uncalibrated = fitted_coefficients(measurements, calibration=tmp_path / "absent.csv")
    assert uncalibrated["speed_reference"]["speed_probe_seconds"] == 0.1
    assert uncalibrated["speed_reference"]["transfer"] == "the rows' own probes"
    assert (uncalibrated["stages"]["d_psi"]["seconds_ref"], uncalibrated["stages"]["d_psi"]["n_exponent"]) == (8.0, 2.0)


def test_the_job_costs_keep_the_latest_correlations_and_scale_the_work_to_the_reference_speed(tmp_path: Path) -> None:
    """Made-up job rows: correlation cells (one stale row of K = 5 replaced) and a job's first-call cost
    (a stale row replaced), work rows of a
    machine twice as slow as the reference (probe 0.1 against 0.05) and one without a probe (the
    reference machine's); the latest work row of a rule counts."""
    def row(rule: str, quantity: str, seconds: float, n: object = "", d: object = "", note: str = "",
            probe: object = "", date: str = "2030-01-02") -> dict[str, object]:
        return {"rule": rule, "quantity": quantity, "seconds": seconds, "n": n, "d": d, "repeats": 3, "threads": 1,
                "load_1min": 1.0, "machine": "test", "date": date, "note": note, "speed_probe_seconds": probe}

    resamples = "10000 permutations, 2000 resamples"
    rows = [row("embed", "example", 0.01, 256, 384, note="embedding_throughput.py record"),
            row("embed", "example", 0.04, 256, 768, note="embedding_throughput.py record"),
            row("embed", "load", 2.0, d=384), row("embed", "example", 0.005, 512, 384),
            row("embed", "tokens", 12.5, 512, 384),
            row("figure_layer_trend", "startup", 1.0), row("provenance", "startup", 0.2),
            row("correlate", "cell", 99.0, 5, note=resamples, probe=0.05, date="2030-01-01"),
            row("correlate", "cell", 0.1 * 0.5**2, 5, note=resamples, probe=0.05),
            row("correlate", "cell", 0.1 * 2.0**2, 20, note=resamples, probe=0.05),
            row("correlate", "first_call", 9.0, 4, probe=0.05, date="2030-01-01"),
            row("correlate", "first_call", 1.2, 4, probe=0.1),
            row("figure_layer_trend", "work", 9.0, 1, note="measure-work: run 'old'", probe=0.1),
            row("figure_layer_trend", "work", 3.0, 1, note="measure-work: run 'reviews'", probe=0.1),
            row("provenance", "work", 0.7, 1, note="measure-work: run 'reviews'")]
    jobs = fitted_job_costs(write_rows(tmp_path / "jobs.csv", JOB_FIELDS, rows), speed=0.05)
    # at the reference speed (probe 0.05): as measured
    # the latest first-call row, measured on a machine twice as slow: half its seconds
    assert jobs["correlation"] == {"k": [5, 20], "seconds": [0.025, 0.4], "resamples": [10000, 2000], "first_call": 0.6}
    assert jobs["work"] == {"figure_layer_trend": 1.5, "provenance": 0.7}
    assert jobs["work_reference"] == ["run 'reviews'"]
    assert jobs["embed_d_exponent"] == 2.0 and jobs["embed_example"] == 0.005 and jobs["embed_tokens"] == 12.5
    # the length of other sentences than the example row's (another count) does not price it
    for tokens in ([r for r in rows if r["quantity"] != "tokens"], [*rows, row("embed", "tokens", 20.0, 256, 384)]):
        with pytest.raises(ValueError, match="length"):
            fitted_job_costs(write_rows(tmp_path / "tokens.csv", JOB_FIELDS, tokens), speed=0.05)
    without_cells = write_rows(tmp_path / "bare.csv", JOB_FIELDS, [r for r in rows if r["quantity"] != "cell"])
    with pytest.raises(ValueError, match="correlation cells"):
        fitted_job_costs(without_cells, speed=0.05)
    without_first_call = write_rows(tmp_path / "no_first.csv", JOB_FIELDS,
                                    [r for r in rows if r["quantity"] != "first_call"])
    with pytest.raises(ValueError, match="first-call cost"):
        fitted_job_costs(without_first_call, speed=0.05)


def test_a_real_encoders_rows_of_a_width_replace_that_widths_side_by_side_rows_of_that_stage(tmp_path: Path) -> None:
    """Made-up rows: d_psi at D = 768 from layers side by side (data empty) at N = 2,000 and 8,000, and
    from a real 768-wide encoder at 2,000 only: the real row alone sets d_psi's factor at 768, at every
    N; d_aff, measured at 768 side by side only, keeps those rows; the D = 384 rows count as they are."""
    def row(stage: str, n: int, d: int, seconds: float, data: str = "") -> dict[str, object]:
        return {"stage": stage, "n": n, "d": d, "k": 3, "units": 6, "seconds_per_unit": seconds, "unit": "ordered pair",
                "threads": 1, "load_1min": 1.0, "machine": "test", "date": "2030-01-02", "fit": "measured", "data": data}

    rows = [row(stage, n, 384, n / 10_000) for stage in ("d_psi", "d_aff") for n in (2000, 8000)]
    rows += [row("d_psi", 2000, 768, 0.2 * 2), row("d_psi", 8000, 768, 0.8 * 2),  # side by side: twice D = 384's
             row("d_psi", 2000, 768, 0.2 * 8, data="a 768-wide encoder"),  # the real encoder: 8 times
             row("d_aff", 2000, 768, 0.2 * 4), row("d_aff", 8000, 768, 0.8 * 4)]
    stages = fitted_coefficients(write_rows(tmp_path / "m.csv", FIELDS, rows))["stages"]
    assert stages["d_psi"]["d_factors"] == [[768, 8.0]] and stages["d_psi"]["n"] == [2000, 8000]
    assert stages["d_aff"]["d_factors"] == [[768, 4.0]]
    assert (stages["d_psi"]["seconds_ref"], stages["d_psi"]["n_exponent"]) == (1.0, 1.0)


def test_rows_of_one_size_on_several_tasks_count_as_their_mean_and_a_tasks_rerun_replaces_its_row(tmp_path: Path
                                                                                                 ) -> None:
    """Made-up d_psi rows of a real 768-wide encoder at N = 2,000 on three tasks (one of them measured
    twice: its later row counts): the factor at 768 is the arithmetic mean of the tasks' costs over
    D = 384's, (0.2 x 2 + 0.2 x 4 + 0.2 x 30) / 3 / 0.2 = 12, not their geometric mean (about 6.2)."""
    def row(n: int, d: int, seconds: float, data: str = "", date: str = "2030-01-02") -> dict[str, object]:
        return {"stage": "d_psi", "n": n, "d": d, "k": 3, "units": 6, "seconds_per_unit": seconds,
                "unit": "ordered pair", "threads": 1, "load_1min": 1.0, "machine": "test", "date": date,
                "fit": "measured", "data": data}

    rows = [row(n, 384, n / 10_000) for n in (2000, 8000)]
    rows += [row(2000, 768, 0.2 * 500, data="encoder, task a", date="2030-01-01"),  # re-measured below
             row(2000, 768, 0.2 * 2, data="encoder, task a"), row(2000, 768, 0.2 * 4, data="encoder, task b"),
             row(2000, 768, 0.2 * 30, data="encoder, task c")]
    stage = fitted_coefficients(write_rows(tmp_path / "m.csv", FIELDS, rows))["stages"]["d_psi"]
    assert stage["d_factors"] == [[768, 12.0]]
    assert (stage["seconds_ref"], stage["n_exponent"], stage["n"]) == (1.0, 1.0, [2000, 8000])


def test_the_narrow_rows_sources_are_the_workflows_truncations_at_exactly_that_rank() -> None:
    """measure --narrow-ranks: each layer's rows projected onto the top `rank` principal directions of the
    centred rows (checked by numpy's SVD), as models/derived.py's svd_truncate derives an encoder."""
    import numpy as np

    from affine_homotopy.costs.measure import narrow_copies

    rng = np.random.default_rng(0)
    layers = [rng.standard_normal((300, 40)) @ rng.standard_normal((40, 40)) + 3.0 for _ in range(2)]
    copies = narrow_copies(layers, 200, 7)
    for layer, copy in zip(layers, copies):
        rows = layer[:200]
        mean = rows.mean(axis=0)
        _, _, vt = np.linalg.svd(rows - mean, full_matrices=False)
        expected = mean + (rows - mean) @ vt[:7].T @ vt[:7]
        assert copy.shape == rows.shape
        np.testing.assert_allclose(copy, expected, atol=1e-8)
        assert np.linalg.matrix_rank(copy - copy.mean(axis=0), tol=1e-8) == 7
    with pytest.raises(ValueError, match="--narrow-ranks 40"):
        narrow_copies(layers, 200, 40)
