"""Staging from a pre-filled Hugging Face cache (issue 13), with no network.

The caches are built here the way huggingface_hub lays them out (content-addressed blobs, snapshot
entries as relative symbolic links, ``refs/<branch>`` holding the commit): a tiny random BERT as a
model repository, and a tiny GLUE-layout data set repository (``<task>/<split>-*.parquet``, as on
``nyu-mll/glue``). Models and tasks are staged with the hub switched off or unreachable, broken
caches give named errors that leave nothing behind, and the tiny study runs from the cache with
embeddings equal to those of the same model loaded by path.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from affine_homotopy.study.validation import check_config
from affine_homotopy.models.encoders import embed_texts, load_encoder
from affine_homotopy.errors import ConfigError, DataError, StagingError
from affine_homotopy.study.hub import hub_cache_dir
from affine_homotopy.jobs.io import fingerprint_frame
from affine_homotopy.models.staging import MARKER, stage_model, stage_task

from tests.helpers import (
    COMMIT_A, COMMIT_B, COMMIT_GLUE, MB0, MB1, cached_study_config, glue_tables, job_counts, model_files,
    put_glue_in_cache, put_in_hub_cache, snakemake, started_early, with_hf_home, write_config,
)


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.glob(".*")) if parent.exists() else []


# ---------------------------------------------------------------------------------------------
# models


def test_model_is_staged_from_the_cache_with_the_hub_off(tmp_path: Path, hf_home: Path, tiny_models) -> None:
    source = tiny_models["tiny_a"]
    snapshot = put_in_hub_cache(hf_home / "hub", MB0, model_files(source), COMMIT_A)
    (snapshot / "tf_model.h5").symlink_to(snapshot / "config.json")  # other formats are not staged
    dest = tmp_path / "resources" / "models" / "mb0"
    record = stage_model("mb0", {"model": MB0, "revision": None}, dest)

    assert record["commit"] == COMMIT_A and record["staged_from"] == "cache"
    assert record["route_reason"] == "HF_HUB_OFFLINE=1" and record["cache_dir"] == str(hf_home / "hub")
    assert json.loads((dest / MARKER).read_text()) == record
    staged = sorted(p.name for p in dest.iterdir() if p.name != MARKER)
    assert staged == sorted(record["files"]) == sorted(p.name for p in source.iterdir())
    for name in staged:  # the very bytes of the cached snapshot, as plain files
        assert not (dest / name).is_symlink() and (dest / name).read_bytes() == (source / name).read_bytes()
    assert record["weights"] == ["model.safetensors"]
    assert leftovers(dest.parent) == []

    texts = ["the film was good", "a very dull plot", "she said it was brilliant"]
    from_cache = load_encoder("mb0", {"source": "hf", "model": MB0}, staged=dest)
    by_path = load_encoder("mb0_path", {"source": "path", "path": str(source)})
    assert from_cache.revision == COMMIT_A
    np.testing.assert_array_equal(embed_texts(from_cache, texts, None, [0, 2]), embed_texts(by_path, texts, None, [0, 2]))


def test_pinned_revision_and_branch_are_resolved_in_the_cache(tmp_path: Path, hf_home: Path, tiny_models) -> None:
    cache = hf_home / "hub"
    put_in_hub_cache(cache, MB0, model_files(tiny_models["tiny_a"]), COMMIT_A, refs=("main",))
    put_in_hub_cache(cache, MB0, model_files(tiny_models["tiny_b"]), COMMIT_B, refs=("step_20k",))
    for revision, commit, width in ((None, COMMIT_A, 32), (COMMIT_B, COMMIT_B, 48), ("step_20k", COMMIT_B, 48)):
        dest = tmp_path / f"staged_{revision}"
        record = stage_model("mb0", {"model": MB0, "revision": revision}, dest)
        assert (record["commit"], record["requested_revision"]) == (commit, revision)
        assert json.loads((dest / "config.json").read_text())["hidden_size"] == width


def test_a_cache_filled_by_a_partial_download_still_stages(tmp_path: Path, hf_home: Path, tiny_models) -> None:
    """An online download of only some files leaves the repository's full listing in the cache;
    huggingface_hub then calls the snapshot incomplete, but what a model needs is there."""
    from huggingface_hub import snapshot_download
    from huggingface_hub._tree_cache import TreeCacheEntry, write_tree_cache
    from huggingface_hub.errors import IncompleteSnapshotError

    files = model_files(tiny_models["tiny_a"])
    put_in_hub_cache(hf_home / "hub", MB0, files, COMMIT_A)
    listing = {name: TreeCacheEntry(size=len(data), blob_id=hashlib.sha1(data).hexdigest()) for name, data in files.items()}
    listing["tf_model.h5"] = TreeCacheEntry(size=10, blob_id="0" * 40)  # on the hub, never fetched
    write_tree_cache(str(hf_home / "hub" / "models--google--multiberts-seed_0"), COMMIT_A, listing)
    with pytest.raises(IncompleteSnapshotError):  # the situation this test is about
        snapshot_download(MB0, cache_dir=hf_home / "hub", local_files_only=True)
    record = stage_model("mb0", {"model": MB0}, tmp_path / "mb0")
    assert record["commit"] == COMMIT_A and "tf_model.h5" not in record["files"]


def test_hf_hub_cache_takes_precedence_over_hf_home(tmp_path: Path, hf_home: Path, monkeypatch, tiny_models) -> None:
    put_in_hub_cache(hf_home / "hub", MB0, model_files(tiny_models["tiny_a"]), COMMIT_A)
    elsewhere = tmp_path / "shared_cache"
    put_in_hub_cache(elsewhere, MB0, model_files(tiny_models["tiny_b"]), COMMIT_B)
    assert stage_model("mb0", {"model": MB0}, tmp_path / "a")["commit"] == COMMIT_A
    monkeypatch.setenv("HF_HUB_CACHE", str(elsewhere))
    assert hub_cache_dir() == elsewhere
    assert stage_model("mb0", {"model": MB0}, tmp_path / "b")["commit"] == COMMIT_B


def test_an_unreachable_hub_falls_back_to_the_cache_and_says_so(
    tmp_path: Path, hf_home: Path, unreachable_hub: str, tiny_models
) -> None:
    put_in_hub_cache(hf_home / "hub", MB0, model_files(tiny_models["tiny_a"]), COMMIT_A)
    put_glue_in_cache(hf_home / "hub", glue_tables(0))
    model = stage_model("mb0", {"model": MB0}, tmp_path / "models" / "mb0")
    task = stage_task("rte", {"glue_task": "rte"}, tmp_path / "data" / "rte")
    for record, commit in ((model, COMMIT_A), (task, COMMIT_GLUE)):
        assert record["staged_from"] == "cache" and record["commit"] == commit
        assert "unreachable" in record["route_reason"] and "ConnectError" in record["route_reason"]
    with pytest.raises(StagingError) as caught:  # neither route works: both are named
        stage_model("mb1", {"model": MB1}, tmp_path / "models" / "mb1")
    assert "holds no copy" in str(caught.value)
    assert "route 'cache', because the hub was unreachable (ConnectError" in str(caught.value)
    assert not (tmp_path / "models" / "mb1").exists()


def test_the_config_check_reads_the_cache_named_at_call_time(hf_home: Path, tiny_models, schema_path) -> None:
    """The layer check finds an hf encoder's depth in the cache that HF_HOME names now."""
    put_in_hub_cache(hf_home / "hub", MB0, model_files(tiny_models["tiny_a"]), COMMIT_A)
    encoders = {"mb0": {"source": "hf", "model": MB0}, "mb0_path": {"source": "path", "path": str(tiny_models["tiny_b"])}}
    config = {"run_name": "x", "encoders": encoders, "tasks": {"rte": {"source": "glue"}}, "layers": [1, 2]}
    check_config(copy.deepcopy(config), schema_path)  # both encoders have depth 2
    config["encoders"]["mb0"]["revision"] = COMMIT_B  # not in the cache: its depth is unknown yet
    check_config(copy.deepcopy(config), schema_path)
    config["encoders"]["mb0"]["revision"] = None
    config["layers"] = [1, 5]
    with pytest.raises(ConfigError, match="encoder 'mb0' has depth 2"):
        check_config(config, schema_path)


# ---------------------------------------------------------------------------------------------
# tasks


def test_task_is_staged_from_the_cache_with_the_hub_off(tmp_path: Path, hf_home: Path) -> None:
    tables = glue_tables(1)
    put_glue_in_cache(hf_home / "hub", tables)
    expected_columns = {"rte": ("sentence1", "sentence2"), "sst2": ("sentence", None), "mnli": ("premise", "hypothesis")}
    dev_split = {"rte": "validation", "sst2": "validation", "mnli": "validation_matched"}
    for task, (column_a, column_b) in expected_columns.items():
        dest = tmp_path / "resources" / "data" / task
        record = stage_task(task, {"glue_task": task}, dest)
        assert record["commit"] == COMMIT_GLUE and record["staged_from"] == "cache"
        assert record["route_reason"] == "HF_HUB_OFFLINE=1" and record["repo_id"] == "nyu-mll/glue"
        for split, hub_split in (("train", "train"), ("dev", dev_split[task])):
            source = tables[task][hub_split]  # built independently above
            staged = pd.read_parquet(dest / f"{split}.parquet")
            assert staged["text_a"].tolist() == source[column_a].tolist()
            assert staged["text_b"].tolist() == (source[column_b].tolist() if column_b else [None] * len(source))
            assert staged["label"].tolist() == source["label"].tolist()
            assert record["splits"][split] == {"n_examples": len(source), "fingerprint_sha256": fingerprint_frame(staged)}
        assert json.loads((dest / MARKER).read_text()) == record
        assert leftovers(dest.parent) == []


# ---------------------------------------------------------------------------------------------
# bad input: a named error that says which route was tried, and nothing left behind


def assert_nothing_staged(dest: Path) -> None:
    assert not dest.exists(), f"{dest} was left behind: {list(dest.iterdir())}"
    assert leftovers(dest.parent) == [], "temporary staging folders were left behind"


def test_cache_folder_without_a_snapshot_for_the_revision(tmp_path: Path, hf_home: Path, tiny_models) -> None:
    put_in_hub_cache(hf_home / "hub", MB0, model_files(tiny_models["tiny_a"]), COMMIT_A)
    dest = tmp_path / "resources" / "models" / "mb0"
    dest.mkdir(parents=True)  # Snakemake makes the output's folder before the job runs
    with pytest.raises(StagingError) as caught:
        stage_model("mb0", {"model": MB0, "revision": COMMIT_B}, dest)
    message = str(caught.value)
    assert COMMIT_B in message and COMMIT_A in message, "the error names the pinned and the cached commit"
    assert "route 'cache'" in message and "HF_HUB_OFFLINE=1" in message and f"--revision {COMMIT_B}" in message
    assert_nothing_staged(dest)

    # refs/main points to a commit whose snapshot is gone (a half-copied cache)
    (hf_home / "hub" / "models--google--multiberts-seed_0" / "refs" / "main").write_text(COMMIT_B)
    with pytest.raises(StagingError, match=rf"(?s)exists but holds no snapshot.*refs/main points to commit {COMMIT_B}"):
        stage_model("mb0", {"model": MB0}, dest)
    assert_nothing_staged(dest)


def test_snapshot_without_config_json(tmp_path: Path, hf_home: Path, tiny_models) -> None:
    put_in_hub_cache(hf_home / "hub", MB0, model_files(tiny_models["tiny_a"], drop=("config.json",)), COMMIT_A)
    dest = tmp_path / "resources" / "models" / "mb0"
    with pytest.raises(StagingError, match=rf"(?s)snapshot of '{MB0}' at commit {COMMIT_A}.*lacks config\.json\..*route 'cache'"):
        stage_model("mb0", {"model": MB0}, dest)
    assert_nothing_staged(dest)


@pytest.mark.parametrize(
    ("drop", "named"),
    [
        (("tokenizer.json", "vocab.txt"), "the tokenizer (tokenizer.json, vocab.txt"),
        (("model.safetensors",), "the weights (model.safetensors or pytorch_model.bin)"),
    ],
    ids=["weights_without_tokenizer", "tokenizer_without_weights"],
)
def test_snapshot_missing_weights_or_tokenizer(tmp_path: Path, hf_home: Path, tiny_models, drop, named) -> None:
    files = model_files(tiny_models["tiny_a"], drop=drop)
    assert not set(drop) & set(files)
    put_in_hub_cache(hf_home / "hub", MB0, files, COMMIT_A)
    dest = tmp_path / "resources" / "models" / "mb0"
    with pytest.raises(StagingError) as caught:
        stage_model("mb0", {"model": MB0}, dest)
    assert named in str(caught.value) and "route 'cache'" in str(caught.value)
    assert "config.json" not in str(caught.value).split("lacks")[1].split(".")[0]  # only what is missing
    assert_nothing_staged(dest)


def test_dataset_cache_without_the_requested_split(tmp_path: Path, hf_home: Path) -> None:
    tables = glue_tables(2)
    del tables["rte"]["validation"]
    put_glue_in_cache(hf_home / "hub", tables)
    dest = tmp_path / "resources" / "data" / "rte"
    with pytest.raises(DataError) as caught:
        stage_task("rte", {"glue_task": "rte"}, dest)
    message = str(caught.value)
    assert "lacks split dev (rte/validation-*.parquet); splits present: test, train." in message
    assert "route 'cache'" in message and "--repo-type dataset --include 'rte/*'" in message
    assert_nothing_staged(dest)


def test_hub_off_with_an_empty_cache(tmp_path: Path, hf_home: Path) -> None:
    for stage, name, spec, kind in (
        (stage_model, "mb0", {"model": MB0}, "models"), (stage_task, "rte", {"glue_task": "rte"}, "data"),
    ):
        dest = tmp_path / "resources" / kind / name
        with pytest.raises(StagingError) as caught:
            stage(name, spec, dest)
        message = str(caught.value)
        assert "holds no copy" in message and str(hf_home / "hub") in message
        assert "route 'cache', because HF_HUB_OFFLINE=1" in message and "hf download" in message
        assert_nothing_staged(dest)


def test_provenance_names_each_route(tmp_path: Path, hf_home: Path, tiny_models) -> None:
    from affine_homotopy.jobs.provenance import collect

    put_in_hub_cache(hf_home / "hub", MB0, model_files(tiny_models["tiny_a"]), COMMIT_A)
    staging = {
        "models": {"mb0": stage_model("mb0", {"model": MB0}, tmp_path / "mb0"),
                   "mine": {"model": "org/mine", "commit": "abc"}},  # as the README's by-hand route writes it
        "tasks": {},
    }
    (tmp_path / "staging.json").write_text(json.dumps(staging))
    models = collect({"run_name": "x"}, tmp_path, [], [], tmp_path / "staging.json")["models"]
    assert models["mb0"]["staging"] == {"repo_id": MB0, "requested_revision": None, "commit": COMMIT_A,
                                        "staged_from": "cache", "route_reason": "HF_HUB_OFFLINE=1"}
    assert models["mine"]["staging"]["staged_from"] == "by hand" and models["mine"]["staging"]["commit"] == "abc"


# ---------------------------------------------------------------------------------------------
# the workflow: the reproduction, then the tiny study, from the cache


@started_early
def cached_study_run(request: pytest.FixtureRequest, environ) -> Callable[[], dict[str, Any]]:
    """The issue's reproduction (HF_HUB_OFFLINE=1, a pre-filled cache, one model staged), then the tiny
    study from the cache, then the same model loaded by path (a second run on the same staged data; two
    identical encoders in one study are a separate matter): the folder, the GLUE tables cached."""
    tmp_path = request.getfixturevalue("tmp_path_factory").mktemp("cached_study")
    tiny_models = request.getfixturevalue("tiny_models")
    hf_home = tmp_path / "hf_home"  # an HF_HOME of its own, the hub off (as the hf_home fixture)
    environ = with_hf_home(environ, hf_home)
    cache = hf_home / "hub"
    put_in_hub_cache(cache, MB0, model_files(tiny_models["tiny_a"]), COMMIT_A)
    put_in_hub_cache(cache, MB1, model_files(tiny_models["tiny_b"]), COMMIT_B, refs=())
    tables = glue_tables(3)
    put_glue_in_cache(cache, tables)
    config = write_config(tmp_path / "c.yaml", cached_study_config(tiny_models))
    by_path = cached_study_config(tiny_models, run_name="by_path")
    by_path["encoders"] = {"mb0_path": {"source": "path", "path": str(tiny_models["tiny_a"])}, "mb1": by_path["encoders"]["mb1"]}
    by_path_file = write_config(tmp_path / "p.yaml", by_path)

    def work() -> dict[str, Any]:
        snakemake("--cores", "1", "resources/models/mb0/STAGED.json", "--configfile", str(config), workdir=tmp_path,
                  environ=environ)
        staged_first = json.loads((tmp_path / "resources" / "models" / "mb0" / MARKER).read_text())
        snakemake("--cores", "2", "--configfile", str(config), workdir=tmp_path, environ=environ)
        targets = [f"results/by_path/embeddings/mb0_path/rte/{split}.npy" for split in ("train", "dev")]
        snakemake("--cores", "2", *targets, "--configfile", str(by_path_file), workdir=tmp_path, environ=environ)
        return {"folder": tmp_path, "tables": tables, "staged_first": staged_first}

    return work


@pytest.mark.workflow
@pytest.mark.timeout(1800)
def test_tiny_study_runs_offline_from_the_cache(cached_study_run) -> None:
    tmp_path, tables = cached_study_run["folder"], cached_study_run["tables"]
    # the reproduction: mb0 staged alone, from the cache
    staged = cached_study_run["staged_first"]
    assert (staged["staged_from"], staged["commit"]) == ("cache", COMMIT_A)

    results = tmp_path / "results" / "cached"
    assert (results / "tables" / "correlation.csv").is_file() and (results / "extrinsic" / "summary.csv").is_file()
    data = pd.read_parquet(results / "data" / "rte" / "dev.parquet")
    assert data["text_a"].tolist() == tables["rte"]["validation"]["sentence1"].tolist()
    assert np.load(results / "embeddings" / "mb1" / "rte" / "train.npy").shape == (1, 40, 48)
    provenance = json.loads((results / "provenance.json").read_text())
    for name, commit in (("mb0", COMMIT_A), ("mb1", COMMIT_B)):
        entry = provenance["models"][name]
        assert entry["staging"]["staged_from"] == "cache" and entry["staging"]["commit"] == commit
        assert entry["revision"] == commit  # what the embedding jobs loaded
    assert provenance["datasets"]["rte"]["staging"]["commit"] == COMMIT_GLUE
    assert provenance["datasets"]["rte"]["staging"]["staged_from"] == "cache"
    assert "staging" not in provenance["models"]["mb0_svd50"]

    # the same model loaded by path, embedding by embedding
    for split, n in (("train", 40), ("dev", 16)):
        from_cache = np.load(results / "embeddings" / "mb0" / "rte" / f"{split}.npy")
        assert from_cache.shape == (1, n, 32)
        np.testing.assert_array_equal(from_cache, np.load(tmp_path / "results" / "by_path" / "embeddings" / "mb0_path" / "rte" / f"{split}.npy"))


@pytest.mark.workflow
@pytest.mark.timeout(1800)
def test_a_model_staged_by_hand_is_trusted_without_the_hub(tmp_path: Path, hf_home: Path, tiny_models) -> None:
    put_glue_in_cache(hf_home / "hub", glue_tables(4))
    config = cached_study_config(tiny_models)
    del config["encoders"]["mb1"]
    config["encoders"]["mb0_path"] = {"source": "path", "path": str(tiny_models["tiny_a"])}
    for name in ("mb0",):  # the third route: files and STAGED.json placed by hand, no cache needed
        folder = tmp_path / "resources" / "models" / name
        folder.mkdir(parents=True)
        for file in tiny_models["tiny_a"].iterdir():
            (folder / file.name).write_bytes(file.read_bytes())
        (folder / MARKER).write_text(json.dumps({"model": MB0, "commit": "by-hand-1"}))
    counts = job_counts(snakemake("-n", "--configfile", str(write_config(tmp_path / "c.yaml", config)),
                                  workdir=tmp_path).stdout)
    assert "download_model" not in counts and counts["download_task"] == 1 and counts["embed"] == 2


def test_the_readme_fill_commands_read_the_cache(hf_home: Path, tiny_models) -> None:
    """The README's `hf download` commands (run offline here) resolve the snapshots staging uses."""
    model = put_in_hub_cache(hf_home / "hub", MB0, model_files(tiny_models["tiny_a"]), COMMIT_A)
    glue = put_glue_in_cache(hf_home / "hub", glue_tables(5))
    hf = str(Path(sys.executable).with_name("hf"))
    for command, snapshot in (
        ([hf, "download", MB0], model),
        ([hf, "download", "nyu-mll/glue", "--repo-type", "dataset", "--include", "rte/*"], glue),
    ):
        result = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ), timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        assert str(snapshot) in result.stdout, result.stdout[-2000:]
