"""The study's lock of resolved commits (affine_homotopy.study.lock): written by the first staging, then
enforced; each kind of bad lock is a named error before any job. The hub is off; models and GLUE
data come from caches laid out as huggingface_hub does (tests/helpers.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from affine_homotopy.errors import ConfigError, StagingError
from affine_homotopy.study.lock import build_lock, check_lock, lock_path, write_lock
from affine_homotopy.models.staging import MARKER, stage_model, stage_task

from tests.helpers import (
    COMMIT_A, COMMIT_B, COMMIT_GLUE, MB0, MB1, cached_study_config, glue_tables, job_counts, model_files,
    put_glue_in_cache, put_in_hub_cache, snakemake, write_config,
)

COMMIT_C = hashlib.sha1(b"tiny model a, retrained").hexdigest()
COMMIT_GLUE_2 = hashlib.sha1(b"tiny glue, second release").hexdigest()


def study() -> dict:
    """The cached study's config as the workflow sees it (check_config fills glue_task)."""
    config = cached_study_config(None)
    config["tasks"]["rte"]["glue_task"] = "rte"
    return config


def locked(config: dict) -> dict:
    staged = {"models": {"mb0": {"commit": COMMIT_A}, "mb1": {"commit": COMMIT_B}},
              "tasks": {"rte": {"commit": COMMIT_GLUE}}}
    return build_lock(config, staged)


@pytest.fixture
def lock_file(tmp_path: Path) -> Path:
    path = tmp_path / "config" / "cached.lock.yaml"
    write_lock(path, locked(study()))
    return path


def test_the_lock_names_every_hub_model_and_glue_task_with_its_commit(lock_file: Path) -> None:
    lock = yaml.safe_load(lock_file.read_text())
    assert lock["run_name"] == "cached" and set(lock["models"]) == {"mb0", "mb1"}  # not the derived encoder
    assert lock["models"]["mb1"] == {"repo_id": MB1, "revision": COMMIT_B, "commit": COMMIT_B}
    assert lock["datasets"]["rte"] == {"repo_id": "nyu-mll/glue", "glue_task": "rte", "revision": None,
                                       "commit": COMMIT_GLUE}
    assert check_lock(study(), lock_file) == lock
    assert lock_path(study()) == Path("config/cached.lock.yaml")
    assert check_lock(study(), lock_file.with_name("none.lock.yaml")) is None  # no lock yet: nothing to enforce


def edit(path: Path, change) -> None:
    lock = yaml.safe_load(path.read_text())
    change(lock)
    path.write_text(yaml.safe_dump(lock))


@pytest.mark.parametrize("change,config_change,expected", [
    (lambda lock: lock.update(run_name="paper"), None, r"written for run_name 'paper'.*lock for another config.*'lock_file'"),
    (lambda lock: lock["models"].pop("mb1"), None, r"models\.mb1 is missing.*update_lock=True"),
    (lambda lock: lock["models"].update(mb2=dict(lock["models"]["mb0"])), None,
     r"models\.mb2 is stale: the config has no hub encoder 'mb2'.*delete that entry"),
    (None, lambda config: config["encoders"]["mb0"].update(model="google/multiberts-seed_9"),
     r"models\.mb0 is stale: repo_id: lock 'google/multiberts-seed_0', config 'google/multiberts-seed_9'"),
    (None, lambda config: config["tasks"]["rte"].update(revision=COMMIT_GLUE_2), r"datasets\.rte is stale: revision"),
    (lambda lock: lock["datasets"]["rte"].update(commit="main"), None,
     r"datasets\.rte\.commit has value 'main', which is not a commit hash"),
    (None, lambda config: config["encoders"]["mb1"].update(revision=COMMIT_B[:12]),
     rf"'encoders\.mb1\.revision' has value '{COMMIT_B[:12]}', which is not a commit hash.*full commit"),
])
def test_each_bad_lock_is_a_named_error(lock_file: Path, change, config_change, expected) -> None:
    config = study()
    if change:
        edit(lock_file, change)
    if config_change:
        config_change(config)
    with pytest.raises(ConfigError, match=expected):
        check_lock(config, lock_file)
    if "revision' has value" not in expected:  # update_lock lifts the lock's checks for one run
        assert check_lock({**config, "update_lock": True}, lock_file) is None


def test_a_model_staged_at_another_commit_than_the_lock_is_refused(lock_file: Path) -> None:
    with pytest.raises(ConfigError, match=r"resources/models/mb0 was staged at commit .*delete resources/models/mb0"):
        check_lock(study(), lock_file, staged_models={"mb0": COMMIT_C})
    check_lock(study(), lock_file, staged_models={"mb0": COMMIT_A, "mb1": "by-hand-1"})  # by hand: outside the lock


def test_staging_refuses_an_upstream_commit_other_than_the_locked_one(tmp_path: Path, hf_home: Path, tiny_models) -> None:
    cache = hf_home / "hub"
    put_in_hub_cache(cache, MB0, model_files(tiny_models["tiny_a"]), COMMIT_C)  # main has moved on
    dest = tmp_path / "resources" / "models" / "mb0"
    with pytest.raises(StagingError, match=rf"encoder 'mb0'.*resolves to commit {COMMIT_C}.*pins commit {COMMIT_A}"
                                           rf".*'revision: {COMMIT_A}'.*update_lock=True"):
        stage_model("mb0", {"model": MB0}, dest, locked_commit=COMMIT_A, lock_file="config/x.lock.yaml")
    assert not dest.exists()
    assert stage_model("mb0", {"model": MB0}, dest, locked_commit=COMMIT_C)["commit"] == COMMIT_C


def test_a_glue_task_is_staged_at_its_revision_and_checked_against_the_lock(tmp_path: Path, hf_home: Path) -> None:
    cache = hf_home / "hub"
    first, second = glue_tables(1), glue_tables(2)
    put_glue_in_cache(cache, first, COMMIT_GLUE)
    put_glue_in_cache(cache, second, COMMIT_GLUE_2)  # main now points to the second release
    latest = stage_task("rte", {"glue_task": "rte"}, tmp_path / "latest")
    pinned = stage_task("rte", {"glue_task": "rte", "revision": COMMIT_GLUE}, tmp_path / "pinned")
    assert (latest["commit"], pinned["commit"]) == (COMMIT_GLUE_2, COMMIT_GLUE)
    assert pinned["requested_revision"] == COMMIT_GLUE
    import pandas as pd

    staged = pd.read_parquet(tmp_path / "pinned" / "train.parquet")
    assert staged["text_a"].tolist() == first["rte"]["train"]["sentence1"].tolist()
    with pytest.raises(StagingError, match=rf"task 'rte'.*resolves to commit {COMMIT_GLUE_2}.*pins commit {COMMIT_GLUE}"):
        stage_task("rte", {"glue_task": "rte"}, tmp_path / "checked", locked_commit=COMMIT_GLUE)
    assert not (tmp_path / "checked").exists()


@pytest.mark.workflow
@pytest.mark.slow
def test_the_first_staging_writes_the_lock_and_later_runs_enforce_it(tmp_path: Path, hf_home: Path, tiny_models) -> None:
    cache = hf_home / "hub"
    put_in_hub_cache(cache, MB0, model_files(tiny_models["tiny_a"]), COMMIT_A)
    put_in_hub_cache(cache, MB1, model_files(tiny_models["tiny_b"]), COMMIT_B, refs=())
    put_glue_in_cache(cache, glue_tables(3))
    config = write_config(tmp_path / "c.yaml", cached_study_config(tiny_models))
    gate = "results/cached/staging.json"
    lock_file = tmp_path / "config" / "cached.lock.yaml"

    snakemake("--cores", "1", gate, "--configfile", str(config), workdir=tmp_path)
    lock = yaml.safe_load(lock_file.read_text())
    assert {n: e["commit"] for n, e in lock["models"].items()} == {"mb0": COMMIT_A, "mb1": COMMIT_B}
    assert lock["datasets"]["rte"]["commit"] == COMMIT_GLUE
    # the next run redoes only the gate (its lock_exists parameter changed), nothing upstream
    again = job_counts(snakemake("-n", gate, "--configfile", str(config), workdir=tmp_path).stdout)
    assert set(again) - {"total"} == {"staging_complete"}

    # upstream moves: restaging mb0 is refused, naming the encoder and how to update the lock
    put_in_hub_cache(cache, MB0, model_files(tiny_models["tiny_a"]), COMMIT_C)  # refs/main -> COMMIT_C
    shutil.rmtree(tmp_path / "resources" / "models" / "mb0")
    failed = snakemake("--cores", "1", gate, "--configfile", str(config), workdir=tmp_path, check=False)
    log = (tmp_path / "results" / "cached" / "logs" / "download" / "model_mb0.log").read_text()
    assert failed.returncode != 0 and f"pins commit {COMMIT_A}" in log and "update_lock=True" in log
    assert not (tmp_path / "resources" / "models" / "mb0").exists()

    # updating the lock on purpose
    snakemake("--cores", "1", gate, "--configfile", str(config), "--config", "update_lock=True", workdir=tmp_path)
    assert yaml.safe_load(lock_file.read_text())["models"]["mb0"]["commit"] == COMMIT_C

    # a lock for another config and a stale entry stop the run before any job
    for change, expected in ((lambda lock: lock.update(run_name="other"), "lock for another config"),
                             (lambda lock: lock["models"].update(gone=lock["models"]["mb0"]), "models.gone is stale")):
        saved = lock_file.read_text()
        edit(lock_file, change)
        result = snakemake("-n", "--configfile", str(config), workdir=tmp_path, check=False)
        assert result.returncode != 0 and expected in result.stdout + result.stderr, result.stderr[-2000:]
        lock_file.write_text(saved)
    assert json.loads((tmp_path / "resources" / "models" / "mb0" / MARKER).read_text())["commit"] == COMMIT_C
