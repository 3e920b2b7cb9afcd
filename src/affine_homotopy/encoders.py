"""Encoders: loading Hugging Face models from the hub, a folder or a Python package, and embedding.

Sentence representation (``pooling``): ``mean`` = average of the chosen hidden state over the
non-padding tokens (special tokens included, as sentence-transformers does); ``cls`` = the first
token's hidden state. Sentence pairs are encoded as pairs by the tokenizer (``[CLS] a [SEP] b
[SEP]`` for BERT), truncated to ``max_length`` tokens. Layers are hidden-state indices: 0 is the
embedding layer's output, ``depth`` the last transformer layer.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .config import check_layers, local_model_dir, module_name
from .errors import NumericalError, StagingError

log = logging.getLogger(__name__)


@dataclass
class LoadedEncoder:
    model: Any
    tokenizer: Any
    depth: int
    revision: str  # what identifies the weights: hub commit, package version or folder fingerprint


def _folder_fingerprint(folder: Path) -> str:
    digest = hashlib.sha256((folder / "config.json").read_bytes())
    for weights in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")):
        digest.update(f"{weights.name}:{weights.stat().st_size}".encode())
    return "sha256:" + digest.hexdigest()[:16]


def load_encoder(
    name: str, spec: Mapping[str, Any], device: torch.device | str = "cpu", staged: str | Path | None = None
) -> LoadedEncoder:
    """Load model and tokenizer; errors name the encoder and say how to fix them.

    ``staged``: the folder where the download stage put a hub encoder (read offline instead).
    """
    from transformers import AutoModel, AutoTokenizer

    source = spec["source"]
    if source == "derived":
        raise ValueError(f"encoder '{name}' is derived: it has no model to load")
    staged_commit = None
    location: str | Path
    kwargs: dict[str, Any]
    if source == "hf" and staged is not None:
        from .staging import staged_model_dir

        location, staged_commit = staged_model_dir(name, staged)
        kwargs = {"local_files_only": True}
    elif source == "hf":
        location = spec["model"]
        kwargs = {"revision": spec.get("revision")}
    else:
        location = local_model_dir(name, spec)  # type: ignore[assignment]
        kwargs = {"local_files_only": True}
    try:
        tokenizer = AutoTokenizer.from_pretrained(location, **kwargs)
        model = AutoModel.from_pretrained(location, **kwargs)
    except (OSError, ValueError) as error:
        if source == "hf" and staged_commit is None:
            raise StagingError(
                f"encoder '{name}': could not load Hugging Face model {spec['model']!r} "
                f"(revision {spec.get('revision') or 'main'}): {error}. The hub may be unreachable "
                f"from this machine. Pre-download it where there is internet (huggingface-cli "
                f"download {spec['model']}) and run with HF_HUB_OFFLINE=1, or copy the model folder "
                f"here and use 'source: path' with 'path: <folder>'."
            ) from error
        raise StagingError(f"encoder '{name}': could not load the model at {location}: {error}") from error
    model.eval().to(device)
    depth = int(model.config.num_hidden_layers)
    if staged_commit is not None:
        revision = staged_commit
    elif source == "hf":
        revision = getattr(model.config, "_commit_hash", None) or spec.get("revision") or "unknown"
    elif source == "package":
        revision = f"{spec['package']}=={importlib.metadata.version(spec['package'])}"
        if module_name(spec) != spec["package"].replace("-", "_"):
            revision += f" (module {module_name(spec)})"
    else:
        revision = _folder_fingerprint(Path(location))
    return LoadedEncoder(model, tokenizer, depth, str(revision))


def embed_texts(
    encoder: LoadedEncoder,
    texts_a: Sequence[str],
    texts_b: Sequence[str] | None,
    layers: Sequence[int],
    pooling: str = "mean",
    max_length: int = 128,
    batch_size: int = 64,
    device: torch.device | str = "cpu",
    name: str = "encoder",
) -> np.ndarray:
    """Representations of every example at every requested layer from ONE forward pass per batch.

    Batches are formed from examples sorted by token count, so padding is minimal.
    Returns a float32 array of shape ``(len(layers), N, D)`` in the input order.
    """
    check_layers(name, encoder.depth, list(layers))
    if pooling not in ("mean", "cls"):
        raise ValueError(f"pooling must be 'mean' or 'cls', got {pooling!r}")
    texts_a = list(texts_a)
    pairs = texts_b is not None and any(t is not None for t in texts_b)
    encoded = encoder.tokenizer(
        texts_a, list(texts_b) if pairs else None, truncation=True, max_length=max_length, padding=False
    )
    lengths = np.array([len(ids) for ids in encoded["input_ids"]])
    order = np.argsort(-lengths, kind="stable")  # longest first: memory peaks at the start
    n = len(texts_a)
    hidden = int(encoder.model.config.hidden_size)
    out = np.empty((len(layers), n, hidden), dtype=np.float32)
    n_batches = (n + batch_size - 1) // batch_size
    started = time.monotonic()
    next_report = 0.0
    with torch.inference_mode():
        for number, start in enumerate(range(0, n, batch_size), start=1):
            index = order[start : start + batch_size]
            features = {key: [encoded[key][k] for k in index] for key in encoded.keys()}
            batch = encoder.tokenizer.pad(features, return_tensors="pt")
            batch = {key: value.to(device) for key, value in batch.items()}
            states = encoder.model(**batch, output_hidden_states=True).hidden_states
            mask = batch["attention_mask"].unsqueeze(-1).to(states[0].dtype)
            for slot, layer in enumerate(layers):
                state = states[layer]
                if pooling == "mean":
                    pooled = (state * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
                else:
                    pooled = state[:, 0]
                out[slot, index] = pooled.float().cpu().numpy()
            fraction = number / n_batches
            if fraction >= next_report or number == n_batches:
                elapsed = time.monotonic() - started
                log.info("embedded %d/%d examples (%.0f%%) in %.1f s", min(start + batch_size, n), n,
                         100 * fraction, elapsed)
                next_report = fraction + 0.1
    return out


def check_finite(array: np.ndarray, layers: Sequence[int], encoder: str, task: str, split: str) -> None:
    """Raise naming encoder, task and layer when a representation holds NaN or Inf."""
    for slot, layer in enumerate(layers):
        bad = ~np.isfinite(array[slot])
        if bad.any():
            rows = np.flatnonzero(bad.any(axis=1))
            raise NumericalError(
                f"encoder '{encoder}', task '{task}', split {split}, layer {layer}: {bad.sum()} "
                f"non-finite values (NaN/Inf) in {len(rows)} example(s), first at row {rows[0]}. "
                "Check the model weights and max_length; no output was written."
            )
