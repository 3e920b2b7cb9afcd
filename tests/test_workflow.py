"""The workflow: dry runs of the shipped configs, lint, bad input, and an end-to-end tiny study."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from affine_homotopy import analysis

from .conftest import REPO

pytestmark = pytest.mark.workflow
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]


def snakemake(*args: str, workdir: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    result = subprocess.run([*SNAKEMAKE, "--directory", str(workdir), *args], capture_output=True, text=True, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result


def job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:")[1].split("\n\n")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def tiny_config(tiny_models: dict[str, Path], **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "run_name": "tiny",
        "encoders": {
            "tiny_a": {"source": "path", "path": str(tiny_models["tiny_a"])},
            "tiny_b": {"source": "path", "path": str(tiny_models["tiny_b"])},
            "tiny_a_svd50": {"source": "derived", "base": "tiny_a", "transform": "svd_truncate", "fraction": 0.5},
            "tiny_b_affine": {"source": "derived", "base": "tiny_b", "transform": "random_affine", "seed": 1},
        },
        "tasks": {
            "sent": {"source": "synthetic", "generator": "synthetic_sentiment", "n_train": 150, "n_dev": 60},
            "para": {"source": "synthetic", "generator": "synthetic_paraphrase", "n_train": 150, "n_dev": 60},
        },
        "layers": [1, 2],
        "embedding": {"batch_size": 32},
        "probe": {"l2_grid": [0.01, 0.1], "max_iter": 200},
        "extrinsic": {"max_iter": 100},
    }
    config.update(overrides)
    return config


def test_dry_run_of_the_demo_and_the_paper_config(tmp_path: Path) -> None:
    demo = job_counts(snakemake("-n", workdir=tmp_path).stdout)
    assert demo["embed"] == 1 * 2 * 2 and demo["derive"] == 6 * 2
    paper = snakemake("-n", "--configfile", str(REPO / "config" / "config.yaml"), workdir=tmp_path).stdout
    counts = job_counts(paper)
    assert counts["embed"] == 27 * 6 * 2  # (encoder, task, split)
    assert counts["intrinsic"] == counts["extrinsic"] == 6 * 4  # (task, layer)
    assert counts["probe"] == 27 * 6
    assert counts["download_model"] == 27 and counts["download_task"] == 6  # staging, on the submit host
    assert counts["rank_deficiency"] == 6 and counts["correlate"] == counts["paper_comparison"] == 1
    assert "results/paper/" in paper and "results/demo/" not in paper  # the demo config is replaced
    through_slurm = snakemake("-n", "--workflow-profile", str(REPO / "profiles" / "slurm"),
                              "--configfile", str(REPO / "config" / "config.yaml"), workdir=tmp_path).stdout
    assert job_counts(through_slurm) == counts  # the cluster profile plans the same study


def test_lint_is_clean(tmp_path: Path) -> None:
    result = snakemake("--lint", workdir=tmp_path)
    assert "Lints for" not in result.stdout + result.stderr


def test_bad_config_fails_before_any_job(tmp_path: Path, tiny_models) -> None:
    config = tiny_config(tiny_models, layers=[1, 5])
    result = snakemake("--cores", "1", "--configfile", str(write_config(tmp_path / "bad.yaml", config)),
                       workdir=tmp_path, check=False)
    assert result.returncode != 0
    assert "encoder 'tiny_a' has depth 2" in result.stderr
    assert not (tmp_path / "results").exists()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, tiny_models) -> tuple[Path, dict[str, Any]]:
    workdir = tmp_path_factory.mktemp("tiny_run")
    config = tiny_config(tiny_models)
    snakemake("--cores", "2", "--configfile", str(write_config(workdir / "tiny.yaml", config)), workdir=workdir)
    return workdir / "results" / "tiny", config


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
                               ("extrinsic", "bound")):
                frame = pd.read_csv(results / kind / task / f"layer{layer}" / f"{file}.csv", index_col=0)
                assert list(frame.index) == names and list(frame.columns) == names
                assert np.all(np.diag(frame.to_numpy()) == 0) and (frame.to_numpy() >= 0).all()
            probes = pd.read_csv(results / "probes" / task / f"layer{layer}.csv")
            assert probes["encoder"].tolist() == names and probes["accuracy"].between(0, 1).all()
            for name in names:
                with np.load(results / "probes" / task / "weights" / name / f"layer{layer}.npz") as weights:
                    assert weights["weight"].shape == (dims[name], 2) and weights["bias"].shape == (2,)
            extrinsic = {m: pd.read_csv(results / "extrinsic" / task / f"layer{layer}" / f"{m}.csv", index_col=0).to_numpy()
                         for m in ("d_psi", "d_worst", "bound")}
            assert (extrinsic["d_worst"] >= extrinsic["d_psi"]).all()
            assert (extrinsic["d_psi"] <= extrinsic["bound"] * (1 + 1e-6) + 1e-9).all()  # Lemma 5.2
            diagnostics = pd.read_csv(results / "extrinsic" / task / f"layer{layer}" / "d_psi_diagnostics.csv")
            assert len(diagnostics) == 4 * 3 and diagnostics["winning_start"].notna().all()
    summary = pd.read_csv(results / "extrinsic" / "summary.csv")
    assert len(summary) == len(config["tasks"]) * len(layers) and (summary["violations"] == 0).all()
    correlation = pd.read_csv(results / "tables" / "correlation.csv")
    assert "d_psi" in set(correlation["extrinsic"])
    n_measures, n_extrinsic = correlation["intrinsic"].nunique(), correlation["extrinsic"].nunique()
    assert n_measures == 10 and len(correlation) == len(config["tasks"]) * len(layers) * n_measures * n_extrinsic * 2
    assert (correlation["n_pairs"] == 4 * 3).all() and correlation["exact"].all()  # 4! < 10,000: exact
    assert (correlation["n_permutations"] == 24).all() and correlation["p_permutation"].between(0, 1).all()
    assert correlation["p_classical"].notna().any() and correlation["ci_low"].notna().any()
    sections = (results / "tables" / "correlation.md").read_text().split("\n## ")
    assert sections[1].startswith("Layer 2 (Table 1")  # the table layer (last configured) comes first
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
        for ext in ("png", "pdf"):
            assert (results / "figures" / f"{figure}.{ext}").stat().st_size > 1000


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
    assert set(job_counts(result.stdout)) <= {*figures, "all", "total"}


def test_failing_jobs_leave_no_output(tmp_path: Path, tiny_models) -> None:
    """A malformed GLUE file: a named error (file and line), no partial files. (An unreachable hub
    model stops the run at staging: tests/test_operations.py.)"""
    glue = tmp_path / "glue" / "RTE"
    glue.mkdir(parents=True)
    (glue / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta b\tc d\tentailment\n1\tbroken\n")
    (glue / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta b\tc d\tentailment\n")
    config = tiny_config(tiny_models)
    config["tasks"]["rte"] = {"source": "glue_dir", "path": str(tmp_path / "glue")}
    result = snakemake("--cores", "2", "--configfile", str(write_config(tmp_path / "c.yaml", config)),
                       "--keep-going", workdir=tmp_path, check=False)
    assert result.returncode != 0
    results = tmp_path / "results" / "tiny"
    logs = "\n".join(p.read_text() for p in (results / "logs").rglob("*.log"))
    assert re.search(r"RTE/train\.tsv, line 3: expected at least 4 tab-separated fields", logs)
    assert not (results / "data" / "rte" / "train.parquet").exists()
    assert "Traceback" not in logs  # expected failures are reported, not dumped
