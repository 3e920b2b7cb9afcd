"""Loading a configured task's examples: GLUE TSV folders, the hub's ``nyu-mll/glue`` parquet files
(online or from the local cache), staged copies, and the synthetic generators.

Every loader returns the frame described in :mod:`affine_homotopy.study.tasks`: columns ``text_a``,
``text_b`` (None for single-sentence tasks) and ``label`` (int, ``0..n_classes-1``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import ConfigError, DataError, StagingError
from ..study.hub import MissingFiles, Snapshot, offline_switch, resolve_snapshot
from ..study.tasks import GLUE_FORMATS, GLUE_REPO, SPLITS, STAGED_MARKER, glue_dir_files


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


def load_task_split(name: str, spec: Mapping[str, Any], split: str, staged: str | Path | None = None) -> pd.DataFrame:
    """The standardised frame of one split of a configured task (``n_train``/``n_dev`` applied).

    ``staged``: folder where the download stage put a ``glue`` task (read instead of the hub).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    source = spec["source"]
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
