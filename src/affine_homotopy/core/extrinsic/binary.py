"""Certified fixed-classifier distances for two-class tasks (docs/method.md, ``d_psi``).

For ``C = 2`` the error of a map on example ``n`` is ``sqrt(2) |sigmoid(u_n) - q_n|`` (``u_n`` the map's
logit gap, ``q_n`` the target's class-one probability), so ``d = sqrt(2) t*`` with ``t*`` quasiconvex:
the maps within a level ``t`` form the polyhedron ``lo_n(t) <= u_n <= hi_n(t)`` (logits of ``q_n -/+ t``).
A Newton iteration on the Chebyshev LP ``s(t) = min s  s.t.  A_n w - s <= hi_n(t), A_n w + s >= lo_n(t)``
(``A = [Z, 1]``) over a working set of half-spaces closes ``[lower, upper]``: every LP's map scored on
all rows gives ``upper``; the LP's row duals ``y`` give, for any map feasible at ``t'``, ``kappa s >=
g(t') = sum_hi y_r hi_r(t') + sum_lo y_r lo_r(t')``, and ``g`` decreases, so ``t* >= root(g)``.

Each LP is solved by the dense interior-point kernel (:func:`affine_homotopy.core.lp.solve_chebyshev`:
a nearly fixed iteration count an LP, where a simplex's pivot count explodes on hard classifiers).
Below ``t*`` an interior point's dual is the centre of the optimal face, whose root falls short of the
Newton step; the purification (:func:`affine_homotopy.core.lp.steepest_optimal_dual`) finds the optimal
dual of steepest ``g'(t)``, and the larger root counts. Any duals of the right signs with ``A_W^T y = 0``
give a valid ``g``: every dual a root is taken from has ``cert_residual = max |A_W^T y| / ||y||_1`` at
most ``CERT_RESIDUAL_LIMIT``; an LP the kernel cannot certify is solved again by HiGHS's dual simplex
(counted as a fallback).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.special import expit

from ...errors import NumericalError
from .. import lp as lp_kernel
from ..interval import Interval

log = logging.getLogger(__name__)

SQRT2 = math.sqrt(2.0)
S_FLOOR = lp_kernel.FLOOR  # logit units: keeps an unbounded working set's LP bounded (then detected below)
CERT_RESIDUAL_LIMIT = 1e-10  # the largest max |A^T y| / ||y||_1 a certificate is built on
# the first working set: both sides of the start map's WORKING_SET_ROWS_PER_COLUMN worst rows per column
# (all rows where N is at most that). Each interior-point iteration costs (rows in the set) columns^2;
# measured on the demo's extrinsic jobs, a set grown by violators beat all rows at every width, and 2
# rows per column beat 1.3 and 3
WORKING_SET_ROWS_PER_COLUMN = 2


def at_floor(s: float) -> bool:
    """The LP's ``s`` sits at ``S_FLOOR`` (to the interior point's accuracy): its rows do not bound ``s``."""
    return s <= S_FLOOR * (1 - 1e-6)


class BinaryTarget:
    """The class-one probabilities ``q`` of one classifier, with ``1 - q`` kept separately, and the
    slab bounds ``lo_n(t)``, ``hi_n(t)`` in logit units."""

    def __init__(self, q: np.ndarray, q_complement: np.ndarray) -> None:
        self.q = np.asarray(q, dtype=np.float64)
        self.qc = np.asarray(q_complement, dtype=np.float64)

    def hi(self, t: float, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        q, qc = self.q[rows], self.qc[rows]
        out = np.full(q.shape, np.inf)
        inside = qc - t > 0
        out[inside] = np.log(q[inside] + t) - np.log(qc[inside] - t)
        return out

    def lo(self, t: float, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        q, qc = self.q[rows], self.qc[rows]
        out = np.full(q.shape, -np.inf)
        inside = q - t > 0
        out[inside] = np.log(q[inside] - t) - np.log(qc[inside] + t)
        return out

    def rates(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """``d hi_n / dt``, ``d lo_n / dt`` at level ``t`` (infinite where the side is absent)."""
        q, qc = self.q, self.qc
        with np.errstate(divide="ignore", invalid="ignore"):
            hi_rate = np.where(qc - t > 0, 1.0 / (q + t) + 1.0 / (qc - t), np.inf)
            lo_rate = np.where(q - t > 0, -1.0 / (q - t) - 1.0 / (qc + t), -np.inf)
        return hi_rate, lo_rate

    def signed_errors(self, u: np.ndarray) -> np.ndarray:
        """``sigmoid(u_n) - q_n``, from the nearer tail of the sigmoid for accuracy."""
        out = np.empty_like(u)
        positive = u >= 0
        out[positive] = self.qc[positive] - expit(-u[positive])  # sigmoid(u) - q = (1 - q) - sigmoid(-u)
        out[~positive] = expit(u[~positive]) - self.q[~positive]
        return out

    def errors(self, u: np.ndarray) -> np.ndarray:
        return np.abs(self.signed_errors(u))


def dual_root(y: np.ndarray, hi_side: np.ndarray, target: BinaryTarget, rows: np.ndarray) -> tuple[float, float]:
    """``(root, t_end)``: the largest ``t`` with ``g(t) > 0`` (module docstring; 0 when ``g(0) <= 0`` or no
    row carries a dual, ``y`` cleaned to hi <= 0, lo >= 0), and ``t_end``, where a used half-space
    disappears and ``g`` drops to ``-inf``: a root there says nothing of higher levels."""
    y = np.where(hi_side, np.minimum(y, 0.0), np.maximum(y, 0.0))
    used = y != 0
    if not used.any():
        return 0.0, math.inf
    y, hi_side, rows = y[used], hi_side[used], rows[used]
    q, qc = target.q[rows], target.qc[rows]
    t_end = min(np.min(qc[hi_side], initial=np.inf), np.min(q[~hi_side], initial=np.inf))
    if not math.isfinite(t_end):
        return 0.0, math.inf

    def g(t: float) -> float:
        with np.errstate(divide="ignore", invalid="ignore"):
            upper = np.log(q[hi_side] + t) - np.log(qc[hi_side] - t)
            lower = np.log(q[~hi_side] - t) - np.log(qc[~hi_side] + t)
        value = float(y[hi_side] @ upper + y[~hi_side] @ lower)
        return -math.inf if math.isnan(value) else value

    if not g(0.0) > 0.0:
        return 0.0, float(t_end)
    low, high = 0.0, float(t_end)
    while True:  # bisection to the last representable bit (terminates: the interval halves)
        middle = 0.5 * (low + high)
        if middle <= low or middle >= high:
            return low, float(t_end)
        if g(middle) > 0.0:
            low = middle
        else:
            high = middle



class ChebyshevLP:
    """The Chebyshev LPs of one classifier on a growing working set of half-spaces, each solved by the
    dense interior-point kernel (:func:`affine_homotopy.core.lp.solve_chebyshev`) on ``A = [Z, 1]``.

    ``member[n, 0/1]``: row ``n``'s hi/lo half-space is in the set (a mask: the kernel's design is
    always all of ``A``). Every returned dual passes the certificate residual check
    (``CERT_RESIDUAL_LIMIT``): the kernel's own, else its purification's, else HiGHS's dual simplex
    from scratch on the same set (``fallbacks`` counts these).
    """

    def __init__(self, design: np.ndarray | torch.Tensor, label: str = "") -> None:
        self.matrix = torch.as_tensor(design, dtype=torch.float64)  # the kernel's copy, on the caller's device
        self.design = self.matrix.cpu().numpy()  # scoring maps on all rows
        self.label = label
        self.member = np.zeros((self.design.shape[0], 2), dtype=bool)
        self.lps = 0
        self.iterations = 0  # interior-point iterations over every LP
        self.fallbacks = 0
        self.last: tuple[BinaryTarget, float, lp_kernel.ChebyshevSolution] | None = None

    @property
    def rows(self) -> np.ndarray:
        """The rows with a half-space in the set."""
        return np.flatnonzero(self.member.any(axis=1))

    def add(self, rows: np.ndarray, hi_side: np.ndarray) -> bool:
        """Add half-spaces to the set; False when all were in."""
        sides = np.where(hi_side, 0, 1)
        fresh = not self.member[rows, sides].all()
        self.member[rows, sides] = True
        return fresh

    def _bounds(self, target: BinaryTarget, t: float) -> tuple[torch.Tensor, torch.Tensor]:
        """``hi``, ``lo`` at level ``t`` on the set (absent sides infinite), as (1, N) tensors."""
        hi = np.where(self.member[:, 0], target.hi(t), np.inf)
        lo = np.where(self.member[:, 1], target.lo(t), -np.inf)
        device = self.matrix.device
        return (torch.as_tensor(hi, device=device)[None], torch.as_tensor(lo, device=device)[None])

    def solve(self, target: BinaryTarget, t: float, start: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
        """``(w, s, y)`` at level ``t``, ``y`` the duals of every half-space (``[hi sides, lo sides]``,
        zero off the set) with a certificate residual at most ``CERT_RESIDUAL_LIMIT``."""
        hi, lo = self._bounds(target, t)
        rows = torch.as_tensor(self.member.any(axis=1), device=self.matrix.device)[None]
        solution = lp_kernel.solve_chebyshev(self.matrix, hi, lo, rows, floor=S_FLOOR,
                                             start=torch.as_tensor(start, device=self.matrix.device)[None])
        self.lps += 1
        self.iterations += int(solution.iterations[0])
        self.last = (target, t, solution)
        w, s = solution.x[0].cpu().numpy(), float(solution.s[0])
        if solution.status[0] == "optimal" and at_floor(s):
            return w, s, np.zeros(2 * self.design.shape[0])  # s unbounded on the set: no certificate
        if solution.status[0] == "optimal" and float(solution.residual[0]) <= CERT_RESIDUAL_LIMIT:
            return w, s, _stacked(solution)
        purified = self.purify() if solution.status[0] == "optimal" else None
        if purified is not None:
            return w, s, purified
        self.fallbacks += 1
        return _highs_solve(self.design, hi[0].cpu().numpy(), lo[0].cpu().numpy(), self.label)

    def purify(self) -> np.ndarray | None:
        """The last LP's steepest optimal dual (:func:`affine_homotopy.core.lp.steepest_optimal_dual`) for
        the levels' parametrisation ``hi(t)``, ``lo(t)``: the dual whose root is the Newton step from the
        last level; None when the purification does not pass the residual check."""
        target, t, solution = self.last
        hi, lo = self._bounds(target, t)
        hi_rate, lo_rate = target.rates(t)
        device = self.matrix.device
        hi_rate = torch.as_tensor(np.where(np.isfinite(hi_rate), hi_rate, 0.0), device=device)[None]
        lo_rate = torch.as_tensor(np.where(np.isfinite(lo_rate), lo_rate, 0.0), device=device)[None]
        steepest = lp_kernel.steepest_optimal_dual(self.matrix, solution, hi, lo, hi_rate, lo_rate)
        self.iterations += int(steepest.iterations[0])
        if steepest.status[0] != "optimal" or float(steepest.residual[0]) > CERT_RESIDUAL_LIMIT:
            return None
        return _stacked(steepest)


def _stacked(solution: lp_kernel.ChebyshevSolution) -> np.ndarray:
    """The first member's duals as one vector, hi sides then lo sides."""
    return torch.cat([solution.y_hi[0], solution.y_lo[0]]).cpu().numpy()


def _highs_solve(design: np.ndarray, hi: np.ndarray, lo: np.ndarray, label: str) -> tuple[np.ndarray, float, np.ndarray]:
    """The LP by HiGHS's dual simplex from scratch (scipy's ``linprog``): a vertex with its duals, for an LP
    the kernel could not certify; a NumericalError naming the classifier if HiGHS fails too."""
    from scipy.optimize import linprog

    n, columns = design.shape
    on_hi, on_lo = np.isfinite(hi), np.isfinite(lo)
    a_ub = np.vstack([np.hstack([design[on_hi], -np.ones((on_hi.sum(), 1))]),
                      np.hstack([-design[on_lo], -np.ones((on_lo.sum(), 1))])])
    cost = np.zeros(columns + 1)
    cost[columns] = 1.0
    result = linprog(cost, A_ub=a_ub, b_ub=np.concatenate([hi[on_hi], -lo[on_lo]]), method="highs-ds",
                     bounds=[(None, None)] * columns + [(S_FLOOR, None)])
    if result.status != 0:
        raise NumericalError(f"the certified extrinsic LP of {label} ended with HiGHS status {result.status} "
                             f"({result.message}) after the interior-point kernel; nothing was written")
    y = np.zeros(2 * n)
    marginals = result.ineqlin.marginals  # d objective / d b_ub <= 0: y_hi directly, y_lo = -marginal
    y[np.flatnonzero(on_hi)] = marginals[: on_hi.sum()]
    y[n + np.flatnonzero(on_lo)] = -marginals[on_hi.sum():]
    return result.x[:columns], float(result.x[columns]), y


def smooth_max_objective(w: np.ndarray, A: np.ndarray, q: np.ndarray, scale: float) -> tuple[float, np.ndarray]:
    """``(f, grad f)`` of ``f(w) = scale logsumexp(e_n^2 / scale)``, ``e_n = sigmoid(A_n . w) - q_n``."""
    sigma = expit(A @ w)
    e = sigma - q
    z = e * e / scale
    # logsumexp and softmax of z from one shifted exponential: scipy.special's spend much of this
    # objective in array-API dispatch
    peak = float(z.max())
    shifted = np.exp(z - peak)
    total = float(shifted.sum())
    return scale * (peak + math.log(total)), A.T @ (shifted * (2.0 / total) * e * sigma * (1.0 - sigma))


def smooth_max_start(A: np.ndarray, target: BinaryTarget, w: np.ndarray, temperatures=(0.3, 0.1, 0.03, 0.01),
                     iterations: int = 40) -> np.ndarray:
    """A near-minimax start: L-BFGS on :func:`smooth_max_objective` (``scale = tau E^2``, ``E`` the start's
    largest error, ``tau`` annealed). Speed only: the certified interval does not rest on it."""
    from scipy.optimize import minimize

    for tau in temperatures:
        scale = max(float(target.errors(A @ w).max()) ** 2 * tau, 1e-30)
        w = minimize(smooth_max_objective, w, args=(A, target.q, scale), jac=True, method="L-BFGS-B",
                     options={"maxiter": iterations, "gtol": 1e-12, "ftol": 1e-15}).x
    return w


@dataclass
class Certificate:
    """``d`` of one fixed classifier in ``interval`` (``iterations``: its LPs), its ``upper`` attained by
    the logit-gap map ``u = A @ coef`` (``A = [Z, 1]``); ``cert_residual``: how far the duals of the
    lower bound are from exact (``max |A_W^T y| / ||y||_1``)."""

    interval: Interval
    coef: np.ndarray  # (r + 1,)
    cert_residual: float = 0.0


def _certificate(lower: float, upper: float, coef: np.ndarray, lps: int, stop: str, residual: float = 0.0
                 ) -> Certificate:
    """``stop``: "tol" | "floor" | "dominated" | "stalled" | "max_lp"."""
    interval = Interval(lower, upper, stop=stop, within_tol=stop in ("tol", "floor"), solver="interior-point",
                        iterations=lps)
    return Certificate(interval, coef, residual)


def certify(lp: ChebyshevLP, target: BinaryTarget, starts: list[np.ndarray], tol: float, atol: float,
            max_lp: int = 100, smooth: bool = True, dominated_below: float = -math.inf,
            decide: bool = False) -> Certificate:
    """Certified ``[lower, upper]`` of ``d = sqrt(2) t*`` for one classifier (module docstring).

    ``starts``: logit-gap maps in ``A``'s coordinates (the best one seeds the upper bound and the
    working set; nothing about validity rests on them). ``tol`` relative, ``atol`` absolute (in
    ``d`` units): the stopping tests. ``lp`` may already hold half-spaces (of another classifier or
    level of the same source): they stay, as valid constraints. ``dominated_below``: stop once
    ``upper`` is at most this (stop ``"dominated"``). ``decide`` (with a finite ``dominated_below``:
    the question is which side of it ``d`` lies on): the LPs are solved at that level until
    ``lower`` passes it (then as usual, to ``tol``) or ``upper`` falls to it. Any sequence of levels
    gives valid bounds; this one settles the question in fewer LPs when ``d`` is near the threshold,
    since the Newton steps from above spend their LPs on levels that cannot decide it.
    """
    A = lp.design
    lps_before = lp.lps
    tol_t, atol_t = tol, atol / SQRT2
    upper_t, coef = _best_start(A, target, starts, atol_t, dominated_below, smooth)
    if upper_t <= atol_t:
        return _certificate(0.0, SQRT2 * upper_t, coef, 0, "floor")
    if SQRT2 * upper_t <= dominated_below:
        return _certificate(0.0, SQRT2 * upper_t, coef, 0, "dominated")
    errors = target.errors(A @ coef)
    lower_t, residual = 0.0, 0.0
    threshold_t = dominated_below / SQRT2 if decide and math.isfinite(dominated_below) else None
    t = upper_t if threshold_t is None else min(upper_t, threshold_t)
    _seed_working_set(lp, target, errors)
    made_two_sided = False
    stop = "max_lp"
    for _ in range(max_lp):
        w, s, y = lp.solve(target, t, coef)
        u = A @ w
        lp_errors = target.errors(u)
        if lp_errors.max() < upper_t:
            upper_t, coef, errors = float(lp_errors.max()), w, lp_errors
        root, t_end, y = _best_root(lp, target, y, s, upper_t * (1 - tol_t))
        if root > lower_t:
            lower_t = min(root, upper_t)
            residual = _residual(A, y)
        done = _stopped(upper_t, lower_t, tol_t, atol_t, dominated_below)
        if done:
            stop = done
            break
        if at_floor(s) and not made_two_sided:
            # the working set does not bound s (no certificate possible): both sides of every row
            made_two_sided = True
            if lp.add(np.repeat(lp.rows, 2), np.tile([True, False], lp.rows.size)):
                continue
        t_next = max(lower_t, 0.5 * t)
        if threshold_t is not None and lower_t <= threshold_t:
            t_next = threshold_t  # still undecided (lower at most the threshold, upper above it): stay there
        if root >= t_end * (1 - 1e-9):
            # the root sits where a used half-space disappears, which says nothing of higher levels.
            # Just above that level the next root can stop at the next row's q_n, one row an LP where
            # many rows' probabilities lie between the bounds; the middle of the interval instead
            # either raises the lower bound past it (infeasible there: the dual's g is positive) or
            # is feasible on the working set
            t_next = min(upper_t, max(t_next, t_end * (1 + 1e-7), 0.5 * (lower_t + upper_t)))
        if not _add_violated(lp, target, u, s, t, errors) and t_next == t:
            stop = "stalled"  # a complete working set and no progress: the LP's accuracy limit
            break
        t = t_next
    # a later map can lower upper below an earlier root by rounding (both are t* to the last bits)
    lower_t = min(lower_t, upper_t)
    return _certificate(SQRT2 * lower_t, SQRT2 * upper_t, coef, lp.lps - lps_before, stop, residual)


def _best_start(A: np.ndarray, target: BinaryTarget, starts: list[np.ndarray], atol_t: float,
                dominated_below: float, smooth: bool) -> tuple[float, np.ndarray]:
    """``(largest error, map)`` of the best start, refined by :func:`smooth_max_start` unless it is exact
    or already dominated. A start with a non-finite coefficient (an overflowed fit) scores nothing: the
    zero map stands in."""
    starts = [w for w in starts if np.isfinite(w).all()] or [np.zeros(A.shape[1])]
    upper_t, best = min((float(target.errors(A @ w).max()), k) for k, w in enumerate(starts))
    coef = starts[best]
    if smooth and upper_t > atol_t and SQRT2 * upper_t > dominated_below:
        smoothed = smooth_max_start(A, target, coef)
        smoothed_upper = float(target.errors(A @ smoothed).max())
        if smoothed_upper < upper_t:
            upper_t, coef = smoothed_upper, smoothed
    return upper_t, coef


def _best_root(lp: ChebyshevLP, target: BinaryTarget, y: np.ndarray, s: float, wanted: float
               ) -> tuple[float, float, np.ndarray]:
    """``(root, t_end, y)`` of the LP's dual and, below ``t*`` (``s > 0``) when its root stays under
    ``wanted``, of its purification (an interior point's dual is the centre of the optimal face, whose
    Newton step is shorter than the steepest vertex's): the larger root."""
    n = lp.design.shape[0]
    half_spaces, hi_side = np.tile(np.arange(n), 2), np.repeat([True, False], n)
    root, t_end = dual_root(y, hi_side, target, half_spaces)
    if s > 0 and root < wanted and lp.last is not None:
        purified = lp.purify()
        if purified is not None:
            root_purified, t_end_purified = dual_root(purified, hi_side, target, half_spaces)
            if root_purified > root:
                return root_purified, t_end_purified, purified
    return root, t_end, y


def _residual(A: np.ndarray, y: np.ndarray) -> float:
    """The certificate residual ``max |A^T y| / ||y||_1`` of duals ``[hi sides, lo sides]``, signs cleaned
    as :func:`dual_root` cleans them."""
    n = A.shape[0]
    signed = np.concatenate([np.minimum(y[:n], 0.0), np.maximum(y[n:], 0.0)])
    return float(np.abs(A.T @ (signed[:n] + signed[n:])).max() / max(np.abs(signed).sum(), 1e-300))


def _stopped(upper_t: float, lower_t: float, tol_t: float, atol_t: float, dominated_below: float) -> str | None:
    """Why :func:`certify` stops at this interval (``"tol"``, ``"floor"``, ``"dominated"``), or None."""
    if upper_t - lower_t <= tol_t * upper_t:
        return "tol"
    if upper_t <= atol_t:
        return "floor"
    if SQRT2 * upper_t <= dominated_below:
        return "dominated"
    return None


def _seed_working_set(lp: ChebyshevLP, target: BinaryTarget, errors: np.ndarray) -> None:
    """Both sides of the start map's ``WORKING_SET_ROWS_PER_COLUMN columns`` worst rows (one-sided sets of
    near-duplicate rows can leave s unbounded)."""
    columns = lp.design.shape[1]
    rows = np.argsort(-errors, kind="stable")[: WORKING_SET_ROWS_PER_COLUMN * columns]
    lp.add(np.repeat(rows, 2), np.tile([True, False], rows.size))


def _add_violated(lp: ChebyshevLP, target: BinaryTarget, u: np.ndarray, s: float, t: float,
                  errors: np.ndarray) -> bool:
    """Add the half-spaces outside the set that the map ``u`` violates at level ``t`` by more than ``s``,
    those the best map also gets most wrong first (they are near-active at the optimum), at most
    ``columns`` an LP; False when there are none."""
    over_hi = u - target.hi(t)
    over_lo = target.lo(t) - u
    over_hi[lp.member[:, 0]] = -np.inf
    over_lo[lp.member[:, 1]] = -np.inf
    threshold = s + 1e-9 * max(1.0, abs(s))
    violated_hi, violated_lo = np.flatnonzero(over_hi > threshold), np.flatnonzero(over_lo > threshold)
    if not violated_hi.size + violated_lo.size:
        return False
    rows = np.concatenate([violated_hi, violated_lo])
    hi_side = np.concatenate([np.ones(violated_hi.size, bool), np.zeros(violated_lo.size, bool)])
    pick = np.argsort(-errors[rows], kind="stable")[: lp.design.shape[1]]
    lp.add(rows[pick], hi_side[pick])
    return True
