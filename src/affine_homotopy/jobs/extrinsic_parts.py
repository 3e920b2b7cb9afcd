"""An extrinsic job split by source (``extrinsic.sources_per_job``).

Each part computes the ordered pairs its encoders are mapped from; the engine solves a source's pairs
on their own (:func:`affine_homotopy.core.extrinsic.extrinsic_distances` with ``pairs``), so a part's
rows are the rows one job computes, bit for bit. The merge puts each part's rows together and writes
the files one job would have written.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def part_pairs(names: Sequence[str], sources: Sequence[str]) -> list[tuple[int, int]]:
    """The ordered pairs ``(i, j)`` whose source ``names[i]`` is one of ``sources``, in the engine's order."""
    unknown = [name for name in sources if name not in names]
    if unknown:
        raise ValueError(f"sources {unknown} are not among the encoders {list(names)}")
    rows = sorted(names.index(name) for name in sources)
    return [(i, j) for i in rows for j in range(len(names)) if j != i]


def merge_matrices(names: Sequence[str], parts: Sequence[tuple[Sequence[str], np.ndarray]]) -> np.ndarray:
    """One (K, K) matrix from the parts' matrices: row ``i`` from the part whose sources hold ``names[i]``.

    ``parts``: (its sources, its (K, K) matrix). Every encoder must be the source of exactly one part."""
    count = len(names)
    out = np.full((count, count), np.nan)
    owner: dict[str, int] = {}
    for slot, (sources, matrix) in enumerate(parts):
        if np.shape(matrix) != (count, count):
            raise ValueError(f"part {slot}: a {np.shape(matrix)} matrix, expected {(count, count)}")
        for name in sources:
            if name in owner:
                raise ValueError(f"encoder {name!r} is the source of parts {owner[name]} and {slot}")
            owner[name] = slot
            row = list(names).index(name)
            out[row] = matrix[row]
    missing = [name for name in names if name not in owner]
    if missing:
        raise ValueError(f"no part maps from {missing}")
    return out


def merge_diagnostics(names: Sequence[str], frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The parts' ``d_psi_diagnostics.csv`` rows as one job writes them: by source in ``names`` order,
    each source's rows in the order its part wrote them."""
    frame = pd.concat(frames, ignore_index=True)
    order = {name: k for k, name in enumerate(names)}
    position = frame["mapped_from"].map(order)
    if position.isna().any():
        raise ValueError(f"diagnostics name sources {sorted(set(frame['mapped_from']) - set(names))} "
                         f"that are not among the encoders")
    return frame.iloc[np.argsort(position.to_numpy(), kind="stable")].reset_index(drop=True)
