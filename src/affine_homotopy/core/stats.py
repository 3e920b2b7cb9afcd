"""Correlations between pairwise distance matrices, with tests that respect shared encoders.

Conventions (every function here)
---------------------------------
* Matrices are K x K with the orientation of the whole project: cell ``(i, j)`` = encoder ``i``
  (row, mapped from) mapped onto encoder ``j`` (column, mapped to).
* Only **ordered pairs i != j** enter, ``K (K - 1)`` values, restricted to an encoder ``group``
  (the group's order kept; ``None`` = all encoders).
* ``spearman``: Pearson correlation of the average ranks of the off-diagonal values;
  ``pearson``: Pearson correlation of the values.
* **Exact pairs tie** (:func:`tie_exact_pairs`, in :func:`full_correlation`): an off-diagonal value
  at most :data:`EXACT_RELATIVE` (1e-6) times the matrix's largest is set to 0 first. Such a pair is
  exact up to float32 rounding (a copy, an affine image, a truncation within the span): its value
  is rounding noise (1e-16 for the CCA family, 6e-8 to 2e-7 of the largest for d_aff and d_iso,
  below the certified floor of d_psi), whose order changes with the inputs' last bits and would
  otherwise enter the ranks. On the demo the real values start at 5e-5 of the largest (CKA).
* **Classical p** (``scipy.stats``): assumes the ``K (K - 1)`` pairs are independent. They are not
  (every encoder appears in ``2 (K - 1)`` pairs), so it overstates significance.
* **Permutation p** (Mantel test, :func:`mantel`): the encoder labels of the second matrix are
  permuted **jointly on rows and columns** (``Y[p, :][:, p]``), which keeps each matrix's
  dependence structure and breaks only the link between the two. Two-sided by default:
  ``p = (1 + #{|stat_perm| >= |stat_obs|}) / (1 + n_permutations)`` for random permutations (the
  observed labelling counts once, so ``p > 0``); when ``K!`` is at most ``n_permutations`` every
  permutation is enumerated and ``p = #{|stat_perm| >= |stat_obs|} / K!`` exactly.
* **Bootstrap CI** (:func:`bootstrap_ci`): resample **encoders** with replacement (K draws), keep the
  pairs ``(a, b)`` of draws with different encoders (an encoder is never paired with itself, also not
  with its own duplicate), recompute the statistic, and report the percentile interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import permutations as _all_permutations
from typing import Literal

import numpy as np
import pandas as pd

from ..errors import DataError

Method = Literal["spearman", "pearson"]
Alternative = Literal["two-sided", "greater", "less"]
METHODS: tuple[Method, ...] = ("spearman", "pearson")
_TIE = 1e-12  # relative slack when counting permuted statistics "at least as extreme"


def group_names(names: Sequence[str], group: Sequence[str] | None = None) -> list[str]:
    """``names`` restricted to ``group`` (``None`` = all), in the order of ``names``."""
    wanted = None if group is None else set(group)
    return [n for n in names if wanted is None or n in wanted]


def group_matrix(frame: pd.DataFrame, group: Sequence[str] | None = None) -> np.ndarray:
    """The square block of ``frame`` for ``group`` (the group's order kept), as floats."""
    names = group_names(list(frame.index), group)
    return frame.loc[names, names].to_numpy(dtype=float)


def off_diagonal(frame: pd.DataFrame | np.ndarray, group: Sequence[str] | None = None) -> np.ndarray:
    """Values of ordered pairs i != j, row-major, restricted to ``group`` (the group's order kept)."""
    values = group_matrix(frame, group) if isinstance(frame, pd.DataFrame) else np.asarray(frame, dtype=float)
    return values[~np.eye(len(values), dtype=bool)]


EXACT_RELATIVE = 1e-6


def tie_exact_pairs(matrix: np.ndarray, relative: float = EXACT_RELATIVE) -> np.ndarray:
    """A copy of the K x K ``matrix`` whose off-diagonal values of magnitude at most ``relative``
    times the largest off-diagonal magnitude are 0 (exact pairs: module docstring)."""
    matrix = np.array(matrix, dtype=float)
    mask = ~np.eye(len(matrix), dtype=bool)
    values = matrix[mask]
    finite = np.abs(values[np.isfinite(values)])
    if finite.size:
        values[np.abs(values) <= relative * finite.max()] = 0.0
        matrix[mask] = values
    return matrix


def _standardised_off_diagonal(matrix: np.ndarray, method: Method) -> np.ndarray | None:
    """K x K array whose off-diagonal cells are the z-scored values (or ranks); diagonal 0.

    ``None`` when the off-diagonal values are constant (no correlation defined).
    """
    k = len(matrix)
    mask = ~np.eye(k, dtype=bool)
    values = matrix[mask]
    if method == "spearman":
        from scipy import stats  # here, not at the top: the figures' jobs need this module, not scipy.stats

        values = stats.rankdata(values)
    values = values - values.mean()
    norm = np.sqrt((values**2).sum())
    if not np.isfinite(norm) or norm == 0:
        return None
    out = np.zeros((k, k))
    out[mask] = values / norm
    return out


def correlation(x: np.ndarray, y: np.ndarray, method: Method) -> float:
    """Spearman rho or Pearson r over the off-diagonal cells of two K x K arrays (nan if undefined)."""
    zx, zy = _standardised_off_diagonal(np.asarray(x, float), method), _standardised_off_diagonal(np.asarray(y, float), method)
    if zx is None or zy is None:
        return float("nan")
    return float((zx * zy).sum())


def classical_p(x: np.ndarray, y: np.ndarray, method: Method) -> float:
    """``scipy.stats`` two-sided p over the off-diagonal pairs (assumes independent pairs)."""
    a, b = off_diagonal(x), off_diagonal(y)
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    from scipy import stats

    test = stats.spearmanr if method == "spearman" else stats.pearsonr
    return float(test(a, b)[1])


def _permutation_batches(k: int, n_permutations: int, seed: int, batch: int) -> tuple[bool, int, Iterator[np.ndarray]]:
    """(exact, count, batches of permutations as (B, K) int arrays)."""
    if math.factorial(k) <= n_permutations:
        every = np.array(list(_all_permutations(range(k))), dtype=np.intp)
        return True, len(every), iter(np.array_split(every, max(1, math.ceil(len(every) / batch))))

    def random_batches() -> Iterator[np.ndarray]:
        rng = np.random.default_rng(seed)
        done = 0
        while done < n_permutations:
            size = min(batch, n_permutations - done)
            yield rng.permuted(np.broadcast_to(np.arange(k), (size, k)), axis=1)
            done += size

    return False, n_permutations, random_batches()


@dataclass(frozen=True)
class MantelResult:
    statistic: float  # observed rho or r
    p_value: float  # permutation p (see module docstring)
    n_permutations: int  # permutations evaluated (K! when exact)
    exact: bool  # every permutation enumerated


def mantel(
    x: np.ndarray,
    y: np.ndarray,
    method: Method = "spearman",
    n_permutations: int = 10_000,
    seed: int = 0,
    alternative: Alternative = "two-sided",
    batch: int = 2_000,
) -> MantelResult:
    """Mantel-type permutation test of the correlation between two K x K matrices.

    The labels of ``y`` are permuted jointly on rows and columns; the statistic of each permutation is
    ``sum_{i != j} zx[i, j] * zy[p_i, p_j]`` with ``zx``, ``zy`` the standardised off-diagonal values
    (ranks for Spearman). A joint relabelling only moves off-diagonal values among themselves, so the
    standardisation (and the ranks) need computing once. Batches of ``batch`` permutations are one
    gather and one product; ``K!`` permutations are enumerated when ``K! <= n_permutations``.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.shape != y.shape or x.ndim != 2 or x.shape[0] != x.shape[1]:
        raise DataError(f"need two K x K matrices of the same shape, got {x.shape} and {y.shape}", argument="y",
                        value=y.shape)
    k = len(x)
    zx, zy = _standardised_off_diagonal(x, method), _standardised_off_diagonal(y, method)
    if k < 3 or zx is None or zy is None:
        return MantelResult(float("nan"), float("nan"), 0, False)
    observed = float((zx * zy).sum())
    exact, count, batches = _permutation_batches(k, n_permutations, seed, batch)
    slack = _TIE * max(1.0, abs(observed))
    hits = 0
    for perms in batches:
        permuted = zy[perms[:, :, None], perms[:, None, :]]  # (B, K, K): y relabelled
        values = np.einsum("ij,bij->b", zx, permuted)
        if alternative == "two-sided":
            hits += int(np.count_nonzero(np.abs(values) >= abs(observed) - slack))
        elif alternative == "greater":
            hits += int(np.count_nonzero(values >= observed - slack))
        else:
            hits += int(np.count_nonzero(values <= observed + slack))
    p_value = hits / count if exact else (1 + hits) / (1 + count)
    return MantelResult(observed, float(p_value), count, exact)


def _weighted_pearson(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Row-wise Pearson correlation of ``a`` and ``b`` (B, M) with non-negative weights ``w`` (B, M)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        n = w.sum(axis=1, keepdims=True)
        da = a - (a * w).sum(axis=1, keepdims=True) / n
        db = b - (b * w).sum(axis=1, keepdims=True) / n
        return (w * da * db).sum(axis=1) / np.sqrt((w * da**2).sum(axis=1) * (w * db**2).sum(axis=1))


def _weighted_ranks(values: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Average ranks (B, M) of ``values`` (M,) in samples holding value m ``w[b, m]`` times (ties averaged)."""
    unique, inverse = np.unique(values, return_inverse=True)
    onehot = np.zeros((len(values), len(unique)))
    onehot[np.arange(len(values)), inverse] = 1.0
    group = w @ onehot  # (B, U): how many sample values fall in each tie group
    below = np.cumsum(group, axis=1) - group
    return (below + (group + 1.0) / 2.0)[:, inverse]


def bootstrap_distribution(
    x: np.ndarray, y: np.ndarray, method: Method = "spearman", n_bootstrap: int = 2_000, seed: int = 0,
    batch: int = 1_000,
) -> np.ndarray:
    """Statistic of ``n_bootstrap`` encoder resamples; nan where undefined (fewer than 3 distinct encoders).

    A resample draws K encoders with replacement; encoder ``a`` drawn ``c_a`` times contributes pair
    ``(a, b)`` (``a != b``) ``c_a * c_b`` times, so a resample is a weighting of the original ordered
    pairs and the statistic is a weighted correlation (ranks for Spearman computed with those
    multiplicities, ties averaged): identical to materialising the resampled matrix, without doing it.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    k = len(x)
    rows, cols = np.nonzero(~np.eye(k, dtype=bool))
    xv, yv = x[rows, cols], y[rows, cols]
    rng = np.random.default_rng(seed)
    out = np.empty(n_bootstrap)
    for start in range(0, n_bootstrap, batch):
        size = min(batch, n_bootstrap - start)
        draws = rng.integers(0, k, size=(size, k))
        counts = (draws[:, :, None] == np.arange(k)).sum(axis=1).astype(float)  # (B, K)
        w = counts[:, rows] * counts[:, cols]  # (B, M): multiplicity of each ordered pair
        if method == "spearman":
            a, b = _weighted_ranks(xv, w), _weighted_ranks(yv, w)
        else:
            a, b = np.broadcast_to(xv, w.shape), np.broadcast_to(yv, w.shape)
        values = _weighted_pearson(a, b, w)
        values[(counts > 0).sum(axis=1) < 3] = np.nan  # two encoders give two pair values: +-1 by construction
        out[start : start + size] = values
    return out


def bootstrap_ci(
    x: np.ndarray, y: np.ndarray, method: Method = "spearman", n_bootstrap: int = 2_000, seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile interval of the encoder bootstrap (module docstring); nan when undefined."""
    values = bootstrap_distribution(x, y, method, n_bootstrap, seed)
    values = values[np.isfinite(values)]
    if len(values) < max(10, n_bootstrap // 2):
        return float("nan"), float("nan")
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return float(low), float(high)


def correlate(intrinsic: pd.DataFrame, extrinsic: pd.DataFrame, group: Sequence[str] | None = None) -> dict[str, float]:
    """Spearman rho and Pearson r with classical p-values (quick look; see :func:`full_correlation`)."""
    _check_same_names(intrinsic, extrinsic)
    x, y = group_matrix(intrinsic, group), group_matrix(extrinsic, group)
    out: dict[str, float] = {"n_pairs": float(len(x) * (len(x) - 1))}
    for method, key in (("spearman", "spearman_rho"), ("pearson", "pearson_r")):
        out[key] = correlation(x, y, method)
        out[key.split("_")[0] + "_p"] = classical_p(x, y, method)
    return out


def full_correlation(
    intrinsic: pd.DataFrame,
    extrinsic: pd.DataFrame,
    group: Sequence[str] | None = None,
    n_permutations: int = 10_000,
    n_bootstrap: int = 2_000,
    seed: int = 0,
    level: float = 0.95,
) -> list[dict[str, float | int | str | bool]]:
    """One record per statistic (spearman, pearson): estimate, classical p, permutation p, bootstrap CI;
    exact pairs of either matrix tie at 0 first (:func:`tie_exact_pairs`)."""
    _check_same_names(intrinsic, extrinsic)
    x, y = tie_exact_pairs(group_matrix(intrinsic, group)), tie_exact_pairs(group_matrix(extrinsic, group))
    records: list[dict[str, float | int | str | bool]] = []
    for method in METHODS:
        test = mantel(x, y, method, n_permutations, seed)
        low, high = bootstrap_ci(x, y, method, n_bootstrap, seed, level) if n_bootstrap else (np.nan, np.nan)
        records.append({
            "statistic": method, "estimate": correlation(x, y, method), "n_encoders": len(x),
            "n_pairs": len(x) * (len(x) - 1), "p_classical": classical_p(x, y, method),
            "p_permutation": test.p_value, "n_permutations": test.n_permutations, "exact": test.exact,
            "ci_low": low, "ci_high": high, "ci_level": level, "n_bootstrap": n_bootstrap,
        })
    return records


def permutation_test_vectors(
    a: np.ndarray, b: np.ndarray, n_permutations: int = 10_000, seed: int = 0, method: Method = "spearman"
) -> tuple[float, float]:
    """Correlation of two length-K vectors and its two-sided permutation p (exact when K! <= n)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if method == "spearman":
        from scipy import stats

        a, b = stats.rankdata(a), stats.rankdata(b)
    za, zb = a - a.mean(), b - b.mean()
    norm = np.sqrt((za**2).sum() * (zb**2).sum())
    if len(a) < 3 or norm == 0:
        return float("nan"), float("nan")
    observed = float(za @ zb / norm)
    exact, count, batches = _permutation_batches(len(a), n_permutations, seed, 5_000)
    hits = sum(int(np.count_nonzero(np.abs(zb[p] @ za / norm) >= abs(observed) - _TIE)) for p in batches)
    return observed, float(hits / count if exact else (1 + hits) / (1 + count))


def stars(p: float) -> str:
    """``**`` for p < 0.01, ``*`` for p < 0.05, else nothing (nan: nothing)."""
    if not np.isfinite(p):
        return ""
    return "**" if p < 0.01 else "*" if p < 0.05 else ""


def _check_same_names(a: pd.DataFrame, b: pd.DataFrame) -> None:
    if list(a.index) != list(b.index):
        raise DataError("the two matrices must list the same encoders in the same order", argument="b")


def to_markdown(frame: pd.DataFrame, digits: int = 3) -> str:
    """A GitHub-flavoured Markdown table (no extra dependency)."""
    def cell(value: object) -> str:
        if isinstance(value, (float, np.floating)):
            value = float(value)
            return "nan" if np.isnan(value) else f"{value:.{digits}g}" if abs(value) < 1e-3 and value != 0 else f"{value:.{digits}f}"
        return str(value)

    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows]) + "\n"


def median_summary(frame: pd.DataFrame, group: Sequence[str] | None = None) -> pd.DataFrame:
    """Per encoder of ``group``: median (and quartiles) of off-diagonal values mapping TO it and FROM it."""
    names = group_names(list(frame.index), group)
    values = group_matrix(frame, group)
    masked = np.where(np.eye(len(names), dtype=bool), np.nan, values)
    q_to = np.nanpercentile(masked, [25, 50, 75], axis=0)  # column j: sources i -> j
    q_from = np.nanpercentile(masked, [25, 50, 75], axis=1)
    return pd.DataFrame({"encoder": names, "to_q1": q_to[0], "to_median": q_to[1], "to_q3": q_to[2],
                         "from_q1": q_from[0], "from_median": q_from[1], "from_q3": q_from[2]})


__all__ = [
    "METHODS", "MantelResult", "bootstrap_ci", "bootstrap_distribution", "classical_p", "correlate", "correlation",
    "full_correlation", "group_matrix", "group_names", "mantel", "median_summary", "off_diagonal",
    "permutation_test_vectors", "stars", "to_markdown",
]
