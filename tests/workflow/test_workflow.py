"""The workflow: dry runs of the shipped configs, lint, bad input, and an end-to-end tiny study."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from affine_homotopy.report import analysis

from tests.helpers import (
    PAPER, REPO, assert_figure_drawn, job_counts, paper_plan, snakemake, started_early, tiny_config, write_config,
)

# pytest-timeout: a test here may run a whole tiny study (the module fixtures count towards the first
# test that uses them); each Snakemake call has its own timeout too (snakemake()).
pytestmark = [pytest.mark.workflow, pytest.mark.timeout(1800)]


def test_dry_run_of_the_demo_and_the_paper_config(dry_run) -> None:
    # a working directory laid out like a clone: config/ beside it, no --configfile
    demo = job_counts(dry_run())
    assert demo["embed"] == 1 * 2 and demo["derive"] == 6 * 2
    paper = dry_run(*paper_plan())
    counts = job_counts(paper)
    extrinsic_layers = len(yaml.safe_load(PAPER.read_text())["extrinsic"]["layers"])  # the final layer
    assert counts["embed"] == 27 * 6  # (encoder, task): both splits in one job
    assert counts["intrinsic"] == 6 * 4  # (task, layer): every configured layer
    assert counts["extrinsic"] == counts["probe_table"] == 6 * extrinsic_layers  # (task, extrinsic layer)
    assert counts["extrinsic_part"] == 27 * 6 * extrinsic_layers  # extrinsic.sources_per_job: 1
    assert counts["probe"] == 27 * 6
    assert counts["download_model"] == 27 and counts["download_task"] == 6  # staging, on the submit host
    assert counts["rank_deficiency"] == 6 and counts["correlate"] == counts["paper_comparison"] == 1
    # the paper config replaces the default config/config.yaml, it is not merged into it
    assert "results/paper/" in paper and "results/demo/" not in paper
    assert "minilm" not in paper and "derive" not in counts
    through_slurm = dry_run(*paper_plan(slurm=True))
    assert job_counts(through_slurm) == counts  # the cluster profile plans the same study


def planned_files(output: str) -> dict[str, dict[str, set[str]]]:
    """{rule: {"input": paths, "output": paths}} over every job of a dry run's output."""
    files: dict[str, dict[str, set[str]]] = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:\n)", output):
        head = re.match(r"(?:local)?rule (\w+):\n", block)
        if not head:
            continue
        for kind in ("input", "output"):
            line = re.search(rf"^    {kind}: (.*)$", block, re.M)
            paths = set(line[1].split(", ")) if line else set()
            files.setdefault(head[1], {"input": set(), "output": set()})[kind] |= paths
    return files


def test_a_selection_of_extrinsic_measures_and_layers_plans_only_those_outputs(tmp_path: Path, tiny_models) -> None:
    """extrinsic.measures [d_psi] at extrinsic.layers [one layer]: the probes, the extrinsic jobs, their
    summary and Table 1 at that layer only, only d_psi's files; the intrinsic stage at every layer."""
    from affine_homotopy.study.layers import layer_label
    from affine_homotopy.core.measures import extrinsic_outputs

    config = tiny_config(tiny_models, extrinsic={"max_iter": 100, "measures": ["d_psi"], "layers": [2]})
    configfile = str(write_config(tmp_path / "selected.yaml", config))
    plan = snakemake("-n", "--configfile", configfile, workdir=tmp_path).stdout
    counts, files = job_counts(plan), planned_files(plan)
    tasks, only = list(config["tasks"]), layer_label(2)
    assert counts["intrinsic"] == len(tasks) * len(config["layers"])
    assert counts["extrinsic"] == counts["probe_table"] == len(tasks)  # one extrinsic layer
    assert counts["probe"] == len(config["encoders"]) * len(tasks)
    extrinsic = files["extrinsic"]["output"]
    assert {Path(p).parent.name for p in extrinsic} == {only}
    assert {Path(p).stem for p in extrinsic} == {*extrinsic_outputs(["d_psi"]), "d_psi_diagnostics"}
    assert "d_worst" not in plan  # no d_worst, d_worst_search or bound_worst file anywhere in the plan
    assert {Path(p).stem for p in files["probe"]["output"] if p.endswith(".npz")} == {only}
    assert {Path(p).stem for p in files["probe_table"]["output"]} == {only}
    for rule in ("correlate", "extrinsic_summary", "figure_extrinsic_vs_intrinsic"):
        layers = {Path(p).parent.name for p in files[rule]["input"] if "/intrinsic/" in p or "/extrinsic/" in p}
        assert layers == {only}, (rule, layers)
    # Figures 1/4, the rank analysis and the preorder keep every layer
    every = {layer_label(position) for position in config["layers"]}
    assert {Path(p).parent.name for p in files["figure_asymmetry_grid"]["input"]} == every
    # a table layer outside extrinsic.layers stops the run before any job, naming both keys
    config["analysis"] = {"table_layer": 1}
    result = snakemake("-n", "--configfile", str(write_config(tmp_path / "bad.yaml", config)), workdir=tmp_path,
                       check=False)
    said = result.stdout + result.stderr
    assert result.returncode != 0 and "Invalid configuration: config key 'analysis.table_layer' has value 1" in said
    assert "config key 'extrinsic.layers' = [2]" in said and not (tmp_path / "results").exists()


def test_a_run_of_d_psi_alone_at_one_layer_writes_only_that(depth_run) -> None:
    """The job scripts with the smallest selection, d_psi at one of two layer positions (the depth run:
    depth0.50 of depth0.50 and depth1.00). The probe jobs fit that layer's task probes and no random-label probe, the extrinsic jobs write d_psi's files, the summary
    has no worst-case column, Table 1 and Figure 2 are at that layer; the intrinsic stage at both."""
    from affine_homotopy.core.measures import extrinsic_outputs

    results, setup = depth_run
    assert sorted(p.name for p in (results / "intrinsic" / "sent").iterdir()) == ["depth0.50", "depth1.00"]
    assert sorted(p.name for p in (results / "extrinsic" / "sent").iterdir()) == ["depth0.50"]
    written = {p.stem for p in (results / "extrinsic" / "sent" / "depth0.50").glob("*.csv")}
    assert written == {*extrinsic_outputs(["d_psi"]), "d_psi_diagnostics"}
    diagnostics = pd.read_csv(results / "extrinsic" / "sent" / "depth0.50" / "d_psi_diagnostics.csv")
    assert not [c for c in diagnostics.columns if "worst" in c or "search" in c] and len(diagnostics) == 4 * 3
    assert sorted(p.name for p in (results / "probes" / "sent").glob("*.csv")) == ["depth0.50.csv"]
    for name in setup["config"]["encoders"]:
        assert [p.name for p in (results / "probes" / "sent" / "weights" / name).iterdir()] == ["depth0.50.npz"]
        with np.load(results / "probes" / "sent" / "weights" / name / "depth0.50.npz") as weights:
            assert weights["random_weight"].shape[0] == 0  # no random-label probe without d_worst
    summary = pd.read_csv(results / "extrinsic" / "summary.csv")
    assert list(summary["layer"]) == ["depth0.50"] and (summary["violations"] == 0).all()
    assert not [c for c in summary.columns if "worst" in c or "search" in c]
    correlation = pd.read_csv(results / "tables" / "correlation.csv")
    assert set(correlation["layer"]) == {"depth0.50"} and set(correlation["extrinsic"]) == {"d_psi"}
    fits = pd.read_csv(results / "tables" / "figure2_fits.csv")
    assert set(fits["layer"]) == {"depth0.50"} and set(fits["extrinsic"]) == {"d_psi"}
    log = (results / "logs" / "extrinsic" / "sent_depth0.50.log").read_text()
    assert "measures (extrinsic.measures): d_psi (task probe); worst-case search: not selected" in log
    for figure in ("layer_trend", "extrinsic_vs_intrinsic", "asymmetry_grid"):
        assert_figure_drawn(results / "figures" / f"{figure}.png", results / "figures" / f"{figure}.pdf")


def test_bad_config_fails_before_any_job(tmp_path: Path, tiny_models) -> None:
    config = tiny_config(tiny_models, layers=[1, 5])
    result = snakemake("--cores", "1", "--configfile", str(write_config(tmp_path / "bad.yaml", config)),
                       workdir=tmp_path, check=False)
    assert result.returncode != 0
    assert "encoder 'tiny_a' has depth 2" in result.stderr
    assert not (tmp_path / "results").exists()


def test_every_output_has_the_documented_shape(tiny_run) -> None:
    results, config = tiny_run
    names, layers = list(config["encoders"]), config["layers"]
    dims = {"tiny_a": 32, "tiny_b": 48, "tiny_a_svd50": 32, "tiny_b_affine": 48}
    for task, spec in config["tasks"].items():
        for split, n in (("train", spec["n_train"]), ("dev", spec["n_dev"])):
            table = pd.read_parquet(results / "data" / task / f"{split}.parquet")
            assert list(table.columns) == ["text_a", "text_b", "label"] and len(table) == n
            for name in names:
                array = np.load(results / "embeddings" / name / task / f"{split}.npy")
                meta = json.loads((results / "embeddings" / name / task / f"{split}.json").read_text())
                assert array.dtype == np.float32 and array.shape == (len(layers), n, dims[name])
                assert meta["layers"] == layers and meta["pooling"] == "mean" and meta["revision"]
        for layer in layers:
            for kind, file in (("intrinsic", "d_aff"), ("extrinsic", "d_psi"), ("extrinsic", "d_worst"),
                               ("extrinsic", "bound"), ("extrinsic", "d_worst_search"), ("extrinsic", "bound_worst")):
                frame = pd.read_csv(results / kind / task / f"layer{layer}" / f"{file}.csv", index_col=0)
                assert list(frame.index) == names and list(frame.columns) == names
                assert np.all(np.diag(frame.to_numpy()) == 0) and (frame.to_numpy() >= 0).all()
            probes = pd.read_csv(results / "probes" / task / f"layer{layer}.csv")
            assert probes["encoder"].tolist() == names and probes["accuracy"].between(0, 1).all()
            for name in names:
                with np.load(results / "probes" / task / "weights" / name / f"layer{layer}.npz") as weights:
                    assert weights["weight"].shape == (dims[name], 2) and weights["bias"].shape == (2,)
            extrinsic = {m: pd.read_csv(results / "extrinsic" / task / f"layer{layer}" / f"{m}.csv", index_col=0).to_numpy()
                         for m in ("d_psi", "d_worst", "bound", "d_worst_search", "bound_worst")}
            assert (extrinsic["d_worst"] >= extrinsic["d_psi"]).all()
            assert (extrinsic["d_worst_search"] >= extrinsic["d_worst"]).all()
            # two classes: every value is certified, [lower, value] closed to extrinsic.tol (or atol)
            for measure in ("d_psi", "d_worst", "d_worst_search"):
                lower = pd.read_csv(results / "extrinsic" / task / f"layer{layer}" / f"{measure}_lower.csv",
                                    index_col=0).loc[names, names].to_numpy()
                value = extrinsic[measure]
                assert np.isfinite(lower).all() and (lower <= value * (1 + 1e-12) + 1e-15).all(), measure
                assert ((value - lower <= 1e-3 * value + 1e-12) | (value <= 1e-6)).all(), measure
            # Lemma 5.2, with the job's per-pair slack: the rebuilt d_aff map's residual on the full
            # target exceeds d_aff by at most the target's tail below the rank rule
            diagnostics = pd.read_csv(results / "extrinsic" / task / f"layer{layer}" / "d_psi_diagnostics.csv")
            slack = {column: np.zeros((4, 4)) for column in ("bound_slack", "bound_worst_slack")}
            for row in diagnostics.itertuples():
                for column in slack:
                    slack[column][names.index(row.mapped_from), names.index(row.mapped_to)] = getattr(row, column)
            assert (diagnostics["d_aff_rebuilt"]
                    <= np.hypot(diagnostics["d_aff"], diagnostics["target_tail"]) * (1 + 1e-6) + 1e-9).all()
            assert (diagnostics["d_aff_rebuilt"] >= diagnostics["d_aff"] * (1 - 1e-6) - 1e-9).all()
            assert (extrinsic["d_psi"] <= (extrinsic["bound"] + slack["bound_slack"]) * (1 + 1e-6) + 1e-9).all()
            assert (extrinsic["d_worst_search"] <= (extrinsic["bound_worst"] + slack["bound_worst_slack"]) * (1 + 1e-6)
                    + 1e-9).all()
            assert (diagnostics["bound_violations"] == 0).all()
            # bound_worst(i, j) = c(1) R_j d_aff(i, j), R_j the largest norm among j's task and random
            # probes (every one of them is evaluated for every pair; searched ones stay in that ball):
            # recomputed from the stored probe weights, which also checks the orientation (column = target)
            d_aff = pd.read_csv(results / "intrinsic" / task / f"layer{layer}" / "d_aff.csv", index_col=0).to_numpy()
            radius = []
            for name in names:
                with np.load(results / "probes" / task / "weights" / name / f"layer{layer}.npz") as weights:
                    norms = np.linalg.norm(weights["random_weight"], 2, axis=(1, 2))
                    np.testing.assert_allclose(weights["random_norm"], norms, rtol=1e-12)
                    radius.append(max(np.linalg.norm(weights["weight"], 2), norms.max()))
            np.testing.assert_allclose(extrinsic["bound_worst"], 0.5 * d_aff * np.array(radius)[None, :], rtol=1e-9)
            assert len(diagnostics) == 4 * 3 and diagnostics["winning_start"].notna().all()
            assert set(diagnostics["worst_classifier"]) <= {"task", *(f"random_{s}" for s in range(100))}
            np.testing.assert_allclose(diagnostics["search_radius"],
                                       [radius[names.index(j)] for j in diagnostics["mapped_to"]], rtol=1e-9)
            assert (probes["random_method"] == "sgd").all() and probes["random_norm_max"].gt(0).all()
    summary = pd.read_csv(results / "extrinsic" / "summary.csv")
    assert len(summary) == len(config["tasks"]) * len(layers) and (summary["violations"] == 0).all()
    assert (summary["bound_worst_violations"] == 0).all() and (summary["ordering_violations"] == 0).all()
    assert (summary["classifier_bound_violations"] == 0).all()
    assert summary["task_probe_worst_share"].between(0, 1).all() and (summary["d_worst_over_d_psi_median"] >= 1).all()
    assert (summary["d_worst_search_over_d_worst_median"] >= 1).all() and (summary["d_aff_missed_tol"] >= 0).all()
    correlation = pd.read_csv(results / "tables" / "correlation.csv")
    assert "d_psi" in set(correlation["extrinsic"])
    n_measures, n_extrinsic = correlation["intrinsic"].nunique(), correlation["extrinsic"].nunique()
    table_default = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())[
        "properties"]["analysis"]["properties"]["intrinsic_measures"]["default"]
    assert set(correlation["intrinsic"]) == set(table_default)  # Table 1's default columns
    # the intrinsic stage writes the selected measures only (d_lin is opt-in)
    written = {path.stem for path in (results / "intrinsic").glob("*/*/*.csv")}
    assert "d_aff" in written and "d_lin" not in written
    assert len(correlation) == len(config["tasks"]) * len(layers) * n_measures * n_extrinsic * 2
    assert (correlation["n_pairs"] == 4 * 3).all() and correlation["exact"].all()  # 4! < 10,000: exact
    assert (correlation["n_permutations"] == 24).all() and correlation["p_permutation"].between(0, 1).all()
    assert correlation["p_classical"].notna().any() and correlation["ci_low"].notna().any()
    sections = (results / "tables" / "correlation.md").read_text().split("\n## ")
    assert sections[1].startswith("Layer position layer2 (Table 1")  # the table layer (last configured) comes first
    table1 = analysis.parse_markdown_table(sections[1])
    assert list(table1.columns[:3]) == ["task", "extrinsic", "stat"] and len(table1) == 2 * n_extrinsic * 2
    assert r"\begin{tabular}" in (results / "tables" / "correlation.tex").read_text()
    comparison = analysis.parse_markdown_table((results / "paper_comparison.md").read_text())
    assert "paper" not in comparison.columns and len(comparison) == 2 * n_measures * n_extrinsic * 2
    fits = pd.read_csv(results / "tables" / "figure2_fits.csv")
    assert len(fits) == 2 * n_extrinsic and fits["slope_se"].notna().all()
    ranks = pd.read_csv(results / "tables" / "rank_analysis.csv")
    assert len(ranks) == 2 * len(layers) * 2 and set(ranks["direction"]) == {"to", "from"}
    ranking = pd.read_csv(results / "tables" / "preorder_ranking.csv")
    assert len(ranking) == 2 * len(layers) * len(names)
    edges = pd.read_csv(results / "tables" / "preorder_edges.csv")
    assert ((edges["mapped_from"] == "tiny_b") & (edges["mapped_to"] == "tiny_b_affine")).any()
    for task in config["tasks"]:
        levels = pd.read_csv(results / "rank_deficiency" / f"{task}.csv")
        assert len(levels) == 25 and (levels["n_pairs"] == 2).all()  # 2 model encoders, ordered pairs
    for figure in ("asymmetry_grid", "extrinsic_vs_intrinsic", "rank_vs_distance", "layer_trend", "preorder",
                   "rank_deficiency"):
        assert_figure_drawn(results / "figures" / f"{figure}.png", results / "figures" / f"{figure}.pdf")


# Warnings a job may show by design (none today): (file name, category, start of the message).
EXPECTED_WARNINGS: list[tuple[str, str, str]] = []
_WARNING_LINE = re.compile(r"WARNING py\.warnings: (?P<file>\S+\.py):(?P<line>\d+): (?P<category>\w+): (?P<message>.*)")


def project_warnings(logs: Path) -> list[str]:
    """Python warnings raised in this project's own code (src/affine_homotopy, workflow/scripts), as the
    jobs log them (runner.configure_logging captures warnings into the log as logger py.warnings, with
    the file and line they were raised at); warnings from other packages' files are not counted."""
    found = []
    for log in sorted(logs.rglob("*.log")):
        for match in _WARNING_LINE.finditer(log.read_text()):
            path = match["file"].replace("\\", "/")
            if "/affine_homotopy/" not in path and "/workflow/scripts/" not in path:
                continue
            if any(Path(path).name == name and match["category"] == category and match["message"].startswith(start)
                   for name, category, start in EXPECTED_WARNINGS):
                continue
            found.append(f"{log.relative_to(logs)}: {match[0]}")
    return found


def test_the_jobs_raise_no_unexpected_warning_from_the_project(tiny_run) -> None:
    results, _ = tiny_run
    logs = results / "logs"
    assert len(list(logs.rglob("*.log"))) > 20  # every job logged
    unexpected = project_warnings(logs)
    assert not unexpected, "warnings from the project's own code:\n" + "\n".join(unexpected)


def test_a_warning_in_a_job_is_found_in_its_log(tmp_path: Path) -> None:
    """The check above can fail: a line as runner.configure_logging writes it is found."""
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "a.log").write_text(
        "2026-01-01 00:00:00,000 WARNING py.warnings: /x/src/affine_homotopy/core/probes.py:124: UserWarning: The given "
        "NumPy array is not writable\n2026-01-01 00:00:00,000 WARNING py.warnings: /venv/torch/nn/x.py:3: "
        "FutureWarning: not ours\n")
    assert project_warnings(tmp_path) == ["probe/a.log: WARNING py.warnings: /x/src/affine_homotopy/core/probes.py:124: "
                                          "UserWarning: The given NumPy array is not writable"]


def test_orientation_and_values_match_an_independent_computation(tiny_run) -> None:
    results, config = tiny_run
    names = list(config["encoders"])
    train = {n: np.load(results / "embeddings" / n / "sent" / "train.npy")[1].astype(np.float64) for n in names}
    read = lambda m: pd.read_csv(results / "intrinsic" / "sent" / "layer2" / f"{m}.csv", index_col=0)  # noqa: E731
    d_aff, d_aff_ls, d_aff_lower = read("d_aff"), read("d_aff_ls"), read("d_aff_lower")
    for source in names:
        for target in names:
            if source == target:
                continue
            # LAPACK least squares on centred data with the documented rank rule as its cutoff
            # (float32 rounding noise in a truncated encoder must not count as directions)
            x, y = train[source] - train[source].mean(0), train[target] - train[target].mean(0)
            cutoff = 5 * np.finfo(np.float32).eps * max(x.shape)
            coef, *_ = np.linalg.lstsq(x, y, rcond=cutoff)
            expected = np.linalg.norm(y - x @ coef, axis=1).max()
            assert d_aff_ls.loc[source, target] == pytest.approx(expected, rel=1e-4, abs=1e-4)
            # the certified minimax value lies below the least-squares one, above its lower bound
            assert d_aff_lower.loc[source, target] <= d_aff.loc[source, target] <= d_aff_ls.loc[source, target] + 1e-12
    # rows are mapped from: the full encoder maps onto its truncation, not back
    assert d_aff.loc["tiny_a", "tiny_a_svd50"] < 1e-4 < d_aff.loc["tiny_a_svd50", "tiny_a"]
    assert max(d_aff.loc["tiny_b", "tiny_b_affine"], d_aff.loc["tiny_b_affine", "tiny_b"]) < 1e-4
    d_psi = pd.read_csv(results / "extrinsic" / "sent" / "layer2" / "d_psi.csv", index_col=0)
    assert d_psi.loc["tiny_a", "tiny_a_svd50"] < 1e-4
    assert (d_psi.to_numpy() <= np.sqrt(2)).all()


def test_provenance_records_the_environment_of_every_stage(tiny_run) -> None:
    import importlib.metadata

    results, _ = tiny_run
    environments = json.loads((results / "provenance.json").read_text())["environments"]
    assert {"embed", "derive", "intrinsic", "probe", "extrinsic", "correlate", "provenance"} <= set(environments)

    def nulls(value):
        if isinstance(value, dict):
            return any(nulls(v) for v in value.values())
        if isinstance(value, list):
            return any(nulls(v) for v in value)
        return value is None

    for rule, records in environments.items():
        assert records and not nulls(records), rule
        for record in records:  # a plain run: every stage ran in the interpreter that runs these tests
            assert record["packages"]["numpy"] == importlib.metadata.version("numpy")
            assert record["python"] == sys.version.split()[0] and record["jobs"] >= 1


def test_rerun_has_nothing_to_do(tiny_run) -> None:
    results, _ = tiny_run
    workdir = results.parent.parent
    result = snakemake("-n", "--configfile", str(workdir / "tiny.yaml"), workdir=workdir)
    assert "Nothing to be done" in result.stdout + result.stderr


def test_forcing_the_figures_recomputes_nothing_upstream(tiny_run) -> None:
    results, _ = tiny_run
    workdir = results.parent.parent
    figures = ["figure_asymmetry_grid", "figure_extrinsic_vs_intrinsic", "figure_layer_trend",
               "figure_rank_deficiency", "rank_analysis", "preorder"]
    result = snakemake("-n", "--configfile", str(workdir / "tiny.yaml"), "--forcerun", *figures, workdir=workdir)
    # provenance is downstream of every result (it records each stage's environment), so it reruns too
    assert set(job_counts(result.stdout)) <= {*figures, "provenance", "all", "total"}


def test_failing_jobs_leave_no_output(tmp_path: Path, tiny_models) -> None:
    """A malformed GLUE file: a named error (file and line), no partial files. (An unreachable hub
    model stops the run at staging: tests/workflow/test_operations.py.) The target is the task's
    tables alone: the other tasks' jobs, which a whole run would also start, check nothing here."""
    glue = tmp_path / "glue" / "RTE"
    glue.mkdir(parents=True)
    (glue / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta b\tc d\tentailment\n1\tbroken\n")
    (glue / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta b\tc d\tentailment\n")
    config = tiny_config(tiny_models)
    config["tasks"]["rte"] = {"source": "glue_dir", "path": str(tmp_path / "glue")}
    targets = [f"results/tiny/data/rte/{split}.parquet" for split in ("train", "dev")]
    # the targets before --configfile, which would take them as more config files
    result = snakemake(*targets, "--cores", "2", "--configfile", str(write_config(tmp_path / "c.yaml", config)),
                       "--keep-going", workdir=tmp_path, check=False)
    assert result.returncode != 0
    results = tmp_path / "results" / "tiny"
    logs = "\n".join(p.read_text() for p in (results / "logs").rglob("*.log"))
    assert re.search(r"RTE/train\.tsv, line 3: expected at least 4 tab-separated fields", logs)
    assert not (results / "data" / "rte" / "train.parquet").exists()
    assert "Traceback" not in logs  # expected failures are reported, not dumped


def test_a_lemma_5_2_violation_fails_the_extrinsic_job(tiny_run, tmp_path: Path) -> None:
    """Zero d_aff makes every bound 0, so d_psi > bound: the job must stop with NumericalError, no output."""
    import shutil

    results, _ = tiny_run
    workdir = tmp_path / "copy"
    shutil.copytree(results.parent.parent, workdir, ignore=shutil.ignore_patterns(".snakemake"))
    layer = tiny_run[1]["layers"][0]
    folder = workdir / "results" / "tiny" / "intrinsic" / "sent" / f"layer{layer}"
    stamp = (folder / "d_aff.csv").stat()
    d_aff = pd.read_csv(folder / "d_aff.csv", index_col=0)
    (d_aff * 0.0).to_csv(folder / "d_aff.csv")
    os.utime(folder / "d_aff.csv", ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # so intrinsic is not rerun
    target = f"results/tiny/extrinsic/sent/layer{layer}/d_psi.csv"
    # the target before --configfile, which would take it as a second config file
    result = snakemake(target, "--cores", "1", "--configfile", str(workdir / "tiny.yaml"), "--forcerun", "extrinsic",
                       workdir=workdir, check=False)
    assert result.returncode != 0
    assert "rule intrinsic:" not in result.stdout + result.stderr
    log = (workdir / "results" / "tiny" / "logs" / "extrinsic" / f"sent_layer{layer}.log").read_text()
    assert re.search(r"NumericalError: .*Lemma 5\.2", log), log[-2000:]
    assert "Traceback" not in log
    assert not (workdir / target).exists()


def test_an_extrinsic_job_split_by_source_writes_the_single_jobs_files(tiny_run, tmp_path: Path) -> None:
    """extrinsic.sources_per_job: parts of 3 and 1 sources and their merge rebuild every extrinsic file of
    the tiny run (one job per task and layer), byte for byte; nothing upstream runs again."""
    import shutil

    results, config = tiny_run
    workdir = tmp_path / "copy"
    shutil.copytree(results.parent.parent, workdir, ignore=shutil.ignore_patterns(".snakemake"))
    extrinsic = workdir / "results" / "tiny" / "extrinsic"
    shutil.rmtree(extrinsic)
    split = {**config, "extrinsic": {**config["extrinsic"], "sources_per_job": 3}}
    configfile = write_config(workdir / "split.yaml", split)
    result = snakemake("--cores", "2", "--configfile", str(configfile), "--until", "extrinsic", workdir=workdir)
    stats = job_counts(result.stdout + result.stderr)
    layers = len(config["layers"]) * len(config["tasks"])
    assert stats.get("extrinsic_part") == 2 * layers and stats.get("extrinsic") == layers, stats  # 4 encoders: 3 + 1
    assert not {"intrinsic", "probe", "embed"} & set(stats), stats
    written = sorted(p.relative_to(results / "extrinsic") for p in (results / "extrinsic").rglob("*.csv")
                     if p.name != "summary.csv")
    assert written, "the tiny run wrote no extrinsic files"
    for name in written:
        assert (extrinsic / name).read_bytes() == (results / "extrinsic" / name).read_bytes(), name
    log = (workdir / "results" / "tiny" / "logs" / "extrinsic_part").glob("*.log")
    assert any("the 9 pairs mapped from" in path.read_text() for path in log)  # 3 sources x 3 targets


# ---------------------------------------------------------------------------------------------
# layers by relative depth, `last`, families with checkpoints


@started_early
def depth_run(request: pytest.FixtureRequest, environ) -> Callable[[], tuple[Path, dict[str, Any]]]:
    """Three models of depths 2, 3 and 4 (and one derived from the depth-3 one) compared at half and
    full depth, end to end, with the smallest extrinsic selection: d_psi alone, at half depth only."""
    from tests.helpers import write_tiny_bert

    factory = request.getfixturevalue("tmp_path_factory")
    root = factory.mktemp("depth_models")
    models = {f"d{depth}": write_tiny_bert(root / f"d{depth}", seed=depth, hidden=32, layers=depth) for depth in (2, 3, 4)}
    workdir = factory.mktemp("depth_run")
    config = {
        "run_name": "depths",
        "encoders": {**{name: {"source": "path", "path": str(path)} for name, path in models.items()},
                     "d3_affine": {"source": "derived", "base": "d3", "transform": "random_affine", "seed": 2}},
        "tasks": {"sent": {"source": "synthetic", "generator": "synthetic_sentiment", "n_train": 120, "n_dev": 40}},
        "layers": {"relative": [0.5, 1.0]},
        "embedding": {"batch_size": 32},
        "probe": {"l2_grid": [0.1], "max_iter": 100},
        # the smallest extrinsic selection (test_a_run_of_d_psi_alone_at_one_layer_writes_only_that)
        "extrinsic": {"max_iter": 50, "measures": ["d_psi"], "layers": [0.5]},
        "analysis": {"table_layer": 0.5},
    }
    configfile = write_config(workdir / "depths.yaml", config)

    def work() -> tuple[Path, dict[str, Any]]:
        snakemake("--cores", "2", "--configfile", str(configfile), workdir=workdir, environ=environ)
        return workdir / "results" / "depths", {"config": config, "models": models}

    return work


def test_relative_depths_resolve_per_model_end_to_end(depth_run) -> None:
    from affine_homotopy.models.encoders import embed_texts, load_encoder
    from affine_homotopy.jobs.io import read_embeddings, read_matrix

    results, setup = depth_run
    # round(f * depth), half up: 0.5 of 3 layers is layer 2
    expected = {"d2": [1, 2], "d3": [2, 3], "d4": [2, 4], "d3_affine": [2, 3]}
    for name, layers in expected.items():
        for split in ("train", "dev"):
            meta = json.loads((results / "embeddings" / name / "sent" / f"{split}.json").read_text())
            assert meta["layers"] == layers and meta["positions"] == ["depth0.50", "depth1.00"], name
            assert meta["depth"] == {"d2": 2, "d3": 3, "d4": 4, "d3_affine": 3}[name]
    assert sorted(p.name for p in (results / "intrinsic" / "sent").iterdir()) == ["depth0.50", "depth1.00"]
    # the depth0.50 slice of the 3-layer model is its hidden state 2, computed here independently
    texts = pd.read_parquet(results / "data" / "sent" / "train.parquet")["text_a"].tolist()
    encoder = load_encoder("d3", {"source": "path", "path": str(setup["models"]["d3"])})
    np.testing.assert_allclose(read_embeddings(results / "embeddings" / "d3" / "sent" / "train.npy", "depth0.50"),
                               embed_texts(encoder, texts, None, [2])[0], atol=1e-5)
    for label in ("depth0.50", "depth1.00"):
        d_aff = read_matrix(results / "intrinsic" / "sent" / label / "d_aff.csv")
        assert list(d_aff.index) == list(setup["config"]["encoders"]) and np.allclose(np.diag(d_aff), 0)
        assert (d_aff.to_numpy()[~np.eye(4, dtype=bool)] > 0).all()
    sections = (results / "tables" / "correlation.md").read_text().split("\n## ")
    assert sections[1].startswith("Layer position depth0.50 (Table 1")  # analysis.table_layer: 0.5


def test_last_layer_and_checkpoint_families_plan_the_right_jobs(tmp_path: Path, tiny_models, dry_run) -> None:
    config = tiny_config(tiny_models, layers=["last"])
    plan = snakemake("-n", "--configfile", str(write_config(tmp_path / "last.yaml", config)), workdir=tmp_path).stdout
    labels = set(re.findall(r"results/tiny/intrinsic/sent/([^/]+)/d_aff\.csv", plan))
    assert labels == {"last"}
    dynamics = snakemake("-n", "--configfile", str(REPO / "config" / "training_dynamics.yaml"), workdir=tmp_path).stdout
    counts = job_counts(dynamics)
    assert counts["download_model"] == 5 * 12 and counts["embed"] == 60 * 2  # (checkpoint, task)
    assert counts["intrinsic"] == 2 * 2 and counts["figure_training_dynamics"] == 1  # (task, depth0.50/depth1.00)
    assert "results/training_dynamics/tables/training_dynamics.csv" in dynamics
    assert "figure_training_dynamics" not in job_counts(dry_run(*paper_plan()))  # no step axis, no figure


def test_bad_relative_depth_fails_before_any_job(tmp_path: Path, tiny_models) -> None:
    config = tiny_config(tiny_models, layers={"relative": [0.5, 1.5]})
    result = snakemake("--cores", "1", "--configfile", str(write_config(tmp_path / "bad.yaml", config)),
                       workdir=tmp_path, check=False)
    assert result.returncode != 0
    assert "config key 'layers.relative' has value [0.5, 1.5]: 1.5 is outside (0, 1]" in result.stderr
    assert not (tmp_path / "results").exists()
