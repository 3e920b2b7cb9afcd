"""Compare two finished runs of the workflow file by file: are their results bit-identical?

    python -m benchmarks compare results/demo /elsewhere/results/demo

Every file under the two folders is compared, except what records *how* a run went rather than
what it computed: ``logs/`` (job logs and their environment records), ``benchmarks/`` (benchmark
files and cost records), ``provenance.json`` (versions, revisions, timings), a copy's ``DONE`` marker
and the figures' PDF metadata (a creation date).
CSV, JSON, Parquet, NumPy and all other files must match byte for byte; a ``.npz`` whose bytes differ
is also compared array by array (its zip headers may carry a time stamp), and a PDF with its
``/CreationDate`` and ``/ModDate`` removed.

It prints one line per file kind (how many identical, how many differ), then the differing files,
and exits 1 when any file differs or is missing on one side.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np

EXCLUDED_DIRS = ("logs", "benchmarks")
EXCLUDED_FILES = ("provenance.json", "DONE")  # DONE: the completion marker a copied run may carry
PDF_DATES = re.compile(rb"/(CreationDate|ModDate) \(D:[^)]*\)")


def result_files(root: Path) -> Iterator[Path]:
    """The files of a run that hold results, relative to ``root``."""
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and relative.parts[0] not in EXCLUDED_DIRS and relative.name not in EXCLUDED_FILES:
            yield relative


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def same_npz(a: Path, b: Path) -> bool:
    with np.load(a, allow_pickle=False) as x, np.load(b, allow_pickle=False) as y:
        if sorted(x.files) != sorted(y.files):
            return False
        return all(x[k].dtype == y[k].dtype and x[k].shape == y[k].shape and x[k].tobytes() == y[k].tobytes()
                   for k in x.files)


def same_file(a: Path, b: Path) -> bool:
    """Bit-identical content (npz: identical arrays; pdf: identical but for the creation dates)."""
    data_a, data_b = a.read_bytes(), b.read_bytes()
    if data_a == data_b:
        return True
    if a.suffix == ".npz":
        return same_npz(a, b)
    if a.suffix == ".pdf":
        return PDF_DATES.sub(b"", data_a) == PDF_DATES.sub(b"", data_b)
    return False


def compare(before: Path, after: Path) -> tuple[Counter, Counter, list[str]]:
    files_before, files_after = set(result_files(before)), set(result_files(after))
    identical, differ, problems = Counter(), Counter(), []
    for relative in sorted(files_before | files_after):
        kind = relative.suffix.lstrip(".") or "(none)"
        if relative not in files_after or relative not in files_before:
            differ[kind] += 1
            problems.append(f"only in {'before' if relative in files_before else 'after'}: {relative}")
        elif same_file(before / relative, after / relative):
            identical[kind] += 1
        else:
            differ[kind] += 1
            problems.append(f"differs: {relative}")
    return identical, differ, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="one run's results folder, e.g. results/demo")
    parser.add_argument("after", type=Path, help="the other run's results folder")
    args = parser.parse_args(argv)
    for folder in (args.before, args.after):
        if not folder.is_dir():
            parser.error(f"{folder} is not a folder of results; run the workflow first (snakemake --cores 2)")
    identical, differ, problems = compare(args.before, args.after)
    print(f"before: {args.before}\nafter:  {args.after}\n(excluded: {', '.join(d + '/' for d in EXCLUDED_DIRS)}, "
          f"{', '.join(EXCLUDED_FILES)}; PDF creation dates)")
    print(f"{'kind':<10}{'identical':>10}{'differ':>8}")
    for kind in sorted(set(identical) | set(differ)):
        print(f"{kind:<10}{identical[kind]:>10}{differ[kind]:>8}")
    print(f"{'all':<10}{sum(identical.values()):>10}{sum(differ.values()):>8}")
    for line in problems:
        print(line)
    print("bit-identical" if not problems else f"{len(problems)} file(s) differ")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
