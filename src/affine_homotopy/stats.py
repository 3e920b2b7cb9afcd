"""Correlations between pairwise distance matrices.

Both matrices share the orientation convention (row = mapped from, column = mapped to). Only ordered
pairs ``i != j`` inside the chosen encoder group enter (K * (K - 1) values). The p-values are the
classical ones (``scipy.stats``), which assume independent pairs; pairs share encoders, so they
overstate significance (a permutation test over encoder labels is the honest alternative).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats


def off_diagonal(frame: pd.DataFrame, group: Sequence[str] | None = None) -> np.ndarray:
    """Values of ordered pairs i != j, row-major, restricted to ``group`` (config order kept)."""
    names = [n for n in frame.index if group is None or n in set(group)]
    values = frame.loc[names, names].to_numpy(dtype=float)
    mask = ~np.eye(len(names), dtype=bool)
    return values[mask]


def correlate(intrinsic: pd.DataFrame, extrinsic: pd.DataFrame, group: Sequence[str] | None = None) -> dict[str, float]:
    if list(intrinsic.index) != list(extrinsic.index):
        raise ValueError("the two matrices must list the same encoders in the same order")
    x, y = off_diagonal(intrinsic, group), off_diagonal(extrinsic, group)
    out: dict[str, float] = {"n_pairs": float(len(x))}
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        out.update(spearman_rho=np.nan, spearman_p=np.nan, pearson_r=np.nan, pearson_p=np.nan)
        return out
    rho, rho_p = stats.spearmanr(x, y)
    r, r_p = stats.pearsonr(x, y)
    out.update(spearman_rho=float(rho), spearman_p=float(rho_p), pearson_r=float(r), pearson_p=float(r_p))
    return out


def to_markdown(frame: pd.DataFrame, digits: int = 3) -> str:
    """A GitHub-flavoured Markdown table (no extra dependency)."""
    def cell(value: object) -> str:
        if isinstance(value, float):
            return "nan" if np.isnan(value) else f"{value:.{digits}g}" if abs(value) < 1e-3 and value != 0 else f"{value:.{digits}f}"
        return str(value)

    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows]) + "\n"
