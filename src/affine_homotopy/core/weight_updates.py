"""Weight updates of the certified minimax solvers (:mod:`affine_homotopy.core.minimax`): each maps
``(batch ids, weights, squared residuals, dual values, leverages())`` to the next weights.

Solvers (``SOLVERS``, selected by name):

``jacobi`` (default)
    Projected dual ascent with a Jacobi (diagonal) scaling, Anderson mixing and a monotone
    safeguard. The diagonal of ``-Hess g`` is ``D_n = 2 k_n G_n`` with the leverage factor
    ``k_n = x_n M^-1 x_n^T``, ``M = X^T W X``. A step moves to
    ``T(w) = max(0, w + gamma (G - nu) / D)`` with ``nu`` such that ``sum T = 1`` (found exactly by
    sorting); Anderson mixing (memory ``m``, type II, in the metric ``sqrt(D / gamma)``) extrapolates
    over the last steps. A point whose dual value falls below the best one seen is rejected: the
    iteration goes back to the best point, forgets its history and takes a plain step (halving
    ``gamma`` when the rejected point was itself a plain step). Rows may leave and re-enter the
    support. On sentence-embedding pairs it needs several times fewer weighted fits than Lawson's
    (docs/performance.md); the dual converges first and the upper bound lags. Problems whose
    residuals are effectively one-dimensional (the optimum rests on about p + 1 rows; e.g. ``d_lin``
    onto an encoder whose mean is not linearly reachable) are slow for both.
``lawson``
    Lawson's iteratively reweighted least squares, ``w <- w r^power / sum(w r^power)``: the same
    dual ascent with ``D_n = 2 G_n / w_n``, which ignores the leverage and so takes steps about
    ``N / p`` times too short on low-leverage rows. Monotone and convergent (``power`` 1), but
    linear: many fits for a small gap.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..errors import ConfigError

DEFAULT_SOLVER = "jacobi"
DEFAULT_MEMORY = 5  # Anderson memory of the jacobi solver
DEFAULT_STEP = 1.0  # gamma of the jacobi solver

Leverages = Callable[[], torch.Tensor]


@dataclass(frozen=True)
class SolverOptions:
    power: float = 1.0  # lawson: w <- w r^power (1 = classical, convergent; larger can stall)
    memory: int = DEFAULT_MEMORY  # jacobi: Anderson memory (0 = plain safeguarded steps)
    step: float = DEFAULT_STEP  # jacobi: gamma, the initial step scale (halved on a rejected plain step)


class LawsonUpdate:
    """``w <- w r^power`` (normalised by the caller)."""

    def __init__(self, batch: int, n: int, dtype: torch.dtype, device: torch.device, options: SolverOptions) -> None:
        if options.power < 1:
            raise ConfigError(f"lawson solver: power must be >= 1, got {options.power}",
                              argument="power", value=options.power)
        self.power = options.power

    def __call__(self, ids: torch.Tensor, w: torch.Tensor, sq_residual: torch.Tensor, dual: torch.Tensor,
                 leverages: Leverages) -> torch.Tensor:
        return w * sq_residual ** (0.5 * self.power)


def simplex_shift(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``nu`` (B,) with ``sum_n max(0, a_n - b_n nu) = 1`` for each row (``b > 0``, ``sum a >= 1``).

    For any set ``J`` of rows, ``sum_J (a - b nu) <= 1`` at the solution, with equality on the rows
    that stay positive, so ``nu = max_J (sum_J a - 1) / sum_J b``; the maximum is over prefixes of the
    rows sorted by their breakpoints ``a / b`` (descending). Exact, one sort per row.
    """
    order = torch.argsort(a / b, dim=1, descending=True)
    cum_a = torch.cumsum(torch.gather(a, 1, order), dim=1)
    cum_b = torch.cumsum(torch.gather(b, 1, order), dim=1)
    return ((cum_a - 1) / cum_b).max(dim=1).values


class JacobiUpdate:
    """Jacobi-scaled projected dual ascent with Anderson mixing and a monotone safeguard (module docstring)."""

    def __init__(self, batch: int, n: int, dtype: torch.dtype, device: torch.device, options: SolverOptions) -> None:
        step, memory = options.step, options.memory
        if step <= 0 or memory < 0:
            raise ConfigError(f"jacobi solver: step must be > 0 and memory >= 0, got step {step}, memory {memory}",
                              argument="step" if step <= 0 else "memory")
        self.memory = memory
        # a dual value below the best by more than rounding is a rejected step
        self.slack = max(1e-12, 64 * torch.finfo(dtype).eps)
        self.best_dual = torch.full((batch,), -math.inf, dtype=dtype, device=device)
        self.best_w = torch.zeros((batch, n), dtype=dtype, device=device)
        self.best_g = torch.zeros_like(self.best_w)  # squared residuals at best_w
        self.best_k = torch.zeros_like(self.best_w)  # leverage factors at best_w
        self.initial_step = step
        self.step = torch.full((batch,), step, dtype=dtype, device=device)
        self.mixed = torch.zeros(batch, dtype=torch.bool, device=device)  # last point came from Anderson
        self.hist_w = torch.zeros((batch, memory + 1, n), dtype=dtype, device=device)
        self.hist_f = torch.zeros_like(self.hist_w)
        self.hist_len = torch.zeros(batch, dtype=torch.long, device=device)
        self.rejections = torch.zeros(batch, dtype=torch.long, device=device)  # diagnostics

    def __call__(self, ids: torch.Tensor, w: torch.Tensor, sq_residual: torch.Tensor, dual: torch.Tensor,
                 leverages: Leverages) -> torch.Tensor:
        tiny = torch.finfo(w.dtype).tiny
        w, sq_residual, k, reject = self._safeguard(ids, w, sq_residual, leverages(), dual)
        curvature = 2 * k * sq_residual  # the diagonal of -Hess g
        # floor relative to the curvature's scale (2 G when k = 1): a row with no curvature (x_n = 0 in a
        # design without a constant column) takes a long, finite step
        scale_ref = torch.maximum(curvature.max(dim=1, keepdim=True).values,
                                  2 * sq_residual.max(dim=1, keepdim=True).values)
        curvature = torch.maximum(curvature, 1e-12 * scale_ref + tiny)
        scale = self.step[ids][:, None] / curvature
        ascent = w + scale * sq_residual
        plain = (ascent - scale * simplex_shift(ascent, scale)[:, None]).clamp(min=0)
        self.mixed[ids] = False
        mix = ~reject
        if self.memory == 0 or not bool(mix.any()):
            return plain
        new_w = plain.clone()
        metric_sq = curvature[mix] / self.step[ids[mix]][:, None]
        new_w[mix], self.mixed[ids[mix]] = self._anderson(ids[mix], w[mix], plain[mix], metric_sq)
        return new_w

    def _safeguard(self, ids: torch.Tensor, w: torch.Tensor, sq_residual: torch.Tensor, k: torch.Tensor,
                   dual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Keep the best point; a point whose dual value fell below it is rejected: step from the best."""
        reject = dual < self.best_dual[ids] * (1 - self.slack)
        self.rejections[ids[reject]] += 1
        plain = ~self.mixed[ids]  # the point came from a plain step
        # backtracking on gamma: halve it when a plain step lost dual value, let it grow back (up to its
        # initial value) after a plain step that did not; without the growth one early halving slows
        # every later step on problems with few support rows
        self.step[ids[reject & plain]] *= 0.5
        grown = ids[~reject & plain]
        self.step[grown] = torch.clamp(self.step[grown] * 1.5, max=self.initial_step)
        improve = ~reject & (dual > self.best_dual[ids])
        kept = ids[improve]
        self.best_dual[kept], self.best_w[kept] = dual[improve], w[improve]
        self.best_g[kept], self.best_k[kept] = sq_residual[improve], k[improve]
        back = reject[:, None]
        self.hist_len[ids[reject]] = 0
        return (torch.where(back, self.best_w[ids], w), torch.where(back, self.best_g[ids], sq_residual),
                torch.where(back, self.best_k[ids], k), reject)

    def _anderson(self, ids: torch.Tensor, w: torch.Tensor, plain: torch.Tensor, metric_sq: torch.Tensor,
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """Type-II Anderson mixing of the map ``w -> plain`` over the last ``memory`` steps."""
        m, tiny = self.memory, torch.finfo(w.dtype).tiny
        hist_w = self.hist_w[ids].roll(-1, dims=1)
        hist_f = self.hist_f[ids].roll(-1, dims=1)
        hist_w[:, -1], hist_f[:, -1] = w, plain - w
        self.hist_w[ids], self.hist_f[ids] = hist_w, hist_f
        length = (self.hist_len[ids] + 1).clamp(max=m + 1)
        self.hist_len[ids] = length
        metric = metric_sq.sqrt()
        valid = (torch.arange(m, device=w.device)[None, :] >= (m + 1 - length)[:, None])[:, :, None]
        d_f = (hist_f[:, 1:] - hist_f[:, :-1]) * valid
        d_w = (hist_w[:, 1:] - hist_w[:, :-1]) * valid
        scaled = d_f * metric[:, None, :]
        gram = scaled @ scaled.transpose(1, 2)
        ridge = 1e-10 * gram.diagonal(dim1=1, dim2=2).sum(dim=1).clamp(min=tiny)
        # unused slots get a unit diagonal (and a zero right-hand side): their coefficient is 0
        diagonal = torch.where(valid[:, :, 0], ridge[:, None], 1.0)
        rhs = scaled @ (hist_f[:, -1] * metric)[:, :, None]
        theta, info = torch.linalg.solve_ex(gram + torch.diag_embed(diagonal), rhs)
        mixed = (plain - (theta * (d_w + d_f)).sum(dim=1)).clamp(min=0)
        total = mixed.sum(dim=1, keepdim=True)
        good = (info == 0) & torch.isfinite(mixed).all(dim=1) & (total[:, 0] > 0) & (length >= 2)
        return torch.where(good[:, None], mixed / total.clamp(min=tiny), plain), good


SOLVERS: dict[str, type[JacobiUpdate] | type[LawsonUpdate]] = {"jacobi": JacobiUpdate, "lawson": LawsonUpdate}

