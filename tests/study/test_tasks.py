"""Task loading: GLUE TSV formats, label conventions, caps, and malformed-file errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from affine_homotopy.errors import DataError
from affine_homotopy.models.task_data import load_task_split, read_glue_tsv
from affine_homotopy.study.tasks import glue_dir_files, task_info

from tests.helpers import SHARED_GLUE, shared_glue_missing

FILES = {
    "SST-2": "sentence\tlabel\nit 's a charming journey . \t1\nno wit , only labored gags \t0\n",
    "CoLA": "gj04\t1\t\tOur friends won't buy this analysis.\ngj04\t0\t*\tThe more books I read.\n",
    "RTE": "index\tsentence1\tsentence2\tlabel\n0\tA dog ran.\tAn animal ran.\tentailment\n1\tA cat sat.\tA dog sat.\tnot_entailment\n",
    "MRPC": "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tHe left.\tHe went away.\n0\t3\t4\tShe won.\tShe lost.\n",
    "MNLI": "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tgold_label\n0\t1\t1\tx\tA\tB\tneutral\n1\t2\t2\tx\tC\tD\tcontradiction\n",
    "QQP": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n0\t1\t2\tWhy?\tHow?\t0\n1\t3\t4\tWho?\tWho is?\t1\n",
}
GLUE_NAMES = {"SST-2": "sst2", "CoLA": "cola", "RTE": "rte", "MRPC": "mrpc", "MNLI": "mnli", "QQP": "qqp"}


@pytest.fixture()
def glue_dir(tmp_path: Path) -> Path:
    for folder, text in FILES.items():
        (tmp_path / folder).mkdir()
        dev_name = "dev_matched.tsv" if folder == "MNLI" else "dev.tsv"
        for name in ("train.tsv", dev_name):
            (tmp_path / folder / name).write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("folder", list(FILES))
def test_every_glue_format_parses_to_the_standard_frame(glue_dir: Path, folder: str) -> None:
    task = GLUE_NAMES[folder]
    frame = read_glue_tsv(glue_dir_files(glue_dir, task)["train"], task)
    assert list(frame.columns) == ["text_a", "text_b", "label"]
    assert len(frame) == 2
    assert (frame["text_b"].isna().all()) == (not task_info(task, {"source": "glue", "glue_task": task}).is_pair)
    expected_labels = {"sst2": [1, 0], "cola": [1, 0], "rte": [0, 1], "mrpc": [1, 0], "mnli": [1, 2], "qqp": [0, 1]}
    assert frame["label"].tolist() == expected_labels[task]


def test_mrpc_bom_is_stripped_and_texts_kept(glue_dir: Path) -> None:
    frame = read_glue_tsv(glue_dir / "MRPC" / "train.tsv", "mrpc")
    assert frame.loc[0, "text_a"] == "He left." and frame.loc[0, "text_b"] == "He went away."


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "train.tsv"
    path.write_text("sentence\tlabel\ngood film\t1\nbroken line without label\n")
    with pytest.raises(DataError, match=r"train\.tsv, line 3: expected at least 2"):
        read_glue_tsv(path, "sst2")


def test_bad_label_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "train.tsv"
    path.write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n")
    with pytest.raises(DataError, match=r"line 2: label 'maybe'"):
        read_glue_tsv(path, "rte")


@pytest.mark.parametrize("content", ["", "sentence\tlabel\n"])
def test_empty_file_is_an_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "train.tsv"
    path.write_text(content)
    with pytest.raises(DataError, match="empty"):
        read_glue_tsv(path, "sst2")


def test_n_train_keeps_the_first_examples(glue_dir: Path) -> None:
    spec = {"source": "glue_dir", "path": str(glue_dir), "glue_task": "qqp", "n_train": 1}
    with pytest.raises(DataError, match="single label"):
        load_task_split("qqp", spec, "train")  # the first example alone has one class
    spec["n_train"] = 2
    assert load_task_split("qqp", spec, "train")["text_a"].tolist() == ["Why?", "Who?"]


def test_synthetic_tasks_load_through_the_same_entry_point() -> None:
    spec = {"source": "synthetic", "generator": "synthetic_paraphrase", "seed": 0, "n_train": 50, "n_dev": 20, "label_noise": 0.0}
    train, dev = load_task_split("p", spec, "train"), load_task_split("p", spec, "dev")
    assert (len(train), len(dev)) == (50, 20)
    assert train["text_b"].notna().all()


@pytest.mark.optional(reason="shared_glue")
@pytest.mark.skipif(shared_glue_missing(), reason="real GLUE files (../shared/glue) not on this machine")
def test_real_glue_files_when_present() -> None:
    sst2 = read_glue_tsv(SHARED_GLUE / "SST-2" / "train.tsv", "sst2")
    assert len(sst2) == 67_349 and int(sst2["label"].sum()) == 37_569
    dev = read_glue_tsv(SHARED_GLUE / "SST-2" / "dev.tsv", "sst2")
    assert int(dev["label"].sum()) == 444 and len(dev) == 872
    for folder, rows in (("CoLA", 8_551), ("RTE", 2_490), ("MRPC", 3_668)):
        task = GLUE_NAMES[folder]
        assert len(read_glue_tsv(SHARED_GLUE / folder / "train.tsv", task)) == rows
