"""Lemma 5.2 (``d <= c(lam) ||W'||_2 d_aff``): the bound, its check, and :class:`LemmaCheck` for every classifier."""

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
    """L2 Lipschitz constant ``c(lam)`` of ``z -> softmax(lam z)``: exactly ``lam / 2``. The Jacobian
    ``lam (diag(p) - p p^T)`` has, by Gershgorin, eigenvalues in ``[0, max_k 2 p_k (1 - p_k)] <= 1/2``;
    two classes with equal logits attain it (the often quoted ``lam`` is loose by a factor of 2)."""
    return 0.5 * float(inverse_temperature)



def lemma_bound(probes: Sequence[SoftmaxProbe | None], d_aff: np.ndarray, inverse_temperature: float = 1.0
                ) -> np.ndarray:
    """Lemma 5.2 for every pair: ``c(lam) * ||W_j||_2 * d_aff[i, j]`` (column ``j`` = the probe's; NaN
    without a probe)."""
    norms = np.array([np.nan if p is None else np.linalg.norm(np.asarray(p.weight, dtype=np.float64), 2)
                      for p in probes])
    bound = softmax_lipschitz(inverse_temperature) * np.asarray(d_aff, dtype=np.float64) * norms[None, :]
    np.fill_diagonal(bound, 0.0)
    return bound


def above_bound(values: np.ndarray, bound: np.ndarray, slack: np.ndarray | float = 0.0, atol: float = BOUND_ATOL,
                rtol: float = BOUND_RTOL) -> int:
    """Off-diagonal pairs with ``values > (bound + slack) (1 + rtol) + atol`` (``slack``: the bound's share
    of the target's discarded tail, :class:`LemmaCheck`); Lemma 5.2 makes it 0."""
    off = ~np.eye(len(values), dtype=bool)
    return int((values[off] > ((bound + slack) * (1 + rtol) + atol)[off]).sum())


def check_bounds(d_psi: np.ndarray, bound: np.ndarray, bound_violations: np.ndarray | None = None,
                 slack: np.ndarray | float = 0.0) -> None:
    """Lemma 5.2 must hold: ``d_psi <= bound`` on every pair and every evaluated classifier within its
    own bound (``bound_violations`` from :func:`extrinsic_distances`, which checks task probes too).
    The composed candidate attains each bound, so a violation is a bug: NumericalError, before any
    output is written."""
    task = above_bound(d_psi, bound, slack)
    if task:
        raise NumericalError(f"{task} ordered pairs have d_psi above Lemma 5.2's bound c(lambda) ||W_j||_2 "
                             "d_aff(i -> j) (bound.csv); nothing was written")
    if bound_violations is not None and int(np.sum(bound_violations)):
        raise NumericalError(f"{int(np.sum(bound_violations))} evaluated classifiers (over "
                             f"{int(np.count_nonzero(bound_violations))} ordered pairs) have a fixed-classifier "
                             "distance above their own Lemma 5.2 bound c(lambda) ||W'_k||_2 d_aff(i -> j) "
                             "(bound_worst.csv); nothing was written")


class LemmaCheck:
    """Lemma 5.2 for every classifier evaluated, ``d_k(i -> j) <= c(lam) ||W_k||_2 d_aff(i -> j)``: the
    largest norm per pair (``bound_worst``) and the classifiers breaking their own bound.

    Each classifier's candidates include it after the map rebuilt from the stored weights, whose
    largest residual on the target is ``rebuilt_ij``. ``d_aff`` maps onto the target's rank-truncated
    representation, so ``rebuilt_ij <= sqrt(d_aff_ij^2 + tail_j^2)`` (``tail_j``: the largest row norm
    the rank rule discarded): the bound uses ``d_aff_ij + max(0, rebuilt_ij - d_aff_ij)`` within that
    allowance; beyond it ``d_aff`` and the weights disagree (a stale file) and ``d_aff`` stands alone.
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

