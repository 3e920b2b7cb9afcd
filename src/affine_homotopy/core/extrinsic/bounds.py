"""Lemma 5.2 (``d <= c(lam) ||W'||_2 d_aff``): the bound, its check, and :class:`LemmaCheck` for every classifier."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class LemmaTally:
    """What one phase found on Lemma 5.2 for each target of a source, (H,) each: the largest classifier
    norm, the classifiers evaluated and those above their own bound. Phases return it; the engine adds."""

    norm_max: np.ndarray
    evaluated: np.ndarray
    violations: np.ndarray

    @staticmethod
    def empty(heads: int) -> LemmaTally:
        return LemmaTally(np.zeros(heads), np.zeros(heads, dtype=int), np.zeros(heads, dtype=int))

    def __add__(self, other: LemmaTally) -> LemmaTally:
        return LemmaTally(np.maximum(self.norm_max, other.norm_max), self.evaluated + other.evaluated,
                          self.violations + other.violations)


@dataclass(frozen=True)
class LemmaCheck:
    """Lemma 5.2 for every classifier of source ``i`` onto target ``others[h]``, ``d_k <= c(lam) ||W_k||_2
    d_aff``, (H,) each (``d_aff`` None: no bound to check).

    Each classifier's candidates include it after the map rebuilt from the stored weights, whose
    largest residual on the target is ``rebuilt``. ``d_aff`` maps onto the target's rank-truncated
    representation, so ``rebuilt <= sqrt(d_aff^2 + tail^2)`` (``tail``: the largest row norm the rank
    rule discarded): the bound uses ``d_aff + max(0, rebuilt - d_aff)`` within that allowance; beyond
    it ``d_aff`` and the weights disagree (a stale file) and ``d_aff`` stands alone.
    """

    c: float
    d_aff: np.ndarray | None
    tail: np.ndarray
    scale: np.ndarray  # the target's largest row norm
    rebuilt: np.ndarray

    def drifted(self, h: int) -> bool:
        """Whether the rebuilt residual exceeds ``d_aff`` by more than the allowance."""
        d_aff = self.d_aff[h]
        return self.rebuilt[h] - d_aff > math.sqrt(d_aff**2 + self.tail[h] ** 2) - d_aff + BOUND_RTOL * self.scale[h]

    def excess(self, h: int) -> float:
        """``max(0, rebuilt - d_aff)`` within the allowance, else 0."""
        if self.d_aff is None:
            return 0.0
        gap = max(0.0, self.rebuilt[h] - self.d_aff[h])
        return 0.0 if self.drifted(h) else gap

    def tally(self, values: list[np.ndarray], norms: list[np.ndarray]) -> LemmaTally:
        """``values[h]``, ``norms[h]``: the classifiers evaluated for target ``h``."""
        values = [np.asarray(v, dtype=np.float64) for v in values]
        norms = [np.asarray(v, dtype=np.float64) for v in norms]
        violations = np.zeros(len(values), dtype=int)
        for h in range(len(values) if self.d_aff is not None else 0):
            bound = self.c * norms[h] * (self.d_aff[h] + self.excess(h))
            violations[h] = int((values[h] > bound * (1 + BOUND_RTOL) + BOUND_ATOL).sum())
        return LemmaTally(np.array([float(n.max()) if n.size else 0.0 for n in norms]),
                          np.array([v.size for v in values]), violations)
