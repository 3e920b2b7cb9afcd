"""The cost model against a run (affine_homotopy.costs.check, `python -m affine_homotopy.costs check`):
every rule has a benchmark file named as its log, each job's cost record lands beside it, and the check
reads synthetic runs in tmp_path: it names the rules without benchmark files, refuses a benchmark file
measured under another config, and its arithmetic matches an independent computation."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from affine_homotopy.costs import check as cost_check
from affine_homotopy.costs.check import TOLERANCE, compare, missing_benchmarks, read_benchmark_file, read_run
from affine_homotopy.costs.study import job_projection, planned_jobs
from affine_homotopy.errors import DataError
from affine_homotopy.jobs.cost_record import job_record_path, process_cpu_seconds, write_job_record
from affine_homotopy.jobs.provenance import config_hash

from tests.helpers import DEMO, PAPER, REPO, SCHEMA, job_counts, snakemake

# Snakemake's benchmark header (snakemake.benchmark.BenchmarkRecord.get_header) and a record of it
HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time"


def test_a_job_record_lands_beside_its_benchmark_file() -> None:
    assert job_record_path("results/demo/logs/intrinsic/sentiment_layer1.log") == Path(
        "results/demo/benchmarks/intrinsic/sentiment_layer1.json")
    assert job_record_path("results/demo/logs/correlate.log") == Path("results/demo/benchmarks/correlate.json")
    # the last logs folder is the run's: a run_name or a folder above it may be called logs too
    assert job_record_path("/x/logs/results/logs/logs/a.log") == Path("/x/logs/results/logs/benchmarks/a.json")
    assert job_record_path("/tmp/intrinsic.log") is None  # a job run outside the workflow writes none


def test_every_rule_with_a_script_has_a_benchmark_file_named_as_its_log() -> None:
    """What lets the check find each job's record: job_benchmark(name) beside job_log(name), same name."""
    checked, scripts = 0, 0
    for path in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        scripts += len(re.findall(r"^\s+script:$", path.read_text(), re.M))
        for block in re.split(r"(?m)^[ \t]*(?=(?:local)?rule \w+:)", path.read_text())[1:]:
            rule = re.match(r"(?:local)?rule (\w+):", block)[1]
            if "script:" not in block:
                continue
            logs = re.findall(r'log:\s*\n\s*job_log\("([^"]+)"\)', block)
            benchmarks = re.findall(r'benchmark:\s*\n\s*job_benchmark\("([^"]+)"\)', block)
            assert logs and logs == benchmarks, f"{path.name}: rule {rule}: log {logs} and benchmark {benchmarks}"
            checked += 1
    assert checked == scripts > 20  # every rule with a script was found


def write_benchmark(path: Path, seconds: float, cpu_time: float | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{HEADER}\n{seconds}\t0:00:01\t100.0\t200.0\t90.0\t95.0\t0.1\t0.2\t50.0\t{cpu_time}\n")


def write_run(root: Path, config: dict, jobs: list[tuple[str, str, float, float]], job_config: dict | None = None,
              benchmark: bool = True, probes: dict[str, float] | None = None,
              threads: dict[str, int] | None = None) -> Path:
    """A finished run's folder: provenance.json, and per job (rule, name, startup CPU, total CPU) its
    environment record, its cost record (written as the runner writes it) and its benchmark file.
    ``probes``: job name -> the speed probe its record holds (others keep this machine's); ``threads``:
    job name -> the threads it ran on (others 1)."""
    run = root / "results" / config["run_name"]
    run.mkdir(parents=True)
    (run / "provenance.json").write_text(json.dumps({"config_sha256": config_hash(config), "config": config}))
    for rule, name, startup, total in jobs:
        log = run / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.with_suffix(".env.json").write_text(json.dumps({"rule": rule}))
        write_job_record(log, rule, {"task": "t"}, job_config or config, startup, total - startup, 1.0,
                         (threads or {}).get(name, 1))
        record = job_record_path(log)
        data = json.loads(record.read_text())
        data["cpu_seconds"] = total  # this process's own CPU stands in for the job's: set the count
        if probes and name in probes:
            data["speed_probe_cpu_seconds"] = probes[name]
        record.write_text(json.dumps(data))
        if benchmark:
            write_benchmark(run / "benchmarks" / f"{name}.tsv", 2.0 * total, "NA" if total < 1 else total - 0.5)
    return run


CONFIG = {"run_name": "toy", "encoders": {"a": {"source": "path"}}, "tasks": {"t": {"source": "synthetic"}}, "seed": 0}
JOBS = [("intrinsic", "intrinsic/t_layer1", 1.0, 10.0), ("intrinsic", "intrinsic/t_layer2", 1.5, 14.0),
        ("probe", "probe/a_t", 2.0, 6.0), ("correlate", "correlate", 0.5, 0.75)]


def test_the_comparison_matches_an_independent_computation(tmp_path: Path) -> None:
    measured = read_run(write_run(tmp_path, CONFIG, JOBS))
    assert measured.fingerprint == config_hash(CONFIG) and len(measured.jobs) == 4
    projected = {"intrinsic": (2, 20.0), "probe": (1, 4.0), "correlate": (1, math.nan), "extrinsic": (2, 9.0)}
    rows = {row.rule: row for row in compare(projected, measured.jobs)}
    assert list(rows) == ["intrinsic", "probe", "correlate", "extrinsic", "total"]
    # intrinsic: (10 + 14) / 20 = 1.2, within 25 %; probe: 6 / 4 = 1.5, not
    assert (rows["intrinsic"].measured, rows["intrinsic"].startup_measured) == (24.0, 2.5)
    assert rows["intrinsic"].ratio == pytest.approx(24.0 / 20.0) and rows["intrinsic"].within
    assert rows["probe"].ratio == pytest.approx(1.5) and not rows["probe"].within
    assert rows["intrinsic"].wall_measured == pytest.approx(2.0 * 24.0)  # the benchmark files' s
    assert rows["intrinsic"].sampled_measured == pytest.approx(24.0 - 1.0)  # and their cpu_time
    assert math.isnan(rows["correlate"].ratio) and math.isnan(rows["correlate"].sampled_measured)  # cpu_time NA
    assert (rows["extrinsic"].jobs_projected, rows["extrinsic"].jobs_measured) == (2, 0)
    # the total: the rules with both a projection and measurements (intrinsic, probe)
    assert (rows["total"].projected, rows["total"].measured) == (24.0, 30.0)
    assert rows["total"].ratio == 1.25 and rows["total"].within  # the bound itself counts as within
    assert TOLERANCE == 0.25
    table = cost_check.comparison_table(list(rows.values()))
    assert re.search(r"^intrinsic\s+2/2\s+20\.0\s+24\.0\s+10\.00/12\.00\s+1\.20\s+yes", table, re.M), table
    assert re.search(r"^probe\s+1/1\s+4\.0\s+6\.0\s+4\.00/6\.00\s+1\.50\s+no", table, re.M), table
    assert re.search(r"^correlate\s+1/1\s+not projected\s+0\.8\s+-\s+-\s+-", table, re.M), table


def test_each_rule_is_projected_at_the_speed_its_jobs_measured(tmp_path: Path) -> None:
    """The speed factor, computed here: a rule's jobs' median speed probe over the reference; a record
    without a probe (an older run) or no reference leaves the projection as it is."""
    probes = {"intrinsic/t_layer1": 0.06, "intrinsic/t_layer2": 0.10, "probe/a_t": 0.02}
    measured = read_run(write_run(tmp_path, CONFIG, JOBS, probes=probes))
    recorded = {job.benchmark.relative_to(job.benchmark.parents[1]).as_posix(): job.speed_probe_seconds
                for job in measured.jobs if job.rule != "correlate"}
    assert recorded == {"intrinsic/t_layer1.tsv": 0.06, "intrinsic/t_layer2.tsv": 0.10, "probe/a_t.tsv": 0.02}
    projected = {"intrinsic": (2, 20.0), "probe": (1, 4.0), "correlate": (1, math.nan)}
    rows = {row.rule: row for row in compare(projected, measured.jobs, reference_probe=0.04)}
    # intrinsic: median probe 0.08, twice the reference: 24 / (20 x 2) = 0.6; probe: 0.02 / 0.04 -> 6 / 2 = 3
    assert rows["intrinsic"].speed_factor == pytest.approx(2.0) and rows["intrinsic"].ratio == pytest.approx(0.6)
    assert rows["intrinsic"].unscaled_ratio == pytest.approx(1.2)
    assert rows["probe"].speed_factor == pytest.approx(0.5) and rows["probe"].ratio == pytest.approx(3.0)
    # the total: (24 + 6) / (20 x 2 + 4 x 0.5)
    assert rows["total"].ratio == pytest.approx(30.0 / 42.0) and rows["total"].projected == 24.0
    table = cost_check.comparison_table(list(rows.values()))
    assert re.search(r"^intrinsic\s+2/2\s+20\.0\s+24\.0\s+10\.00/12\.00\s+0\.60\s+no\s.*\s2\.00\s+1\.20\s+1$", table, re.M), table
    unscaled = {row.rule: row for row in compare(projected, measured.jobs)}
    assert unscaled["intrinsic"].speed_factor == 1.0 and unscaled["intrinsic"].ratio == pytest.approx(1.2)
    older = read_run(write_run(tmp_path / "older", CONFIG, JOBS, probes=dict.fromkeys(probes, math.nan)))
    assert compare(projected, older.jobs, reference_probe=0.04)[0].speed_factor == 1.0


def test_a_rule_whose_jobs_ran_on_more_threads_says_so(tmp_path: Path, capsys, monkeypatch) -> None:
    """The projection is single-thread CPU: a job on two threads counts both threads' CPU, so its rule
    carries the most threads of its jobs (the total: of its rules), the table prints them and the check
    names the rule."""
    measured = read_run(write_run(tmp_path, CONFIG, JOBS, threads={"intrinsic/t_layer2": 2}))
    assert sorted(job.threads for job in measured.jobs) == [1, 1, 1, 2]
    projected = {"intrinsic": (2, 20.0), "probe": (1, 4.0), "correlate": (1, math.nan)}
    rows = {row.rule: row for row in compare(projected, measured.jobs)}
    assert (rows["intrinsic"].threads, rows["probe"].threads, rows["total"].threads) == (2, 1, 2)
    table = cost_check.comparison_table(list(rows.values()))
    assert re.search(r"^intrinsic\s.*\s2$", table, re.M) and re.search(r"^probe\s.*\s1$", table, re.M), table
    monkeypatch.setattr("affine_homotopy.costs.study.job_projection", lambda config, jobs, tokens, widths: projected)
    monkeypatch.setattr("affine_homotopy.costs.study.planned_jobs", lambda config, snakefile: {"intrinsic": 2, "probe": 1})
    cost_check.check(tmp_path / "results" / "toy", cores=2)
    out = capsys.readouterr().out
    assert "rules with jobs on more than one thread (the most per job): intrinsic (2):" in out, out


def test_the_job_record_holds_the_speed_probe_outside_the_jobs_cpu(tmp_path: Path) -> None:
    """The probe runs after the job's CPU count is taken: the process spent at least the probe (three
    runs, each at least the least) after the recorded total."""
    log = tmp_path / "results" / "toy" / "logs" / "probe" / "a.log"
    log.parent.mkdir(parents=True)
    write_job_record(log, "probe", {}, CONFIG, 0.1, 0.2, 0.3, 1)
    after = process_cpu_seconds()
    record = json.loads(job_record_path(log).read_text())
    assert 0 < record["speed_probe_cpu_seconds"] < 60
    assert after - record["cpu_seconds"] >= 3 * record["speed_probe_cpu_seconds"] * 0.99


def test_the_benchmark_file_reads_na_as_nan_and_refuses_another_file(tmp_path: Path) -> None:
    write_benchmark(tmp_path / "a.tsv", 3.5, "NA")
    values = read_benchmark_file(tmp_path / "a.tsv")
    assert values["s"] == 3.5 and math.isnan(values["cpu_time"]) and values["max_rss"] == 100.0
    (tmp_path / "b.tsv").write_text("seconds\tcpu\n1\t2\n")
    with pytest.raises(DataError, match=r"b\.tsv is not a Snakemake benchmark file"):
        read_benchmark_file(tmp_path / "b.tsv")


def test_a_benchmark_file_of_another_config_is_refused_naming_the_file_and_both_fingerprints(tmp_path: Path) -> None:
    other = {**CONFIG, "seed": 1}
    run = write_run(tmp_path, CONFIG, JOBS[:1], job_config=other)
    with pytest.raises(DataError) as refused:
        read_run(run)
    message = str(refused.value)
    assert str(run / "benchmarks" / "intrinsic" / "t_layer1.tsv") in message
    assert config_hash(other) in message and config_hash(CONFIG) in message
    assert "another config" in message


def test_a_benchmark_file_without_its_record_is_refused(tmp_path: Path) -> None:
    run = write_run(tmp_path, CONFIG, JOBS[:1])
    job_record_path(run / "logs" / "intrinsic" / "t_layer1.log").unlink()
    with pytest.raises(DataError, match=r"t_layer1\.tsv has no cost record beside it"):
        read_run(run)


def test_a_folder_that_is_not_a_finished_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"is not a finished run: it has no provenance\.json"):
        read_run(tmp_path)


def test_the_check_names_the_rules_without_benchmark_files(tmp_path: Path, capsys, monkeypatch) -> None:
    from affine_homotopy.costs.__main__ import main

    run = write_run(tmp_path, CONFIG, JOBS, benchmark=False)
    measured = read_run(run)
    assert measured.jobs == [] and measured.logged_rules == {"intrinsic", "probe", "correlate"}
    assert missing_benchmarks({"intrinsic": 2, "extrinsic": 2, "embed": 0}, measured) == [
        "correlate", "extrinsic", "intrinsic", "probe"]
    monkeypatch.setattr("affine_homotopy.costs.study.planned_jobs",
                        lambda config, snakefile: {"intrinsic": 2, "extrinsic": 2})
    with pytest.raises(SystemExit) as stop:
        main(["check", str(run)])
    assert stop.value.code == 2
    said = capsys.readouterr().err
    assert f"{run} has no benchmark files" in said and "correlate, extrinsic, intrinsic, probe" in said
    # only one rule lacks them: the table, then that rule named
    write_run(tmp_path / "partial", CONFIG, JOBS[:1])
    partial = read_run(tmp_path / "partial" / "results" / "toy")
    assert missing_benchmarks({"intrinsic": 2, "extrinsic": 2}, partial) == ["extrinsic"]


def test_measure_work_takes_the_median_work_of_the_unsized_rules_and_refuses_a_run_without_them(
        tmp_path: Path, capsys, monkeypatch) -> None:
    """measure work on a synthetic reference run: per rule the median of its jobs' CPU less start-up, with
    their median speed probe; the sized rules (intrinsic here) are left to their stages. A run without
    a benchmark file of an unsized rule is refused, naming the fix."""
    from affine_homotopy.costs.measure_jobs import measure_work

    jobs = [("intrinsic", "intrinsic/t_layer1", 1.0, 10.0), ("derive", "derive/a_t", 1.0, 1.5),
            ("derive", "derive/b_t", 1.0, 1.25), ("derive", "derive/c_t", 1.0, 2.0),
            ("provenance", "provenance", 0.25, 1.75)]
    probes = {"derive/a_t": 0.02, "derive/b_t": 0.03, "derive/c_t": 0.04, "provenance": 0.05}
    run = write_run(tmp_path, CONFIG, jobs, probes=probes)
    written = tmp_path / "jobs.csv"
    measure_work(run, written)
    with open(written, newline="") as handle:
        rows = {row["rule"]: row for row in csv.DictReader(handle)}
    assert set(rows) == {"derive", "provenance"}
    assert (float(rows["derive"]["seconds"]), rows["derive"]["n"], float(rows["derive"]["speed_probe_seconds"])) == (
        0.5, "3", 0.03)
    assert (float(rows["provenance"]["seconds"]), float(rows["provenance"]["speed_probe_seconds"])) == (1.5, 0.05)
    assert all(row["quantity"] == "work" and "run 'toy'" in row["note"] for row in rows.values())
    sized_only = write_run(tmp_path / "sized", CONFIG, jobs[:1])
    with pytest.raises(DataError, match="has no benchmark files of a rule whose work the config does not size"):
        measure_work(sized_only, written)


@pytest.fixture
def restore_job_state(monkeypatch):
    """runner.run configures the root logger, switches the hub off and sets torch's threads: undo it."""
    import logging
    import sys

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "1")
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch else None
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:], root.level = handlers, level
    logging.captureWarnings(False)
    if torch:
        torch.set_num_threads(threads)


@pytest.mark.usefixtures("restore_job_state")
def test_the_runner_writes_the_record_with_the_config_fingerprint(tmp_path: Path) -> None:
    from affine_homotopy.jobs import runner

    log = tmp_path / "results" / "toy" / "logs" / "probe" / "a_t.log"
    log.parent.mkdir(parents=True)
    job = SimpleNamespace(rule="probe", log=[str(log)], threads=1, config=CONFIG,
                          wildcards=SimpleNamespace(items=lambda: {"encoder": "a", "task": "t"}.items()))
    busy = lambda _: sum(i * i for i in range(300_000))  # noqa: E731
    runner.run(job, busy)
    record = json.loads((tmp_path / "results" / "toy" / "benchmarks" / "probe" / "a_t.json").read_text())
    assert record["rule"] == "probe" and record["wildcards"] == {"encoder": "a", "task": "t"}
    assert record["config_sha256"] == config_hash(CONFIG)
    assert record["work_cpu_seconds"] > 0 and record["startup_cpu_seconds"] > 0
    # the total is the start-up and the work (and the record's own writing)
    assert record["startup_cpu_seconds"] + record["work_cpu_seconds"] <= record["cpu_seconds"] + 1e-3
    assert record["cpu_seconds"] - record["startup_cpu_seconds"] - record["work_cpu_seconds"] < 0.5


@pytest.fixture(scope="module")
def demo_plan() -> tuple[dict, dict[str, int]]:
    """The demo's validated config and its jobs per rule, as the workflow plans them."""
    from affine_homotopy.study.validation import check_config

    config = check_config(yaml.safe_load(DEMO.read_text()), SCHEMA)
    return config, planned_jobs(config, REPO / "workflow" / "Snakefile")


def test_the_projection_per_rule_is_start_up_plus_work(demo_plan) -> None:
    """job_projection against its parts, computed here: start-up per job times the jobs, plus the
    pairwise stages (study_projection), the embed forward pass, Table 1's correlations (2 tasks x 3
    layers x 9 intrinsic x 3 extrinsic measures of 7 encoders, all 7! = 5,040 permutations enumerated)
    or the rule's measured work per job."""
    from affine_homotopy.costs.model import job_costs
    from affine_homotopy.costs.study import encoder_width, study_projection, task_size

    config, jobs = demo_plan
    costs = job_costs()
    projection, work = job_projection(config, jobs), study_projection(config).rules
    assert jobs["embed"] == 2 and jobs["derive"] == 12 and jobs["probe"] == 14 and jobs["intrinsic"] == 6
    for rule in ("intrinsic", "extrinsic", "probe", "rank_deficiency"):
        assert projection[rule] == (jobs[rule], pytest.approx(jobs[rule] * costs.startup[rule] + work[rule]))
    for rule in ("derive", "provenance", "figure_layer_trend"):  # measured on the reference run
        assert costs.work[rule] > 0
        assert projection[rule] == (jobs[rule], pytest.approx(jobs[rule] * (costs.startup[rule] + costs.work[rule])))
    assert 7 in costs.correlation_k and config["analysis"]["n_permutations"] > 5040  # all 7! permutations
    cell = costs.correlation_seconds[costs.correlation_k.index(7)]
    assert costs.correlation_first_call > 0  # scipy.stats, imported at the job's first correlation
    assert projection["correlate"][1] == pytest.approx(costs.startup["correlate"] + costs.correlation_first_call
                                                       + 2 * 3 * 9 * 3 * cell)
    width = encoder_width("minilm", config["encoders"])
    # one embed job per task: one model load, both splits' examples
    forward = sum(costs.embed_load + (task_size(spec, "train") + task_size(spec, "dev")) * costs.embed_example
                  * (width / 384) ** costs.embed_d_exponent for spec in config["tasks"].values())
    assert projection["embed"][1] == pytest.approx(2 * costs.startup["embed"] + forward)


def test_an_example_costs_its_tokens_words_and_marks_plus_the_special_tokens_up_to_max_length() -> None:
    """approximate_tokens counted by hand: 5 words and 3 marks, plus [CLS] and [SEP]; a pair adds its
    second text and one [SEP]; the count stops at max_length, as the encoder truncates."""
    from affine_homotopy.costs.model import approximate_tokens

    assert approximate_tokens("The film, however, was good.", None, 128) == 5 + 3 + 2
    assert approximate_tokens("The film, however, was good.", "It wasn't.", 128) == 5 + 3 + 2 + (3 + 2) + 1
    assert approximate_tokens("The film, however, was good.", None, 6) == 6
    assert approximate_tokens("", None, 128) == 2


def test_an_embed_job_costs_its_examples_tokens(tmp_path: Path, demo_plan) -> None:
    """JobCosts.embed_seconds against a hand computation: examples twice as long as the measured ones
    cost twice the forward pass, the model's load alike; unknown lengths cost as the measured ones. And
    job_projection prices each task's embed jobs at the tokens a run's prepared data has
    (cost_check.prepared_tokens: the mean over both splits, counted here by hand)."""
    import pandas as pd

    from affine_homotopy.costs.model import JobCosts, job_costs
    from affine_homotopy.costs.study import encoder_width, task_size

    costs = JobCosts({}, 3.0, 0.01, 2.0, embed_tokens=12.0)
    assert costs.embed_seconds(100, 768, 24.0) == pytest.approx(3.0 + 100 * 0.01 * 2.0 * 4.0)
    assert costs.embed_seconds(100, 384, None) == pytest.approx(3.0 + 100 * 0.01)
    assert JobCosts({}, 3.0, 0.01, 2.0).embed_seconds(100, 384, 24.0) == pytest.approx(3.0 + 100 * 0.01)

    config, jobs = demo_plan
    first, second = list(config["tasks"])
    for split, texts in (("train", [("a b c", None), ("a, b.", "c d")]), ("dev", [("a", "b")])):
        (tmp_path / "data" / first).mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"text_a": [a for a, _ in texts], "text_b": [b for _, b in texts], "label": 0}).to_parquet(
            tmp_path / "data" / first / f"{split}.parquet")
    tokens = cost_check.prepared_tokens(tmp_path, config)
    # "a b c": 3 + 2; "a, b." and "c d": (4 + 2) + (2 + 1); "a" and "b": (1 + 2) + (1 + 1)
    assert tokens == {first: pytest.approx((5 + 9 + 5) / 3)}
    costs = job_costs()
    width = encoder_width("minilm", config["encoders"])
    plain, priced = job_projection(config, jobs)["embed"][1], job_projection(config, jobs, tokens)["embed"][1]
    spec = config["tasks"][first]
    forward = ((task_size(spec, "train") + task_size(spec, "dev")) * costs.embed_example
               * (width / 384) ** costs.embed_d_exponent)
    assert costs.embed_tokens > 0 and second not in tokens
    assert priced - plain == pytest.approx(forward * (tokens[first] / costs.embed_tokens - 1))


def test_the_check_prices_a_run_at_its_stored_widths_wherever_it_runs(tmp_path: Path, monkeypatch, demo_plan) -> None:
    """cost_check.run_widths reads each model encoder's width from the run's stored embeddings (a derived
    copy's files are not read), and job_projection prices the run at those widths: the same projection
    from a folder where a staged model of that name has another width and from one without it, and the
    embed jobs' forward pass at the stored width by hand."""
    import numpy as np

    from affine_homotopy.costs.model import job_costs
    from affine_homotopy.costs.study import encoder_width, task_size
    from affine_homotopy.study.validation import check_config

    raw = yaml.safe_load(DEMO.read_text())
    mpnet = yaml.safe_load((REPO / "config" / "real_models.yaml").read_text())["encoders"]["mpnet"]
    raw["encoders"]["minilm"] = mpnet  # a staged pypi model: its width is read from resources/ under the cwd
    config = check_config(raw, SCHEMA)
    first = next(iter(config["tasks"]))
    run = tmp_path / "run"
    for name, width in (("minilm", 384), ("minilm_svd80", 7)):
        (run / "embeddings" / name / first).mkdir(parents=True)
        np.save(run / "embeddings" / name / first / "train.npy", np.zeros((3, 2, width), dtype=np.float32))
    widths = cost_check.run_widths(run, config)
    assert widths == {"minilm": 384}

    staged = tmp_path / "staged" / "resources" / "models" / "minilm"
    staged.mkdir(parents=True)
    (staged / "STAGED.json").write_text("{}")
    (staged / "config.json").write_text(json.dumps({"hidden_size": 999}))
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "staged")
    assert encoder_width("minilm", config["encoders"]) == 999  # this folder's model would set the price
    jobs = demo_plan[1]  # the same jobs: one model encoder replaced by another
    from_staged, staged_own = job_projection(config, jobs, None, widths), job_projection(config, jobs)
    monkeypatch.chdir(tmp_path / "empty")
    assert job_projection(config, jobs, None, widths) == from_staged
    assert staged_own["intrinsic"][1] > from_staged["intrinsic"][1]  # 999 wide costs more than 384
    costs = job_costs()
    forward = sum(costs.embed_load + (task_size(spec, "train") + task_size(spec, "dev")) * costs.embed_example
                  for spec in config["tasks"].values())  # at 384, the measured width: factor 1
    assert from_staged["embed"][1] == pytest.approx(2 * costs.startup["embed"] + forward)


def test_a_correlation_costs_its_permutations_and_resamples() -> None:
    """JobCosts.correlation_cell_seconds: a Mantel test of K encoders enumerates K! permutations when that
    is fewer than asked; each permutation and each bootstrap resample costs alike."""
    from affine_homotopy.costs.model import JobCosts, permutations_drawn

    assert [permutations_drawn(k, 10_000) for k in (3, 5, 7, 8, 27)] == [6, 120, 5040, 10_000, 10_000]
    # measured at K = 5, 10 and 20: as K^2 up to 10, as K^3 beyond
    costs = JobCosts({}, 0.0, 0.0, 0.0, {}, correlation_k=(5, 10, 20), correlation_seconds=(0.125, 0.5, 4.0),
                     correlation_resamples=(10_000, 2_000))
    assert costs.correlation_cell_seconds(10, 10_000, 2_000) == pytest.approx(0.5)
    assert costs.correlation_cell_seconds(8, 10_000, 2_000) == pytest.approx(0.5 * 0.8**2)  # within a segment
    assert costs.correlation_cell_seconds(40, 10_000, 2_000) == pytest.approx(32.0)  # the end segment extended
    # 4 encoders: all 24 permutations, as measured (the measured K hold the enumerated ones too)
    assert costs.correlation_cell_seconds(4, 10_000, 2_000) == pytest.approx(0.125 * 0.8**2)
    assert costs.correlation_cell_seconds(4, 10_000, 4_000) == pytest.approx(0.125 * 0.8**2 * (24 + 4000) / 2024)
    assert costs.correlation_cell_seconds(20, 20_000, 4_000) == pytest.approx(8.0)  # twice the resamples
    # 7 encoders: all 5,040 permutations either way, so only the bootstrap's doubling counts
    assert costs.correlation_cell_seconds(7, 20_000, 4_000) == pytest.approx(
        0.125 * 1.4**2 * (5040 + 4000) / (5040 + 2000))


@pytest.mark.workflow
@pytest.mark.parametrize("config", [DEMO, PAPER], ids=["demo", "paper"])
def test_a_runs_config_plans_the_jobs_its_configfile_plans(tmp_path: Path, config: Path) -> None:
    """The check plans a finished run from the config its provenance record holds (a validated dict):
    the same jobs per rule as Snakemake plans from the config file, less the staging downloads."""
    from affine_homotopy.study.validation import check_config

    planned = job_counts(snakemake("-n", "--configfile", str(config), workdir=tmp_path).stdout)
    downloads = {rule for rule in planned if rule.startswith("download_")} | {"all", "total"}
    expected = planned_jobs(check_config(yaml.safe_load(config.read_text()), SCHEMA), REPO / "workflow" / "Snakefile")
    assert expected == {rule: count for rule, count in planned.items() if rule not in downloads}
