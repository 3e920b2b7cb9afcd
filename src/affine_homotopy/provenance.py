"""Provenance of a run: code version, software, hardware, model revisions, data fingerprints, config."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

PACKAGES = ("torch", "transformers", "tokenizers", "datasets", "numpy", "scipy", "pandas", "matplotlib", "snakemake")


def config_hash(config: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


def git_state(repo: str | Path) -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()

    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None, "note": "not a git checkout"}


def software() -> dict[str, Any]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    info: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(), "packages": versions}
    try:
        import torch

        info["torch_cuda"] = torch.version.cuda
        info["cuda_devices"] = [torch.cuda.get_device_name(k) for k in range(torch.cuda.device_count())]
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return info


def collect(
    config: Mapping[str, Any], repo: str | Path, data_meta: Iterable[str | Path], embedding_meta: Iterable[str | Path]
) -> dict[str, Any]:
    """Everything needed to say what produced a run's numbers."""
    datasets: dict[str, dict[str, Any]] = {}
    for path in data_meta:
        meta = json.loads(Path(path).read_text())
        datasets.setdefault(meta["task"], {})[meta["split"]] = {
            "n_examples": meta["n_examples"], "fingerprint_sha256": meta["fingerprint_sha256"],
            "label_counts": meta["label_counts"],
        }
    models: dict[str, Any] = {}
    for path in embedding_meta:
        meta = json.loads(Path(path).read_text())
        models.setdefault(meta["encoder"], {"revision": meta.get("revision"), "source": meta.get("source")})
        models[meta["encoder"]].setdefault("devices", set()).add(meta.get("device", "derived"))
    for entry in models.values():
        entry["devices"] = sorted(d for d in entry["devices"] if d)
    return {
        "run_name": config["run_name"],
        "code": git_state(repo),
        "software": software(),
        "models": models,
        "datasets": datasets,
        "config_sha256": config_hash(config),
        "config": config,
    }
