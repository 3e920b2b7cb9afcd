"""The ``embeddings`` encoder source: representations computed elsewhere, one file per task.

Formats (by extension): ``.npy`` holding one ``(N, D)`` array or an ``(L, N, D)`` stack; ``.npz`` or
``.safetensors`` with one ``(N, D)`` array per layer; a torch ``.pt``/``.pth`` holding a tensor (as ``.npy``)
or a dict of ``(N, D)`` tensors (as ``.npz``). Any float dtype is read as float32.

Layers: the encoder's ``layers`` maps each configured layer (a position as ``layers`` writes it, or its
label) to the file's array: a key, or a slice index of a stack. Without it: arrays named by the configured
labels (``layer6``, ``depth0.50``, ``last``) are those layers, the slices of a stack are the configured
layers in order, and a single array stands for every configured layer.

Rows: one file holds both splits of its task. An ``ids`` entry (a string or integer array; in a
``.safetensors`` file an integer tensor or a JSON list in the header's metadata; in a ``.pt`` dict a list
or tensor) ties each row to the example of that id: any order, and more rows than the task uses are
allowed. Without ids, the rows are the task's examples in the task's order: the fit split's, then the eval
split's, as prepare_task lists them (``data/<task>/train_ids.json``, ``dev_ids.json``); the row count must
then be exactly the task's. An optional ``ids_sha256`` entry (a string; safetensors: metadata) pins that
order: it must equal the fingerprint of the task's ids (:func:`affine_homotopy.study.user_data.ids_sha256`
of the train ids followed by the dev ids), which prepare_task records as ``task_ids_sha256``.

Every problem (a missing file or task entry, an unknown extension, a layer the file lacks, a row count or
ids that do not match, duplicate ids, NaN or Inf) is a ConfigError or DataError naming the encoder, the
task, the key, the value and the fix: from the config check where the task's examples are known then
(``table`` and ``synthetic`` tasks, and ``glue`` or ``hf_dataset`` tasks already staged), else from the
import job before it writes anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DataError
from .layers import layer_label
from .user_files import existing_file, file_sha256, ids_sha256

EMBEDDING_FORMATS = {".npy": "npy", ".npz": "npz", ".safetensors": "safetensors", ".pt": "torch", ".pth": "torch"}
IDS_KEY = "ids"
IDS_SHA256_KEY = "ids_sha256"
RESERVED = (IDS_KEY, IDS_SHA256_KEY)
Key = str | int | None  # an array's key, a slice index of a stack, or None for a single (N, D) array


@dataclass
class EmbeddingsFile:
    """One embeddings file: its arrays by key with their (N, D) shapes, and its ids (None: tied by order)."""

    path: Path
    fmt: str
    shapes: dict[Key, tuple[int, int]]
    ids: list[str] | None
    ids_fingerprint: str | None
    load: Callable[[Key], np.ndarray]
    stacked: bool = False  # the keys are slice indices of one (L, N, D) array
    _cache: dict[Key, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def keys(self) -> list[Key]:
        return list(self.shapes)

    @property
    def n(self) -> int:
        return next(iter(self.shapes.values()))[0]

    def array(self, key: Key) -> np.ndarray:
        if key not in self._cache:
            self._cache[key] = np.asarray(self.load(key), dtype=np.float32)
        return self._cache[key]

    def sha256(self) -> str:
        return file_sha256(self.path)


def file_key(encoder: str, task: str) -> str:
    return f"encoders.{encoder}.files.{task}"


def embeddings_format(path: str | Path, key: str, what: str = "") -> str:
    fmt = EMBEDDING_FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ConfigError(
            f"{what + ': ' if what else ''}config key '{key}' has value {str(path)!r}, whose extension is not an embeddings format this workflow "
            f"reads. Fix: save the representations as {', '.join(EMBEDDING_FORMATS)} (numpy .npy/.npz, "
            "safetensors, or a torch file), or rename the file if it is one of them.", key=f"{key}")
    return fmt


def _float_array(value: Any, what: str, name: str) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor (bfloat16 has no numpy dtype)
        value = value.detach().cpu()
        value = value.float() if value.is_floating_point() else value
        value = value.numpy()
    array = np.asarray(value)
    if array.dtype.kind not in "fiu":
        raise DataError(f"{what}: array {name!r} has dtype {array.dtype}; expected real numbers (a float array).")
    return array


def _id_texts(values: Any, what: str, count: int) -> list[str]:
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    if isinstance(values, str):
        values = json.loads(values)
    array = np.asarray(values)
    if array.ndim != 1:
        raise DataError(f"{what}: its '{IDS_KEY}' has shape {array.shape}; expected one id per row, a 1-D array.")
    if array.dtype.kind == "O":
        texts = [str(v) for v in array.tolist()]
    elif array.dtype.kind == "S":
        texts = [v.decode() for v in array.tolist()]
    elif array.dtype.kind == "f":
        if not np.all(np.isfinite(array) & (array == np.round(array))):
            raise DataError(f"{what}: its '{IDS_KEY}' are real numbers; ids are strings or integers.")
        texts = [str(int(v)) for v in array.tolist()]
    else:
        texts = [str(v) for v in array.tolist()]
    if len(texts) != count:
        raise DataError(f"{what}: it holds {count} rows but {len(texts)} ids. Fix: one id per row.")
    if len(set(texts)) < len(texts):
        from collections import Counter

        repeated = [i for i, c in Counter(texts).items() if c > 1]
        raise DataError(f"{what}: its '{IDS_KEY}' repeat ({len(repeated)} id(s), e.g. "
                        f"{', '.join(repr(i) for i in repeated[:5])}): each row must be one example. Fix: drop the "
                        "duplicate rows.")
    return texts


@dataclass
class _Layout:
    """What one format's reader finds in a file: shapes and dtypes per array key, whether a single
    array is an (L, N, D) stack, the ids and their fingerprint if stored, and how to load one array."""

    shapes: dict[Key, tuple[int, ...]]
    dtypes: dict[Key, str]
    load: Callable[[Key], Any]
    stacked: bool = False
    ids: Any = None
    fingerprint: Any = None


def _npy_layout(path: Path, where: str) -> _Layout:
    array = np.load(path, mmap_mode="r", allow_pickle=False)
    shapes, dtypes, stacked = _stack_layout(array.shape, str(array.dtype), where)
    load = (lambda k: np.load(path, mmap_mode="r")) if not stacked else (lambda k: np.load(path, mmap_mode="r")[k])
    return _Layout(shapes, dtypes, load, stacked)


def _npz_file_layout(path: Path, where: str) -> _Layout:
    shapes, dtypes = _npz_layout(path)
    with np.load(path, allow_pickle=False) as archive:
        ids = archive[IDS_KEY] if IDS_KEY in shapes else None
        fingerprint = archive[IDS_SHA256_KEY] if IDS_SHA256_KEY in shapes else None
    for name in RESERVED:
        shapes.pop(name, None)
        dtypes.pop(name, None)

    def load(k: Key) -> Any:
        with np.load(path, allow_pickle=False) as archive:
            return archive[k]

    return _Layout(shapes, dtypes, load, ids=ids, fingerprint=fingerprint)


def _safetensors_layout(path: Path, where: str) -> _Layout:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata() or {}
        names = list(handle.keys())
        shapes = {name: tuple(handle.get_slice(name).get_shape()) for name in names}
        dtypes = {name: str(handle.get_slice(name).get_dtype()) for name in names}
        ids = handle.get_tensor(IDS_KEY) if IDS_KEY in names else metadata.get(IDS_KEY)
    shapes.pop(IDS_KEY, None)
    dtypes.pop(IDS_KEY, None)

    def load(k: Key) -> Any:
        with safe_open(str(path), framework="pt") as handle:
            return handle.get_tensor(k)

    return _Layout(shapes, dtypes, load, ids=ids, fingerprint=metadata.get(IDS_SHA256_KEY))


def _torch_layout(path: Path, where: str) -> _Layout:
    import torch

    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError:  # a file in the legacy (non-zip) format cannot be memory-mapped
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(loaded, Mapping):
        contents = {(str(k) if k not in RESERVED else k): v for k, v in loaded.items()}
        ids, fingerprint = contents.pop(IDS_KEY, None), contents.pop(IDS_SHA256_KEY, None)
        bad = [k for k, v in contents.items() if not hasattr(v, "shape")]
        if bad:
            raise DataError(f"{where}: entry {bad[0]!r} is a {type(contents[bad[0]]).__name__}, not a tensor; "
                            f"a dict holds one (N, D) tensor per layer (and optional {', '.join(RESERVED)}).")
        return _Layout({k: tuple(v.shape) for k, v in contents.items()}, {k: str(v.dtype) for k, v in contents.items()},
                       contents.__getitem__, ids=ids, fingerprint=fingerprint)
    if hasattr(loaded, "shape"):
        shapes, dtypes, stacked = _stack_layout(tuple(loaded.shape), str(loaded.dtype), where)
        return _Layout(shapes, dtypes, (lambda k: loaded) if not stacked else loaded.__getitem__, stacked)
    raise DataError(f"{where} holds a {type(loaded).__name__}; expected a tensor, or a dict of (N, D) "
                    "tensors (with optional 'ids').")


_READERS: dict[str, Callable[[Path, str], _Layout]] = {
    "npy": _npy_layout, "npz": _npz_file_layout, "safetensors": _safetensors_layout, "torch": _torch_layout,
}


def _read_layout(path: Path, fmt: str, where: str) -> _Layout:
    try:
        return _READERS[fmt](path, where)
    except (DataError, ConfigError):
        raise
    except Exception as error:  # a damaged or foreign file: numpy, safetensors and torch raise many types
        if fmt == "torch":
            hint = (" A torch file is read with weights_only=True (no code runs): save tensors, and ids as a list of "
                    "Python str or int (not numpy values).")
        else:
            hint = (" Object arrays need pickle, which is off: save ids as a string array (np.array(ids, dtype=str))."
                    if "pickle" in str(error).lower() else "")
        raise DataError(f"{where} cannot be read as {fmt}: {type(error).__name__}: {error}.{hint}") from None


def _check_arrays(layout: _Layout, where: str) -> int:
    """The number of examples, after checking that every array is a real (N, D) matrix of one shape."""
    shapes, dtypes = layout.shapes, layout.dtypes
    if not shapes:
        raise DataError(f"{where} holds no arrays (only {', '.join(RESERVED)}). Fix: save the representations in it.")
    for name, shape in shapes.items():
        if len(shape) != 2:
            raise DataError(f"{where}: array {name!r} has shape {tuple(shape)}; expected (N, D): one row per example. "
                            "(A stack of layers (L, N, D) is read from a .npy file or a .pt tensor.)")
        kind = dtypes[name].replace("torch.", "").lower()
        if not any(word in kind for word in ("float", "int", "f16", "f32", "f64", "bf16", "i64", "i32")) \
                or "complex" in kind:
            raise DataError(f"{where}: array {name!r} has dtype {dtypes[name]}; expected real numbers (floats).")
    counts = {int(shape[0]) for shape in shapes.values()}
    widths = {int(shape[1]) for shape in shapes.values()}
    if len(counts) > 1 or len(widths) > 1:
        raise DataError(f"{where}: its arrays differ in shape ({', '.join(f'{k!r}: {tuple(v)}' for k, v in shapes.items())}); "
                        "every layer must hold the same N examples with the same width D.")
    return counts.pop()


def open_embeddings(value: str, key: str, what: str) -> EmbeddingsFile:
    """Read an embeddings file's layout (arrays, shapes, ids) without loading its arrays; ConfigError or
    DataError for what cannot be used."""
    path = existing_file(value, key, what)
    fmt = embeddings_format(path, key, what)
    where = f"{what}: {value} (config key '{key}')"
    layout = _read_layout(path, fmt, where)
    n = _check_arrays(layout, where)
    id_list = _id_texts(layout.ids, where, n) if layout.ids is not None else None
    fingerprint = layout.fingerprint
    if fingerprint is not None and not isinstance(fingerprint, str):
        fingerprint = str(np.asarray(fingerprint).item())
    load = layout.load
    return EmbeddingsFile(path, fmt, {k: (int(v[0]), int(v[1])) for k, v in layout.shapes.items()}, id_list,
                          fingerprint, lambda k: _float_array(load(k), where, str(k)), layout.stacked)


def _npz_layout(path: Path) -> tuple[dict[Key, tuple[int, ...]], dict[Key, str]]:
    """Shapes and dtypes of an .npz file's arrays, from their headers (nothing is decompressed in full)."""
    import zipfile

    shapes: dict[Key, tuple[int, ...]] = {}
    dtypes: dict[Key, str] = {}
    with zipfile.ZipFile(path) as archive:
        for member in archive.namelist():
            if not member.endswith(".npy"):
                continue
            with archive.open(member) as handle:
                major, _ = np.lib.format.read_magic(handle)
                read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
                shape, _, dtype = read(handle)
            shapes[member[:-4]] = tuple(shape)
            dtypes[member[:-4]] = str(dtype)
    return shapes, dtypes


def _stack_layout(shape: tuple[int, ...], dtype: str, where: str) -> tuple[dict[Key, tuple[int, ...]], dict[Key, str], bool]:
    shape = tuple(int(k) for k in shape)
    if len(shape) == 2:
        return {None: shape}, {None: dtype}, False
    if len(shape) == 3:
        return {k: shape[1:] for k in range(shape[0])}, {k: dtype for k in range(shape[0])}, True
    raise DataError(f"{where} holds an array of shape {shape}; expected (N, D) or a stack of layers (L, N, D).")


def _shown(key: Key) -> str:
    return "the single array" if key is None else (f"slice {key}" if isinstance(key, int) else repr(key))


def layer_map(encoder: str, spec: Mapping[str, Any], file: EmbeddingsFile, labels: Sequence[str],
              task: str) -> dict[str, Key]:
    """Configured layer label -> the file's array (see the module docstring)."""
    key = f"encoders.{encoder}.layers"
    prefix = f"encoder '{encoder}', task '{task}'"
    where = f"{prefix}: {file.path}"
    keys = file.keys
    shown = "[" + ", ".join(_shown(k) for k in keys) + "]"
    mapping = spec.get("layers")
    if mapping:
        out: dict[str, Key] = {}
        for position, target in mapping.items():
            try:
                label = layer_label(position)
            except ValueError:
                label = layer_label(int(position)) if str(position).isdigit() else None
            if label not in labels:
                raise ConfigError(f"{prefix}: config key '{key}' names layer {position!r}, which is not a configured layer "
                                  f"(config key 'layers': labels {list(labels)}). Fix: map the configured layers only.",
                                  key=f"{key}")
            if file.stacked or keys == [None]:
                valid = isinstance(target, int) and not isinstance(target, bool) and (
                    0 <= target < len(keys) if file.stacked else target == 0)
                if not valid:
                    raise ConfigError(
                        f"{prefix}: config key '{key}.{position}' has value {target!r}, which {file.path} lacks: it holds "
                        + (f"a stack of {len(keys)} layers (slice indices 0..{len(keys) - 1})" if file.stacked
                           else "one (N, D) array (slice 0)") + ". Fix: give a slice index.", key=f"{key}.{position}")
                out[label] = target if file.stacked else None
            elif target not in keys:
                raise ConfigError(f"{prefix}: config key '{key}.{position}' has value {target!r}, which {file.path} "
                                  f"lacks; its arrays are {shown}. Fix: name one of them (or fix the file's keys).",
                                  key=f"{key}.{position}")
            else:
                out[label] = target
        missing = [label for label in labels if label not in out]
        if missing:
            raise ConfigError(f"{prefix}: config key '{key}' maps no array of {file.path} to the configured layer(s) {missing} "
                              f"(config key 'layers': {list(labels)}). Fix: add e.g. '{missing[0]}: <key>' to it.",
                              key=f"{key}")
        return {label: out[label] for label in labels}
    if keys == [None] or (len(keys) == 1 and not _is_label(keys[0])):
        return {label: keys[0] for label in labels}  # one representation: every configured layer
    if file.stacked:
        if len(keys) != len(labels):
            raise ConfigError(
                f"{where} holds a stack of {len(keys)} layers, but {len(labels)} layers are configured (config key "
                f"'layers': {list(labels)}), and config key '{key}' does not say which slice is which. Fix: set "
                f"'{key}' (e.g. {{{labels[0]}: 0}}), or save the configured layers only, in order.", key=f"{key}")
        return dict(zip(labels, keys))
    missing = [label for label in labels if label not in keys]
    if missing:
        raise ConfigError(
            f"{where} has no array for the configured layer(s) {missing} (config key 'layers': {list(labels)}); its "
            f"arrays are {shown}. Fix: name the file's arrays by the configured labels, or map them with config key "
            f"'{key}' (e.g. {{{missing[0]}: {_shown(keys[0])}}}).", key="layers")
    return {label: label for label in labels}


def _is_label(key: Key) -> bool:
    if not isinstance(key, str):
        return False
    try:
        return layer_label(key) == key
    except ValueError:
        return False


def task_rows(encoder: str, task: str, file: EmbeddingsFile, task_ids: Mapping[str, Sequence[str]],
              ids_file: str = "data/<task>/<split>_ids.json") -> dict[str, np.ndarray]:
    """The file's row of each example of each split (``task_ids``: split -> ids, ``train`` then ``dev``)."""
    key = file_key(encoder, task)
    where = f"encoder '{encoder}', task '{task}': {file.path} (config key '{key}')"
    wanted = {split: [str(i) for i in ids] for split, ids in task_ids.items()}
    if file.ids is not None:
        position = {value: row for row, value in enumerate(file.ids)}
        rows = {}
        for split, ids in wanted.items():
            missing = [i for i in ids if i not in position]
            if missing:
                shown = ", ".join(repr(i) for i in missing[:5])
                raise DataError(
                    f"{where}: its ids do not match the task's: {len(missing)} of the {len(ids)} {split} example ids "
                    f"are not in the file (e.g. {shown}; the file's ids start {file.ids[:3]}). The task's ids are "
                    f"listed in {ids_file}. Fix: compute the representations of those examples, with their ids.")
            rows[split] = np.array([position[i] for i in ids], dtype=np.int64)
        return rows
    total = sum(len(ids) for ids in wanted.values())
    if file.n != total:
        counts = " + ".join(f"{len(ids)} {split}" for split, ids in wanted.items())
        raise DataError(
            f"{where}: it holds {file.n} rows but the task has {total} examples ({counts}), and the file has no "
            f"'{IDS_KEY}' to tie its rows to them. Fix: add an '{IDS_KEY}' array (the examples' ids, any order; listed "
            f"in {ids_file}), or save exactly the task's examples in its order (train, then validation).")
    if file.ids_fingerprint is not None:
        expected = ids_sha256([i for ids in wanted.values() for i in ids])
        if file.ids_fingerprint != expected:
            raise DataError(
                f"{where}: its '{IDS_SHA256_KEY}' is {file.ids_fingerprint}, but the task's examples (train, then "
                f"validation) have the fingerprint {expected}: the file was made for other examples or another order. "
                "Fix: recompute it for the task's examples, in the order of "
                f"{ids_file}.")
    rows, start = {}, 0
    for split, ids in wanted.items():
        rows[split] = np.arange(start, start + len(ids), dtype=np.int64)
        start += len(ids)
    return rows


def selected_arrays(encoder: str, task: str, file: EmbeddingsFile, layers: Mapping[str, Key],
                    rows: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """split -> (L, n, D) float32 array of the configured layers at the task's rows; DataError for NaN or Inf."""
    out = {split: np.empty((len(layers), len(index), file.shapes[file.keys[0]][1]), dtype=np.float32)
           for split, index in rows.items()}
    for slot, (label, source) in enumerate(layers.items()):
        array = file.array(source)
        for split, index in rows.items():
            values = array[index]
            finite = np.isfinite(values)
            if not finite.all():
                bad = np.flatnonzero(~finite.all(axis=1))
                first = int(index[bad[0]])
                named = f", id {file.ids[first]!r}" if file.ids is not None else ""
                raise DataError(
                    f"encoder '{encoder}', task '{task}': {file.path} (config key '{file_key(encoder, task)}') holds "
                    f"{int((~finite).sum())} NaN/Inf value(s) in {bad.size} {split} example(s) at layer {label} "
                    f"({_shown(source)}; first in file row {first}{named}). Fix: recompute those representations, or "
                    "drop the examples from the task.", key=f"{file_key(encoder, task)}")
            out[split][slot] = values
    return out


def check_embeddings_encoder(encoder: str, spec: Mapping[str, Any], tasks: Sequence[str], labels: Sequence[str],
                             task_ids: Callable[[str], Mapping[str, Sequence[str]] | None]) -> None:
    """The config check of an embeddings encoder: a file for every task, readable, with every configured layer;
    where the task's ids are known (``task_ids(task)`` not None), the rows and their finiteness too."""
    files = spec["files"]
    missing = [task for task in tasks if task not in files]
    if missing:
        raise ConfigError(
            f"config key 'encoders.{encoder}.files' has no file for task(s) {missing} (it names {list(files)}): an "
            f"embeddings encoder needs one file per task of the config. Fix: add '{missing[0]}: <file>' under "
            f"encoders.{encoder}.files, or remove the task.", key=f"encoders.{encoder}.files")
    unknown = [task for task in files if task not in tasks]
    if unknown:
        raise ConfigError(
            f"config key 'encoders.{encoder}.files' names task(s) {unknown} that the config does not have (tasks: "
            f"{list(tasks)}). Fix: remove them, or fix their spelling.", key=f"encoders.{encoder}.files")
    for task in tasks:
        file = open_embeddings(files[task], file_key(encoder, task), f"encoder '{encoder}', task '{task}'")
        layers = layer_map(encoder, spec, file, labels, task)
        ids = task_ids(task)
        if ids is not None:
            selected_arrays(encoder, task, file, layers, task_rows(encoder, task, file, ids))


def embeddings_width(spec: Mapping[str, Any]) -> int | None:
    """The width D of an embeddings encoder (from its first file's layout), or None when it cannot be read."""
    for task, value in spec.get("files", {}).items():
        try:
            file = open_embeddings(value, "", task)
        except (ConfigError, DataError):
            return None
        return int(file.shapes[file.keys[0]][1])
    return None
