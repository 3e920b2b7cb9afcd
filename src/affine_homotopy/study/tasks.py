"""Classification tasks as a study configures them: GLUE from the Hugging Face hub, GLUE TSV folders,
synthetic tasks, and your own data: a ``table`` of local files and any Hugging Face dataset
(``hf_dataset``; their rows, labels and splits: :mod:`affine_homotopy.study.user_data`). Their formats,
classes and metrics; :mod:`affine_homotopy.models.task_data` loads them.

Every loader returns the same frame: columns ``text_a`` (str), ``text_b`` (str, or None for
single-sentence tasks) and ``label`` (int, ``0..n_classes-1``). Label ids follow the Hugging Face
``nyu-mll/glue`` convention (e.g. RTE: entailment = 0, not_entailment = 1; MNLI: entailment = 0,
neutral = 1, contradiction = 2), so a GLUE folder and the hub give identical frames.

Splits: ``train`` is the *fit* split (probes and all distances are fitted on it; ``n_train`` keeps
its first examples, as the paper did for MNLI and QQP); ``dev`` is the *eval* split (probe scores).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any



SPLITS = ("train", "dev")


@dataclass(frozen=True)
class GlueFormat:
    folder: str
    dev_file: str
    header: bool
    text_a: str | int
    text_b: str | int | None
    label: str | int
    labels: Mapping[str, int]
    hf_columns: tuple[str, str | None]
    hf_dev_split: str = "validation"


_BINARY = {"0": 0, "1": 1}
GLUE_FORMATS: dict[str, GlueFormat] = {
    "sst2": GlueFormat("SST-2", "dev.tsv", True, "sentence", None, "label", _BINARY, ("sentence", None)),
    "cola": GlueFormat("CoLA", "dev.tsv", False, 3, None, 1, _BINARY, ("sentence", None)),
    "mrpc": GlueFormat(
        "MRPC", "dev.tsv", True, "#1 String", "#2 String", "Quality", _BINARY, ("sentence1", "sentence2")
    ),
    "rte": GlueFormat(
        "RTE", "dev.tsv", True, "sentence1", "sentence2", "label",
        {"entailment": 0, "not_entailment": 1}, ("sentence1", "sentence2"),
    ),
    "mnli": GlueFormat(
        "MNLI", "dev_matched.tsv", True, "sentence1", "sentence2", "gold_label",
        {"entailment": 0, "neutral": 1, "contradiction": 2}, ("premise", "hypothesis"),
        hf_dev_split="validation_matched",
    ),
    "qqp": GlueFormat(
        "QQP", "dev.tsv", True, "question1", "question2", "is_duplicate", _BINARY,
        ("question1", "question2"),
    ),
}

# The GLUE tasks the workflow knows (the one list: the config schema's enum is checked against it)
GLUE_TASKS: tuple[str, ...] = tuple(GLUE_FORMATS)

# Probe metrics beyond accuracy, as reported for GLUE.
GLUE_METRICS: dict[str, tuple[str, ...]] = {
    "mrpc": ("accuracy", "f1"),
    "qqp": ("accuracy", "f1"),
    "cola": ("accuracy", "mcc"),
}


# The synthetic generators (affine_homotopy.models.synthetic) whose examples are sentence pairs
SYNTHETIC_PAIR_GENERATORS: frozenset[str] = frozenset({"synthetic_paraphrase"})


@dataclass(frozen=True)
class TaskInfo:
    name: str
    is_pair: bool
    n_classes: int
    metrics: tuple[str, ...]


# Task sources whose classes come from the data (recorded in the prepared data's sidecar), and those
# staged from the Hugging Face hub into resources/data/<task>/ by the download stage
USER_TASK_SOURCES: tuple[str, ...] = ("table", "hf_dataset")
HUB_TASK_SOURCES: tuple[str, ...] = ("glue", "hf_dataset")


def task_info(name: str, spec: Mapping[str, Any], meta: Mapping[str, Any] | None = None) -> TaskInfo:
    """Pairs, classes and metrics of a task. ``meta``: the prepared data's sidecar (``data/<task>/train.json``),
    which a ``table`` or ``hf_dataset`` task needs: its classes are those of its data."""
    if spec["source"] in USER_TASK_SOURCES:
        if meta is None:
            raise ValueError(f"task '{name}' ({spec['source']}): its classes come from its data; pass the prepared "
                             "data's metadata (data/<task>/train.json)")
        return TaskInfo(name, bool(meta["is_pair"]), int(meta["n_classes"]), ("accuracy",))
    if spec["source"] == "synthetic":
        return TaskInfo(name, spec["generator"] in SYNTHETIC_PAIR_GENERATORS, 2, ("accuracy",))
    glue = spec["glue_task"]
    fmt = GLUE_FORMATS[glue]
    return TaskInfo(
        name, fmt.text_b is not None, len(set(fmt.labels.values())), GLUE_METRICS.get(glue, ("accuracy",))
    )


def glue_dir_files(root: str | Path, glue_task: str) -> dict[str, Path]:
    fmt = GLUE_FORMATS[glue_task]
    base = Path(root).expanduser() / fmt.folder
    return {"train": base / "train.tsv", "dev": base / fmt.dev_file}


GLUE_REPO = "nyu-mll/glue"  # the hub's GLUE: parquet files <task>/<split>-*.parquet


STAGED_MARKER = "STAGED.json"  # written by affine_homotopy.models.staging (its MARKER) with the staged files


