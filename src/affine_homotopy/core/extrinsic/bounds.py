"""Lemma 5.2 (``d <= c(lam) ||W'||_2 d_aff``) and the run summaries of the extrinsic stage."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ...errors import NumericalError

if TYPE_CHECKING:  # an annotation only: the summaries need neither torch nor scipy (core.probes imports both)
    from ..probes import SoftmaxProbe

# Lemma 5.2 checks: a value counts as above its bound when value > bound (1 + BOUND_RTOL) + BOUND_ATOL,
# the bound using d_aff plus the rank rule's discarded tail of the target (see LemmaCheck)
BOUND_RTOL, BOUND_ATOL = 1e-6, 1e-9


def softmax_lipschitz(inverse_temperature: float = 1.0) -> float:
    """L2 Lipschitz constant ``c(lam)`` of ``z -> softmax(lam z)``: exactly ``lam / 2``.

    The Jacobian is ``lam (diag(p) - p p^T)``, symmetric positive semi-definite. By Gershgorin its
    eigenvalues lie in ``[0, max_k 2 p_k (1 - p_k)]`` (diagonal ``p_k - p_k^2``, absolute
    off-diagonal row sum ``p_k (1 - p_k)``), and ``2 p (1 - p) <= 1/2``; the mean-value theorem on
    the convex domain turns the Jacobian bound into a Lipschitz bound. It is attained: two classes
    with equal logits (``p = (1/2, 1/2)``) give eigenvalue ``lam / 2`` in direction ``(1, -1)``.
    (The often quoted constant ``lam`` is valid but loose by a factor of 2.)
    """
    return 0.5 * float(inverse_temperature)



def lemma_bound(probes: Sequence[SoftmaxProbe], d_aff: np.ndarray, inverse_temperature: float = 1.0) -> np.ndarray:
    """Lemma 5.2 for every pair: ``c(lam) * ||W_j||_2 * d_aff[i, j]`` (column ``j`` = the probe's)."""
    norms = np.array([np.linalg.norm(np.asarray(p.weight, dtype=np.float64), 2) for p in probes])
    bound = softmax_lipschitz(inverse_temperature) * np.asarray(d_aff, dtype=np.float64) * norms[None, :]
    np.fill_diagonal(bound, 0.0)
    return bound


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
        "violations": int((d_psi[off] > ((bound + slack) * (1 + rtol) + atol)[off]).sum()),
        "d_psi_median": float(np.median(d_psi[off])) if off.any() else math.nan,
        "bound_median": float(np.median(bound[off])) if off.any() else math.nan,
    }
    if d_worst is not None:
        row["d_worst_median"] = float(np.median(d_worst[off])) if off.any() else math.nan
        row["d_worst_below_d_psi"] = int((d_worst[off] < d_psi[off]).sum())
    return row


def check_bounds(d_psi: np.ndarray, bound: np.ndarray, bound_violations: np.ndarray | None = None,
                 slack: np.ndarray | float = 0.0) -> None:
    """Lemma 5.2 must hold: ``d_psi <= bound`` on every pair and every evaluated classifier within its
    own bound (``bound_violations`` from :func:`extrinsic_distances`, which checks task probes too).
    The composed candidate attains each bound, so a violation is a bug: NumericalError, before any
    output is written."""
    task = tightness_summary(d_psi, bound, slack=slack)["violations"]
    if task:
        raise NumericalError(f"{task} ordered pairs have d_psi above Lemma 5.2's bound c(lambda) ||W_j||_2 "
                             "d_aff(i -> j) (bound.csv); nothing was written")
    if bound_violations is not None and int(np.sum(bound_violations)):
        raise NumericalError(f"{int(np.sum(bound_violations))} evaluated classifiers (over "
                             f"{int(np.count_nonzero(bound_violations))} ordered pairs) have a fixed-classifier "
                             "distance above their own Lemma 5.2 bound c(lambda) ||W'_k||_2 d_aff(i -> j) "
                             "(bound_worst.csv); nothing was written")


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
        "bound_worst_violations": int((d_worst_search[off] > ((bound_worst + slack) * (1 + rtol) + atol)[off]).sum()),
        "ordering_violations": int(((d_worst[off] < d_psi[off]) | (d_worst_search[off] < d_worst[off])).sum()),
    }



class LemmaCheck:
    """Lemma 5.2 for every classifier evaluated: ``d_k(i -> j) <= c(lam) ||W_k||_2 d_aff(i -> j)``.

    Keeps the largest norm per pair (``bound_worst = c(lam) * max_k ||W_k||_2 * d_aff``) and counts
    classifiers that break their own bound (tolerances ``BOUND_RTOL``, ``BOUND_ATOL``). Every
    classifier's candidates include it composed with the map ``A_ij`` rebuilt from the stored
    solver weights, whose largest residual on the target itself is ``rebuilt_ij`` (Lemma 5.2 holds
    exactly with it). ``d_aff`` maps onto the target's rank-truncated representation, so
    ``rebuilt_ij <= sqrt(d_aff_ij^2 + tail_j^2)`` (``tail_j`` the largest row norm the rank rule
    discarded from target ``j``): the bound is checked with ``d_aff_ij + excess_ij``,
    ``excess_ij = max(0, rebuilt_ij - d_aff_ij)``, when ``excess_ij`` is within that allowance (plus
    ``BOUND_RTOL`` of the target's scale for rounding). A larger excess means ``d_aff`` and the stored
    weights disagree (a stale or altered file), and then the bound is checked against ``d_aff`` as
    it stands.
    """

    def __init__(self, count: int, d_aff: np.ndarray | None, lam: float, tail: np.ndarray,
                 scale: np.ndarray) -> None:
        self.d_aff = None if d_aff is None else np.asarray(d_aff, dtype=np.float64)
        self.tail = np.asarray(tail, dtype=np.float64)
        self.scale = np.asarray(scale, dtype=np.float64)
        self.rebuilt = np.zeros((count, count))
        self.c = softmax_lipschitz(lam)
        self.norm_max = np.zeros((count, count))
        self.violations = np.zeros((count, count), dtype=int)
        self.evaluated = np.zeros((count, count), dtype=int)

    def add(self, i: int, j: int, values: np.ndarray, norms: np.ndarray) -> None:
        values, norms = np.asarray(values, dtype=np.float64), np.asarray(norms, dtype=np.float64)
        if values.size == 0:
            return
        self.norm_max[i, j] = max(self.norm_max[i, j], float(norms.max()))
        self.evaluated[i, j] += values.size
        if self.d_aff is not None:
            bound = self.c * norms * (self.d_aff[i, j] + self.excess(i, j))
            self.violations[i, j] += int((values > bound * (1 + BOUND_RTOL) + BOUND_ATOL).sum())

    def allowance(self, i: int, j: int) -> float:
        """How far the rebuilt map's residual may exceed ``d_aff`` (see the class docstring)."""
        d_aff = self.d_aff[i, j]
        return math.sqrt(d_aff**2 + self.tail[j] ** 2) - d_aff + BOUND_RTOL * self.scale[j]

    def excess(self, i: int, j: int) -> float:
        """``max(0, rebuilt - d_aff)`` within the allowance, else 0 (see the class docstring)."""
        if self.d_aff is None:
            return 0.0
        gap = max(0.0, self.rebuilt[i, j] - self.d_aff[i, j])
        return gap if gap <= self.allowance(i, j) else 0.0

    def bound_worst(self) -> np.ndarray | None:
        if self.d_aff is None:
            return None
        bound = self.c * self.norm_max * self.d_aff
        np.fill_diagonal(bound, 0.0)
        return bound

