"""Tables of the extrinsic stage: the per-pair diagnostics frame, Lemma 5.2's tightness, what the worst
case adds, and the run summary per (task, layer)."""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..core.extrinsic.bounds import BOUND_ATOL, BOUND_RTOL, above_bound

if TYPE_CHECKING:  # an annotation only: the extrinsic_summary job needs neither torch nor the engine
    from ..core.extrinsic.engine import ExtrinsicResult

log = logging.getLogger(__name__)


def tightness_summary(d_psi: np.ndarray, bound: np.ndarray, d_worst: np.ndarray | None = None,
                      atol: float = BOUND_ATOL, rtol: float = BOUND_RTOL, slack: np.ndarray | float = 0.0
                      ) -> dict[str, float]:
    """How much of the extrinsic gap the bound explains: ``d_psi / bound`` over pairs ``i != j``.

    Pairs with ``bound <= atol`` carry no ratio (both sides are 0). ``violations`` counts pairs
    with ``d_psi > (bound + slack) (1 + rtol) + atol``; it must be 0 (``slack``: the extrinsic job's
    per-pair ``bound_slack``, the bound's share of the target's discarded tail: :class:`LemmaCheck`).
    """
    off = ~np.eye(len(d_psi), dtype=bool)
    ratio = d_psi[off & (bound > atol)] / bound[off & (bound > atol)]
    row: dict[str, float] = {
        "n_pairs": int(off.sum()), "n_ratio": int(ratio.size),
        "tightness_median": float(np.median(ratio)) if ratio.size else math.nan,
        "tightness_min": float(ratio.min()) if ratio.size else math.nan,
        "tightness_max": float(ratio.max()) if ratio.size else math.nan,
        "violations": above_bound(d_psi, bound, slack, atol, rtol),
        "d_psi_median": float(np.median(d_psi[off])) if off.any() else math.nan,
        "bound_median": float(np.median(bound[off])) if off.any() else math.nan,
    }
    if d_worst is not None:
        row["d_worst_median"] = float(np.median(d_worst[off])) if off.any() else math.nan
        row["d_worst_below_d_psi"] = int((d_worst[off] < d_psi[off]).sum())
    return row


def worst_case_summary(d_psi: np.ndarray, d_worst: np.ndarray, d_worst_search: np.ndarray, bound_worst: np.ndarray,
                       task_probe_worst: np.ndarray, atol: float = BOUND_ATOL, rtol: float = BOUND_RTOL,
                       slack: np.ndarray | float = 0.0) -> dict[str, float]:
    """How much the random-label probes and the search add, over ordered pairs ``i != j``.

    ``task_probe_worst`` (K, K) bool: the task probe was the worst classifier of ``d_worst``.
    ``task_probe_worst_share`` counts only pairs with ``d_worst > atol`` (where every classifier
    gives 0 no classifier is "the worst"); ``..._after_search`` the same share when the searched
    classifiers join (the task probe stays the worst where the search found nothing larger); the
    ratios skip pairs whose denominator is ``<= atol``.
    ``bound_worst_violations`` counts ``d_worst_search > (bound_worst + slack) (1 + rtol) + atol`` (must be 0;
    the extrinsic job checks each classifier against its own bound), ``ordering_violations`` pairs
    breaking ``d_psi <= d_worst <= d_worst_search`` (must be 0: the maxima are over nested sets).
    """
    off = ~np.eye(len(d_psi), dtype=bool)
    positive = off & (d_worst > atol)
    by_psi, by_worst = off & (d_psi > atol), off & (d_worst > atol)
    return {
        "task_probe_worst_share": float(task_probe_worst[positive].mean()) if positive.any() else math.nan,
        "task_probe_worst_share_after_search": (float((task_probe_worst & (d_worst_search <= d_worst))[positive].mean())
                                                if positive.any() else math.nan),
        "n_pairs_positive_d_worst": int(positive.sum()),
        "d_worst_over_d_psi_median": float(np.median(d_worst[by_psi] / d_psi[by_psi])) if by_psi.any() else math.nan,
        "d_worst_search_over_d_worst_median": (float(np.median(d_worst_search[by_worst] / d_worst[by_worst]))
                                               if by_worst.any() else math.nan),
        "d_worst_search_improved_pairs": int((d_worst_search[off] > d_worst[off]).sum()),
        "d_worst_search_median": float(np.median(d_worst_search[off])) if off.any() else math.nan,
        "bound_worst_median": float(np.median(bound_worst[off])) if off.any() else math.nan,
        "bound_worst_violations": above_bound(d_worst_search, bound_worst, slack, atol, rtol),
        "ordering_violations": int(((d_worst[off] < d_psi[off]) | (d_worst_search[off] < d_worst[off])).sum()),
    }


def diagnostics_frame(result: ExtrinsicResult, d_aff: np.ndarray | None = None) -> pd.DataFrame:
    """One row per computed ordered pair (``d_psi_diagnostics.csv``), with the pair's ``bound`` and
    ``d_aff`` beside its values when ``d_aff`` was given."""
    frame = pd.DataFrame(result.diagnostics)
    index = {name: k for k, name in enumerate(result.names)}
    cells = [(index[a], index[b]) for a, b in zip(frame["mapped_from"], frame["mapped_to"])]
    bounds = result.bounds
    if bounds is not None and d_aff is not None:
        frame.insert(3, "bound", [bounds.task[c] for c in cells])
        frame.insert(4, "d_aff", [d_aff[c] for c in cells])
        if bounds.worst is not None:
            frame["bound_worst"] = [bounds.worst[c] for c in cells]
    return frame


def pair_matrix(diagnostics: pd.DataFrame, names: list[str], column: str, fill) -> np.ndarray:
    """(K, K) matrix of a per-pair column of ``d_psi_diagnostics.csv`` (row mapped onto column)."""
    matrix = pd.DataFrame(fill, index=names, columns=names)
    for source, target, value in zip(diagnostics["mapped_from"], diagnostics["mapped_to"], diagnostics[column]):
        matrix.loc[source, target] = value
    return matrix.to_numpy()


def missed_tol(solver: pd.DataFrame) -> int:
    """Ordered pairs whose certified d_aff interval missed the solver's ``tol`` (``d_aff_solver.csv``)."""
    # a file written before the 'converged' column existed carries no such record: all pairs count as converged
    if "converged" not in solver.columns:
        log.info("d_aff_solver.csv has no 'converged' column: all pairs counted as converged")
        return 0
    return int((~solver["converged"].astype(bool)).sum())


def _gap_stats(diagnostics: pd.DataFrame, column: str, tol: float | None) -> dict[str, float]:
    if column not in diagnostics.columns:
        return {}
    gaps = pd.to_numeric(diagnostics[column], errors="coerce")
    stats = {f"{column}_max": float(gaps.max()) if gaps.notna().any() else math.nan,
             f"{column}_uncertified": int(gaps.isna().sum())}
    if tol is not None:
        above = gaps > tol
        stats[f"{column}_above_tol"] = int(above.sum())
        # the pairs themselves, widest first: a gap above tol is reported, not hidden in a count
        order = gaps[above].sort_values(ascending=False).index
        stats[f"{column}_above_tol_pairs"] = "; ".join(
            f"{diagnostics.at[k, 'mapped_from']} -> {diagnostics.at[k, 'mapped_to']} {gaps[k]:.2%}" for k in order)
    return stats


# worst_case_summary's columns that describe the search (dropped when d_worst_search was not selected)
SEARCH_COLUMNS = ("task_probe_worst_share_after_search", "d_worst_search_over_d_worst_median",
                  "d_worst_search_improved_pairs", "d_worst_search_median")


def summary_row(task: str, layer: str, matrices: dict[str, pd.DataFrame], diagnostics: pd.DataFrame,
                solver: pd.DataFrame, probes: pd.DataFrame, tol: float | None = None) -> dict[str, object]:
    """The run summary of one (task, layer): Lemma 5.2's tightness and violations (must be 0), what
    the worst case adds, the certified gaps (largest, pairs above ``tol``, uncertified pairs), the LPs
    solved by HiGHS and the largest certificate residual, the pairs whose ``d_aff`` missed its tol, and the probes' accuracy and sharpness.

    ``matrices`` holds what the extrinsic job wrote for its selection (``extrinsic.measures``):
    ``d_psi`` and ``bound`` always, ``d_worst`` and ``bound_worst`` with d_worst, ``d_worst_search``
    with the search. The columns of a measure that was not computed are absent: without ``d_worst``
    none of the worst case's (``d_worst_*``, ``task_probe_worst_share``, ``bound_worst_*``,
    ``ordering_violations``); with ``d_worst`` but no search, the search's own (``*_after_search``,
    ``d_worst_search_*``), and ``bound_worst_violations`` and ``ordering_violations`` check
    ``d_psi <= d_worst <= bound_worst`` (the largest value computed)."""
    names = list(matrices["d_psi"].index)
    d_psi = matrices["d_psi"].to_numpy()
    d_worst = matrices["d_worst"].to_numpy() if "d_worst" in matrices else None
    stats = tightness_summary(d_psi, matrices["bound"].to_numpy(), d_worst,
                              slack=pair_matrix(diagnostics, names, "bound_slack", 0.0))
    worst: dict[str, float] = {}
    if d_worst is not None:
        searched = "d_worst_search" in matrices
        # without the search, the largest value computed is d_worst: the checks of the ordering and of
        # bound_worst apply to it, and the search's own columns are dropped
        d_search = matrices["d_worst_search"].to_numpy() if searched else d_worst
        worst = worst_case_summary(d_psi, d_worst, d_search, matrices["bound_worst"].to_numpy(),
                                   pair_matrix(diagnostics, names, "worst_classifier", "") == "task",
                                   slack=pair_matrix(diagnostics, names, "bound_worst_slack", 0.0))
        if not searched:
            worst = {key: value for key, value in worst.items() if key not in SEARCH_COLUMNS}
    stats["classifier_bound_violations"] = int(diagnostics["bound_violations"].sum())
    row: dict[str, object] = {"task": task, "layer": layer, **stats, **worst}
    for column in ("d_psi_gap", "d_worst_gap", "d_worst_search_gap"):
        row.update(_gap_stats(diagnostics, column, tol))
    for column, total in (("highs_fallbacks", "sum"), ("cert_residual_max", "max")):
        if column in diagnostics.columns:  # the certificates' kernel fallbacks and residual, over the pairs
            row[column] = getattr(pd.to_numeric(diagnostics[column]), total)()
    row.update({"d_aff_missed_tol": missed_tol(solver),
                "probe_accuracy_median": probes["accuracy"].median(),
                "probe_accuracy_min": probes["accuracy"].min(), "probe_accuracy_max": probes["accuracy"].max()})
    for column in ("random_train_accuracy_mean", "random_norm_median", "task_norm"):
        if column in probes.columns:  # absent without random-label probes (none, or d_worst not selected)
            row[f"{column}_median"] = float(np.median(probes[column]))
    return row
