"""Certified fixed-classifier distances for two-class tasks (docs/method.md, ``d_psi``).

For ``C = 2`` the error of a map on example ``n`` is ``sqrt(2) |sigmoid(u_n) - q_n|`` (``u_n`` the map's
logit gap, ``q_n`` the target's class-one probability), so ``d = sqrt(2) t*`` with ``t*`` quasiconvex:
the maps within a level ``t`` form the polyhedron ``lo_n(t) <= u_n <= hi_n(t)`` (logits of ``q_n -/+ t``).
A Newton iteration on the Chebyshev LP ``s(t) = min s  s.t.  A_n w - s <= hi_n(t), A_n w + s >= lo_n(t)``
(``A = [Z, 1]``) over a working set of half-spaces closes ``[lower, upper]``: every LP's map scored on
all rows gives ``upper``; the LP's row duals ``y`` give, for any map feasible at ``t'``, ``kappa s >=
g(t') = sum_hi y_r hi_r(t') + sum_lo y_r lo_r(t')``, and ``g`` decreases, so ``t* >= root(g)``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from ...errors import NumericalError
from ..interval import Interval

log = logging.getLogger(__name__)

SQRT2 = math.sqrt(2.0)
S_FLOOR = -50.0  # logit units: keeps an unbounded working set's LP bounded (then detected below)


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


def _quiet_highs(highspy):
    """A HiGHS object, built with the process's stdout pointed at stderr: HiGHS writes its banner from C
    at construction, before ``output_flag`` can be set, and a caller's stdout should carry only results."""
    import os
    import sys

    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no file descriptor 1 (an embedded interpreter): nothing to protect
        return highspy.Highs()
    try:
        os.dup2(2, 1)
        return highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


class ChebyshevLP:
    """The Chebyshev LP of one classifier on a growing set of half-spaces: one HiGHS model.

    A half-space is a row of ``A = [Z, 1]`` with a side; its bound depends on the classifier and the
    level only, so one model serves every level of the classifier (warm starts).
    """

    def __init__(self, design: np.ndarray, label: str = "", scaled: bool = True) -> None:
        """``scaled=False``: without HiGHS's scaling of rows and columns (the columns of ``[Z, 1]``
        are whitened already). The worst-case search's sharp classifiers then need fewer simplex
        iterations; the task and random-label probes keep the default."""
        import highspy  # the official HiGHS bindings: warm-started dual simplex (see the module docstring)

        self.highspy = highspy
        self.design = design
        self.label = label
        n, columns = design.shape
        solver = _quiet_highs(highspy)
        for option, value in (("output_flag", False), ("presolve", "off"), ("solver", "simplex"),
                              ("simplex_strategy", 1), ("threads", 1), ("random_seed", 0),
                              ("primal_feasibility_tolerance", 1e-9), ("dual_feasibility_tolerance", 1e-9),
                              ("simplex_dual_edge_weight_strategy", 1),  # devex
                              # a deterministic cap, well above what a typical solve needs: past it one
                              # interior-point solve of the dense LP is cheaper than more pivots (solve)
                              ("simplex_iteration_limit", max(5_000, 8 * (columns + 1)))):
            solver.setOptionValue(option, value)
        if not scaled:
            solver.setOptionValue("simplex_scale_strategy", 0)
        self.inf = highspy.kHighsInf
        cost = np.zeros(columns + 1)
        cost[columns] = 1.0  # minimise s, the last column
        lower = np.full(columns + 1, -self.inf)
        lower[columns] = S_FLOOR
        solver.addCols(columns + 1, cost, lower, np.full(columns + 1, self.inf), 0,
                       np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
        self.solver = solver
        self.columns = columns
        self.rows = np.zeros(0, dtype=np.int64)  # LP row k is half-space (rows[k], hi_side[k])
        self.hi_side = np.zeros(0, dtype=bool)
        self.member = np.zeros((n, 2), dtype=bool)  # member[n, 0/1]: row n's hi/lo side is in the LP
        self.lps = 0
        self.fallbacks = 0  # solves finished by the interior-point method after the simplex stalled
        self.simplex_iterations = 0
        self.last_dual: np.ndarray | None = None

    def _finite(self, values: np.ndarray) -> np.ndarray:
        return np.where(np.isfinite(values), values, np.copysign(self.inf, values))

    def add(self, rows: np.ndarray, hi_side: np.ndarray, target: BinaryTarget, t: float) -> None:
        """Add half-spaces (skipping those already in), with bounds at level ``t``."""
        fresh = ~self.member[rows, np.where(hi_side, 0, 1)]
        rows, hi_side = rows[fresh], hi_side[fresh]
        if rows.size == 0:
            return
        keep = np.unique(np.stack([rows, hi_side]), axis=1)  # also drops duplicates within the call
        rows, hi_side = keep[0].astype(np.int64), keep[1].astype(bool)
        sign = np.where(hi_side, -1.0, 1.0)
        values = np.hstack([self.design[rows], sign[:, None]]).ravel()
        width = self.columns + 1
        indices = np.tile(np.arange(width, dtype=np.int32), rows.size)
        starts = np.arange(rows.size, dtype=np.int32) * width
        lower = np.where(hi_side, -np.inf, target.lo(t, rows))
        upper = np.where(hi_side, target.hi(t, rows), np.inf)
        self.solver.addRows(rows.size, self._finite(lower), self._finite(upper), values.size, starts, indices, values)
        self.member[rows, np.where(hi_side, 0, 1)] = True
        self.rows = np.concatenate([self.rows, rows])
        self.hi_side = np.concatenate([self.hi_side, hi_side])

    def crash(self, nonbasic: np.ndarray) -> None:
        """An advanced start: every column basic, LP rows ``nonbasic`` (one per column) at the bound of
        their side; the vertex where the start map's worst rows are active (speed only)."""
        highspy = self.highspy
        status = [highspy.HighsBasisStatus.kBasic] * self.rows.size
        for k in nonbasic.tolist():
            status[k] = highspy.HighsBasisStatus.kUpper if self.hi_side[k] else highspy.HighsBasisStatus.kLower
        basis = self.solver.getBasis()
        basis.col_status = [highspy.HighsBasisStatus.kBasic] * (self.columns + 1)
        basis.row_status = status
        basis.valid = True
        self.solver.setBasis(basis)

    def set_level(self, target: BinaryTarget, t: float) -> None:
        lower = np.where(self.hi_side, -np.inf, target.lo(t, self.rows))
        upper = np.where(self.hi_side, target.hi(t, self.rows), np.inf)
        count = self.rows.size
        self.solver.changeRowsBounds(count, np.arange(count, dtype=np.int32), self._finite(lower), self._finite(upper))

    def solve(self) -> tuple[np.ndarray, float, np.ndarray]:
        """``(w, s, row duals)``; a status other than optimal is retried from scratch, then by the
        interior-point method with crossover (a degenerate LP can stall the dual simplex: seen on a
        real pair), then a NumericalError naming the problem (this LP is always feasible and bounded
        by ``S_FLOOR``). A simplex that reaches its iteration cap goes to the interior-point method at
        once: a stalled warm start of a wide classifier stalls again from scratch, at many times the
        interior-point method's cost."""
        status = None
        for attempt in range(3):
            if attempt == 1 and status == self.highspy.HighsModelStatus.kIterationLimit:
                continue  # straight to the interior-point method
            if attempt:
                self.solver.clearSolver()
            if attempt == 2:
                self.solver.setOptionValue("solver", "ipm")
                self.solver.setOptionValue("run_crossover", "on")
                self.fallbacks += 1
            try:
                self.solver.run()
            finally:
                if attempt == 2:
                    self.solver.setOptionValue("solver", "simplex")
            status = self.solver.getModelStatus()
            if status == self.highspy.HighsModelStatus.kOptimal:
                break
        else:
            raise NumericalError(f"the certified extrinsic LP of {self.label} ended with HiGHS status "
                                 f"'{self.solver.modelStatusToString(status)}' (expected optimal); nothing was "
                                 "written")
        self.lps += 1
        self.simplex_iterations += int(self.solver.getInfo().simplex_iteration_count)
        solution = self.solver.getSolution()
        x = np.asarray(solution.col_value)
        self.last_dual = np.asarray(solution.row_dual)
        return x[: self.columns], float(x[self.columns]), self.last_dual


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
    the logit-gap map ``u = A @ coef`` (``A = [Z, 1]``); ``cert_residual``: how far HiGHS's duals are
    from exact (``max |A_W^T y| / ||y||_1``)."""

    interval: Interval
    coef: np.ndarray  # (r + 1,)
    cert_residual: float = 0.0


def _certificate(lower: float, upper: float, coef: np.ndarray, lps: int, stop: str, residual: float = 0.0
                 ) -> Certificate:
    """``stop``: "tol" | "floor" | "dominated" | "stalled" | "max_lp"."""
    interval = Interval(lower, upper, stop=stop, within_tol=stop in ("tol", "floor"), solver="highs",
                        iterations=lps)
    return Certificate(interval, coef, residual)


def certify(lp: ChebyshevLP, target: BinaryTarget, starts: list[np.ndarray], tol: float, atol: float,
            max_lp: int = 100, working_rows: int | None = None, added_per_lp: int | None = None,
            smooth: bool = True, dominated_below: float = -math.inf, decide: bool = False) -> Certificate:
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
    columns = A.shape[1]
    lps_before = lp.lps
    tol_t, atol_t = tol, atol / SQRT2
    # a start with a non-finite coefficient (an overflowed fit) scores nothing: the zero map stands in
    starts = [w for w in starts if np.isfinite(w).all()] or [np.zeros(columns)]
    scored = [(float(target.errors(A @ w).max()), k) for k, w in enumerate(starts)]
    upper_t, best = min(scored)
    coef = starts[best]
    if SQRT2 * upper_t <= dominated_below and upper_t > atol_t:  # before the smooth start: it only lowers upper
        return _certificate(0.0, SQRT2 * upper_t, coef, 0, "dominated")
    if smooth and upper_t > atol_t:
        smoothed = smooth_max_start(A, target, coef)
        if target.errors(A @ smoothed).max() < upper_t:
            coef = smoothed
            upper_t = float(target.errors(A @ coef).max())
    errors = target.errors(A @ coef)
    lower_t = 0.0
    residual = 0.0
    if upper_t <= atol_t:
        return _certificate(0.0, SQRT2 * upper_t, coef, 0, "floor")
    if SQRT2 * upper_t <= dominated_below:
        return _certificate(0.0, SQRT2 * upper_t, coef, 0, "dominated")
    added_per_lp = added_per_lp or max(32, columns // 2)
    threshold_t = dominated_below / SQRT2 if decide and math.isfinite(dominated_below) else None
    t = upper_t if threshold_t is None else min(upper_t, threshold_t)
    _seed_working_set(lp, target, coef, errors, t, working_rows)
    made_two_sided = False
    stop = "max_lp"
    for _ in range(max_lp):
        w, s, y = lp.solve()
        u = A @ w
        lp_errors = target.errors(u)
        if lp_errors.max() < upper_t:
            upper_t, coef, errors = float(lp_errors.max()), w, lp_errors
        root, t_end = dual_root(y, lp.hi_side, target, lp.rows)
        if root > lower_t:
            lower_t = min(root, upper_t)
            signed = np.where(lp.hi_side, np.minimum(y, 0.0), np.maximum(y, 0.0))
            residual = float(np.abs(A[lp.rows].T @ signed).max() / max(np.abs(signed).sum(), 1e-300))
        done = _stopped(upper_t, lower_t, tol_t, atol_t, dominated_below)
        if done:
            stop = done
            break
        if s <= S_FLOOR * (1 - 1e-9) and not made_two_sided:
            # the working set does not bound s (no certificate possible): both sides of every row
            lp.add(np.concatenate([lp.rows, lp.rows]), np.repeat([True, False], lp.rows.size), target, t)
            made_two_sided = True
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
        if not _add_violated(lp, target, u, s, t, errors, added_per_lp) and t_next == t:
            stop = "stalled"  # a complete working set and no progress: the LP's accuracy limit
            break
        if t_next != t:
            t = t_next
        lp.set_level(target, t)
    return _certificate(SQRT2 * lower_t, SQRT2 * upper_t, coef, lp.lps - lps_before, stop, residual)


def _stopped(upper_t: float, lower_t: float, tol_t: float, atol_t: float, dominated_below: float) -> str | None:
    """Why :func:`certify` stops at this interval (``"tol"``, ``"floor"``, ``"dominated"``), or None."""
    if upper_t - lower_t <= tol_t * upper_t:
        return "tol"
    if upper_t <= atol_t:
        return "floor"
    if SQRT2 * upper_t <= dominated_below:
        return "dominated"
    return None


def _seed_working_set(lp: ChebyshevLP, target: BinaryTarget, coef: np.ndarray, errors: np.ndarray, t: float,
                      working_rows: int | None) -> None:
    """The start map's worst rows on the side they violate, at level ``t``; with many rows per column
    both sides (one-sided sets of near-duplicate rows can leave s unbounded)."""
    A = lp.design
    n, columns = A.shape
    both_sides = n > 10 * columns
    working_rows = min(n, working_rows or (2 * columns if both_sides else int(1.3 * columns) + 1))
    worst = np.argsort(-errors, kind="stable")[:working_rows]
    fresh = lp.rows.size == 0
    signed = target.signed_errors(A @ coef)
    if both_sides:
        lp.add(np.concatenate([worst, worst]), np.repeat([True, False], worst.size), target, t)
    else:
        lp.add(worst, signed[worst] > 0, target, t)
    lp.set_level(target, t)
    if fresh and worst.size >= columns + 1:
        # crash: the columns + 1 worst rows active at their violated side (HiGHS's own start is the
        # all-slack basis, which needs a pivot for every column first)
        position = {(int(r), bool(h)): k for k, (r, h) in enumerate(zip(lp.rows, lp.hi_side))}
        lp.crash(np.array([position[(int(r), bool(signed[r] > 0))] for r in worst[: columns + 1]]))


def _add_violated(lp: ChebyshevLP, target: BinaryTarget, u: np.ndarray, s: float, t: float, errors: np.ndarray,
                  added_per_lp: int) -> bool:
    """Add the half-spaces outside the LP that the map ``u`` violates at level ``t`` by more than
    ``s``, those the best map also gets most wrong first (they are near-active at the optimum), at
    most ``added_per_lp``; False when there are none."""
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
    pick = np.argsort(-errors[rows], kind="stable")[:added_per_lp]
    lp.add(rows[pick], hi_side[pick], target, t)
    return True
