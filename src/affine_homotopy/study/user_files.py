"""Your own data files: the table formats (chosen by extension), reading a table, and the files'
fingerprints (sha256 of a file, of a list of example ids) that the lock and the ``embeddings``
encoders check; :mod:`affine_homotopy.study.user_data` turns a table into a task's labelled splits."""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError, DataError

if TYPE_CHECKING:  # pandas is a workflow dependency, imported where a table is read
    import pandas as pd

# extension -> format; the text formats may carry a compression suffix (.csv.gz, .jsonl.zst)
TABLE_FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
                 ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet"}
COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst", ".zip")


# ---------------------------------------------------------------------------------------------
# files


def resolve_path(value: str | os.PathLike[str]) -> Path:
    """A configured file: ``~`` expanded, a relative path taken from the working directory (like ``lock_file``)."""
    return Path(os.path.expandvars(os.path.expanduser(str(value))))


_SHA256: dict[tuple[str, int, int], str] = {}


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 of a file's bytes (hex), computed once per file version (path, size, mtime) in a process."""
    path = Path(path)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _SHA256:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _SHA256[key] = digest.hexdigest()
    return _SHA256[key]


def ids_sha256(ids: Sequence[str]) -> str:
    """The fingerprint of an ordered list of example ids (prepare_task writes it; embeddings files may carry it)."""
    return hashlib.sha256(json.dumps([str(i) for i in ids]).encode()).hexdigest()


def table_format(path: str | os.PathLike[str], key: str, what: str = "") -> str:
    """The format of a table file from its extension; ConfigError naming ``what`` (the task) and ``key`` for an
    unknown one."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in COMPRESSIONS:
        suffixes = suffixes[:-1]
    fmt = TABLE_FORMATS.get(suffixes[-1]) if suffixes else None
    if fmt is None or (fmt == "parquet" and Path(path).suffix.lower() in COMPRESSIONS):
        raise ConfigError(
            f"{what + ': ' if what else ''}config key '{key}' has value {str(path)!r}, whose extension is not a "
            "table format this workflow "
            f"reads. Fix: use one of {', '.join(TABLE_FORMATS)} (CSV, TSV, JSON Lines, Parquet; the text formats "
            f"may end in {', '.join(COMPRESSIONS)}), or rename the file if it is one of them.", key=f"{key}")
    return fmt


def existing_file(value: str, key: str, what: str) -> Path:
    """The configured file ``value`` of config key ``key``; ConfigError when it is not a file."""
    path = resolve_path(value)
    if not path.is_file():
        where = "" if path.is_absolute() else f" (relative paths are read from the working directory {Path.cwd()})"
        state = "is a folder, not a file" if path.is_dir() else "does not exist"
        raise ConfigError(f"{what}: config key '{key}' has value {value!r}, which {state}{where}. Fix: point "
                          f"'{key}' at the file.", key=f"{key}")
    return path


def read_table(value: str, key: str, what: str) -> pd.DataFrame:
    """One configured table file as found (every column of a CSV/TSV as text, empty fields missing)."""
    path = existing_file(value, key, what)
    return read_table_file(path, table_format(path, key, what), what, f"config key '{key}'")


def read_table_file(path: Path, fmt: str, what: str, named: str) -> pd.DataFrame:
    """A table file of format ``fmt`` (:data:`TABLE_FORMATS`); ``named`` says where it comes from in messages."""
    import pandas as pd

    try:
        if fmt in ("csv", "tsv"):
            # as text, so that labels and ids keep their spelling (007, 1e3) and "NA" or "null" stay texts;
            # TSV without quoting, as GLUE's files and most hand-made ones: a sentence may start with '"'
            quoting = csv.QUOTE_MINIMAL if fmt == "csv" else csv.QUOTE_NONE
            return pd.read_csv(path, sep="," if fmt == "csv" else "\t", dtype=str, keep_default_na=False,
                               na_values=[""], encoding="utf-8-sig", quoting=quoting)
        if fmt == "jsonl":
            return pd.read_json(path, lines=True, dtype=False)
        return pd.read_parquet(path)
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as error:
        raise DataError(f"{what}: {path} ({named}) cannot be read as {fmt.upper()}: "
                        f"{type(error).__name__}: {error}. Fix: repair the file, or give it the extension of its "
                        "format.") from None
