"""Loading a configured task's examples: GLUE TSV folders, the hub's ``nyu-mll/glue`` parquet files
(online or from the local cache), any Hugging Face dataset's data files (``hf_dataset``), local tables
(``table``), staged copies, and the synthetic generators.

Every loader returns the frame described in :mod:`affine_homotopy.study.tasks`: columns ``text_a``,
``text_b`` (None for single-sentence tasks) and ``label`` (int, ``0..n_classes-1``). :func:`load_task`
gives both splits with the examples' ids (``<split>:<row>`` for GLUE and synthetic tasks; a table's or a
data set's own ids, see :mod:`affine_homotopy.study.user_data`) and, for your own data, the class mapping.

Hugging Face datasets are read from the hub's files through huggingface_hub snapshots, as GLUE is: the
same cache, offline switch, lock of commits and error messages as models and GLUE, and no second
cache (``datasets`` offline reads only its own prepared-data cache). Which files hold a split: the data
set card's ``configs`` (its README's YAML header, as ``datasets`` reads it), else the hub's file-name
conventions (``[<config>/]...<split>[-._0-9]*.<ext>``, or a folder named after the split, as in the
hub's parquet conversion ``refs/convert/parquet``: ``<config>/<split>/0000.parquet``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import ConfigError, DataError, StagingError
from ..study.hub import MissingFiles, Snapshot, offline_switch, resolve_snapshot
from ..study.tasks import GLUE_FORMATS, GLUE_REPO, SPLITS, STAGED_MARKER, glue_dir_files, task_info
from ..study.user_data import STANDARD, LabelledSplits, Source, apply_caps, labelled_splits, standard_rows, table_task
from ..study.user_files import COMPRESSIONS, TABLE_FORMATS, read_table_file


def read_glue_tsv(path: str | Path, glue_task: str) -> pd.DataFrame:
    """Parse one GLUE TSV file; malformed input raises DataError naming the file and line."""
    fmt = GLUE_FORMATS[glue_task]
    path = Path(path)
    with open(path, encoding="utf-8-sig", newline="") as handle:  # utf-8-sig: MRPC has a BOM
        lines = handle.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or (fmt.header and len(lines) == 1):
        raise DataError(f"{path}: file is empty (no examples). Re-extract the GLUE {fmt.folder} data.")
    columns: dict[str | int, int]
    first = 0
    if fmt.header:
        header = lines[0].rstrip("\r").split("\t")
        wanted = [c for c in (fmt.text_a, fmt.text_b, fmt.label) if c is not None]
        missing = [c for c in wanted if c not in header]
        if missing:
            raise DataError(
                f"{path}, line 1: header lacks column(s) {missing}; found {header}. Expected the "
                f"GLUE {fmt.folder} layout."
            )
        columns = {name: header.index(name) for name in wanted}  # type: ignore[misc]
        first = 1
    else:
        columns = {c: c for c in (fmt.text_a, fmt.label)}  # type: ignore[misc]
    width = max(columns.values()) + 1
    rows: list[tuple[str, str | None, int]] = []
    for number, line in enumerate(lines[first:], start=first + 1):
        fields = line.rstrip("\r").split("\t")
        if len(fields) < width:
            raise DataError(
                f"{path}, line {number}: expected at least {width} tab-separated fields, found "
                f"{len(fields)}: {line[:80]!r}"
            )
        raw_label = fields[columns[fmt.label]].strip()
        if raw_label not in fmt.labels:
            raise DataError(
                f"{path}, line {number}: label {raw_label!r} is not one of {sorted(fmt.labels)}."
            )
        text_b = fields[columns[fmt.text_b]] if fmt.text_b is not None else None
        rows.append((fields[columns[fmt.text_a]].strip(), text_b.strip() if text_b else text_b, fmt.labels[raw_label]))
    return pd.DataFrame(rows, columns=["text_a", "text_b", "label"]).astype({"label": "int64"})


def glue_split_files(names: Sequence[str], glue_task: str, split: str) -> list[str]:
    """The parquet files of one split in the ``nyu-mll/glue`` layout, in shard order."""
    hf_split = "train" if split == "train" else GLUE_FORMATS[glue_task].hf_dev_split
    return sorted(n for n in names if fnmatch(n, f"{glue_task}/{hf_split}-*.parquet"))


def glue_snapshot(glue_task: str, splits: Sequence[str] = SPLITS, what: str | None = None,
                  revision: str | None = None) -> Snapshot:
    """The ``nyu-mll/glue`` snapshot holding ``splits`` of a task at ``revision`` (None: main): from the
    hub, or from the local cache when ``HF_DATASETS_OFFLINE``/``HF_HUB_OFFLINE`` is set or the hub is
    unreachable."""
    what = what or f"GLUE task '{glue_task}'"

    def choose(names: Sequence[str]) -> list[str]:
        chosen = {split: glue_split_files(names, glue_task, split) for split in splits}
        missing = [
            f"split {split} ({glue_task}/{'train' if split == 'train' else GLUE_FORMATS[glue_task].hf_dev_split}"
            f"-*.parquet)" for split, files in chosen.items() if not files
        ]
        if missing:
            present = sorted({n.split("/")[1].split("-")[0] for n in names if n.startswith(f"{glue_task}/")})
            raise MissingFiles([f"{', '.join(missing)}; splits present: {', '.join(present) or 'none'}"])
        return [f for files in chosen.values() for f in files]

    pinned = f" --revision {revision}" if revision else ""
    fill_hint = (
        f"To fill the cache on a machine with internet (HF_HOME or HF_HUB_CACHE set as here): hf download "
        f"{GLUE_REPO} --repo-type dataset{pinned} --include '{glue_task}/*', or this workflow's download stage "
        f"(snakemake --until download_model download_task). Or point the task at a GLUE folder with "
        f"'source: glue_dir'."
    )
    return resolve_snapshot(
        GLUE_REPO, repo_type="dataset", choose=choose, what=what, fill_hint=fill_hint, revision=revision,
        offline=offline_switch(datasets=True), missing_error=DataError,
    )


def load_glue_hub(glue_task: str, split: str, snapshot: Snapshot | None = None, revision: str | None = None) -> pd.DataFrame:
    """Load a GLUE split of ``nyu-mll/glue`` from the hub or the local cache (see :func:`glue_snapshot`).

    Read from the snapshot's parquet files, the same way on both routes: ``datasets`` (5.2) offline
    reads only its own prepared-data cache, never the hub cache of the repository.
    """
    snapshot = snapshot or glue_snapshot(glue_task, (split,), revision=revision)
    files = [snapshot.folder / f for f in glue_split_files(snapshot.files, glue_task, split)]
    if not files:
        raise DataError(f"GLUE task '{glue_task}': snapshot {snapshot.folder} has no files for split {split}.")
    table = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    column_a, column_b = GLUE_FORMATS[glue_task].hf_columns
    wanted = [c for c in (column_a, column_b, "label") if c]
    missing = [c for c in wanted if c not in table.columns]
    n_classes = len(set(GLUE_FORMATS[glue_task].labels.values()))
    bad_labels = sorted(set(table["label"].tolist()) - set(range(n_classes))) if "label" in table else []
    if missing or bad_labels:
        raise DataError(
            f"GLUE task '{glue_task}', split {split}: {', '.join(map(str, files))} "
            + (f"lacks column(s) {missing} (found {list(table.columns)})" if missing else
               f"has labels {bad_labels[:5]} outside 0..{n_classes - 1}")
            + f" (commit {snapshot.commit}, route '{snapshot.staged_from}'). Expected the {GLUE_REPO} layout."
        )
    frame = pd.DataFrame(
        {
            "text_a": table[column_a],
            "text_b": table[column_b] if column_b else [None] * len(table),
            "label": table["label"],
        }
    )
    return frame.astype({"label": "int64"})


def staged_task_file(name: str, dest: str | Path, split: str) -> Path:
    path = Path(dest) / f"{split}.parquet"
    if not path.is_file() or not (Path(dest) / STAGED_MARKER).is_file():
        raise StagingError(
            f"task '{name}': no staged data at {path}. Run the download stage first "
            f"(snakemake --cores 1 {Path(dest) / STAGED_MARKER}), on a machine with internet or with a "
            f"pre-filled Hugging Face cache and HF_DATASETS_OFFLINE=1."
        )
    return path


# ---------------------------------------------------------------------------------------------
# any Hugging Face dataset (source: hf_dataset)

README = "README.md"


def _data_file(name: str) -> bool:
    suffixes = [x.lower() for x in Path(name).suffixes]
    if suffixes and suffixes[-1] in COMPRESSIONS:
        suffixes = suffixes[:-1]
    return bool(suffixes) and suffixes[-1] in TABLE_FORMATS and not Path(name).name.startswith(".")


def _card_configs(readme: str | None) -> list[dict[str, Any]]:
    """The ``configs`` of a data set card's YAML header (empty when it has none)."""
    import yaml

    if not readme or not readme.startswith("---"):
        return []
    header = readme.split("\n---", 1)[0].removeprefix("---")
    try:
        configs = (yaml.safe_load(header) or {}).get("configs") or []
    except yaml.YAMLError:
        return []
    return [c for c in configs if isinstance(c, dict)]


def _patterns(data_files: Any, split: str) -> list[str] | None:
    """The path patterns of ``split`` in a card config's ``data_files`` (None: the split is not listed)."""
    if isinstance(data_files, str):
        return [data_files] if split == "train" else None
    if isinstance(data_files, Mapping):
        value = data_files.get(split)
        return None if value is None else ([value] if isinstance(value, str) else list(value))
    if isinstance(data_files, list):
        if all(isinstance(item, str) for item in data_files):
            return list(data_files) if split == "train" else None
        for item in data_files:
            if isinstance(item, Mapping) and item.get("split") == split:
                path = item.get("path")
                return [path] if isinstance(path, str) else list(path or [])
    return None


def _card_splits(data_files: Any) -> list[str]:
    if isinstance(data_files, Mapping):
        return list(data_files)
    if isinstance(data_files, list):
        return [item["split"] for item in data_files if isinstance(item, Mapping) and "split" in item] or ["train"]
    return ["train"]


def _convention_match(relative: str, split: str) -> bool:
    parts = relative.split("/")
    if any(part in (split, f"partial-{split}") for part in parts[:-1]):
        return True
    stem = parts[-1]
    if not stem.startswith(split):
        return False
    rest = stem[len(split):]
    return rest == "" or rest[0] in "-._ 0123456789"


def hf_split_files(names: Sequence[str], split: str, config_name: str | None, readme: str | None) -> list[str]:
    """The data files of ``split`` among a data set repository's ``names`` (see the module docstring);
    :class:`MissingFiles` says what is there instead."""
    configs = _card_configs(readme)
    data = sorted(n for n in names if _data_file(n))
    if configs:
        if config_name is not None:
            chosen = [c for c in configs if c.get("config_name") == config_name]
        else:
            chosen = ([c for c in configs if c.get("default")] or (configs if len(configs) == 1 else [])
                      or [c for c in configs if c.get("config_name") == "default"])
        if not chosen:
            names_ = [str(c.get("config_name")) for c in configs]
            raise MissingFiles([f"the configuration {config_name!r} (the card's configs: {', '.join(names_)}; set "
                                "config_name to one of them)" if config_name else
                                f"a default configuration (the card's configs: {', '.join(names_)}; set config_name)"])
        patterns = _patterns(chosen[0].get("data_files"), split)
        if patterns is None:
            raise MissingFiles([f"split {split!r} in configuration {chosen[0].get('config_name')!r} (its splits: "
                                f"{', '.join(_card_splits(chosen[0].get('data_files')))})"])
        files = sorted(n for n in data if any(fnmatch(n, pattern) or fnmatch(n, pattern.rstrip('/') + '/*')
                                              for pattern in patterns))
        if not files:
            raise MissingFiles([f"data files for split {split!r} (patterns {patterns})"])
        return files
    prefix = f"{config_name}/" if config_name else ""
    files = [n for n in data if n.startswith(prefix) and _convention_match(n[len(prefix):], split)]
    if not config_name:
        groups = {n.split("/")[0] for n in files if n.count("/") >= 2 or
                  (n.count("/") == 1 and n.split("/")[0] not in ("data", split))}
        if len(groups) > 1:
            raise MissingFiles([f"one configuration for split {split!r}: files of several ({', '.join(sorted(groups))}) "
                                "match; set config_name to one of them"])
    if not files:
        present = sorted({part for n in data for part in n.removeprefix(prefix).replace(".", "-").split("/")[-1:]
                          for part in [part.split("-")[0]]})
        raise MissingFiles([f"data files for split {split!r}{' under ' + prefix if prefix else ''} (data files "
                            f"there start with: {', '.join(present[:10]) or 'none'})"])
    return sorted(files)


def hf_splits(spec: Mapping[str, Any]) -> dict[str, str]:
    """The workflow's split -> the data set's split it is read from (no dev entry: held out of train)."""
    out = {"train": spec.get("train") or "train"}
    if spec.get("validation_fraction") is None:
        out["dev"] = spec.get("validation") or "validation"
    return out


def hf_dataset_snapshot(name: str, spec: Mapping[str, Any]) -> tuple[Snapshot, dict[str, list[str]]]:
    """The snapshot of a ``hf_dataset`` task's repository at its revision, and the data files of each of its
    splits: from the hub, or from the local cache when ``HF_DATASETS_OFFLINE``/``HF_HUB_OFFLINE`` is set or
    the hub is unreachable. The card is read first (its ``configs`` say which files hold a split), then the
    data files are fetched at the commit it came from."""
    dataset, revision, config_name = spec["dataset"], spec.get("revision"), spec.get("config_name")
    what = f"task '{name}'"
    splits = hf_splits(spec)
    pinned = f" --revision {revision}" if revision else ""
    fill_hint = (
        f"To fill the cache on a machine with internet (HF_HOME or HF_HUB_CACHE set as here): hf download {dataset} "
        f"--repo-type dataset{pinned}, or this workflow's download stage (snakemake --until download_task). Or save "
        f"the data as files and use 'source: table'.")
    offline = offline_switch(datasets=True)

    def choose_all(names: Sequence[str], readme: str | None) -> dict[str, list[str]]:
        chosen, missing = {}, []
        for split, hf_split in splits.items():
            try:
                chosen[split] = hf_split_files(names, hf_split, config_name, readme)
            except MissingFiles as lacking:
                missing.extend(lacking.missing)
        if missing:
            raise MissingFiles(missing)
        return chosen

    def choose_card(names: Sequence[str]) -> list[str]:
        if README in names:
            return [README]
        return sorted({f for files in choose_all(names, None).values() for f in files})

    card = resolve_snapshot(dataset, repo_type="dataset", choose=choose_card, what=what, fill_hint=fill_hint,
                            revision=revision, offline=offline, missing_error=DataError)
    readme = (card.folder / README).read_text(errors="replace") if README in card.files else None
    if readme is None:
        names = card.files
        return card, choose_all(names, None)
    chosen: dict[str, list[str]] = {}

    def choose_data(names: Sequence[str]) -> list[str]:
        chosen.update(choose_all(names, readme))
        return sorted({f for files in chosen.values() for f in files} | {README})

    snapshot = resolve_snapshot(dataset, repo_type="dataset", choose=choose_data, what=what, fill_hint=fill_hint,
                                revision=card.commit, offline=offline or card.route_reason,
                                missing_error=DataError)
    # the commit the requested revision resolved to (the second call asked for that commit itself)
    return replace(snapshot, requested_revision=revision, route_reason=card.route_reason,
                   staged_from=card.staged_from), chosen


def read_hf_split(name: str, spec: Mapping[str, Any], snapshot: Snapshot, hf_split: str,
                  files: Sequence[str]) -> pd.DataFrame:
    """The standard frame (text_a, text_b, label as found, id) of one split of a ``hf_dataset`` task."""
    what = f"task '{name}'"
    where = f"split {hf_split!r} of {snapshot.repo_id} at commit {snapshot.commit} ({', '.join(files)})"
    tables = []
    for file in files:
        suffixes = [x.lower() for x in Path(file).suffixes]
        fmt = TABLE_FORMATS[suffixes[-2] if suffixes[-1] in COMPRESSIONS else suffixes[-1]]
        tables.append(read_table_file(snapshot.folder / file, fmt, what, f"split {hf_split!r} of {snapshot.repo_id}"))
    raw = pd.concat(tables, ignore_index=True) if len(tables) > 1 else tables[0]
    fmt = "parquet" if all(f.endswith(".parquet") for f in files) else "jsonl"
    return standard_rows(raw, spec["columns"], Source(name, f"tasks.{name}", where, fmt, hf_split))


def hf_labelled_splits(name: str, spec: Mapping[str, Any], frames: Mapping[str, pd.DataFrame],
                       where: str) -> LabelledSplits:
    """Both splits of a ``hf_dataset`` task from its splits' standard frames (``dev`` absent: held out)."""
    splits = hf_splits(spec)
    sources = {split: Source(name, f"tasks.{name}", f"split {hf!r} of {spec['dataset']} ({where})", "parquet", hf)
               for split, hf in splits.items()}
    train = frames["train"].copy()
    dev = frames["dev"].copy() if "dev" in splits else None
    return labelled_splits(name, spec, train, dev, sources)


def staged_hf_frames(name: str, spec: Mapping[str, Any], staged: str | Path) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """The staged standard frames (labels as found) of a ``hf_dataset`` task, and its STAGED.json record."""
    from ..jobs.io import read_json

    frames = {split: pd.read_parquet(staged_task_file(name, staged, split))[STANDARD] for split in SPLITS}
    return frames, read_json(Path(staged) / STAGED_MARKER)


# ---------------------------------------------------------------------------------------------
# a configured task


@dataclass
class PreparedTask:
    """Both splits of a configured task as the workflow uses them (caps applied): the standard frames, the
    examples' ids, the classes, and what provenance records of your own data (``record``)."""

    name: str
    frames: dict[str, pd.DataFrame]  # text_a, text_b, label (class ids)
    ids: dict[str, list[str]]
    n_classes: int
    is_pair: bool
    classes: list[Any] | None = None  # class id k is the label classes[k] (table and hf_dataset tasks)
    record: dict[str, Any] = field(default_factory=dict)


def _prepared(name: str, splits: LabelledSplits) -> PreparedTask:
    frames = {split: frame[["text_a", "text_b", "label"]].reset_index(drop=True)
              for split, frame in splits.frames.items()}
    for frame in frames.values():
        frame["label"] = frame["label"].astype("int64")
    return PreparedTask(name, frames, {split: splits.ids(split) for split in SPLITS}, len(splits.classes),
                        splits.is_pair, splits.classes, splits.record)


def load_task(name: str, spec: Mapping[str, Any], staged: str | Path | None = None) -> PreparedTask:
    """Both splits of a configured task, with ids and classes (``n_train`` and the eval split's cap applied).

    ``staged``: folder where the download stage put a ``glue`` or ``hf_dataset`` task (read instead of the hub).
    """
    source = spec["source"]
    if source == "table":
        return _prepared(name, apply_caps(name, spec, table_task(name, spec)))
    if source == "hf_dataset":
        if staged is not None:
            frames, record = staged_hf_frames(name, spec, staged)
            where = f"staged in {staged}, commit {record.get('commit')}"
        else:
            snapshot, files = hf_dataset_snapshot(name, spec)
            frames = {split: read_hf_split(name, spec, snapshot, hf, files[split])
                      for split, hf in hf_splits(spec).items()}
            record, where = snapshot.record(), f"commit {snapshot.commit}"
        splits = hf_labelled_splits(name, spec, frames, where)
        splits.record["dataset"] = {key: record.get(key) for key in
                                    ("repo_id", "config_name", "requested_revision", "commit", "staged_from")}
        return _prepared(name, apply_caps(name, spec, splits))
    frames = {split: load_task_split(name, spec, split, staged) for split in SPLITS}
    info = task_info(name, spec)
    return PreparedTask(name, frames, {split: [f"{split}:{k}" for k in range(len(frame))]
                                       for split, frame in frames.items()}, info.n_classes, info.is_pair)


def load_task_split(name: str, spec: Mapping[str, Any], split: str, staged: str | Path | None = None) -> pd.DataFrame:
    """The standardised frame of one split of a configured task (``n_train``/``n_dev`` applied).

    ``staged``: folder where the download stage put a ``glue`` or ``hf_dataset`` task (read instead of the hub).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    source = spec["source"]
    if source in ("table", "hf_dataset"):
        return load_task(name, spec, staged).frames[split]
    if source == "synthetic":
        from .synthetic import SYNTHETIC_TASKS  # deferred: the vocabulary is only needed for synthetic tasks

        generate: Callable[..., tuple[pd.DataFrame, pd.DataFrame]] = SYNTHETIC_TASKS[spec["generator"]]
        train, dev = generate(
            seed=spec["seed"], n_train=spec["n_train"], n_dev=spec["n_dev"], label_noise=spec["label_noise"]
        )
        frame = train if split == "train" else dev
    elif source == "glue_dir":
        frame = read_glue_tsv(glue_dir_files(spec["path"], spec["glue_task"])[split], spec["glue_task"])
    elif source == "glue" and staged is not None:
        frame = pd.read_parquet(staged_task_file(name, staged, split))
    elif source == "glue":
        frame = load_glue_hub(spec["glue_task"], split, revision=spec.get("revision"))
    else:  # the schema rejects other sources before this point
        raise ConfigError(f"task '{name}': unknown source {source!r}")
    limit = spec.get("n_train") if split == "train" else spec.get("n_dev")
    if limit is not None:
        frame = frame.iloc[:limit]
    frame = frame.reset_index(drop=True)
    if frame.empty:
        raise DataError(f"task '{name}', split {split}: no examples.")
    if frame["label"].nunique() < 2 and split == "train":
        raise DataError(f"task '{name}': the fit split has a single label; probes need >= 2 classes.")
    return frame
