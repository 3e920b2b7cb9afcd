"""``affine_homotopy.embed``: sentence representations of your texts from a Hugging Face encoder, by the
workflow's own embedding code (:func:`affine_homotopy.models.encoders.embed_positions`, what the embed job
runs), so that an array made here is the array the workflow would make for the same texts and settings.

This module imports nothing heavy until :func:`embed` is called: ``import affine_homotopy`` stays light,
and without transformers (the core install) the call raises an ImportError that names the extra to install.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

INSTALL_HINT = "pip install 'affine-homotopy[workflow]'"


def _require_transformers() -> None:
    try:
        import transformers  # noqa: F401
    except ImportError as error:
        raise ImportError(
            "affine_homotopy.embed runs a Hugging Face encoder and needs transformers, which the core install "
            f"does not include. Install the [workflow] extra: {INSTALL_HINT} (or pip install transformers "
            f"tokenizers safetensors). ({error})") from None


def _texts(name: str, values: Any) -> list[str]:
    if isinstance(values, str):
        raise ValueError(f"{name} must be a list of strings (one text per example), got one string; pass [text]")
    try:
        texts = list(values)
    except TypeError:
        raise ValueError(f"{name} must be a list of strings (one text per example), got "
                         f"{type(values).__name__}") from None
    if not texts:
        raise ValueError(f"{name} is empty; pass at least one text")
    bad = [k for k, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise ValueError(f"{name}[{bad[0]}] is a {type(texts[bad[0]]).__name__}, not a string ({len(bad)} such)")
    return texts


def embed(
    model: Any,
    texts: Sequence[str],
    layers: Any = "last",
    pooling: str = "mean",
    batch_size: int = 64,
    device: Any = None,
    *,
    text_pairs: Sequence[str] | None = None,
    max_length: int = 128,
    tokenizer: Any = None,
    revision: str | None = None,
    pad_token: str | None = None,
    trust_remote_code: bool = False,
) -> Any:
    """Sentence representations of ``texts`` at the requested layers, as the workflow's embed job makes them.

    ``model``: a Hugging Face hub id (``"sentence-transformers/all-MiniLM-L6-v2"``; ``revision`` pins it), a
    local model folder, or a loaded transformers model (``tokenizer``: its tokenizer; default: the one saved
    with it, from ``model.name_or_path``). ``layers``: a hidden-state index (0 = the embedding output), ``"last"``,
    a fraction of the model's depth in (0, 1], or a list of these. ``pooling``: ``mean`` (over the non-padding
    tokens), ``cls`` (the first token) or ``last`` (the last non-padding token; decoder-only models).
    ``text_pairs``: second sentences, encoded as pairs (``[CLS] a [SEP] b [SEP]``). ``max_length``: tokens
    kept per example. ``device``: ``None`` (a loaded model: its own device; otherwise CUDA when visible, else
    the CPU), ``"cpu"``, ``"cuda"`` or ``"auto"``. ``pad_token``: ``eos``, ``bos`` or ``unk`` for a tokenizer
    without a padding token (GPT-2, Llama).

    Returns a float32 ``(N, D)`` numpy array for one layer, or for a list of layers a dict from each layer's
    label (``layer6``, ``last``, ``depth0.50``) to its ``(N, D)`` array, in the order given: saved with the
    examples' ids it is a file for an ``embeddings`` encoder, ``np.savez("mine.npz", ids=ids, **reps)``.

    Raises ImportError without transformers (install the ``[workflow]`` extra), ValueError for bad
    arguments (naming the argument), and the workflow's named errors for a model that cannot be loaded.
    """
    _require_transformers()
    from .encoders import embed_positions

    texts = _texts("texts", texts)
    pairs = _texts("text_pairs", text_pairs) if text_pairs is not None else None
    single = not isinstance(layers, (list, tuple))
    positions = [layers] if single else list(layers)
    labels = _check_arguments(texts, pairs, layers, positions, pooling, batch_size)
    encoder, chosen = _encoder_on_device(model, tokenizer, device, revision, pad_token, trust_remote_code)
    array, _ = embed_positions(encoder, texts, pairs, positions, pooling, max_length, batch_size, chosen,
                               str(getattr(model, "name_or_path", model)))
    if single:
        return array[0]
    return {label: array[slot] for slot, label in enumerate(labels)}


def _check_arguments(texts: list[str], pairs: list[str] | None, layers: Any, positions: list[Any], pooling: str,
                     batch_size: int) -> list[str]:
    """The layers' labels, after every argument of :func:`embed` is checked (ValueError naming it)."""
    from ..study.layers import layer_label
    from .encoders import POOLINGS

    if pairs is not None and len(pairs) != len(texts):
        raise ValueError(f"text_pairs has {len(pairs)} texts but texts has {len(texts)}; give one pair per text")
    if pooling not in POOLINGS:
        raise ValueError(f"pooling={pooling!r}; choose one of {', '.join(POOLINGS)}")
    if not (isinstance(batch_size, int) and batch_size >= 1):
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if not positions:
        raise ValueError("layers is empty; give a layer (6, 'last', 0.5) or a list of them")
    try:
        labels = [layer_label(p) for p in positions]
    except ValueError as error:
        raise ValueError(f"layers={layers!r}: {error}; use hidden-state indices (0 = the embedding output), "
                         "'last', or fractions of the depth in (0, 1]") from None
    if len(set(labels)) < len(labels):
        raise ValueError(f"layers={layers!r} names a layer more than once")
    return labels


def _encoder_on_device(model: Any, tokenizer: Any, device: Any, revision: str | None, pad_token: str | None,
                       trust_remote_code: bool) -> tuple[Any, Any]:
    """The encoder of :func:`embed`'s ``model`` (a hub id, a folder or a loaded model) and its device."""
    import torch

    from ..jobs.devices import select_device
    from .encoders import load_encoder, wrap_model

    if isinstance(model, (str, os.PathLike)):
        location = os.path.expanduser(os.fspath(model))
        if os.path.isdir(location):
            spec: dict[str, Any] = {"source": "path", "path": location}
        else:
            spec = {"source": "hf", "model": os.fspath(model), "revision": revision}
        spec.update(pad_token=pad_token, trust_remote_code=trust_remote_code)
        chosen = select_device("auto") if device is None else _device(device, select_device)
        return load_encoder(os.fspath(model), spec, chosen), chosen
    if not (hasattr(model, "config") and callable(model)):
        raise ValueError(f"model must be a hub id, a local model folder or a loaded transformers model, got "
                         f"{type(model).__name__}")
    if tokenizer is None:
        from transformers import AutoTokenizer

        source = getattr(model, "name_or_path", None) or getattr(model.config, "_name_or_path", None)
        if not source:
            raise ValueError("model is a loaded model without a saved name or folder; pass its tokenizer=")
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    encoder = wrap_model(model, tokenizer, type(model).__name__, pad_token)
    if device is None:
        chosen = next(iter(model.parameters())).device if any(True for _ in model.parameters()) \
            else torch.device("cpu")
    else:
        chosen = _device(device, select_device)
        model.to(chosen)
    return encoder, chosen


def _device(device: Any, select_device: Any) -> Any:
    import torch

    if isinstance(device, str) and device in ("auto", "cpu", "cuda"):
        try:
            return select_device(device)
        except RuntimeError as error:
            raise ValueError(f"device={device!r}: {error}; use device='cpu'") from None
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device={device!r} is not a device ({error}); use 'cpu', 'cuda' or 'auto'") from None
