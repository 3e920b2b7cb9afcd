"""Certified minimax (Chebyshev) regression: ``min_C max_n ||y_bn - x_n C||_2`` for a batch of targets.

This is the solver behind ``d_aff`` and ``d_lin`` (Eq. 19 of the paper) and the rank-deficiency grid.
Every solver here works on the same dual and certifies the same interval:

* **dual.** For weights ``w`` on the simplex, ``g(w) = min_C sum_n w_n ||y_n - x_n C||^2`` is a
  weighted least-squares fit, and ``sqrt(g(w))`` is a **lower bound** on the optimum (a maximum is
  at least any weighted mean). ``g`` is concave; its gradient is the vector ``G`` of squared
  residuals of the weighted fit, and the optimum equals ``max_w sqrt(g(w))``.
* **primal.** The largest residual ``sqrt(max_n G_n)`` of any fitted map is an **upper bound**
  (the map attains it).
* **stop.** when ``upper - lower <= tol * upper + atol`` (``atol``: a float32-noise floor chosen by
  the caller) or after ``max_iter`` weighted fits. ``converged`` records whether the returned
  interval passes that test.

Solvers (``SOLVERS``, selected by name: ``jacobi``, the default, and ``lawson``) are the weight
updates of :mod:`affine_homotopy.core.weight_updates`.

Working set (:func:`working_set_fit`, ``working_set=True``; the engine's default where
:func:`uses_working_set` holds, i.e. N at least ten times the first set of 4 p rows): on real sentence-embedding
pairs the optimum rests on a minority of the rows at large N (docs/performance.md), so the solver runs
on a working set of rows (those with the largest least-squares residuals first), checks the map on
every row and adds the violators; certified on the full problem (see :func:`working_set_fit`).

``d_lin``'s hard case: a full-rank encoder mapped without bias onto another whose mean it cannot
reach linearly has effectively one-dimensional residuals (the optimum rests on about p + 1 rows);
both solvers need hundreds of fits there (Lawson over a thousand). The intervals stay certified;
pairs that stop at ``max_iter`` are flagged (``converged`` False). That is why the engine computes
``d_lin`` only when asked (:class:`~affine_homotopy.core.intrinsic.IntrinsicSettings` ``measures``).

Both batch over targets sharing one design, leave rows with zero weight (or below ``PRUNE`` times
the largest) out of the weighted fits (every row still enters the upper bound), and can iterate in
float32 (``iterate_dtype``): the returned bounds are then recomputed in the design's precision
from the iterations' best weights (:func:`certify`), so they stay certified. Weighted least squares
is :class:`affine_homotopy.core.linalg.WeightedLeastSquares` (its ``leverages`` give ``k_n``).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import torch

from ..errors import ConfigError, DataError
from .interval import Interval
from .linalg import WeightedLeastSquares, residual_norms, weighted_fit
from .working_set_rule import uses_working_set, working_set_size  # noqa: F401  (part of this module's API)
from .weight_updates import DEFAULT_MEMORY, DEFAULT_SOLVER, SOLVERS, JacobiUpdate, LawsonUpdate, SolverOptions

log = logging.getLogger(__name__)

# the working-set outer loop (working_set_fit); when it runs and its first set's size: .working_set_rule
WORKING_SET_LOOSE_TOL = 1e-2  # the relative gap of the rounds before the set is nearly complete
WORKING_SET_JOIN = 1.0  # rows outside the set join it when their residual exceeds this times the lower bound
# rows that carry no weight and whose residual is this far (relative) below the lower bound leave the set: a
# set that only grows keeps every row some early, poor map put in it, and its solves cost several times the
# fits of one kept to the rows near the optimum
WORKING_SET_KEEP = 0.01
# the precision of the loose rounds and of the residual screens that choose rows: neither enters the
# certificate, which is computed in the design's precision
WORKING_SET_SCREEN_DTYPE = torch.float32
# the tight rounds iterate in that precision too (their bounds recomputed in the design's, as
# minimax_fit's iterate_dtype does) when tol is at least this: float32 iterates resolve a relative gap
# of about 1e-6, and a float32 weighted fit is cheaper than a float64 one for the same fits
WORKING_SET_FLOAT32_MIN_TOL = 1e-5
PRUNE = 1e-10  # rows whose weight falls below this times the largest get weight 0 and leave the weighted fits


@dataclass
class MinimaxResult:
    upper: torch.Tensor  # (B,) max residual of the best map found: the reported value
    lower: torch.Tensor  # (B,) certified lower bound
    least_squares: torch.Tensor  # (B,) max residual of the plain least-squares map (iteration 1)
    coef: torch.Tensor  # (B, p, q) coefficients of the best map on the design
    iterations: torch.Tensor  # (B,) weighted least-squares fits used
    weights: torch.Tensor  # (B, N) the weights whose weighted least-squares fit is the best map
    weights_lower: torch.Tensor | None = None  # (B, N) the weights whose dual value is `lower` squared
    converged: torch.Tensor | None = None  # (B,) bool: upper - lower <= tol * upper + atol
    rounds: torch.Tensor | None = None  # (B,) working-set rounds (None: solved on every row at once)
    solver: str = ""  # the key of SOLVERS that produced it

    def interval(self, b: int) -> Interval:
        """Member ``b`` as the certified :class:`~affine_homotopy.core.interval.Interval`: stopped at ``tol``
        (``within_tol``) or at ``max_iter``."""
        within = bool(self.converged[b]) if self.converged is not None else False
        return Interval(float(self.lower[b]), float(self.upper[b]), stop="tol" if within else "max_iter",
                        within_tol=within, solver=self.solver, iterations=int(self.iterations[b]))


# ---------------------------------------------------------------------------------------------
# the shared iteration and certificate


def minimax_fit(
    design: torch.Tensor, targets: torch.Tensor, atol: torch.Tensor, tol: float = 1e-3, max_iter: int = 1000, *,
    solver: str = DEFAULT_SOLVER, power: float = 1.0, memory: int = DEFAULT_MEMORY,
    iterate_dtype: torch.dtype | None = None, orthonormal: bool = False,
    initial_weights: torch.Tensor | None = None, working_set: bool = False,
) -> MinimaxResult:
    """``min_C max_n ||targets[b, n] - design[n] @ C||_2`` for a batch of targets sharing a design.

    ``design`` (N, p) must have full column rank (an orthonormal basis, possibly with a constant
    column). ``targets`` (B, N, q): zero-padded columns are harmless. ``atol`` (B,): the absolute
    part of the stopping test. ``solver``: a key of :data:`SOLVERS` (:mod:`.weight_updates`); ``power``
    applies to ``lawson``, ``memory`` (Anderson) to ``jacobi``.

    ``iterate_dtype`` (e.g. float32) runs the iterations in that precision and re-certifies in the
    design's (:func:`certify`). ``orthonormal``: the design's columns are orthonormal, so the first
    (uniform-weight) step is a projection and needs no Gram matrix. ``initial_weights`` (B, N),
    non-negative with a positive sum per row: a warm start instead of uniform weights (the first
    step is then a weighted fit, and ``least_squares`` is that fit's largest residual).
    ``working_set``: solve by :func:`working_set_fit` when :func:`uses_working_set` says it pays.
    """
    check_solver(solver)
    if max_iter < 1:
        raise ConfigError(f"max_iter must be >= 1, got {max_iter}", argument="max_iter", value=max_iter)
    if working_set and initial_weights is None and uses_working_set(targets.shape[1], design.shape[1]):
        return working_set_fit(design, targets, atol, tol, max_iter, orthonormal=orthonormal, solver=solver,
                               power=power, memory=memory, iterate_dtype=iterate_dtype)
    exact_design, exact_targets = design, targets
    if iterate_dtype is not None and iterate_dtype != design.dtype:
        design, targets = design.to(iterate_dtype), targets.to(iterate_dtype)
    batch, n, _ = targets.shape
    update = SOLVERS[solver](batch, n, design.dtype, design.device, SolverOptions(power, memory))
    start = None
    if initial_weights is not None:
        if initial_weights.shape != targets.shape[:2] or bool((initial_weights < 0).any()):
            raise DataError(f"initial_weights must be non-negative of shape {tuple(targets.shape[:2])}, "
                            f"got shape {tuple(initial_weights.shape)}", argument="initial_weights")
        start = initial_weights.to(design.dtype)
        start = start / start.sum(dim=1, keepdim=True)
    result = _iterate(design, targets, atol.to(design.dtype), tol, max_iter, update, orthonormal, start)
    if design is not exact_design:
        result = certify(exact_design, exact_targets, result.weights, result.weights_lower, result.iterations,
                         orthonormal)
    result.converged = result.upper - result.lower <= tol * result.upper + atol.to(result.upper.dtype)
    result.solver = solver
    return result


def check_solver(solver: str) -> None:
    """A ConfigError naming the argument ``solver`` unless it is a key of :data:`SOLVERS`."""
    if solver not in SOLVERS:
        raise ConfigError(f"unknown minimax solver {solver!r}; choose one of {sorted(SOLVERS)}", argument="solver",
                          value=solver)


def _iterate(design: torch.Tensor, targets: torch.Tensor, atol: torch.Tensor, tol: float, max_iter: int,
             update: LawsonUpdate | JacobiUpdate, orthonormal: bool,
             start: torch.Tensor | None = None) -> MinimaxResult:
    """Weighted fits, bounds and the stopping test; ``update`` proposes the next weights (from ``start``,
    on the simplex, or uniform)."""
    batch, n, q = targets.shape
    dtype, device = design.dtype, design.device
    if start is None:
        weights = torch.full((batch, n), 1.0 / n, dtype=dtype, device=device)
    else:
        weights, orthonormal = start.clone(), False  # a warm start: the first fit is a weighted one
    upper = torch.full((batch,), math.inf, dtype=dtype, device=device)
    lower = torch.zeros_like(upper)
    least_squares = torch.zeros_like(upper)
    coef_best = targets.new_zeros((batch, design.shape[1], q))
    weights_best = weights.clone()  # the weights whose fit attains `upper`
    weights_lower = weights.clone()  # the weights that attain `lower`
    iterations = torch.zeros(batch, dtype=torch.long, device=device)
    active = torch.arange(batch, device=device)
    rows: torch.Tensor | None = None  # rows carrying weight in any active pair (None: all)
    if start is not None:
        carrying = (weights > 0).any(dim=0)
        rows = None if bool(carrying.all()) else torch.nonzero(carrying).squeeze(1)
    for it in range(1, max_iter + 1):
        w = weights[active]
        current = targets if active.numel() == batch else targets[active]  # no copy while all are active
        fit: WeightedLeastSquares | None = None
        if it == 1 and orthonormal:
            coef = design.T @ current  # uniform weights on orthonormal columns: a projection
        else:
            fit = WeightedLeastSquares(design, w, rows)
            coef = fit.solve(current)
        sq_residual = residual_norms(design, current, coef, squared=True)
        dual = (w * sq_residual).sum(dim=1)
        step_upper = sq_residual.max(dim=1).values.sqrt()
        step_lower = dual.clamp(min=0).sqrt()
        if it == 1:
            least_squares[active] = step_upper
        better = step_upper < upper[active]
        coef_best[active[better]] = coef[better]
        weights_best[active[better]] = w[better]
        higher = step_lower > lower[active]
        weights_lower[active[higher]] = w[higher]
        upper[active] = torch.minimum(upper[active], step_upper)
        lower[active] = torch.maximum(lower[active], step_lower)
        iterations[active] = it
        going = (upper[active] - lower[active]) > tol * upper[active] + atol[active]
        if it == max_iter or not bool(going.any()):
            break
        ids = active[going]
        weights[ids] = _next_weights(update, design, fit, ids, going, w, sq_residual, dual)
        active = ids
        carrying = (weights[active] > 0).any(dim=0)
        rows = None if bool(carrying.all()) else torch.nonzero(carrying).squeeze(1)
    return MinimaxResult(upper=upper, lower=torch.minimum(lower, upper), least_squares=least_squares, coef=coef_best,
                         iterations=iterations, weights=weights_best, weights_lower=weights_lower)


def _next_weights(update: LawsonUpdate | JacobiUpdate, design: torch.Tensor, fit: WeightedLeastSquares | None,
                  ids: torch.Tensor, going: torch.Tensor, w: torch.Tensor, sq_residual: torch.Tensor,
                  dual: torch.Tensor) -> torch.Tensor:
    """The next weights of the targets still ``going`` (``ids``): ``update``'s proposal with the rows below
    ``PRUNE`` times the largest set to 0, back on the simplex; a proposal that is not usable keeps ``w``."""
    n = design.shape[0]

    def leverages() -> torch.Tensor:
        if fit is None:  # M = X^T X / N = I / N
            return (n * (design * design).sum(dim=1)).expand(int(going.sum()), n)
        return fit.leverages(going)

    proposed = update(ids, w[going], sq_residual[going], dual[going], leverages)
    proposed = torch.where(proposed >= PRUNE * proposed.max(dim=1, keepdim=True).values, proposed, 0.0)
    total = proposed.sum(dim=1, keepdim=True)
    usable = (total > 0) & torch.isfinite(total)
    return torch.where(usable, proposed / total.clamp(min=torch.finfo(w.dtype).tiny), w[going])


def certify(design: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor, weights_lower: torch.Tensor,
            iterations: torch.Tensor, orthonormal: bool = False) -> MinimaxResult:
    """The interval recomputed in ``design``'s precision from an iteration's weights.

    Upper bound: the smaller of the largest residuals of the weighted fit at ``weights`` and of the
    plain least-squares fit (both maps exist, so both are upper bounds). Lower bound: the dual value
    at ``weights_lower``. Used after iterating in a lower precision.
    """
    # back on the simplex in this precision (float32 sums are off by ~1e-7, which would inflate the bound)
    weights, weights_lower = (v.to(design.dtype) / v.to(design.dtype).sum(dim=1, keepdim=True)
                              for v in (weights, weights_lower))
    uniform = torch.full_like(weights, 1.0 / design.shape[0])
    if orthonormal:  # least squares on orthonormal columns: a projection
        coef_ls = design.T @ targets
        residual_ls = residual_norms(design, targets, coef_ls)
    else:
        coef_ls, residual_ls = weighted_fit(design, targets, uniform)
    coef_up, residual_up = weighted_fit(design, targets, weights)
    residual_low = residual_up.clone()
    other = ~(weights == weights_lower).all(dim=1)  # often the same iterate holds both bounds
    if bool(other.any()):
        residual_low[other] = weighted_fit(design, targets[other], weights_lower[other])[1]
    ls_value, up_value = residual_ls.max(dim=1).values, residual_up.max(dim=1).values
    lower = (weights_lower * residual_low**2).sum(dim=1).sqrt()
    use_ls = ls_value < up_value
    upper = torch.where(use_ls, ls_value, up_value)
    coef = torch.where(use_ls[:, None, None], coef_ls, coef_up)
    weights_best = torch.where(use_ls[:, None], uniform, weights)
    return MinimaxResult(upper=upper, lower=torch.minimum(lower, upper), least_squares=ls_value, coef=coef,
                         iterations=iterations, weights=weights_best, weights_lower=weights_lower)


# ---------------------------------------------------------------------------------------------
# the working-set outer loop


def working_set_fit(
    design: torch.Tensor, targets: torch.Tensor, atol: torch.Tensor, tol: float = 1e-3, max_iter: int = 1000, *,
    orthonormal: bool = False, initial_rows: int | None = None, **options,
) -> MinimaxResult:
    """:func:`minimax_fit` by a working-set outer loop: solve on a subset of the rows, check the map on all.

    Per target: the first working set is the ``initial_rows`` rows (default :func:`working_set_size`)
    with the largest residuals of the plain least-squares map. Each round solves the minimax problem
    on the working set (warm-started at the previous round's dual weights, new rows at weight 0) and
    screens the round's map on **every** row. Then the rows outside the set whose residual exceeds
    the lower bound join it (the worst first, at most as many as the set holds), and the rows that
    carry no dual weight and lie more than ``WORKING_SET_KEEP`` below the lower bound leave it (the
    first set's size of largest residuals always stays).

    Rounds while the set is far from complete are solved to ``WORKING_SET_LOOSE_TOL`` in float32, and
    the screens run in float32: they only choose rows. The tight rounds iterate in float32 too where
    ``tol >= WORKING_SET_FLOAT32_MIN_TOL`` (their bounds recomputed in the design's precision), in
    ``iterate_dtype`` below it. The loop stops when a screened map passes the stopping test and the
    same map, recomputed on every row in the design's precision, passes it too.

    Certified as :func:`minimax_fit`: zero weights outside the working set are a point of the full
    simplex, and the dual value there is the subset's, so every round's lower bound (recomputed in the
    design's precision) holds for the full problem, as does the least-squares fit's (uniform weights);
    the upper bound is the largest residual over all rows, in the design's precision, of the best map
    certified. ``iterations`` counts the weighted fits of all rounds plus the least-squares fit;
    ``max_iter`` caps that total. ``weights`` and ``weights_lower`` are full-length (zero outside).
    """
    batch, n, _ = targets.shape
    size = min(n, initial_rows or working_set_size(n, design.shape[1]))
    atol = atol.to(design.dtype)
    best, residual_ls, closed = _least_squares_start(design, targets, atol, tol, orthonormal)
    design_screen = _Screen.screen_copy(design)  # one float32 copy of the design for every target
    for b in range(batch):
        if not bool(closed[b]):
            _working_set_target(design, targets[b], residual_ls[b], atol, b, best, size, tol, max_iter, options,
                                design_screen)
    lower = torch.minimum(best.lower, best.upper)
    return MinimaxResult(upper=best.upper, lower=lower, least_squares=best.least_squares, coef=best.coef,
                         iterations=best.iterations, weights=best.weights, weights_lower=best.weights_lower,
                         converged=best.upper - lower <= tol * best.upper + atol, rounds=best.rounds,
                         solver=options.get("solver", DEFAULT_SOLVER))


def _least_squares_start(design: torch.Tensor, targets: torch.Tensor, atol: torch.Tensor, tol: float,
                         orthonormal: bool) -> tuple[MinimaxResult, torch.Tensor, torch.Tensor]:
    """The plain least-squares fit of every target as the best interval so far (``lower`` unclipped until
    the end), its residuals, and which targets it already closes.

    The least-squares fit is the weighted fit at uniform weights: its dual value is a lower bound, and
    where that interval already closes (a target that is an affine image of the source, its residuals
    at the float floor) no round is needed; the rounds' float32 screens could not even resolve them."""
    batch, n, _ = targets.shape
    uniform = torch.full((batch, n), 1.0 / n, dtype=design.dtype, device=design.device)
    if orthonormal:
        coef_ls = design.T @ targets
        residual_ls = residual_norms(design, targets, coef_ls)
    else:
        coef_ls, residual_ls = weighted_fit(design, targets, uniform)
    least_squares = residual_ls.max(dim=1).values
    iterations = torch.ones(batch, dtype=torch.long, device=design.device)
    best = MinimaxResult(upper=least_squares.clone(), lower=torch.zeros_like(least_squares),
                         least_squares=least_squares, coef=coef_ls.clone(), iterations=iterations,
                         weights=uniform.clone(), weights_lower=uniform.clone(), rounds=torch.zeros_like(iterations))
    ls_lower = residual_ls.square().mean(dim=1).sqrt()
    closed = least_squares - ls_lower <= tol * least_squares + atol
    best.lower[closed] = torch.minimum(ls_lower[closed], least_squares[closed])
    return best, residual_ls, closed


@dataclass
class _Rounds:
    """The state of one target's working-set rounds that chooses rows: the lower bound ``guide`` (the
    loose rounds' float32 ones included) and its dual weights and rows, and the best screened map not
    certified (its value and weights)."""

    guide: float
    guide_weights: tuple[torch.Tensor, torch.Tensor] | None = None
    candidate: tuple[float, torch.Tensor] | None = None


def _round_options(options: dict, dtype: torch.dtype, tol: float) -> dict:
    """The tight rounds' options: float32 iterates where ``tol`` allows it (bounds recomputed in ``dtype``)."""
    options = {key: value for key, value in options.items() if key != "iterate_dtype" or value != dtype}
    if tol >= WORKING_SET_FLOAT32_MIN_TOL and dtype.itemsize > WORKING_SET_SCREEN_DTYPE.itemsize:
        options["iterate_dtype"] = WORKING_SET_SCREEN_DTYPE
    return options


def _solve_round(design: torch.Tensor, target: torch.Tensor, screen: "_Screen", rows: torch.Tensor,
                 atol: torch.Tensor, inner: float, budget: int, start: torch.Tensor | None, loose: bool,
                 options: dict) -> MinimaxResult:
    """One round on the working set ``rows``: a loose round only chooses rows, so it runs in float32
    throughout and its bounds enter no certificate."""
    if loose:
        return minimax_fit(screen.design_screen[rows], screen.target_screen[rows][None], atol.to(screen.dtype),
                           inner, budget, initial_weights=None if start is None else start.to(screen.dtype),
                           **{key: value for key, value in options.items() if key != "iterate_dtype"})
    return minimax_fit(design[rows], target[rows][None], atol, inner, budget, initial_weights=start, **options)


def _working_set_target(design: torch.Tensor, target: torch.Tensor, residual: torch.Tensor, atol: torch.Tensor, b: int,
                        best: MinimaxResult, size: int, tol: float, max_iter: int, options: dict,
                        design_screen: torch.Tensor) -> None:
    """The working-set rounds of target ``b`` (see :func:`working_set_fit`), updating ``best[b]`` in place;
    ``residual``: the least-squares map's residuals, which choose the first set; ``design_screen``: the
    design in the screens' precision, shared by the targets (:meth:`_Screen.screen_copy`)."""
    n, dtype, device = target.shape[0], design.dtype, design.device
    screen = _Screen(design, target, design_screen)
    rows = torch.unique(torch.topk(residual, size).indices)  # sorted
    start: torch.Tensor | None = None
    inner = max(tol, WORKING_SET_LOOSE_TOL)  # while the set is far from complete, a rough solve is enough
    state = _Rounds(float(best.lower[b]))
    options = _round_options(options, dtype, tol)
    while int(best.iterations[b]) < max_iter:
        loose = inner > tol
        sub = _solve_round(design, target, screen, rows, atol[b : b + 1], inner, max_iter - int(best.iterations[b]),
                           start, loose, options)
        best.iterations[b] += sub.iterations[0]
        best.rounds[b] += 1
        weights = torch.zeros(n, dtype=dtype, device=device)
        weights[rows] = sub.weights[0].to(dtype)
        if float(sub.lower[0]) > state.guide:
            state.guide, state.guide_weights = float(sub.lower[0]), (sub.weights_lower[0].to(dtype), rows)
        if not loose and sub.lower[0] > best.lower[b]:
            best.lower[b] = sub.lower[0]
            best.weights_lower[b] = 0.0
            best.weights_lower[b, rows] = sub.weights_lower[0].to(dtype)
        residual = screen.residuals(sub.coef[0])
        value = float(residual.max())
        if not loose and value * (1 - tol) <= float(best.lower[b]) + float(atol[b]):
            # the screened map closes the gap: certify it on every row in the design's precision
            residual = screen.exact(sub.coef[0])
            value, state.candidate = float(residual.max()), None
            _keep_if_better(best, b, value, sub.coef[0], weights)
            if best.upper[b] - best.lower[b] <= tol * best.upper[b] + atol[b]:
                break
        elif state.candidate is None or value < state.candidate[0]:
            state.candidate = (value, weights)
        log.debug("working set round %d: %d rows, %d fits, map's largest residual %.6g (on the set %.6g), "
                  "lower bound %.6g", int(best.rounds[b]), rows.numel(), int(sub.iterations[0]), value,
                  float(sub.upper[0]), state.guide)
        outside = torch.ones(n, dtype=torch.bool, device=device)
        outside[rows] = False
        violation = torch.where(outside & (residual > state.guide * WORKING_SET_JOIN), residual, -1.0)
        count = min(int((violation > 0).sum()), rows.numel())
        if count == 0 and not loose:
            break  # the subset's interval did not close within max_iter
        # the set is nearly complete once the map's excess outside it is within the loose gap: solve to tol
        if count == 0 or value - float(sub.upper[0]) <= inner * value:
            inner = tol
        dual = torch.zeros(n, dtype=dtype, device=device)  # the warm start: the round's dual weights
        dual[rows] = sub.weights_lower[0].to(dtype)
        rows, start = _next_set(rows, dual, residual, violation, count, size, state.guide)
    _finish_target(design, target, screen, best, b, tol, atol, state)


def _finish_target(design: torch.Tensor, target: torch.Tensor, screen: "_Screen", best: MinimaxResult, b: int,
                   tol: float, atol: torch.Tensor, state: _Rounds) -> None:
    """A loop that ended without closing the gap: the guide's lower bound where it is higher, and the best
    screened map, refitted in the design's precision, where it is better."""
    if best.upper[b] - best.lower[b] > tol * best.upper[b] + atol[b]:
        _certify_guide(design, target, best, b, state.guide, state.guide_weights)
    if state.candidate is not None and state.candidate[0] < float(best.upper[b]):
        carrying = torch.nonzero(state.candidate[1] > 0).squeeze(1)
        coef = WeightedLeastSquares(design, state.candidate[1], carrying).solve(target)
        _keep_if_better(best, b, float(screen.exact(coef).max()), coef, state.candidate[1])


def _certify_guide(design: torch.Tensor, target: torch.Tensor, best: MinimaxResult, b: int, guide: float,
                   guide_weights: tuple[torch.Tensor, torch.Tensor] | None) -> None:
    """A loop that ends without closing the gap: the loose rounds' best dual value, recomputed in the
    design's precision, becomes the lower bound where it is higher."""
    if guide_weights is None or guide <= float(best.lower[b]):
        return
    weights, rows = guide_weights
    weights = weights / weights.sum()
    residual = weighted_fit(design[rows], target[rows][None], weights[None])[1][0]
    lower = (weights * residual**2).sum().sqrt()
    if lower > best.lower[b]:
        best.lower[b] = lower
        best.weights_lower[b] = 0.0
        best.weights_lower[b, rows] = weights


class _Screen:
    """A map's residuals on every row of one target: screened in float32 (they only choose rows), and
    exact in the design's precision (the certified upper bound)."""

    def __init__(self, design: torch.Tensor, target: torch.Tensor, design_screen: torch.Tensor) -> None:
        self.design, self.target, self.design_screen = design, target, design_screen
        self.dtype = self.design_screen.dtype
        self.target_screen = target.to(self.dtype)

    @staticmethod
    def screen_copy(design: torch.Tensor) -> torch.Tensor:
        """The design in the screens' precision (float32, or the design's own if narrower): N p entries,
        converted once for all the targets of a batch rather than once per target."""
        narrow = design.dtype.itemsize > WORKING_SET_SCREEN_DTYPE.itemsize
        return design.to(WORKING_SET_SCREEN_DTYPE) if narrow else design

    def residuals(self, coef: torch.Tensor) -> torch.Tensor:
        return residual_norms(self.design_screen, self.target_screen, coef.to(self.dtype)).to(self.design.dtype)

    def exact(self, coef: torch.Tensor) -> torch.Tensor:
        return residual_norms(self.design, self.target, coef)


def _keep_if_better(best: MinimaxResult, b: int, value: float, coef: torch.Tensor, weights: torch.Tensor) -> None:
    """``best[b]`` takes the map ``coef`` (the weighted fit at ``weights``) when its certified largest
    residual ``value`` is below the best one."""
    if value < float(best.upper[b]):
        best.upper[b], best.coef[b], best.weights[b] = value, coef, weights


def _next_set(rows: torch.Tensor, dual: torch.Tensor, residual: torch.Tensor, violation: torch.Tensor, count: int,
              size: int, lower: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The next working set and its warm start (``dual``, zero on new rows): the set and its ``count``
    worst violators, less the rows that carry no dual weight and whose residual is more than ``WORKING_SET_KEEP`` below the lower bound
    (they rejoin if they become violators); the ``size`` rows of largest residual always stay, so
    the set never falls below the first set's size."""
    n = residual.shape[0]
    member = torch.zeros(n, dtype=torch.bool, device=residual.device)
    member[rows] = True
    if count:
        member[torch.topk(violation, count).indices] = True
    keep = (dual > 0) | (residual >= (1 - WORKING_SET_KEEP) * lower)
    keep[torch.topk(torch.where(member, residual, -1.0), min(size, int(member.sum()))).indices] = True
    rows = torch.nonzero(member & keep).squeeze(1)
    return rows, dual[rows][None]
