"""Staging: put hub models and GLUE data once into ``resources/``, from the hub or a pre-filled cache.

Compute jobs then read only from ``resources/`` with the hub switched off (``HF_HUB_OFFLINE=1``,
``HF_DATASETS_OFFLINE=1``), so they run on compute nodes without network. Three routes fill
``resources/``:

* ``hub`` (online): the revision is resolved to a commit on the hub and the files are downloaded
  through the local Hugging Face cache (:mod:`affine_homotopy.study.hub`);
* ``cache`` (``HF_HUB_OFFLINE=1``, or the hub unreachable): the snapshot of the requested
  revision in the local cache (``HF_HUB_CACHE``, else ``HF_HOME/hub``);
* by hand: a model folder (or ``train.parquet``/``dev.parquet``) with a ``STAGED.json``.

Data sets: a GLUE task's two splits as standard frames; a Hugging Face dataset's (``hf_dataset``) splits as
standard frames with the labels as found and the examples' ids (``dev.parquet`` is empty when the eval
split is held out of the training split by ``validation_fraction``), checked (columns, texts, labels,
classes, ids) when staged, so that bad data stops the run before any compute job.

Each staged folder holds a ``STAGED.json``: the commit, the route (``staged_from``: ``hub`` or
``cache``) and why the cache was used; for data also the examples' fingerprints. It is assembled in
a hidden sibling folder and renamed into place when complete, so a failed or interrupted staging
leaves nothing that a rerun would trust.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from ..errors import AffineHomotopyError, DataError, StagingError
from ..study.hub import MissingFiles, Snapshot, offline_switch, resolve_snapshot
from ..jobs.io import fingerprint_frame, install_folder, read_json, write_parquet
from ..study.lock import check_resolved
from ..study.tasks import STAGED_MARKER, SPLITS
from .task_data import glue_snapshot, hf_dataset_snapshot, hf_labelled_splits, hf_splits, load_glue_hub, read_hf_split

log = logging.getLogger(__name__)

MARKER = STAGED_MARKER  # one name for the file, in tasks (which reads staged data) and here
# What a model folder needs (top-level files only): config, tokenizer, one weights format.
MODEL_FILES = [
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
    "vocab.json", "merges.txt", "*.model", "added_tokens.json",
]
SAFETENSORS_FILES = ["*.safetensors", "*.safetensors.index.json"]
TORCH_FILES = ["pytorch_model*.bin", "pytorch_model.bin.index.json"]
TOKENIZER_VOCABULARIES = ("tokenizer.json", "vocab.txt", "vocab.json", "*.model")


def _manual_hint(name: str, dest: Path) -> str:
    return (
        f"To stage it by hand, copy a Hugging Face model folder (config.json, tokenizer files and "
        f"model.safetensors or pytorch_model.bin) into {dest} and write {dest / MARKER} containing "
        '{"model": "<id>", "commit": "<revision>", "staged_from": "by hand"}; or point the encoder at '
        f"a local folder with 'source: path' in the config (encoder '{name}')."
    )


def _model_fill_hint(name: str, model: str, revision: str | None, dest: Path) -> str:
    pinned = f" --revision {revision}" if revision else ""
    return (
        f"To fill the cache on a machine with internet (HF_HOME or HF_HUB_CACHE set as here): "
        f"hf download {model}{pinned}, or this workflow's download stage (snakemake --until "
        f"download_model download_task). " + _manual_hint(name, dest)
    )


def choose_model_files(names: Sequence[str]) -> list[str]:
    """The files of a model repository to stage: config, tokenizer and one weights format
    (safetensors when there are any). :class:`MissingFiles` names what is lacking."""
    top = [n for n in names if "/" not in n]
    weights = SAFETENSORS_FILES if any(n.endswith(".safetensors") for n in top) else TORCH_FILES
    chosen = sorted(n for n in top if any(fnmatch(n, p) for p in MODEL_FILES + weights))
    missing = []
    if "config.json" not in chosen:
        missing.append("config.json")
    if not any(fnmatch(n, p) for n in chosen for p in ("*.safetensors", "pytorch_model*.bin")):
        missing.append("the weights (model.safetensors or pytorch_model.bin)")
    if not any(fnmatch(n, p) for n in chosen for p in TOKENIZER_VOCABULARIES):
        missing.append("the tokenizer (tokenizer.json, vocab.txt, vocab.json + merges.txt or a SentencePiece *.model)")
    elif "vocab.json" in chosen and "merges.txt" not in chosen and "tokenizer.json" not in chosen:
        missing.append("merges.txt (the BPE tokenizer's vocab.json needs it)")
    if missing:
        raise MissingFiles(missing)
    return chosen


def _link_or_copy(source: Path, target: Path) -> None:
    """A hard link to the cache's blob when on the same file system (no extra disk), else a copy."""
    source = source.resolve()  # cache snapshots hold symbolic links to blobs
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _discard_empty(dest: Path) -> None:
    """Remove the empty folder Snakemake made for a job's outputs when staging failed."""
    if dest.is_dir() and not any(dest.iterdir()):
        dest.rmdir()


def stage_model(name: str, spec: Mapping[str, Any], dest: str | Path, locked_commit: str | None = None,
                lock_file: str | Path | None = None) -> dict[str, Any]:
    """Stage weights and tokenizer of a hub encoder at its resolved commit into ``dest``, from the
    hub or (``HF_HUB_OFFLINE=1``, or the hub unreachable) from the local cache. ``locked_commit``: the
    commit the study's lock (``lock_file``) pins; any other resolved commit is an error, before
    anything is staged."""
    dest = Path(dest)
    model, revision = spec["model"], spec.get("revision")
    try:
        snapshot = resolve_snapshot(
            model, choose=choose_model_files, what=f"encoder '{name}'", revision=revision,
            fill_hint=_model_fill_hint(name, model, revision, dest), offline=offline_switch(),
        )
        check_resolved(f"encoder '{name}'", model, revision, snapshot.commit, locked_commit, lock_file)
        record = {
            "encoder": name, "model": model, **snapshot.record(), "files": list(snapshot.files),
            "weights": [f for f in snapshot.files if f.endswith((".safetensors", ".bin"))],
        }

        def fill(work: Path) -> dict[str, Any]:
            for file in snapshot.files:
                _link_or_copy(snapshot.folder / file, work / file)
            return record

        install_folder(dest, fill, MARKER, f"encoder '{name}'")
    except AffineHomotopyError:
        _discard_empty(dest)
        raise
    log.info("staged %s at commit %s (from the %s) in %s", model, snapshot.commit, snapshot.staged_from, dest)
    return record


def staged_model_dir(name: str, dest: str | Path) -> tuple[Path, str]:
    """The staged folder and commit of a hub encoder; a named error when it was not staged."""
    dest = Path(dest)
    if not (dest / MARKER).is_file() or not (dest / "config.json").is_file():
        raise StagingError(
            f"encoder '{name}': no staged model at {dest} (missing {MARKER} or config.json). Run the "
            f"download stage first (snakemake --cores 1 {dest / MARKER}), on a machine with internet "
            f"or with a pre-filled Hugging Face cache and HF_HUB_OFFLINE=1; or stage it by hand."
        )
    return dest, str(read_json(dest / MARKER).get("commit", "unknown"))


def stage_task(name: str, spec: Mapping[str, Any], dest: str | Path, locked_commit: str | None = None,
               lock_file: str | Path | None = None) -> dict[str, Any]:
    """Stage both splits of a GLUE task (whole splits; caps are applied later) at its ``revision``
    into ``dest``, from the hub or (``HF_DATASETS_OFFLINE=1``/``HF_HUB_OFFLINE=1``, or the hub
    unreachable) the cache. ``locked_commit``: as for :func:`stage_model`. A ``hf_dataset`` task: see
    :func:`stage_hf_dataset`."""
    if spec.get("source") == "hf_dataset":
        return stage_hf_dataset(name, spec, dest, locked_commit, lock_file)
    dest = Path(dest)
    glue_task, revision = spec["glue_task"], spec.get("revision")
    try:
        snapshot: Snapshot = glue_snapshot(glue_task, SPLITS, what=f"task '{name}'", revision=revision)
        check_resolved(f"task '{name}'", snapshot.repo_id, revision, snapshot.commit, locked_commit, lock_file)
        frames = {split: load_glue_hub(glue_task, split, snapshot) for split in SPLITS}
        record: dict[str, Any] = {"task": name, "glue_task": glue_task, **snapshot.record(), "splits": {}}
        for split, frame in frames.items():
            if frame.empty:
                raise DataError(
                    f"task '{name}': split {split} of {snapshot.repo_id} ({glue_task}) at commit "
                    f"{snapshot.commit} has no examples (route '{snapshot.staged_from}'). Place a GLUE "
                    f"folder by hand and use 'source: glue_dir'."
                )
            record["splits"][split] = {"n_examples": len(frame), "fingerprint_sha256": fingerprint_frame(frame)}
        record["files"] = list(snapshot.files)

        def fill(work: Path) -> dict[str, Any]:
            for split, frame in frames.items():
                write_parquet(work / f"{split}.parquet", frame)
            return record

        install_folder(dest, fill, MARKER, f"task '{name}'")
    except AffineHomotopyError:
        _discard_empty(dest)
        raise
    log.info("staged task %s (%s) at commit %s (from the %s) in %s", name, glue_task, snapshot.commit,
             snapshot.staged_from, dest)
    return record


def stage_hf_dataset(name: str, spec: Mapping[str, Any], dest: str | Path, locked_commit: str | None = None,
                     lock_file: str | Path | None = None) -> dict[str, Any]:
    """Stage the splits of a Hugging Face dataset (``source: hf_dataset``) at its ``revision`` into ``dest``:
    ``train.parquet`` and ``dev.parquet`` (empty when ``validation_fraction`` holds the eval split out of the
    training split) in the standard layout with the labels as found and the examples' ids, from the hub or
    (``HF_DATASETS_OFFLINE=1``/``HF_HUB_OFFLINE=1``, or the hub unreachable) the cache. The data are checked
    here (columns, texts, labels, classes, ids), before any compute job; ``locked_commit``: as for
    :func:`stage_model`."""
    import pandas as pd

    from ..study.user_data import STANDARD

    dest = Path(dest)
    try:
        snapshot, files = hf_dataset_snapshot(name, spec)
        check_resolved(f"task '{name}'", snapshot.repo_id, spec.get("revision"), snapshot.commit, locked_commit,
                       lock_file)
        frames = {split: read_hf_split(name, spec, snapshot, hf, files[split]) for split, hf in hf_splits(spec).items()}
        checked = hf_labelled_splits(name, spec, frames, f"commit {snapshot.commit}")  # the checks, before staging
        frames.setdefault("dev", pd.DataFrame({column: pd.Series([], dtype=object) for column in STANDARD}))
        record: dict[str, Any] = {
            "task": name, "dataset": spec["dataset"], "config_name": spec.get("config_name"), **snapshot.record(),
            "splits": {split: {"hf_split": hf, "files": files[split], "n_examples": len(frames[split])}
                       for split, hf in hf_splits(spec).items()},
            "classes": checked.classes, "files": sorted({f for names in files.values() for f in names}),
        }

        def fill(work: Path) -> dict[str, Any]:
            for split in SPLITS:
                frame = frames[split].copy()
                frame["label"] = frame["label"].astype(str) if frame["label"].map(type).nunique() > 1 else frame["label"]
                write_parquet(work / f"{split}.parquet", frame)
            return record

        install_folder(dest, fill, MARKER, f"task '{name}'")
    except AffineHomotopyError:
        _discard_empty(dest)
        raise
    log.info("staged task %s (%s) at commit %s (from the %s) in %s", name, spec["dataset"], snapshot.commit,
             snapshot.staged_from, dest)
    return record
