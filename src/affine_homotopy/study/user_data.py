"""Your own labelled data: the ``table`` task source (and the rows of an ``hf_dataset`` task).

A table is one local file per split (``train`` and ``validation``), or one file (``path``) that is split
here, stratified by class, with ``validation_fraction`` and ``seed``. The format is chosen by the file's
extension (:data:`TABLE_FORMATS`): CSV, TSV, JSON Lines or Parquet (the text formats also compressed).

Columns (``columns`` in the task's spec, every name configurable): ``text`` (required), ``text_pair``
(optional: a sentence-pair task), ``label`` (required) and ``id`` (optional). Labels are strings or
integers (a column of whole numbers written as floats counts as integers) and become the class ids
``0..C-1`` in sorted order (numbers numerically, strings as text); ``classes`` records the mapping
(class id ``k`` is ``classes[k]``). Example ids are strings: the ``id`` column's values, else the row
number in the file (``"17"``) for a single ``path``, or ``"<split>:<row>"`` (``"train:17"``,
``"validation:17"``) for two files, so that they are unique across both splits.

Everything here runs where the examples are first seen: when the config is checked (a ``table`` task, at
parse time, before any job) and in the ``prepare_task`` job (both sources). Every problem is a
:class:`ConfigError` (a key names a file, a format or a column that is not there) or a :class:`DataError`
(the data cannot be used: an empty text, a missing label, a regression target, a single class, validation
classes that training never has, duplicate ids) naming the task, the key, the value and the fix.

``n_train`` / ``n_validation`` keep the first examples of each split (file order, as for GLUE), applied by
:func:`apply_caps`; the config check reads the whole split and leaves the caps' class checks to prepare_task.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, DataError
from .user_files import existing_file, file_sha256, read_table, table_format

SOURCE_COLUMNS = ("text", "text_pair", "label", "id")
# the standard frame of one split before its labels become class ids: the workflow's three columns, the
# label as found (``label``) and the example's id
STANDARD = ["text_a", "text_b", "label", "id"]

if TYPE_CHECKING:  # pandas is a workflow dependency, imported where a table is read
    import pandas as pd

# ---------------------------------------------------------------------------------------------
# rows: text, pair, label, id


def _rows_text(fmt: str, rows: Sequence[int], count: int | None = None) -> str:
    """Where some rows are: "line 5" in a CSV/TSV (the header is line 1), "row 4" elsewhere."""
    offset, word = {"csv": (2, "line"), "tsv": (2, "line"), "jsonl": (1, "line")}.get(fmt, (0, "row"))
    shown = ", ".join(str(int(r) + offset) for r in rows[:5])
    more = (count if count is not None else len(rows)) - min(len(rows), 5)
    return f"{word}{'s' if len(rows) > 1 else ''} {shown}" + (f" and {more} more" if more > 0 else "")


@dataclass(frozen=True)
class Source:
    """Where one split's rows come from, for messages: the task, its config key prefix, the file or split."""

    task: str
    key: str  # the config key of the file (tasks.x.path), or of the task (tasks.x) for a hub split
    where: str  # "data/reviews.csv", or "split 'train' of org/data"
    fmt: str  # csv, tsv, jsonl, parquet (how rows are counted in messages)
    split: str  # the id prefix when the rows have no id column: "train", "validation", or "" (a single file)

    @property
    def what(self) -> str:
        return f"task '{self.task}'"


def _missing(values: pd.Series) -> pd.Series:
    """Missing values: NaN/None, or text that is empty or only whitespace."""
    blank = values.map(lambda v: isinstance(v, str) and not v.strip()).astype(bool)
    return values.isna().astype(bool) | blank


def _chosen_columns(raw: pd.DataFrame, columns: Mapping[str, Any], source: Source,
                    task_key: str) -> dict[str, str | None]:
    """Each role's column of the table (None: a switched-off or absent optional one), or a ConfigError
    naming the key ``<task_key>.columns.<role>`` whose column the table lacks."""
    found = [str(c) for c in raw.columns]
    chosen: dict[str, str | None] = {}
    for role in SOURCE_COLUMNS:
        name = columns.get(role)
        if name is False and role in ("text_pair", "id"):  # switched off: no such column, whatever the file has
            chosen[role] = None
            continue
        if name is None and role in ("text_pair", "id"):
            chosen[role] = role if role in found else None  # the default name, when the file has it
            continue
        name = name if name is not None else role
        if name not in found:
            raise ConfigError(
                f"{source.what}: config key '{task_key}.columns.{role}' is {name!r}, but {source.where} has no such "
                f"column; its columns are {found}. Fix: set '{task_key}.columns.{role}' to the column holding the "
                f"{'texts' if role == 'text' else 'second texts' if role == 'text_pair' else role + 's'}"
                + (" (or leave it out: the default is a column of that name, when there is one)."
                   if role in ("text_pair", "id") else "."), key=f"{task_key}.columns.{role}")
        chosen[role] = name
    return chosen


def standard_rows(raw: pd.DataFrame, columns: Mapping[str, Any], source: Source) -> pd.DataFrame:
    """The standard frame (text_a, text_b, label as found, id) of one split's table."""
    import pandas as pd

    task_key = f"tasks.{source.task}"
    chosen = _chosen_columns(raw, columns, source, task_key)
    if raw.empty:
        raise DataError(f"{source.what}: {source.where} has no rows (config key '{source.key}'). Fix: point it at a "
                        "file with examples.", key=f"{source.key}")
    frame = pd.DataFrame(index=range(len(raw)))
    for role, target in (("text", "text_a"), ("text_pair", "text_b")):
        name = chosen[role]
        if name is None:
            frame[target] = pd.Series([None] * len(raw), dtype=object)
            continue
        values = raw[name].reset_index(drop=True)
        empty = _missing(values).to_numpy()
        if empty.any():
            rows = empty.nonzero()[0]
            raise DataError(
                f"{source.what}: {source.where} has an empty text in column {name!r} (config key "
                f"'{task_key}.columns.{role}') at {_rows_text(source.fmt, rows)} ({int(empty.sum())} of {len(raw)} "
                "rows). Every example needs a text. Fix: drop those rows or fill them in.")
        frame[target] = values.map(str).astype(object)
    labels = raw[chosen["label"]].reset_index(drop=True)
    absent = _missing(labels).to_numpy()
    if absent.any():
        rows = absent.nonzero()[0]
        raise DataError(
            f"{source.what}: {source.where} has no label in column {chosen['label']!r} (config key "
            f"'{task_key}.columns.label') at {_rows_text(source.fmt, rows)} ({int(absent.sum())} of {len(raw)} rows). "
            "Fix: drop the unlabelled rows, or label them.")
    frame["label"] = _labels(labels, chosen["label"], task_key, source)
    if chosen["id"] is None:
        prefix = f"{source.split}:" if source.split else ""
        frame["id"] = [f"{prefix}{row}" for row in range(len(raw))]
    else:
        ids = raw[chosen["id"]].reset_index(drop=True)
        absent = _missing(ids).to_numpy()
        if absent.any():
            raise DataError(
                f"{source.what}: {source.where} has no id in column {chosen['id']!r} (config key "
                f"'{task_key}.columns.id') at {_rows_text(source.fmt, absent.nonzero()[0])}. Fix: give every row an "
                "id, or set 'columns.id: false' to number the rows instead.")
        frame["id"] = [_id_text(v) for v in ids]
    return frame[STANDARD]


def _id_text(value: Any) -> str:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _labels(values: pd.Series, column: str, task_key: str, source: Source) -> list[Any]:
    """The labels of one column as Python ints or strings (bools stay bools); DataError for real numbers."""
    import numpy as np

    items = [v.item() if isinstance(v, np.generic) else v for v in values.tolist()]
    if all(isinstance(v, str) for v in items):
        text = [v.strip() for v in items]
        try:
            return [int(v) for v in text]
        except ValueError:
            pass
        try:
            numbers: list[Any] = [float(v) for v in text]
        except ValueError:
            return text  # class names, without the spaces around them
    elif all(isinstance(v, bool) for v in items):
        return items
    elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
        numbers = items
    else:
        return [str(v) for v in items]  # mixed types: compared as text
    fractional = [k for k, v in enumerate(numbers) if not (math.isfinite(v) and float(v).is_integer())]
    if fractional:
        sample = ", ".join(repr(numbers[k]) for k in fractional[:3])
        raise DataError(
            f"{source.what}: column {column!r} of {source.where} (config key '{task_key}.columns.label') holds real "
            f"numbers ({sample} at {_rows_text(source.fmt, fractional)}): a regression target, not class labels. "
            "This workflow fits classifiers. Fix: point 'columns.label' at a column of class labels (strings or "
            "integers), or bin the scores into classes first.", key=f"{task_key}.columns.label")
    return [int(v) for v in numbers]


# ---------------------------------------------------------------------------------------------
# a task's two splits


@dataclass
class LabelledSplits:
    """Both splits of a task: standard frames (text_a, text_b, label = class id, id), the class mapping and
    what provenance records (``record``: the files with their sha256, the split's settings)."""

    frames: dict[str, pd.DataFrame]  # "train", "dev"
    classes: list[Any]  # class id k is the label classes[k]
    is_pair: bool
    record: dict[str, Any] = field(default_factory=dict)

    def ids(self, split: str) -> list[str]:
        return self.frames[split]["id"].tolist()


def _sort_key(value: Any) -> tuple[int, Any]:
    return (0, value) if isinstance(value, (bool, int)) else (1, str(value))


def _common_kind(frames: Sequence[pd.DataFrame]) -> None:
    """Labels of both splits compared as one kind: integers, or else text ('1' in one file, 1 in the other)."""
    kinds = {type(v) for frame in frames for v in frame["label"]}
    if len(kinds) > 1:
        for frame in frames:
            frame["label"] = [str(v) for v in frame["label"]]


def _class_counts(labels: Sequence[Any]) -> str:
    from collections import Counter

    counts = Counter(labels)
    return ", ".join(f"{value!r}: {counts[value]}" for value in sorted(counts, key=_sort_key))


def labelled_splits(name: str, spec: Mapping[str, Any], train: pd.DataFrame, dev: pd.DataFrame | None,
                    sources: Mapping[str, Source]) -> LabelledSplits:
    """Both splits from the standard frames of the fit split and of the eval split (``dev`` None: held out of
    ``train`` by ``validation_fraction`` and ``seed``, stratified): classes, class ids, the checks."""
    import numpy as np
    import pandas as pd

    what = f"task '{name}'"
    frames = [train] + ([dev] if dev is not None else [])
    for frame in frames:  # Python values (numpy scalars from a parquet file sort as text otherwise)
        frame["label"] = pd.Series([_plain(v) for v in frame["label"].tolist()], index=frame.index, dtype=object)
    _common_kind(frames)
    classes = sorted(set(train["label"]), key=_sort_key)
    if len(classes) < 2:
        raise DataError(
            f"{what}: {sources['train'].where} has a single class ({classes[0]!r}, column "
            f"'{spec['columns']['label']}'; config key 'tasks.{name}.columns.label'): a probe needs at least 2 "
            "classes. Fix: use data with two or more classes, or the column that holds the classes.",
            key=f"tasks.{name}.columns.label")
    record: dict[str, Any] = {}
    if dev is None:
        fraction, seed = float(spec["validation_fraction"]), int(spec.get("seed", 0))
        index = {value: k for k, value in enumerate(classes)}
        ids_of = np.array([index[v] for v in train["label"]])
        train_rows, dev_rows = stratified_split(ids_of, len(classes), fraction, seed, what, name)
        dev = train.iloc[dev_rows].reset_index(drop=True)
        train = train.iloc[train_rows].reset_index(drop=True)
        record["validation_split"] = {"validation_fraction": fraction, "seed": seed, "stratified": True}
    else:
        unseen = sorted(set(dev["label"]) - set(classes), key=_sort_key)
        if unseen:
            rows = [k for k, v in enumerate(dev["label"]) if v in set(unseen)]
            raise DataError(
                f"{what}: the validation split ({sources['dev'].where}) has class(es) {unseen} at "
                f"{_rows_text(sources['dev'].fmt, rows)}, which never occur in the training split "
                f"({sources['train'].where}: {_class_counts(train['label'])}). A probe cannot learn a class it never "
                "sees. Fix: add training examples of those classes, drop them from the validation file, or let the "
                f"workflow split one file (config key 'tasks.{name}.path' with validation_fraction).",
                key=f"tasks.{name}.path")
    both = list(train["id"]) + list(dev["id"])
    if len(set(both)) < len(both):
        from collections import Counter

        repeated = [i for i, count in Counter(both).items() if count > 1]
        column = spec["columns"].get("id") or "id"
        raise DataError(
            f"{what}: example ids repeat across its rows ({len(repeated)} id(s), e.g. "
            f"{', '.join(repr(i) for i in repeated[:5])}; column {column!r}, config key 'tasks.{name}.columns.id'). "
            "Ids tie an embeddings file's rows to the examples, so each must be unique (across both splits). Fix: "
            f"make them unique, or set 'tasks.{name}.columns.id: false' to number the rows instead.",
            key=f"tasks.{name}.columns.id")
    index = {value: k for k, value in enumerate(classes)}
    out = {}
    for split, frame in (("train", train), ("dev", dev)):
        frame = frame.copy()
        frame["label"] = np.array([index[v] for v in frame["label"]], dtype=np.int64)
        out[split] = frame.reset_index(drop=True)
    is_pair = bool(train["text_b"].notna().any())
    record["classes"] = [_plain(c) for c in classes]
    return LabelledSplits(out, [_plain(c) for c in classes], is_pair, record)


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def stratified_split(labels: Any, n_classes: int, fraction: float, seed: int, what: str,
                     name: str) -> tuple[list[int], list[int]]:
    """Rows of the fit and the eval split (each in file order): ``round(fraction * n_c)`` of each class ``c``
    held out, drawn by ``default_rng(seed)`` class by class; every class keeps one row for the fit split, and
    the eval split gets at least one row (from the largest class that can spare one)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    held: list[int] = []
    spare = []
    for c in range(n_classes):
        rows = np.flatnonzero(labels == c)
        shuffled = rng.permutation(rows)
        k = min(int(math.floor(fraction * len(rows) + 0.5)), len(rows) - 1)
        held.extend(int(r) for r in shuffled[:k])
        spare.append((len(rows) - k, -c, shuffled[k:]))
    if not held:
        count, _, rows = max(spare, key=lambda item: (item[0], item[1]))
        if count < 2:
            raise DataError(f"{what}: too few examples ({len(labels)}) to hold out a validation split: every class "
                            f"has one. Fix: add examples, or give 'tasks.{name}.train' and 'validation' files.")
        held.append(int(rows[0]))
    dev = sorted(held)
    keep = set(dev)
    return [r for r in range(len(labels)) if r not in keep], dev


def split_cap(spec: Mapping[str, Any], split: str) -> int | None:
    """The configured cap of a split: ``n_train``, or the eval split's ``n_validation`` (``n_dev`` for GLUE
    and synthetic tasks)."""
    if split == "train":
        return spec.get("n_train")
    return spec.get("n_validation") if spec["source"] in ("table", "hf_dataset") else spec.get("n_dev")


def apply_caps(name: str, spec: Mapping[str, Any], splits: LabelledSplits, check: bool = True) -> LabelledSplits:
    """The first ``n_train`` / ``n_validation`` examples of each split; with ``check``, DataError when the fit
    split then has one class, or the eval split a class the fit split lacks (naming the cap)."""
    frames = {}
    for split, frame in splits.frames.items():
        cap = split_cap(spec, split)
        frames[split] = frame.iloc[:cap].reset_index(drop=True) if cap else frame
    if check:
        what = f"task '{name}'"
        train, dev = set(frames["train"]["label"]), set(frames["dev"]["label"])
        cap = f"n_train = {spec.get('n_train')}" if spec.get("n_train") else "the whole fit split"
        if len(train) < 2:
            raise DataError(
                f"{what}: {cap} keeps a single class ({splits.classes[min(train)]!r}) of "
                f"{len(splits.classes)}: a probe needs at least 2. The cap keeps the first examples in file "
                f"order. Fix: raise config key 'tasks.{name}.n_train', or shuffle the file.",
                key=f"tasks.{name}.n_train")
        unseen = sorted(dev - train)
        if unseen:
            raise DataError(
                f"{what}: with {cap}, the validation split has class(es) {[splits.classes[c] for c in unseen]} that "
                "the fit split it keeps never has (the cap keeps the first examples in file order). Fix: raise "
                f"config key 'tasks.{name}.n_train', or shuffle the file.", key=f"tasks.{name}.n_train")
    return replace(splits, frames=frames)


# ---------------------------------------------------------------------------------------------
# the table source


def table_files(name: str, spec: Mapping[str, Any]) -> dict[str, str]:
    """The config key (``tasks.x.path``, ``.train``, ``.validation``) -> file of a table task, after checking
    that it names one file to split, or a train and a validation file."""
    key = f"tasks.{name}"
    has = {k: spec.get(k) is not None for k in ("path", "train", "validation")}
    fraction = spec.get("validation_fraction") is not None
    if has["path"] and (has["train"] or has["validation"]):
        raise ConfigError(f"task '{name}': config key '{key}' gives both 'path' and 'train'/'validation'. Fix: give "
                          "one file to split ('path' with 'validation_fraction'), or a 'train' and a 'validation' "
                          "file.", key=f"{key}")
    if has["path"]:
        if not fraction:
            raise ConfigError(f"task '{name}': config key '{key}.path' = {spec['path']!r} is one file, and "
                              f"'{key}.validation_fraction' is missing. Fix: add e.g. 'validation_fraction: 0.2' (the "
                              "share of each class held out for the probes' scores), or give 'train' and "
                              "'validation' files instead of 'path'.", key=f"{key}.path")
        return {f"{key}.path": spec["path"]}
    if has["train"] != has["validation"]:
        given, lacking = ("train", "validation") if has["train"] else ("validation", "train")
        raise ConfigError(f"task '{name}': config key '{key}.{given}' is set but '{key}.{lacking}' is missing. Fix: "
                          f"give both files, or one file as '{key}.path' with 'validation_fraction'.",
                          key=f"{key}.{given}")
    if not has["train"]:
        raise ConfigError(f"task '{name}': config key '{key}' names no data: give 'path' (one file, with "
                          "'validation_fraction') or 'train' and 'validation' (one file per split).", key=f"{key}")
    if fraction:
        raise ConfigError(f"task '{name}': config key '{key}.validation_fraction' splits one file, but the task "
                          f"gives 'train' and 'validation' files. Fix: remove validation_fraction, or give one "
                          f"'path' instead.", key=f"{key}.validation_fraction")
    return {f"{key}.train": spec["train"], f"{key}.validation": spec["validation"]}


_TABLES: dict[str, LabelledSplits] = {}


def table_task(name: str, spec: Mapping[str, Any]) -> LabelledSplits:
    """Both splits of a ``table`` task, before the caps (memoised per spec and file version in a process:
    the config check and the resource estimates read it; ``name`` is for messages)."""
    files = table_files(name, spec)
    paths = {key: existing_file(value, key, f"task '{name}'") for key, value in files.items()}
    for key, path in paths.items():
        table_format(path, key, f"task '{name}'")
    stamp = json.dumps([dict(spec), [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns)
                                           for p in paths.values()]], sort_keys=True, default=str)
    if stamp in _TABLES:
        return _TABLES[stamp]
    raws, sources = {}, {}
    for key, path in paths.items():
        role = key.rsplit(".", 1)[1]
        split = "dev" if role == "validation" else "train"
        sources[split] = Source(name, key, str(files[key]), table_format(path, key, f"task '{name}'"),
                                "" if role == "path" else role)
        raws[split] = standard_rows(read_table(files[key], key, f"task '{name}'"), spec["columns"], sources[split])
    splits = labelled_splits(name, spec, raws["train"], raws.get("dev"), sources)
    splits.record["files"] = {key: {"path": str(files[key]), "sha256": file_sha256(path)} for key, path in paths.items()}
    _TABLES[stamp] = splits
    return splits


def known_task_ids(name: str, spec: Mapping[str, Any], staged: str | os.PathLike[str] | None = None
                   ) -> dict[str, list[str]] | None:
    """The example ids of a task's splits (caps applied) where they are known before any job: a ``table`` task
    (its files), a ``synthetic`` one (``<split>:<row>``), and a ``glue`` or ``hf_dataset`` task already staged
    in ``staged`` (default ``resources/data/<task>``, from the working directory); None otherwise (a GLUE
    folder, a hub task not staged yet: known once prepare_task has run)."""
    if spec["source"] == "table":
        splits = apply_caps(name, spec, table_task(name, spec), check=False)
        return {split: splits.ids(split) for split in ("train", "dev")}
    if spec["source"] == "synthetic":
        return {split: [f"{split}:{k}" for k in range(int(split_cap(spec, split)))] for split in ("train", "dev")}
    folder = Path(staged) if staged is not None else Path("resources") / "data" / name
    marker = folder / "STAGED.json"
    if spec["source"] not in ("glue", "hf_dataset") or not marker.is_file():
        return None
    try:
        record = json.loads(marker.read_text())
        if spec["source"] == "glue":
            sizes = {split: int(record["splits"][split]["n_examples"]) for split in ("train", "dev")}
            return {split: [f"{split}:{k}" for k in range(min(n, split_cap(spec, split) or n))]
                    for split, n in sizes.items()}
        import pandas as pd

        frames = {split: pd.read_parquet(folder / f"{split}.parquet")[STANDARD] for split in ("train", "dev")}
    except (OSError, KeyError, ValueError, TypeError):  # staged by hand in another layout: the job checks it
        return None
    train_split = spec.get("train") or "train"
    where = f"staged in {folder}"
    sources = {"train": Source(name, f"tasks.{name}", f"split {train_split!r} ({where})", "parquet", train_split),
               "dev": Source(name, f"tasks.{name}", f"the eval split ({where})", "parquet", "")}
    dev = frames["dev"] if spec.get("validation_fraction") is None else None
    splits = apply_caps(name, spec, labelled_splits(name, spec, frames["train"], dev, sources), check=False)
    return {split: splits.ids(split) for split in ("train", "dev")}
