"""d_aff's tight round: could a correction of the weighted fit's map close the gap in fewer fits?

Run from the repository root (2-core machine: keep OpenMP threads from spinning)::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.primal_polish [--sizes 20000 67349] [--pairs 4]

The question: in the working-set solver's tight round the dual value (the lower bound) is within about
1e-5 of its end after a few fits, and the upper bound (the largest residual of the weighted fit's map)
lags for tens of fits (docs/performance.md, "The weighted fit's kernels, and where the fits go"). The
optimum rests on a few thousand rows of a p x q map, so many maps attain it; the weighted fit is only
one of them. A **polish** corrects the fit's map ``C`` by the smallest change in the fit's own metric
``M = X^T W X`` that brings the rows above ``(1 + tol / 2) lower`` down to that level:
``dC = M^-1 X_A^T (X_A M^-1 X_A^T)^-1 E_A`` (``A`` the rows above it so far, at most p of them,
``E_A`` their excess residuals), with the fit's Cholesky factor, repeated up to ``--polish-steps``
times. Any map's largest residual is an upper bound, so a polished map certifies the same way.

Data and problems: those of ``benchmarks/daff_passes.py`` (all-MiniLM-L6-v2 and paraphrase-MiniLM-L3-v2 on
SST-2's training sentences, the four ordered pairs, the engine's design and target, tol 1e-3, one
torch thread). For each pair the solver runs once (``minimax_fit``, the working-set path); its final
working set (the rows carrying weight and the 6,000 rows of largest final residual) is then solved
again by the jacobi update (``weight_updates.JacobiUpdate``, the engine's defaults) from uniform
weights in float32, and after every weighted fit its map is polished. Printed per pair: the fits
the plain iteration needs to close the gap to ``tol``, the fits after which a polished map closes it,
and the CPU seconds of a weighted fit (Gram matrix, factor, solve, squared residuals, leverages) and
of a polish, measured side by side in that loop.

Not in the solver: ``d_aff``'s weights (``d_aff_weights.npy``, ``MinimaxResult.weights``) are the
map's whole record -- the extrinsic stage and the API rebuild the map as the weighted fit of those
weights, and Lemma 5.2's check compares the rebuilt map's residual with ``d_aff`` -- and a polished
map is not the weighted fit of any stored weights.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time

from benchmarks.common import add_glue_dir, load_text, say
from benchmarks.daff_passes import PAIRS, TOL, encoders, problem

import torch  # noqa: E402

from affine_homotopy.core import minimax  # noqa: E402
from affine_homotopy.core.linalg import WeightedLeastSquares, residual_norms  # noqa: E402
from affine_homotopy.core.weight_updates import JacobiUpdate, SolverOptions  # noqa: E402

SET_ROWS = 6000  # the final working sets at N = 67,349 hold 6,000-9,000 rows


def polish(x: torch.Tensor, y: torch.Tensor, coef: torch.Tensor, factor: torch.Tensor, lower: float,
           steps: int) -> float:
    """The largest residual on the set of the map ``coef`` after up to ``steps`` minimum ``M``-norm
    corrections (module docstring); ``factor``: the Cholesky factor of the fit's ``M``."""
    level = (1 + TOL / 2) * lower
    active = torch.zeros(x.shape[0], dtype=torch.bool)
    best = math.inf
    for _ in range(steps):
        residual = y - x @ coef
        norms = torch.linalg.vector_norm(residual, dim=1)
        best = min(best, float(norms.max()))
        above = norms > level
        if not bool(above.any()):
            return best
        active |= above
        rows = torch.nonzero(active).squeeze(1)
        if rows.numel() > x.shape[1]:  # at most p rows: the system below stays solvable
            rows = rows[torch.topk(norms[rows], x.shape[1]).indices]
        excess = residual[rows] * torch.clamp(1 - level / norms[rows], min=0)[:, None]
        whitened = torch.linalg.solve_triangular(factor, x[rows].T, upper=False)  # L^-1 X_A^T
        system = whitened.T @ whitened
        system = system + 1e-6 * system.diagonal().mean() * torch.eye(system.shape[0], dtype=system.dtype)
        coef = coef + torch.linalg.solve_triangular(factor.T, whitened @ torch.linalg.solve(system, excess),
                                                    upper=True)
    return min(best, float(torch.linalg.vector_norm(y - x @ coef, dim=1).max()))


def tight_round(x: torch.Tensor, y: torch.Tensor, max_fits: int, steps: int) -> tuple[int, int | None, float, float]:
    """Jacobi from uniform weights on the set: (fits to close the gap plainly, fits after which a polished map
    closes it, median CPU s of a fit, median CPU s of a polish)."""
    m = x.shape[0]
    update = JacobiUpdate(1, m, x.dtype, x.device, SolverOptions())
    weights = torch.full((1, m), 1.0 / m, dtype=x.dtype)
    upper, lower, polished_at = math.inf, 0.0, None
    fit_seconds, polish_seconds = [], []
    for fit_count in range(1, max_fits + 1):
        tick = time.process_time()
        fit = WeightedLeastSquares(x, weights)
        coef = fit.solve(y[None])[0]
        squared = residual_norms(x, y, coef, squared=True)[None]
        dual = (weights * squared).sum(dim=1)
        leverage = fit.leverages()
        fit_seconds.append(time.process_time() - tick)
        upper = min(upper, float(squared.max().sqrt()))
        lower = max(lower, float(dual.clamp(min=0).sqrt()))
        if upper - lower <= TOL * upper:
            break
        if polished_at is None:
            tick = time.process_time()
            value = polish(x, y, coef, fit.factor[0], lower, steps)
            polish_seconds.append(time.process_time() - tick)
            if value - lower <= TOL * value:
                polished_at = fit_count
        proposed = update(torch.arange(1), weights, squared, dual, lambda leverage=leverage: leverage)
        weights = proposed / proposed.sum(dim=1, keepdim=True)
    median = lambda values: sorted(values)[len(values) // 2] if values else math.nan  # noqa: E731
    return fit_count, polished_at, median(fit_seconds), median(polish_seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_glue_dir(parser, "SST-2/train.tsv")
    parser.add_argument("--sizes", type=int, nargs="+", default=[20000, 67349])
    parser.add_argument("--pairs", type=int, default=len(PAIRS), help="the first this many pairs")
    parser.add_argument("--polish-steps", type=int, default=8, help="corrections per polish")
    parser.add_argument("--max-fits", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    reps = encoders(args.glue_dir)
    say(f"machine: {platform.machine()}, {os.cpu_count()} cores (shared), 1 torch thread, torch {torch.__version__}, "
        f"{load_text()}")
    say(f"data: SST-2 train (first N rows), mean-pooled; tol {TOL:g}; the tight round: jacobi from uniform weights "
        f"in float32 on each pair's final working set; polish: up to {args.polish_steps} corrections after each fit")
    say(f"{'N':>6}  {'pair':<29} {'set':>5} {'p':>4} | {'fits, plain':>11} {'polished after':>14} | "
        f"{'fit CPU s':>9} {'polish CPU s':>12}")
    for n in args.sizes:
        for source, target in PAIRS[: args.pairs]:
            design, y, atol = problem(reps[source], reps[target], n)
            solved = minimax.minimax_fit(design, y, atol, TOL, 5000, orthonormal=True, working_set=True)
            final = residual_norms(design, y, solved.coef)[0]
            rows = torch.unique(torch.cat([torch.nonzero(solved.weights[0] > 0).squeeze(1),
                                           torch.topk(final, min(SET_ROWS, n)).indices]))
            x, t = design[rows].float(), y[0, rows].float()
            plain, polished, fit_s, polish_s = tight_round(x, t, args.max_fits, args.polish_steps)
            say(f"{n:6d}  {source + ' -> ' + target:<29} {rows.numel():5d} {x.shape[1]:4d} | {plain:11d} "
                f"{polished if polished is not None else '-':>14} | {fit_s:9.3f} {polish_s:12.3f}")
    say(load_text())


if __name__ == "__main__":
    main()
