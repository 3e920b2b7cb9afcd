"""Provenance of a run: code version, software, hardware, model revisions, data fingerprints, config."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

PACKAGES = ("torch", "transformers", "tokenizers", "huggingface_hub", "numpy", "scipy", "pandas", "matplotlib", "snakemake")


def config_hash(config: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


def git_state(repo: str | Path) -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()

    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None, "note": "not a git checkout"}


def environment() -> dict[str, Any]:
    """The interpreter this process runs in and the versions of the :data:`PACKAGES` installed there.

    Packages this environment does not have are listed under ``not_installed`` (a stage's conda
    environment holds only what it needs), never given a null version.
    """
    versions, missing = {}, []
    for name in (*PACKAGES, "affine-homotopy"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    return {"python": platform.python_version(), "executable": sys.executable, "prefix": sys.prefix,
            "packages": versions, "not_installed": missing}


def software() -> dict[str, Any]:
    """This process's environment, platform and CUDA devices (the provenance job's own)."""
    info: dict[str, Any] = {**environment(), "platform": platform.platform()}
    try:
        import torch

        info["torch_cuda"] = torch.version.cuda
        info["cuda_devices"] = [torch.cuda.get_device_name(k) for k in range(torch.cuda.device_count())]
    except ImportError:  # an environment without torch (the figures' under --use-conda)
        pass
    return info


def environment_record_path(log_path: str | Path) -> Path:
    """Where a job records its environment: beside its log, ``<log stem>.env.json``."""
    return Path(log_path).with_suffix(".env.json")


def record_stage_environment(rule: str, log_path: str | Path) -> None:
    """Called by every workflow job (:func:`affine_homotopy.jobs.runner.run`) before its work starts."""
    from .io import write_json

    write_json(environment_record_path(log_path), {"rule": rule, **environment()})


def stage_environments(log_root: str | Path) -> dict[str, list[dict[str, Any]]]:
    """Per rule, the distinct environments its jobs ran in (from the records under ``log_root``), with job counts.

    Under ``--use-conda`` each rule family runs in its ``workflow/envs/*.yaml`` environment, so the rules
    differ; a plain run shows the launching interpreter for every rule.
    """
    stages: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(Path(log_root).rglob("*.env.json")):
        record = json.loads(path.read_text())
        rule = record.pop("rule")
        for known in stages.setdefault(rule, []):
            if {k: v for k, v in known.items() if k != "jobs"} == record:
                known["jobs"] += 1
                break
        else:
            stages[rule].append({**record, "jobs": 1})
    return dict(sorted(stages.items()))


# What provenance.json keeps of each STAGED.json: where the files came from, and at which commit.
STAGING_KEYS = ("repo_id", "requested_revision", "commit", "staged_from", "route_reason")


def collect(
    config: Mapping[str, Any], repo: str | Path, data_meta: Iterable[str | Path], embedding_meta: Iterable[str | Path],
    staging: str | Path | None = None,
) -> dict[str, Any]:
    """Everything needed to say what produced a run's numbers.

    ``staging``: the run's ``staging.json`` (every STAGED.json by encoder and task name); each staged
    model and data set gets a ``staging`` entry: route (``staged_from``: hub, cache or by hand) and commit.
    """
    datasets: dict[str, dict[str, Any]] = {}
    for path in data_meta:
        meta = json.loads(Path(path).read_text())
        datasets.setdefault(meta["task"], {})[meta["split"]] = {
            "n_examples": meta["n_examples"], "fingerprint_sha256": meta["fingerprint_sha256"],
            "label_counts": meta["label_counts"],
            **{key: meta[key] for key in ("ids_sha256",) if key in meta},
        }
        # your own data (table, hf_dataset): the class mapping, the files with their sha256, the data set's commit
        for key in ("classes", "files", "dataset", "validation_split"):
            if key in meta:
                datasets[meta["task"]][key] = meta[key]
    models: dict[str, Any] = {}
    for path in embedding_meta:
        meta = json.loads(Path(path).read_text())
        models.setdefault(meta["encoder"], {"revision": meta.get("revision"), "source": meta.get("source")})
        if meta.get("file_sha256"):  # an embeddings encoder: its file per task, with its sha256
            models[meta["encoder"]].setdefault("files", {})[meta["task"]] = {
                "path": meta.get("file"), "sha256": meta["file_sha256"], "rows_tied_by": meta.get("rows_tied_by")}
        models[meta["encoder"]].setdefault("devices", set()).add(meta.get("device", "derived"))
    for entry in models.values():
        entry["devices"] = sorted(d for d in entry["devices"] if d)
    staged = json.loads(Path(staging).read_text()) if staging else {}
    for name, record in staged.get("models", {}).items():
        models.setdefault(name, {})["staging"] = _staging_entry(record)
    for name, record in staged.get("tasks", {}).items():
        datasets.setdefault(name, {})["staging"] = _staging_entry(record)
    return {
        "run_name": config["run_name"],
        "code": git_state(repo),
        "software": software(),
        "models": models,
        "datasets": datasets,
        "config_sha256": config_hash(config),
        "config": config,
    }


def _staging_entry(record: Mapping[str, Any]) -> dict[str, Any]:
    entry = {key: record.get(key) for key in STAGING_KEYS}
    # a folder staged by hand may hold only {"model", "commit"}; other stagers name their "source"
    model = record.get("model")
    entry["repo_id"] = entry["repo_id"] or (model if isinstance(model, str) else None)
    entry["staged_from"] = entry["staged_from"] or record.get("source") or "by hand"
    return entry
