"""Certified fixed-classifier distances for ``C >= 3`` classes (docs/method.md, "Multi-class certificates").

The error of a map on example ``n`` is ``||softmax(u_n) - p_n||_2`` with logits ``u_n = M [z_n, 1]`` (class
``C - 1``'s row of ``M`` fixed at 0: ``(C - 1)(r + 1)`` parameters), and ``d = t*`` the smallest largest
error. At a level ``t`` every map reaching ``t`` satisfies, on every example, two families of linear
constraints in ``M`` (a relaxation: the polyhedron contains every such map):

- **exact pairwise slabs**: for a pair ``k != l`` the ratio ``r = s_k / s_l`` of a point of the ball
  ``||s - p|| <= t`` in the plane ``sum s = 1`` is where ``(p_k - r p_l)^2 <= t^2 w(r)``, ``w(r) = (1 - 1/C)
  (1 + r^2) + 2 r / C``: a slab ``lo <= u_k - u_l <= hi`` (:class:`SlabLevels`; at ``C = 2`` the two-class
  slab at ``t / sqrt 2``);
- **concave cuts**: ``|s_k - p_k| <= tau = t sqrt((C - 1) / C)``, and ``log s_k(u) = u_k - logsumexp(u)`` is
  concave, so ``log s_k(u) >= log(p_k - tau)`` is convex and each of its tangent planes is a valid cut.

A Newton iteration on the Chebyshev LP of these rows, as for two classes (:mod:`.binary`), with a
working set of slabs and a growing set of cuts (tangent at each LP's map where it violates the convex
constraint): the LP's duals ``y`` give ``g(t') = sum y_hi hi(t') + y_lo lo(t')``, decreasing, and no map
reaches a level with ``g > 0``, so ``t* >= root(g)``. Every LP's map is scored exactly on all examples (the
upper bound), and the best is refined by the local search. The relaxation may stop short of ``t*``:
then the interval stays open (stop ``"relaxation"``) and its gap is reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np
import torch

from .. import lp as lp_kernel
from ..interval import Interval
from ...errors import NumericalError
from .binary import (CERT_RESIDUAL_LIMIT, S_FLOOR, WORKING_SET_ROWS_PER_COLUMN, at_floor, highs_solve,
                     largest_positive)

# every pair of classes up to this many classes; above, each class against the example's most probable
# target class (C - 1 pairs an example instead of C (C - 1) / 2: any subset of pairs keeps the bound valid)
ALL_PAIRS_UP_TO = 3
CUT_MARGIN = 1e-9  # a cut is added where the map violates its convex constraint by more than this (log units)


def class_pairs(P: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(n, k, l)`` of the pairwise slabs: every pair ``k < l`` of every example up to ``ALL_PAIRS_UP_TO``
    classes, else each class against the example's most probable class."""
    N, C = P.shape
    if C <= ALL_PAIRS_UP_TO:
        pairs = np.array(list(combinations(range(C), 2)))
        return np.repeat(np.arange(N), len(pairs)), np.tile(pairs[:, 0], N), np.tile(pairs[:, 1], N)
    top = P.argmax(axis=1)
    n, k = np.nonzero(np.arange(C)[None, :] != top[:, None])
    return n, k, top[n]


def radius_factor(n_classes: int) -> float:
    """``kappa``: ``||s - p||_2 <= t`` with ``sum (s - p) = 0`` bounds each ``|s_k - p_k|`` by ``kappa t``."""
    return math.sqrt((n_classes - 1) / n_classes)


@dataclass
class SlabLevels:
    """The level functions of a set of LP rows: slab ends ``hi(t)``, ``lo(t)`` (``+inf``/``-inf`` where a side
    is absent) and their rates. A slab row ``(k, l)`` of example ``n`` bounds ``u_k - u_l`` (``pk = p_nk``,
    ``pl = p_nl``); a cut row (``cut`` True) bounds its tangent plane from below, ``lo(t) = log(pk - tau)
    + offset``. The ``lo`` side disappears where ``tau = pk``, the ``hi`` side where ``tau = pl``."""

    pk: np.ndarray
    pl: np.ndarray
    cut: np.ndarray
    offset: np.ndarray
    n_classes: int

    def _parts(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """``(tau, log q0)``, ``q0 = p_k p_l + t^2 / C + t sqrt(bracket)``: the root formula's stable half
        (the discriminant ``4 t^2 bracket`` is written without cancellation)."""
        C, pk, pl = self.n_classes, self.pk, self.pl
        bracket = (1 - 1 / C) * (pk * pk + pl * pl) + 2 * pk * pl / C - t * t * (1 - 2 / C)
        q0 = pk * pl + t * t / C + t * np.sqrt(np.maximum(bracket, 0.0))
        with np.errstate(divide="ignore"):
            return radius_factor(C) * t, np.log(q0)

    def hi(self, t: float) -> np.ndarray:
        tau, log_q0 = self._parts(t)
        inside = (self.pl > tau) & ~self.cut
        with np.errstate(divide="ignore", invalid="ignore"):
            value = log_q0 - np.log(self.pl - tau) - np.log(self.pl + tau)
        return np.where(inside, value, np.inf)

    def lo(self, t: float) -> np.ndarray:
        tau, log_q0 = self._parts(t)
        with np.errstate(divide="ignore", invalid="ignore"):
            slab = np.log(self.pk - tau) + np.log(self.pk + tau) - log_q0
            value = np.where(self.cut, np.log(self.pk - tau) + self.offset, slab)
        return np.where(self.pk > tau, value, -np.inf)

    def rates(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """``d hi / dt``, ``d lo / dt`` (0 where the side is absent): implicit differentiation of the slab
        ends' quadratic, ``d log r / dt = 2 t w(r) / (r dQ/dr)``."""
        C, pk, pl = self.n_classes, self.pk, self.pl
        kappa = radius_factor(C)

        def rate(log_r: np.ndarray) -> np.ndarray:
            r = np.exp(np.where(np.isfinite(log_r), log_r, 0.0))
            w = (1 - 1 / C) * (1 + r * r) + 2 * r / C
            dq_dr = -2 * pl * (pk - r * pl) - t * t * (2 * (1 - 1 / C) * r + 2 / C)
            with np.errstate(divide="ignore", invalid="ignore"):
                value = 2 * t * w / (r * dq_dr)
            return np.where(np.isfinite(log_r) & np.isfinite(value), value, 0.0)

        hi, lo = self.hi(t), self.lo(t)
        with np.errstate(divide="ignore", invalid="ignore"):
            cut_rate = np.where(np.isfinite(lo), -kappa / (pk - kappa * t), 0.0)
        return rate(hi), np.where(self.cut, cut_rate, rate(lo))

    def ends(self) -> tuple[np.ndarray, np.ndarray]:
        """The levels where each row's hi and lo sides disappear."""
        kappa = radius_factor(self.n_classes)
        return np.where(self.cut, np.inf, self.pl / kappa), self.pk / kappa


def dual_root(levels: SlabLevels, y_hi: np.ndarray, y_lo: np.ndarray) -> tuple[float, float]:
    """``(root, t_end)`` of the duals of an LP on ``levels``' rows (module docstring); ``t_end``: the
    lowest level where a used side disappears (``g`` drops to ``-inf`` there)."""
    y_hi, y_lo = np.minimum(y_hi, 0.0), np.maximum(y_lo, 0.0)
    hi_end, lo_end = levels.ends()
    t_end = min(np.min(hi_end[y_hi != 0], initial=np.inf), np.min(lo_end[y_lo != 0], initial=np.inf))
    if not (y_hi.any() or y_lo.any()) or not math.isfinite(t_end):
        return 0.0, math.inf
    used = (y_hi != 0) | (y_lo != 0)
    part = SlabLevels(levels.pk[used], levels.pl[used], levels.cut[used], levels.offset[used], levels.n_classes)
    y_hi, y_lo = y_hi[used], y_lo[used]

    def g(t: float) -> float:
        hi, lo = part.hi(t), part.lo(t)
        with np.errstate(invalid="ignore"):
            value = float(y_hi[y_hi != 0] @ hi[y_hi != 0] + y_lo[y_lo != 0] @ lo[y_lo != 0])
        return -math.inf if math.isnan(value) else value

    return largest_positive(g, float(t_end)), float(t_end)


@dataclass
class Root:
    """The certified root of one LP's duals (0: none), where a used side disappears, and the duals'
    certificate residual."""

    value: float = 0.0
    end: float = math.inf
    residual: float = 0.0
    found: bool = False  # False: the LP gave no certificate (not optimal, or its residual failed the check)

    @property
    def at_end(self) -> bool:
        """The root sits where a used side disappears: it says nothing of higher levels."""
        return self.value >= self.end * (1 - 1e-9)

    @classmethod
    def of(cls, levels: SlabLevels, solution: lp_kernel.ChebyshevSolution) -> Root:
        """The root of the first member's duals, if it is optimal and its residual passes the check."""
        residual = float(solution.residual[0])
        if solution.status[0] != "optimal" or residual > CERT_RESIDUAL_LIMIT:
            return cls()
        value, end = dual_root(levels, solution.y_hi[0].cpu().numpy(), solution.y_lo[0].cpu().numpy())
        return cls(value, end, residual, True)


class MulticlassLP:
    """The relaxation's Chebyshev LPs of one classifier (``P`` (N, C)) on one source (``design = [Z, 1]``,
    float64, on the kernel's device): a working set of slab half-spaces (``member[i, 0/1]``: slab ``i``'s
    hi/lo side is in) and the cuts added so far. ``x``, the LP's variables, is ``M`` (C - 1, q) flattened."""

    def __init__(self, design: torch.Tensor, P: np.ndarray) -> None:
        self.matrix = design.to(torch.float64)
        self.design = self.matrix.cpu().numpy()
        self.P = np.asarray(P, dtype=np.float64)
        self.C = self.P.shape[1]
        self.n, self.k, self.l = class_pairs(self.P)
        self.member = np.zeros((self.n.size, 2), dtype=bool)
        self.cut_n, self.cut_k = np.zeros(0, dtype=int), np.zeros(0, dtype=int)
        self.cut_grad, self.cut_offset = np.zeros((0, self.C)), np.zeros(0)
        self.lps = self.iterations = 0
        self.fallbacks = 0  # LPs whose kernel duals failed the residual check, solved again by HiGHS
        self.uncertified = 0  # LPs that gave no certificate at all (their roots are not used)

    @property
    def columns(self) -> int:
        return (self.C - 1) * self.design.shape[1]

    def logits(self, x: np.ndarray) -> np.ndarray:
        """(N, C) logits of the map ``x``, class ``C - 1``'s fixed at 0."""
        u = self.design @ x.reshape(self.C - 1, -1).T
        return np.hstack([u, np.zeros((u.shape[0], 1))])

    def errors(self, u: np.ndarray) -> np.ndarray:
        """``||softmax(u_n) - p_n||_2`` per example."""
        shifted = np.exp(u - u.max(axis=1, keepdims=True))
        return np.linalg.norm(shifted / shifted.sum(axis=1, keepdims=True) - self.P, axis=1)

    def add(self, slabs: np.ndarray, hi_side: np.ndarray) -> bool:
        """Add slab half-spaces to the set; False when all were in."""
        sides = np.where(hi_side, 0, 1)
        fresh = not self.member[slabs, sides].all()
        self.member[slabs, sides] = True
        return fresh

    def seed(self, errors: np.ndarray) -> None:
        """Both sides of every slab of the start map's worst examples, ``WORKING_SET_ROWS_PER_COLUMN`` slabs
        a column in all (as for two classes)."""
        per_example = self.n.size // self.P.shape[0] if self.C <= ALL_PAIRS_UP_TO else self.C - 1
        worst = np.argsort(-errors, kind="stable")[: max(1, WORKING_SET_ROWS_PER_COLUMN * self.columns // per_example)]
        slabs = np.flatnonzero(np.isin(self.n, worst))
        self.add(np.repeat(slabs, 2), np.tile([True, False], slabs.size))

    def _rows(self) -> tuple[np.ndarray, SlabLevels, lp_kernel.ExampleBlocks]:
        """The LP's rows: the slabs in the set, then the cuts; their levels and design (rows, columns)."""
        slabs = np.flatnonzero(self.member.any(axis=1))
        n, k, l = self.n[slabs], self.k[slabs], self.l[slabs]
        levels = SlabLevels(np.concatenate([self.P[n, k], self.P[self.cut_n, self.cut_k]]),
                            np.concatenate([self.P[n, l], np.zeros(self.cut_n.size)]),
                            np.concatenate([np.zeros(slabs.size, bool), np.ones(self.cut_n.size, bool)]),
                            np.concatenate([np.zeros(slabs.size), self.cut_offset]), self.C)
        device = self.matrix.device
        weights = np.zeros((slabs.size + self.cut_n.size, self.C))
        weights[np.arange(slabs.size), k] = 1.0
        weights[np.arange(slabs.size), l] = -1.0
        weights[slabs.size:] = self.cut_grad
        # only the examples with a row enter the products
        used, index = np.unique(np.concatenate([n, self.cut_n]), return_inverse=True)
        return slabs, levels, lp_kernel.ExampleBlocks(self.matrix[torch.as_tensor(used, device=device)],
                                                      torch.as_tensor(index, device=device),
                                                      torch.as_tensor(weights[:, : self.C - 1], device=device))

    def solve(self, t: float, start: np.ndarray, wanted: float) -> tuple[np.ndarray, float, Root]:
        """``(x, s, root)`` at level ``t``: the LP's map, its value and the certified root of its duals (0
        when none passes the residual check); below ``t*`` (``s > 0``) with a root under ``wanted``, the
        purified dual's root too, the larger counting."""
        slabs, levels, design = self._rows()
        device = self.matrix.device
        inside = np.concatenate([self.member[slabs], np.ones((self.cut_n.size, 2), bool)])
        hi = torch.as_tensor(np.where(inside[:, 0], levels.hi(t), np.inf), device=device)[None]
        lo = torch.as_tensor(np.where(inside[:, 1], levels.lo(t), -np.inf), device=device)[None]
        solution = lp_kernel.solve_chebyshev(design, hi, lo, floor=S_FLOOR,
                                             start=torch.as_tensor(start, device=device)[None])
        self.lps += 1
        self.iterations += int(solution.iterations[0])
        x, s = solution.x[0].cpu().numpy(), float(solution.s[0])
        if at_floor(s) and solution.status[0] == "optimal":
            return x, s, Root()  # the rows do not bound s: no certificate at this level
        root = Root.of(levels, solution)
        if s > 0 and root.value < wanted:
            hi_rate, lo_rate = (torch.as_tensor(rate, device=device)[None] for rate in levels.rates(t))
            steepest = lp_kernel.steepest_optimal_dual(design, solution, hi, lo, hi_rate, lo_rate)
            self.iterations += int(steepest.iterations[0])
            root = max(root, Root.of(levels, steepest), key=lambda r: (r.found, r.value))
        if not root.found:
            root = self._highs_root(design, hi[0].cpu().numpy(), lo[0].cpu().numpy(), levels)
        return x, s, root

    def _highs_root(self, design: lp_kernel.ExampleBlocks, hi: np.ndarray, lo: np.ndarray, levels: SlabLevels) -> Root:
        """The root of HiGHS's vertex duals for an LP whose kernel duals failed the residual check (counted
        in ``fallbacks``); no root (counted in ``uncertified``) if HiGHS fails too."""
        self.fallbacks += 1
        try:
            _, _, y = highs_solve(design.dense().cpu().numpy(), hi, lo, "a multi-class classifier")
        except NumericalError:
            self.uncertified += 1
            return Root()
        rows = hi.size
        value, end = dual_root(levels, y[:rows], y[rows:])
        return Root(value, end, 0.0, True)

    def add_violated(self, u: np.ndarray, s: float, t: float, errors: np.ndarray) -> bool:
        """Add the slab half-spaces outside the set that ``u`` violates at ``t`` by more than ``s``, those of
        the examples the best map gets most wrong first, at most ``columns``; False when there are none."""
        levels = SlabLevels(self.P[self.n, self.k], self.P[self.n, self.l], np.zeros(self.n.size, bool),
                            np.zeros(self.n.size), self.C)
        gap = u[self.n, self.k] - u[self.n, self.l]
        over = np.stack([gap - levels.hi(t), levels.lo(t) - gap], axis=1)
        over[self.member] = -np.inf
        slabs, sides = np.nonzero(over > s + 1e-9 * max(1.0, abs(s)))
        if not slabs.size:
            return False
        pick = np.argsort(-errors[self.n[slabs]], kind="stable")[: self.columns]
        return self.add(slabs[pick], sides[pick] == 0)

    def add_cuts(self, u: np.ndarray, s: float, t: float) -> bool:
        """Tangent cuts of ``log s_k(u) >= log(p_k - tau)`` at ``u`` where it is violated by more than
        ``max(s, 0) + CUT_MARGIN``, the largest violations first, at most ``columns``; False when none."""
        tau = radius_factor(self.C) * t
        log_s = u - np.logaddexp.reduce(u, axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            violation = np.where(self.P > tau, np.log(self.P - tau) - log_s, -np.inf)
        n, k = np.nonzero(violation > max(s, 0.0) + CUT_MARGIN)
        if not n.size:
            return False
        pick = np.argsort(-violation[n, k], kind="stable")[: self.columns]
        n, k = n[pick], k[pick]
        grad = -np.exp(log_s[n])
        grad[np.arange(n.size), k] += 1.0
        # the tangent plane of f = log s_k at u0: f(u) <= f(u0) + g.(u - u0), so f(u) >= beta implies
        # g.u >= beta - f(u0) + g.u0; with class C - 1's logit 0, g.u is the row g[:C - 1] . u[:C - 1]
        offset = -log_s[n, k] + (grad * u[n]).sum(axis=1)
        self.cut_n, self.cut_k = np.concatenate([self.cut_n, n]), np.concatenate([self.cut_k, k])
        self.cut_grad = np.vstack([self.cut_grad, grad])
        self.cut_offset = np.concatenate([self.cut_offset, offset])
        return True


@dataclass
class MulticlassCertificate:
    """``d`` of one classifier in ``interval``, its ``upper`` attained by the map ``coef`` (C - 1, q)."""

    interval: Interval
    coef: np.ndarray
    cert_residual: float = 0.0  # max |A_W^T y| / ||y||_1 of the duals the lower bound rests on
    cuts: int = 0  # tangent cuts added
    fallbacks: int = 0  # LPs solved again by HiGHS


def certify(lp: MulticlassLP, starts: list[np.ndarray], tol: float, atol: float, max_lp: int = 100,
            dominated_below: float = -math.inf, decide: bool = False) -> MulticlassCertificate:
    """Certified ``[lower, upper]`` of ``d = t*`` for one classifier (module docstring): a Newton iteration
    on ``t`` as :func:`.binary.certify`'s, with cuts. ``starts``: maps ``x`` (speed only); ``tol``, ``atol``,
    ``dominated_below`` and ``decide`` as there. Stops ``"tol"``, ``"floor"``, ``"dominated"``,
    ``"relaxation"`` (the relaxation's own optimum reached: it is feasible, with nothing left to add,
    within ``tol`` of the lower bound) or ``"max_lp"``."""
    starts = [x for x in starts if np.isfinite(x).all()] or [np.zeros(lp.columns)]
    upper, best = min((float(lp.errors(lp.logits(x)).max()), k) for k, x in enumerate(starts))
    coef = starts[best]
    lps_before = lp.lps
    if upper <= atol or upper <= dominated_below:
        return _certificate(0.0, upper, coef, 0, "floor" if upper <= atol else "dominated", lp)
    errors = lp.errors(lp.logits(coef))
    lp.seed(errors)
    lower, residual, stop = 0.0, 0.0, "max_lp"
    ceiling = upper  # the lowest level where the relaxation was feasible with nothing left to add
    threshold = dominated_below if decide and math.isfinite(dominated_below) else None
    t = upper if threshold is None else min(upper, threshold)
    for _ in range(max_lp):
        x, s, root = lp.solve(t, coef, upper * (1 - tol))
        u = lp.logits(x)
        lp_errors = lp.errors(u)
        if lp_errors.max() < upper:
            upper, coef, errors = float(lp_errors.max()), x, lp_errors
        previous = lower
        if root.value > lower:
            lower, residual = min(root.value, upper), root.residual
        done = _stopped(upper, lower, tol, atol, dominated_below)
        if done:
            stop = done
            break
        added = lp.add_violated(u, s, t, errors) | lp.add_cuts(u, s, t)
        if s <= 0 and not added:
            ceiling = min(ceiling, t)
        t_next = _next_level(t, lower, ceiling, root, threshold)
        # the relaxation's own optimum: no lower bound above the ceiling, none above this level to the
        # LP's accuracy, or a Newton step from the lower bound that moved it less than a tenth of tol
        # (the cuts' tail: each round raises the relaxation's optimum less)
        stalled = (root.found and not root.at_end and s > 0 and t >= previous
                   and lower - previous < 0.1 * tol * upper)
        if ceiling - lower <= tol * upper or (not added and t_next == t) or stalled:
            stop = "relaxation"
            break
        t = t_next
    return _certificate(min(lower, upper), upper, coef, lp.lps - lps_before, stop, lp, residual)


def _next_level(t: float, lower: float, ceiling: float, root: Root, threshold: float | None) -> float:
    """The next LP's level, by :func:`.binary.certify`'s rule: the Newton step (the lower bound, at least
    half the level), the threshold while undecided, and past a root stuck where a side disappears the
    middle of ``[lower, ceiling]`` (a bisection: the relaxation is infeasible below ``lower`` and was
    feasible at ``ceiling``)."""
    t_next = max(lower, 0.5 * t)
    if threshold is not None and lower <= threshold:
        t_next = threshold
    if root.at_end:
        t_next = min(ceiling, max(t_next, root.end * (1 + 1e-7), 0.5 * (lower + ceiling)))
    return t_next


def _stopped(upper: float, lower: float, tol: float, atol: float, dominated_below: float) -> str | None:
    if upper - lower <= tol * upper:
        return "tol"
    if upper <= atol:
        return "floor"
    if upper <= dominated_below:
        return "dominated"
    return None


def _certificate(lower: float, upper: float, coef: np.ndarray, lps: int, stop: str, lp: MulticlassLP,
                 residual: float = 0.0) -> MulticlassCertificate:
    interval = Interval(lower, upper, stop=stop, within_tol=stop in ("tol", "floor"), solver="interior-point",
                        iterations=lps)
    return MulticlassCertificate(interval, coef, residual, int(lp.cut_n.size), lp.fallbacks)


def to_lp_map(A: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The LP's variables of the logit map ``u = z A + c`` (``A`` (r, C), ``c`` (C,)): class ``C - 1``'s row
    subtracted (softmax does not see it)."""
    M = np.vstack([A, c[None]]).T  # (C, r + 1)
    return (M[:-1] - M[-1]).ravel()


def from_lp_map(x: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(A (r, C), c (C,))`` of the LP's variables ``x``, class ``C - 1``'s column 0."""
    M = np.vstack([x.reshape(n_classes - 1, -1), np.zeros((1, x.size // (n_classes - 1)))])
    return M[:, :-1].T.copy(), M[:, -1].copy()


def certify_classifier(Z: torch.Tensor, P: np.ndarray, A: np.ndarray, c: np.ndarray, settings,
                       dominated_below: float = -math.inf, decide: bool = False) -> MulticlassCertificate:
    """:func:`certify` for one classifier's targets ``P`` (N, C) on the whitened source ``Z`` (N, r), from the
    local search's map ``(A, c)``; the best LP map is then refined by the local search (an upper bound
    attained by a map, whichever is lower counts). ``settings``: the engine's ``ExtrinsicSettings``."""
    from .local import refine

    design = torch.cat([Z.to(torch.float64), torch.ones((Z.shape[0], 1), dtype=torch.float64, device=Z.device)], 1)
    lp = MulticlassLP(design, P)
    start = to_lp_map(np.asarray(A, dtype=np.float64), np.asarray(c, dtype=np.float64))
    found = certify(lp, [start], settings.tol, settings.atol, settings.max_lp, dominated_below, decide)
    interval = found.interval
    if found.coef is start or interval.stop in ("tol", "floor", "dominated"):
        return found
    A_lp, c_lp = (torch.as_tensor(v, dtype=Z.dtype, device=Z.device) for v in from_lp_map(found.coef, lp.C))
    value, _, _, A_refined, c_refined = refine(Z, torch.as_tensor(P, dtype=Z.dtype, device=Z.device)[:, None],
                                               A_lp[:, None], c_lp[None], settings)
    if not float(value[0]) < interval.upper:
        return found
    coef = to_lp_map(A_refined[:, 0].cpu().numpy().astype(np.float64), c_refined[0].cpu().numpy().astype(np.float64))
    upper = float(lp.errors(lp.logits(coef)).max())  # scored as every LP map is
    if not upper < interval.upper:
        return found
    closed = upper - interval.lower <= settings.tol * upper
    interval = Interval(interval.lower, upper, stop="tol" if closed else interval.stop, within_tol=closed,
                        solver=interval.solver, iterations=interval.iterations)
    return replace(found, interval=interval, coef=coef)
