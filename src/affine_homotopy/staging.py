"""Staging: fetch models and datasets once, on a machine with internet, into ``resources/``.

Compute jobs then read only from ``resources/`` with the hub switched off (``HF_HUB_OFFLINE=1``,
``HF_DATASETS_OFFLINE=1``), so they run on compute nodes without network. Each staged folder holds a
``STAGED.json`` with what was fetched: the model's resolved commit, or the dataset's fingerprint.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import DataError, StagingError
from .io import fingerprint_frame, read_json, write_json, write_parquet
from .tasks import load_glue_hub

log = logging.getLogger(__name__)

MODEL_FILES = [
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
    "vocab.json", "merges.txt", "*.model", "added_tokens.json",
]
MARKER = "STAGED.json"


def _manual_hint(name: str, dest: Path) -> str:
    return (
        f"To stage it by hand, copy a Hugging Face model folder (config.json, tokenizer files and "
        f"model.safetensors or pytorch_model.bin) into {dest} and write {dest / MARKER} containing "
        '{"model": "<id>", "commit": "<revision>"}; or point the encoder at a local folder with '
        f"'source: path' in the config (encoder '{name}')."
    )


def stage_model(name: str, spec: Mapping[str, Any], dest: str | Path) -> dict[str, Any]:
    """Download weights and tokenizer of a hub encoder at its resolved commit into ``dest``."""
    from huggingface_hub import HfApi, snapshot_download

    dest = Path(dest)
    model, revision = spec["model"], spec.get("revision")
    try:
        info = HfApi().model_info(model, revision=revision, files_metadata=False)
        files = [s.rfilename for s in (info.siblings or [])]
        weights = ["*.safetensors"] if any(f.endswith(".safetensors") for f in files) else ["pytorch_model.bin"]
        snapshot_download(model, revision=info.sha, local_dir=dest, allow_patterns=MODEL_FILES + weights)
    except Exception as error:  # hub errors come in many types: name them all the same way
        raise StagingError(
            f"encoder '{name}': could not download {model!r} (revision {revision or 'main'}) from the "
            f"Hugging Face hub: {type(error).__name__}: {error}. Tried: huggingface_hub.snapshot_download "
            f"of the weights and tokenizer. " + _manual_hint(name, dest)
        ) from error
    if not (dest / "config.json").is_file():
        raise StagingError(f"encoder '{name}': the download of {model!r} has no config.json. " + _manual_hint(name, dest))
    record = {"model": model, "requested_revision": revision, "commit": info.sha, "weights": weights}
    write_json(dest / MARKER, record)
    log.info("staged %s at commit %s in %s", model, info.sha, dest)
    return record


def staged_model_dir(name: str, dest: str | Path) -> tuple[Path, str]:
    """The staged folder and commit of a hub encoder; a named error when it was not staged."""
    dest = Path(dest)
    if not (dest / MARKER).is_file() or not (dest / "config.json").is_file():
        raise StagingError(
            f"encoder '{name}': no staged model at {dest} (missing {MARKER} or config.json). Run the "
            f"download stage first (snakemake --cores 1 {dest / MARKER}), on a machine with internet."
        )
    return dest, str(read_json(dest / MARKER).get("commit", "unknown"))


def stage_task(name: str, spec: Mapping[str, Any], dest: str | Path) -> dict[str, Any]:
    """Download both splits of a GLUE task (whole splits; caps are applied later) into ``dest``."""
    dest = Path(dest)
    record: dict[str, Any] = {"task": name, "glue_task": spec["glue_task"], "splits": {}}
    for split in ("train", "dev"):
        frame = load_glue_hub(spec["glue_task"], split)
        if frame.empty:
            raise DataError(
                f"task '{name}': split {split} of nyu-mll/glue/{spec['glue_task']} is empty after download; "
                f"place a GLUE folder by hand and use 'source: glue_dir'."
            )
        write_parquet(dest / f"{split}.parquet", frame)
        record["splits"][split] = {"n_examples": len(frame), "fingerprint_sha256": fingerprint_frame(frame)}
    write_json(dest / MARKER, record)
    return record


def staged_task_file(name: str, dest: str | Path, split: str) -> Path:
    path = Path(dest) / f"{split}.parquet"
    if not path.is_file() or not (Path(dest) / MARKER).is_file():
        raise StagingError(
            f"task '{name}': no staged data at {path}. Run the download stage first "
            f"(snakemake --cores 1 {Path(dest) / MARKER}), on a machine with internet."
        )
    return path
