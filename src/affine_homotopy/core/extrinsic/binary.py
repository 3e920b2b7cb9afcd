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

The classifiers of one source are certified together (:func:`certify`): their Newton iterations run in
lock step, each round's LPs (each its own level, start and working set, a row mask on the source's
:class:`Design`) in batched kernel calls on the source's device, and the round's purifications
likewise; :func:`members_per_call` says how many members share a call on the CPU and on CUDA.
"""

from __future__ import annotations

import logging
import math
import sys
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

    return largest_positive(g, float(t_end)), float(t_end)


def largest_positive(g, high: float) -> float:
    """The largest ``t`` in ``[0, high)`` with ``g(t) > 0`` for a decreasing ``g`` (0 when ``g(0) <= 0``), by
    bisection to the last representable bit (it terminates: the interval halves)."""
    if not g(0.0) > 0.0:
        return 0.0
    low = 0.0
    while True:
        middle = 0.5 * (low + high)
        if middle <= low or middle >= high:
            return low
        if g(middle) > 0.0:
            low = middle
        else:
            high = middle


@dataclass(frozen=True)
class Design:
    """``A = [Z, 1]`` of one source, shared by all its classifiers' LPs: ``matrix``, the kernel's float64
    tensor on the source's device (the interior point's products run there), and ``array``, the same
    on the CPU for scoring maps on all rows (a matrix-vector product a map, cheaper than a transfer)."""

    matrix: torch.Tensor
    array: np.ndarray

    @classmethod
    def of(cls, design: np.ndarray | torch.Tensor) -> Design:
        matrix = torch.as_tensor(design, dtype=torch.float64)
        return cls(matrix, matrix.cpu().numpy())  # on the CPU a view of the same memory


def members_per_call(device: torch.device) -> int:
    """How many classifiers' LPs go into one kernel call (and one purification call). A batch's products
    run over the union of its members' working sets: on CUDA all of them make one wide product, on the
    CPU, measured on the extrinsic stage of sources with several targets, a batch costs more than its
    members solved one at a time."""
    return sys.maxsize if device.type == "cuda" else 1


def _calls(count: int, device: torch.device) -> list[range]:
    """The members of each kernel call (:func:`members_per_call`)."""
    size = members_per_call(device)
    return [range(first, min(first + size, count)) for first in range(0, count, size)]


class ChebyshevLP:
    """One classifier's Chebyshev LPs on a growing working set of half-spaces of its source's
    :class:`Design`, solved by the dense interior-point kernel in batches with the source's other
    classifiers (:func:`solve_batch`, :func:`purify_batch`).

    ``member[n, 0/1]``: row ``n``'s hi/lo half-space is in the set (a mask: the kernel's design is
    always all of ``A``). ``fallbacks`` counts the LPs solved by HiGHS (:meth:`highs`).
    """

    def __init__(self, design: Design | np.ndarray | torch.Tensor, label: str = "") -> None:
        self.design = design if isinstance(design, Design) else Design.of(design)
        self.label = label
        self.member = np.zeros((self.design.array.shape[0], 2), dtype=bool)
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

    def bounds(self, target: BinaryTarget, t: float) -> tuple[np.ndarray, np.ndarray]:
        """``hi``, ``lo`` at level ``t`` on the set (absent sides infinite)."""
        return (np.where(self.member[:, 0], target.hi(t), np.inf), np.where(self.member[:, 1], target.lo(t), -np.inf))

    def highs(self, target: BinaryTarget, t: float) -> tuple[np.ndarray, float, np.ndarray]:
        """``(w, s, y)`` at level ``t`` by HiGHS's dual simplex, for an LP the kernel could not certify (counted)."""
        self.fallbacks += 1
        return highs_solve(self.design.array, *self.bounds(target, t), self.label)


def solve_batch(lps: list[ChebyshevLP], targets: list[BinaryTarget], levels: list[float],
                starts: list[np.ndarray]) -> list[lp_kernel.ChebyshevSolution]:
    """Each LP (all on one design) at its level from its start map, :func:`members_per_call` to a kernel
    call; each solution, a batch of one, is also its LP's ``last``."""
    matrix = lps[0].design.matrix
    solutions = []
    for call in _calls(len(lps), matrix.device):
        bounds = [lps[k].bounds(targets[k], levels[k]) for k in call]
        solution = lp_kernel.solve_chebyshev(
            matrix, _on(matrix, [hi for hi, _ in bounds]), _on(matrix, [lo for _, lo in bounds]),
            _on(matrix, [lps[k].member.any(axis=1) for k in call]), floor=S_FLOOR,
            start=_on(matrix, [starts[k] for k in call]))
        for b, k in enumerate(call):
            part = solution.member(b)
            lps[k].lps += 1
            lps[k].iterations += int(part.iterations[0])
            lps[k].last = (targets[k], levels[k], part)
            solutions.append(part)
    return solutions


def purify_batch(lps: list[ChebyshevLP]) -> list[np.ndarray | None]:
    """Each LP's last solution's steepest optimal dual (:func:`affine_homotopy.core.lp.steepest_optimal_dual`)
    for the levels' parametrisation ``hi(t)``, ``lo(t)``: the dual whose root is the Newton step from
    the last level, as :func:`_stacked` duals; None where it does not pass the residual check."""
    duals: list[np.ndarray | None] = []
    if not lps:
        return duals
    matrix = lps[0].design.matrix
    for call in _calls(len(lps), matrix.device):
        lasts = [lps[k].last for k in call]
        bounds = [lps[k].bounds(target, t) for k, (target, t, _) in zip(call, lasts)]
        rates = [target.rates(t) for target, t, _ in lasts]
        steepest = lp_kernel.steepest_optimal_dual(
            matrix, lp_kernel.ChebyshevSolution.stack([solution for _, _, solution in lasts]),
            _on(matrix, [hi for hi, _ in bounds]), _on(matrix, [lo for _, lo in bounds]),
            _on(matrix, [np.where(np.isfinite(hi), hi, 0.0) for hi, _ in rates]),
            _on(matrix, [np.where(np.isfinite(lo), lo, 0.0) for _, lo in rates]))
        for b, k in enumerate(call):
            lps[k].iterations += int(steepest.iterations[b])
            passed = steepest.status[b] == "optimal" and float(steepest.residual[b]) <= CERT_RESIDUAL_LIMIT
            duals.append(_stacked(steepest, b) if passed else None)
    return duals


def _on(matrix: torch.Tensor, arrays: list[np.ndarray]) -> torch.Tensor:
    """The members' arrays as one (B, ...) tensor on the design's device (float64, masks bool)."""
    stacked = np.stack(arrays)
    return torch.as_tensor(stacked, dtype=None if stacked.dtype == bool else torch.float64, device=matrix.device)


def _stacked(solution: lp_kernel.ChebyshevSolution, b: int = 0) -> np.ndarray:
    """Member ``b``'s duals as one vector, hi sides then lo sides."""
    return torch.cat([solution.y_hi[b], solution.y_lo[b]]).cpu().numpy()


def highs_solve(design: np.ndarray, hi: np.ndarray, lo: np.ndarray, label: str) -> tuple[np.ndarray, float, np.ndarray]:
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


def smooth_max_objective(w: np.ndarray, A: np.ndarray, q: np.ndarray, scale: float
                         ) -> tuple[float, np.ndarray, float]:
    """``(f, grad f, max_n |e_n|)`` of ``f(w) = scale logsumexp(e_n^2 / scale)``, ``e_n = sigmoid(A_n . w) - q_n``."""
    sigma = expit(A @ w)
    e = sigma - q
    z = e * e / scale
    # logsumexp and softmax of z from one shifted exponential: scipy.special's spend much of this
    # objective in array-API dispatch
    peak = float(z.max())
    shifted = np.exp(z - peak)
    total = float(shifted.sum())
    gradient = A.T @ (shifted * (2.0 / total) * e * sigma * (1.0 - sigma))
    return scale * (peak + math.log(total)), gradient, math.sqrt(peak * scale)


class _Dominated(Exception):
    """Raised by :func:`smooth_max_start`'s objective at a map whose largest error is at most ``enough``."""

    def __init__(self, w: np.ndarray) -> None:
        super().__init__()
        self.w = w


def smooth_max_start(A: np.ndarray, target: BinaryTarget, w: np.ndarray, temperatures=(0.3, 0.1, 0.03, 0.01),
                     iterations: int = 40, enough: float = -math.inf) -> np.ndarray:
    """A near-minimax start: L-BFGS on :func:`smooth_max_objective` (``scale = tau E^2``, ``E`` the start's
    largest error, ``tau`` annealed), stopped at the first map evaluated whose largest error is at most
    ``enough`` (a classifier that falls there is dominated: a finer start cannot matter; most of the
    search's classifiers end so, a few evaluations in). Speed only: the certified interval does not
    rest on it."""
    from scipy.optimize import minimize

    def objective(v: np.ndarray, scale: float) -> tuple[float, np.ndarray]:
        value, gradient, largest = smooth_max_objective(v, A, target.q, scale)
        if largest <= enough:
            raise _Dominated(v.copy())
        return value, gradient

    for tau in temperatures:
        largest = float(target.errors(A @ w).max())
        if largest <= enough:
            break
        scale = max(largest ** 2 * tau, 1e-30)
        try:
            w = minimize(objective, w, args=(scale,), jac=True, method="L-BFGS-B",
                         options={"maxiter": iterations, "gtol": 1e-12, "ftol": 1e-15}).x
        except _Dominated as stop:
            return stop.w
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


@dataclass
class BinaryProblem:
    """One classifier to certify: its LPs (``lp`` may already hold half-spaces, of another classifier
    or level of the same source: they stay, as valid constraints), its target, its ``starts``
    (logit-gap maps in ``A``'s coordinates: the best one seeds the upper bound and the working set;
    nothing about validity rests on them) and ``dominated_below`` (:func:`certify`)."""

    lp: ChebyshevLP
    target: BinaryTarget
    starts: list[np.ndarray]
    dominated_below: float = -math.inf


def certify(problems: list[BinaryProblem], tol: float, atol: float, max_lp: int = 100, smooth: bool = True,
            decide: bool = False) -> list[Certificate]:
    """Certified ``[lower, upper]`` of ``d = sqrt(2) t*`` for each classifier (module docstring), their
    Newton iterations in lock step: a round solves one LP of every classifier still open, batched on
    their shared design (:func:`solve_batch`); a classifier leaves once it stops.

    ``tol`` relative, ``atol`` absolute (in ``d`` units): the stopping tests. ``dominated_below``: stop
    once ``upper`` is at most this (stop ``"dominated"``). ``decide`` (with a finite ``dominated_below``:
    the question is which side of it ``d`` lies on): the LPs are solved at that level until ``lower``
    passes it (then as usual, to ``tol``) or ``upper`` falls to it. Any sequence of levels gives valid
    bounds; this one settles the question in fewer LPs when ``d`` is near the threshold, since the
    Newton steps from above spend their LPs on levels that cannot decide it.
    """
    if any(problem.lp.design is not problems[0].lp.design for problem in problems):
        raise ValueError("the classifiers certified together share one design (their LPs are batched on it)")
    tol_t, atol_t = tol, atol / SQRT2
    heads = [_begin(problem, atol_t, smooth, decide) for problem in problems]
    live = [head for head in heads if isinstance(head, _Newton)]
    for _ in range(max_lp):
        if not live:
            break
        steps = _round(live, tol_t)
        live = [head for head, step in zip(live, steps) if head.advance(step, tol_t, atol_t)]
    return [head.certificate() if isinstance(head, _Newton) else head for head in heads]


@dataclass
class _Step:
    """One LP of a round: its map's logit gaps ``u``, its ``s``, and the duals ``y`` a bound rests on
    with their ``root`` and ``t_end`` (:func:`dual_root`)."""

    u: np.ndarray
    s: float
    y: np.ndarray
    root: float
    t_end: float


@dataclass
class _Newton:
    """One classifier's Newton iteration on the level ``t`` (:func:`certify`), in ``t`` units."""

    problem: BinaryProblem
    upper_t: float
    coef: np.ndarray  # the best map
    errors: np.ndarray  # its errors on every row
    threshold_t: float | None  # decide: the level held until the threshold is settled
    t: float  # the next LP's level
    lps_before: int
    lower_t: float = 0.0
    residual: float = 0.0
    made_two_sided: bool = False
    stop: str = "max_lp"

    def step(self, w: np.ndarray, s: float, y: np.ndarray) -> _Step:
        """The LP's map scored on all rows (the best map where it lowers ``upper``) and its duals' root."""
        u = self.problem.lp.design.array @ w
        errors = self.problem.target.errors(u)
        if errors.max() < self.upper_t:
            self.upper_t, self.coef, self.errors = float(errors.max()), w, errors
        return _Step(u, s, y, *_root(self.problem, y))

    def advance(self, step: _Step, tol_t: float, atol_t: float) -> bool:
        """The bounds after ``step`` and the next level; False once the classifier stops (``stop`` set)."""
        lp, target = self.problem.lp, self.problem.target
        if step.root > self.lower_t:
            self.lower_t = min(step.root, self.upper_t)
            self.residual = _residual(lp.design.array, step.y)
        done = _stopped(self.upper_t, self.lower_t, tol_t, atol_t, self.problem.dominated_below)
        if done:
            self.stop = done
            return False
        if at_floor(step.s) and not self.made_two_sided:
            # the working set does not bound s (no certificate possible): both sides of every row
            self.made_two_sided = True
            if lp.add(np.repeat(lp.rows, 2), np.tile([True, False], lp.rows.size)):
                return True  # the same level again
        t_next = max(self.lower_t, 0.5 * self.t)
        if self.threshold_t is not None and self.lower_t <= self.threshold_t:
            t_next = self.threshold_t  # still undecided (lower at most the threshold, upper above it): stay there
        if step.root >= step.t_end * (1 - 1e-9):
            # the root sits where a used half-space disappears, which says nothing of higher levels.
            # Just above that level the next root can stop at the next row's q_n, one row an LP where
            # many rows' probabilities lie between the bounds; the middle of the interval instead
            # either raises the lower bound past it (infeasible there: the dual's g is positive) or
            # is feasible on the working set
            t_next = min(self.upper_t, max(t_next, step.t_end * (1 + 1e-7), 0.5 * (self.lower_t + self.upper_t)))
        if not _add_violated(lp, target, step.u, step.s, self.t, self.errors) and t_next == self.t:
            self.stop = "stalled"  # a complete working set and no progress: the LP's accuracy limit
            return False
        self.t = t_next
        return True

    def certificate(self) -> Certificate:
        # a later map can lower upper below an earlier root by rounding (both are t* to the last bits)
        lower_t = min(self.lower_t, self.upper_t)
        return _certificate(SQRT2 * lower_t, SQRT2 * self.upper_t, self.coef, self.problem.lp.lps - self.lps_before,
                            self.stop, self.residual)


def _begin(problem: BinaryProblem, atol_t: float, smooth: bool, decide: bool) -> Certificate | _Newton:
    """The classifier's certificate where its best start is exact or dominated, else its Newton
    iteration at the first level, with the working set seeded."""
    lp, target, below = problem.lp, problem.target, problem.dominated_below
    A = lp.design.array
    upper_t, coef = _best_start(A, target, problem.starts, atol_t, below, smooth)
    if upper_t <= atol_t:
        return _certificate(0.0, SQRT2 * upper_t, coef, 0, "floor")
    if SQRT2 * upper_t <= below:
        return _certificate(0.0, SQRT2 * upper_t, coef, 0, "dominated")
    errors = target.errors(A @ coef)
    threshold_t = below / SQRT2 if decide and math.isfinite(below) else None
    _seed_working_set(lp, target, errors)
    t = upper_t if threshold_t is None else min(upper_t, threshold_t)
    return _Newton(problem, upper_t, coef, errors, threshold_t, t, lp.lps)


def _round(heads: list[_Newton], tol_t: float) -> list[_Step]:
    """One LP of every head at its level (:func:`solve_batch`) and the duals its bound rests on: the
    kernel's where they pass the residual check, else their purification's, else HiGHS's (also where
    the kernel did not finish). Below ``t*`` (``s > 0``) a root short of ``upper (1 - tol)`` gives way to
    the purification's where that is larger: an interior point's dual is the centre of the optimal
    face, whose Newton step is shorter than the steepest vertex's. The round's purifications are one
    batch (:func:`purify_batch`)."""
    lps = [head.problem.lp for head in heads]
    solutions = solve_batch(lps, [head.problem.target for head in heads], [head.t for head in heads],
                            [head.coef for head in heads])
    steps: list[_Step | None] = []
    for head, solution in zip(heads, solutions):
        found = _kernel_duals(head, solution)
        steps.append(None if found is None else head.step(*found))
    purify = [k for k, step in enumerate(steps)
              if step is None or (step.s > 0 and step.root < heads[k].upper_t * (1 - tol_t))]
    for k, dual in zip(purify, purify_batch([lps[k] for k in purify])):
        head, step = heads[k], steps[k]
        if step is None:  # the certificate itself rests on the purification, or on HiGHS
            w, s = solutions[k].x[0].cpu().numpy(), float(solutions[k].s[0])
            steps[k] = head.step(w, s, dual) if dual is not None else head.step(*lps[k].highs(head.problem.target, head.t))
        elif dual is not None:
            root, t_end = _root(head.problem, dual)
            if root > step.root:
                step.root, step.t_end, step.y = root, t_end, dual
    return steps


def _kernel_duals(head: _Newton, solution: lp_kernel.ChebyshevSolution) -> tuple[np.ndarray, float, np.ndarray] | None:
    """``(w, s, y)`` of the head's LP: the kernel's where its duals pass the residual check (zero where
    ``s`` sits at the floor: no certificate), HiGHS's where the kernel did not finish; None where its
    duals fail the check (the purification's turn)."""
    if solution.status[0] != "optimal":
        return head.problem.lp.highs(head.problem.target, head.t)
    w, s = solution.x[0].cpu().numpy(), float(solution.s[0])
    if at_floor(s):
        return w, s, np.zeros(2 * head.problem.lp.member.shape[0])
    if float(solution.residual[0]) <= CERT_RESIDUAL_LIMIT:
        return w, s, _stacked(solution)
    return None


def _root(problem: BinaryProblem, y: np.ndarray) -> tuple[float, float]:
    """:func:`dual_root` of duals ``[hi sides, lo sides]`` of every row."""
    n = problem.lp.member.shape[0]
    return dual_root(y, np.repeat([True, False], n), problem.target, np.tile(np.arange(n), 2))


def _best_start(A: np.ndarray, target: BinaryTarget, starts: list[np.ndarray], atol_t: float,
                dominated_below: float, smooth: bool) -> tuple[float, np.ndarray]:
    """``(largest error, map)`` of the best start, refined by :func:`smooth_max_start` unless it is exact
    or already dominated. A start with a non-finite coefficient (an overflowed fit) scores nothing: the
    zero map stands in."""
    starts = [w for w in starts if np.isfinite(w).all()] or [np.zeros(A.shape[1])]
    upper_t, best = min((float(target.errors(A @ w).max()), k) for k, w in enumerate(starts))
    coef = starts[best]
    if smooth and upper_t > atol_t and SQRT2 * upper_t > dominated_below:
        smoothed = smooth_max_start(A, target, coef, enough=dominated_below / SQRT2)
        smoothed_upper = float(target.errors(A @ smoothed).max())
        if smoothed_upper < upper_t:
            upper_t, coef = smoothed_upper, smoothed
    return upper_t, coef


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
    columns = lp.design.array.shape[1]
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
    pick = np.argsort(-errors[rows], kind="stable")[: lp.design.array.shape[1]]
    lp.add(rows[pick], hi_side[pick])
    return True
