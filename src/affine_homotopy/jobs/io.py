"""File I/O with the project's on-disk contracts.

Every writer is atomic: it writes to a temporary file in the target's directory and renames it
into place, so a job killed mid-write never leaves a file that a rerun would trust.

Contracts
---------
* Embeddings: ``<split>.npy`` float32 array of shape ``(n_layers, N, D)`` plus a JSON sidecar
  ``<split>.json`` (``layers`` = hidden-state indices in the order of the first axis,
  ``positions`` = their labels such as ``layer4`` / ``depth0.50`` / ``last``, ``depth``, ``pooling``,
  ``revision``, ``N``, ``D`` ...).
* Pairwise matrices: CSV with the encoder names as index and header, in config order. Cell
  ``(i, j)`` always describes encoder ``i`` (row) mapped onto encoder ``j`` (column).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pandas is a workflow dependency: the core library (atomic writers) runs without it
    import pandas as pd


_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes files private; outputs get the usual mode
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def install_folder(dest: str | os.PathLike[str], fill: Callable[[Path], Mapping[str, Any]], marker: str,
                   what: str) -> Mapping[str, Any]:
    """Build a folder atomically: ``fill`` writes into a hidden sibling of ``dest`` and returns the
    record that is written last, as ``marker``; the sibling is then renamed onto ``dest``.

    ``dest`` therefore holds either a complete folder with its marker or what was there before; a
    failure leaves no partial folder (and removes the empty one Snakemake makes for outputs). A
    file-system error (full disk, no permission) becomes a :class:`~affine_homotopy.errors.StagingError`
    naming ``what`` and ``dest``. Returns the record."""
    from ..errors import StagingError

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    for stale in dest.parent.glob(f".{dest.name}.staging-*"):  # left by a killed run
        shutil.rmtree(stale, ignore_errors=True)
    work = dest.parent / f".{dest.name}.staging-{os.getpid()}"
    old = dest.parent / f".{dest.name}.staging-{os.getpid()}-old"
    try:
        work.mkdir()
        record = fill(work)
        write_json(work / marker, record)
        if dest.exists():  # an earlier staging, or the empty folder Snakemake makes for outputs
            os.replace(dest, old)
        os.replace(work, dest)
    except OSError as error:
        if dest.is_dir() and not any(dest.iterdir()):
            dest.rmdir()
        raise StagingError(f"{what}: could not write the staged files to {dest}: {error}") from error
    except BaseException:
        if dest.is_dir() and not any(dest.iterdir()):
            dest.rmdir()
        raise
    finally:
        for folder in (work, old):
            shutil.rmtree(folder, ignore_errors=True)
    return record


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` and rename it onto ``path`` when the block succeeds."""
    with atomic_path(path) as tmp, open(tmp, mode) as handle:
        yield handle


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    with atomic_open(path) as handle:
        json.dump(data, handle, indent=2, sort_keys=False, default=_json_default)
        handle.write("\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    with open(path) as handle:
        return json.load(handle)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot serialise {type(value).__name__} to JSON")


def write_npy(path: str | os.PathLike[str], array: np.ndarray) -> None:
    with atomic_open(path, "wb") as handle:
        np.save(handle, array)


def write_embeddings(
    npy_path: str | os.PathLike[str], array: np.ndarray, metadata: dict[str, Any], storage_dtype: str = "float32"
) -> None:
    """Write an ``(n_layers, N, D)`` embedding array (float32, or float16 to halve disk) and its sidecar."""
    if array.ndim != 3:
        raise ValueError(f"embeddings must be (n_layers, N, D), got shape {array.shape}")
    if len(metadata.get("layers", [])) != array.shape[0]:
        raise ValueError("metadata 'layers' must list one hidden-state index per array slice")
    meta = dict(metadata)
    meta.update(n_layers=int(array.shape[0]), N=int(array.shape[1]), D=int(array.shape[2]))
    if storage_dtype not in ("float32", "float16"):
        raise ValueError(f"storage_dtype must be float32 or float16, got {storage_dtype!r}")
    meta["dtype"] = storage_dtype
    write_npy(npy_path, array.astype(storage_dtype, copy=False))
    write_json(Path(npy_path).with_suffix(".json"), meta)


def read_embeddings(npy_path: str | os.PathLike[str], layer: int | str | None = None) -> np.ndarray:
    """Read embeddings as float32; with ``layer`` return one (N, D) slice.

    ``layer`` is a hidden-state index (int) or a position label (str, e.g. ``layer6``; see
    :mod:`affine_homotopy.study.layers`), resolved through the array's sidecar.
    """
    from ..study.layers import slot_of

    array = np.load(npy_path, mmap_mode="r")
    if layer is None:
        return np.asarray(array, dtype=np.float32)
    slot = slot_of(read_json(Path(npy_path).with_suffix(".json")), layer)
    return np.asarray(array[slot], dtype=np.float32)


def write_matrix(path: str | os.PathLike[str], matrix: np.ndarray, names: Sequence[str]) -> None:
    """Write a K x K matrix with encoder names as index and columns (row i mapped onto column j)."""
    matrix = np.asarray(matrix, dtype=float)
    if matrix.shape != (len(names), len(names)):
        raise ValueError(f"matrix shape {matrix.shape} does not match {len(names)} names")
    import pandas as pd

    frame = pd.DataFrame(matrix, index=list(names), columns=list(names))
    frame.index.name = "mapped_from"
    write_csv(path, frame, index=True)


def read_matrix(path: str | os.PathLike[str]) -> pd.DataFrame:
    import pandas as pd

    frame = pd.read_csv(path, index_col=0)
    if list(frame.index) != list(frame.columns):
        raise ValueError(f"{path}: index and columns must name the same encoders in the same order")
    return frame


def write_csv(path: str | os.PathLike[str], frame: pd.DataFrame, index: bool = False) -> None:
    with atomic_open(path) as handle:
        frame.to_csv(handle, index=index, float_format="%.10g")


def write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_open(path) as handle:
        handle.write(text)


def write_parquet(path: str | os.PathLike[str], frame: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)


def fingerprint_frame(frame: pd.DataFrame) -> str:
    """SHA-256 over the examples (text_a, text_b, label), independent of file format."""
    digest = hashlib.sha256()
    for row in frame.itertuples(index=False):
        digest.update(json.dumps([row.text_a, row.text_b, int(row.label)]).encode())
        digest.update(b"\n")
    return digest.hexdigest()
