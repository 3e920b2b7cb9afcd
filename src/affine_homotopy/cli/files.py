"""The files of the ``affine-homotopy`` command (:mod:`affine_homotopy.cli`): representation files, probe
files and output paths, each checked before any work; anything wrong is an :class:`InputError` naming
the file, what was wrong and the fix (the command prints it as one line, exit status 2).

Representations: ``.npy``, ``.npz`` or ``.pt``/``.pth`` files holding an ``(N, D)`` array (rows =
examples), or a workflow embedding file ``(n_layers, N, D)`` read with ``--layer``: a hidden-state
index or a position label (``layer6``) looked up in the file's JSON sidecar (``<file>.json``, as the
workflow writes it), or without a sidecar the slice index along the first axis. An ``.npz`` or
``.pt`` file with several arrays needs ``FILE:KEY``.

Probes (``d_psi --probe``): an ``.npz`` with arrays ``weight`` (D_target, C) and ``bias`` (C,) (the
library's ``(weight, bias)``, logits ``target @ weight + bias``); a ``.pt``/``.pth`` with tensors
``weight`` (C, D_target) and ``bias`` (C,), as ``torch.save(linear.state_dict(), FILE)`` writes a
``torch.nn.Linear(D_target, C)``; or a scikit-learn linear classifier saved with ``joblib.dump``
(``.joblib``; needs joblib; unpickling runs code: only load files you trust). A (D_target,) weight is
a binary logistic classifier.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

SUFFIXES = (".npy", ".npz", ".pt", ".pth")
PROBE_SUFFIXES = (".npz", ".pt", ".pth", ".joblib")
# the first bytes of each format: numpy's header, a zip archive (.npz, torch's default format), and
# pickle protocol 2 (torch's legacy format)
NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
PICKLE_MAGIC = b"\x80"


class InputError(Exception):
    """Bad command-line input: reported as one line, exit status 2."""


def split_key(spec: str) -> tuple[Path, str | None]:
    for suffix in (".npz", ".pt", ".pth"):
        marker = suffix + ":"
        if marker in spec:
            path, key = spec.split(marker, 1)
            return Path(path + suffix), key
    return Path(spec), None


def _pick(arrays: dict[str, Any], key: str | None, path: Path) -> Any:
    if key is not None:
        if key not in arrays:
            raise InputError(f"{path}: no array named {key!r}; it holds {sorted(arrays)}")
        return arrays[key]
    if len(arrays) != 1:
        raise InputError(f"{path} holds {len(arrays)} arrays {sorted(arrays)}; choose one with {path}:KEY")
    return next(iter(arrays.values()))


def _check_file(path: Path, suffixes: tuple[str, ...], what: str) -> bytes:
    """The first bytes of ``path`` after the checks every input file gets (exists, a file, readable,
    a known suffix, not empty)."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path} is a directory; pass a {what} file ({', '.join(suffixes)})")
    if path.suffix not in suffixes:
        raise InputError(f"{path}: unknown file type {path.suffix or '(none)'!r}; use {', '.join(suffixes)}")
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
    except OSError as error:
        raise InputError(f"{path}: cannot read it: {error.strerror or error}") from None
    if not head:
        raise InputError(f"{path} is empty (0 bytes); write the {what} again")
    expected = {".npy": (NPY_MAGIC,), ".npz": ZIP_MAGIC, ".pt": (*ZIP_MAGIC, PICKLE_MAGIC),
                ".pth": (*ZIP_MAGIC, PICKLE_MAGIC)}.get(path.suffix)
    if expected and not head.startswith(expected):
        kind = {".npy": "numpy's .npy header", ".npz": "a zip archive (np.savez)"}.get(path.suffix, "torch.save's format")
        raise InputError(f"{path}: not a {path.suffix} file (it does not start with {kind}); write it with "
                         f"{'np.save' if path.suffix == '.npy' else 'np.savez' if path.suffix == '.npz' else 'torch.save'}")
    return head


def _unreadable(path: Path, error: BaseException) -> InputError:
    import pickle

    text = str(error).strip()
    message = text.splitlines()[0] if text else type(error).__name__
    if isinstance(error, pickle.UnpicklingError):  # torch's own advice (weights_only=False) would run its code
        message = ("it holds objects other than tensors (a pickle), or its bytes are damaged; the command loads "
                   "only tensors and dicts of tensors")
    return InputError(f"{path}: cannot read it as {path.suffix}: {message} (a corrupt or truncated file, or one that "
                      "holds more than arrays; write it again)")


def _torch_load(path: Path) -> Any:
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)  # weights_only: no code runs


def read_array(path: Path, key: str | None) -> Any:
    """The array (a numpy array, or a torch tensor as saved) that ``path`` (and ``key``) names."""
    _check_file(path, SUFFIXES, "representation")
    try:
        if path.suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as data:
                return np.asarray(_pick({k: data[k] for k in data.files}, key, path))
        import torch

        loaded = _torch_load(path)
        if isinstance(loaded, dict):
            tensors = {str(k): v for k, v in loaded.items() if isinstance(v, torch.Tensor)}
            if not tensors:
                raise InputError(f"{path} holds a dict without tensors (keys {sorted(map(str, loaded))})")
            loaded = _pick(tensors, key, path)
        if not isinstance(loaded, torch.Tensor):
            raise InputError(f"{path} holds a {type(loaded).__name__}, not a tensor")
        return loaded.detach()  # any dtype: the library upcasts (bfloat16 included) with a note
    except InputError:
        raise
    except Exception as error:  # corrupt, truncated or pickled: numpy, zipfile, torch and struct all raise
        raise _unreadable(path, error) from None


def _sidecar(path: Path) -> dict[str, Any] | None:
    meta_path = path.with_suffix(".json")
    if not meta_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError) as error:
        raise InputError(f"{meta_path}: unreadable sidecar: {error}") from None
    return meta if isinstance(meta, dict) and "layers" in meta else None


def layer_of(spec: str, layer: str | None) -> Any:
    """The (N, D) array (or tensor) that ``spec`` names, one layer of an (n_layers, N, D) file."""
    path, key = split_key(spec)
    array = read_array(path, key)
    if array.ndim == 3:
        if layer is None:
            raise InputError(f"{path} has shape {tuple(array.shape)} (n_layers, N, D); choose a layer with --layer")
        meta = _sidecar(path)
        position: int | str = int(layer) if layer.lstrip("-").isdigit() else layer
        if meta is not None:
            from ..study.layers import slot_of

            try:
                slot = slot_of(meta, position)
            except (KeyError, ValueError, TypeError) as error:
                raise InputError(f"{path}: --layer {layer}: {error.args[0] if error.args else error}") from None
        elif isinstance(position, int) and -array.shape[0] <= position < array.shape[0]:
            slot = position
        else:
            raise InputError(f"{path}: --layer {layer}: without a sidecar ({path.with_suffix('.json').name}) the layer "
                             f"is a slice index 0..{array.shape[0] - 1}")
        return array[slot]
    return array  # an (N, D) file is used as it is, also when --layer names a layer of the others


def load_representation(spec: str, layer: str | None = None) -> Any:
    """The (N, D) array named by ``spec`` (``FILE`` or ``FILE:KEY``), one layer of an (n_layers, N, D) file.

    Checked like the library's arguments (2-D, N >= 2, finite; integer, bfloat16 or float16 upcast
    with a note), with the file named in any message.
    """
    from ..api.inputs import as_representation

    return as_representation(spec, layer_of(spec, layer))


def read_probe(spec: str, target_width: int) -> Any:
    """The classifier in probe file ``spec`` as the library takes it (module docstring)."""
    path = Path(spec)
    _check_file(path, PROBE_SUFFIXES, "probe")
    if path.suffix == ".joblib":
        return _sklearn_probe(path)
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as data:
                parts = {k: np.asarray(data[k]) for k in data.files}
        else:
            loaded = _torch_load(path)
            parts = dict(loaded) if isinstance(loaded, dict) else {}
    except Exception as error:
        raise _unreadable(path, error) from None
    missing = [k for k in ("weight", "bias") if k not in parts]
    if missing:
        raise InputError(f"{path}: a probe file holds 'weight' and 'bias'; it lacks {missing} (it holds "
                         f"{sorted(map(str, parts))})")
    weight, bias = parts["weight"], parts["bias"]
    if path.suffix == ".npz":
        return (weight, bias)
    import torch

    if not (isinstance(weight, torch.Tensor) and isinstance(bias, torch.Tensor)):
        raise InputError(f"{path}: 'weight' and 'bias' must be tensors (torch.save(linear.state_dict(), FILE))")
    weight = weight.detach().to(torch.float64)
    if weight.ndim == 2 and weight.shape[1] != target_width:
        raise InputError(f"{path}: weight has shape {tuple(weight.shape)}; a .pt probe is torch.nn.Linear(D_target, C)'s "
                         f"(C, D_target) = (C, {target_width}) (an .npz probe takes (D_target, C))")
    return (weight.T if weight.ndim == 2 else weight, bias)


def _sklearn_probe(path: Path) -> Any:
    try:
        import joblib
    except ImportError:
        raise InputError(f"{path}: reading a scikit-learn model needs joblib (pip install joblib)") from None
    try:
        model = joblib.load(path)
    except Exception as error:
        raise _unreadable(path, error) from None
    if not (hasattr(model, "coef_") and hasattr(model, "intercept_")):
        raise InputError(f"{path} holds a {type(model).__name__}, not a fitted linear classifier (coef_, intercept_)")
    return model


def check_output(path: str, what: str = "table") -> Path:
    """``path`` checked before any work: not a directory, in a directory that exists and is writable."""
    out = Path(path)
    if out.is_dir():
        raise InputError(f"--out {path} is a directory; give a file name, e.g. {out / 'table.csv'}")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"--out {path}: the directory {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK | os.X_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise InputError(f"--out {path}: cannot write the {what} there (permission denied); choose another path")
    return out
