"""Intrinsic (representation-level) distances between encoders, for all ordered pairs at once.

Orientation convention, used by every matrix this project writes: entry ``(i, j)`` is encoder ``i``
(row, *mapped from*) mapped onto encoder ``j`` (column, *mapped to*). In the paper's notation
(Eq. 19, ``d_Aff(H, G)`` maps ``G`` onto ``H``) entry ``(i, j)`` is ``d_Aff(H_j, H_i)``. Small means
"``i`` carries everything ``j`` has, up to the map". Theory (Thm 4.1): mapping a higher-rank encoder
onto a lower-rank one can be exact, the reverse cannot.

Measures (all distances; 0 = identical up to the map class; names are the CSV file stems)

``d_aff``
    Eq. 19, ``min over affine psi of max_n ||y_n - psi(x_n)||_2`` (L2 norm in the target's space,
    not divided by ``D``). A second-order-cone problem, solved by Lawson's iteratively reweighted
    least squares, which certifies an interval at every step: for weights ``w`` on the simplex,
    ``sqrt(min_psi sum_n w_n ||y_n - psi(x_n)||^2)`` is a **lower bound** (a maximum is at least
    any weighted mean) and the largest residual of any fitted map is an **upper bound**. The
    iteration stops when ``upper - lower <= tol * upper + atol`` (``atol`` = 10 eps(float32) times
    the target's largest centred row norm: below it a residual is float32 rounding) or after
    ``max_iter`` steps. ``d_aff`` is the upper bound (attained by a map), ``d_aff_lower`` the lower.
``d_aff_ls``
    Largest residual of the plain least-squares affine map (the paper's way: fit the mean squared
    error, evaluate the maximum). Always ``>= d_aff``.
``d_aff_msd``
    ``d_aff ** 2 / D_j``: the largest per-example mean squared error, the scale of the paper's
    Figure 2.
``psi_norm``
    Operator (spectral) norm of the linear part of the map that attains ``d_aff``; Lemma 5.2
    multiplies it into the extrinsic bound.
``d_lin``
    As ``d_aff`` with a linear map (no bias), on uncentred representations.
``d_iso``
    Largest residual of the orthogonal Procrustes map plus bias (``x -> (x - mu_x) R + mu_y``,
    ``R`` the (semi-)orthogonal maximiser of ``tr(R^T X_c^T Y_c)``): the paper's symmetric
    pseudo-metric of affine isometries, evaluated at the Procrustes fit.

Baselines (Ding et al. 2021 conventions: columns centred, each matrix divided by its Frobenius
norm; canonical correlations ``rho_1 >= rho_2 >= ...`` over ``min(rank_i, rank_j)`` directions)

``procrustes``  ``2 - 2 ||X^T Y||_*`` (symmetric; in ``[0, 2]``).
``cca_r2``      ``1 - mean rho_k^2`` (``1 - R^2_CCA``; symmetric).
``cca_rho``     ``1 - mean rho_k`` (symmetric).
``pwcca``       ``1 - sum_k alpha_k rho_k / sum_k alpha_k`` with Morcos et al. (2018) weights
                ``alpha_k = sum_d |<h_k, x_d>|``, ``h_k`` the unit-norm canonical variates of the
                *mapped-from* encoder ``i`` and ``x_d`` its centred columns. Asymmetric.
``svcca``       ``1 - mean rho_k`` after keeping, for each encoder, the leading singular directions
                that explain 99 % of its variance (squared singular values).
``cka``         ``1 - ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F)`` (linear CKA; symmetric).

Every measure works on the rank-ruled orthonormal bases of :mod:`affine_homotopy.linalg` (directions
at float32 rounding level are dropped), so encoders may differ in width and ``N < D`` is fine.

Engine: each encoder is factorised once (``X - mu = Q diag(s) V^T``, and the uncentred ``X`` for
``d_lin``). Pair work uses only ``Q``, ``s`` and ``V``: the target ``Y_j`` is represented as
``Q_j diag(s_j)``, which has the same row norms and residuals as ``Y_j`` itself. For each source,
``Q_i^T [Q_1 ... Q_K]`` is one matrix product, and the Lawson iterations of a block of targets are
batched matrix products, so memory stays bounded by ``block_mb`` as K grows.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from .linalg import FLOAT32_EPS, Factors, WeightedLeastSquares, factorise, weighted_fit

log = logging.getLogger(__name__)

MEASURES = (
    "d_aff", "d_aff_lower", "d_aff_ls", "d_aff_msd", "psi_norm", "d_lin", "d_iso",
    "procrustes", "cca_r2", "cca_rho", "pwcca", "svcca", "cka",
)
SVCCA_VARIANCE = 0.99


@dataclass
class SolverSettings:
    tol: float = 1e-3
    max_iter: int = 1000
    multiplier: float = 5.0  # the rank rule's n
    power: float = 1.0  # Lawson weight update w <- w * r**power (1 = classical Lawson)
    block_mb: int = 1024
    dtype: torch.dtype = torch.float64
    device: torch.device | str = "cpu"
    measures: tuple[str, ...] = MEASURES
    keep_weights: bool = False  # return the weights of each d_aff map (to rebuild it: affine_map)
    iterate_dtype: torch.dtype | None = None  # e.g. float32: faster iterations, bounds certified in dtype


# ---------------------------------------------------------------------------------------------
# the minimax solver


@dataclass
class MinimaxResult:
    upper: torch.Tensor  # (B,) max residual of the best map found: the reported value
    lower: torch.Tensor  # (B,) certified lower bound
    least_squares: torch.Tensor  # (B,) max residual of the plain least-squares map (iteration 1)
    coef: torch.Tensor  # (B, p, q) coefficients of the best map on the design
    iterations: torch.Tensor  # (B,)
    weights: torch.Tensor  # (B, N) the weights whose weighted least-squares fit is the best map


def minimax_fit(
    design: torch.Tensor, targets: torch.Tensor, atol: torch.Tensor, tol: float = 1e-3,
    max_iter: int = 1000, power: float = 1.0, prune: float = 1e-10, iterate_dtype: torch.dtype | None = None,
    orthonormal: bool = False,
) -> MinimaxResult:
    """``min_C max_n ||targets[b, n] - design[n] @ C||_2`` for a batch of targets sharing a design.

    ``design`` (N, p) must have full column rank (an orthonormal basis, possibly with a constant
    column). ``targets`` (B, N, q): zero-padded columns are harmless. Lawson's iteratively
    reweighted least squares with the certified interval described in the module docstring.
    ``power`` 1 is classical Lawson (monotone, convergent); larger values are faster on easy
    problems but can stall on a wrong support. Rows whose weight falls below ``prune`` times the
    largest are set to weight 0 and left out of the weighted fits (any simplex weights give a valid
    lower bound); every row still enters the upper bound.

    ``iterate_dtype`` (e.g. float32, twice as fast on CPUs) runs the iterations in that precision;
    the reported bounds are then recomputed in the design's precision from the iterations' best
    weights, so they stay certified. ``orthonormal``: the design's columns are orthonormal, so the
    first (uniform-weight) step is a plain projection and needs no Gram matrix.
    """
    exact_design, exact_targets = design, targets
    if iterate_dtype is not None and iterate_dtype != design.dtype:
        design, targets = design.to(iterate_dtype), targets.to(iterate_dtype)
    batch, n, _ = targets.shape
    weights = torch.full((batch, n), 1.0 / n, dtype=design.dtype, device=design.device)
    upper = torch.full((batch,), math.inf, dtype=design.dtype, device=design.device)
    lower = torch.zeros_like(upper)
    least_squares = torch.zeros_like(upper)
    coef_best = targets.new_zeros((batch, design.shape[1], targets.shape[2]))
    weights_best = weights.clone()  # the weights whose fit attains `upper`
    weights_lower = weights.clone()  # the weights that attain `lower`
    iterations = torch.zeros(batch, dtype=torch.long, device=design.device)
    active = torch.arange(batch, device=design.device)
    rows = torch.arange(n, device=design.device)  # rows carrying weight in any active pair
    for step in range(1, max_iter + 1):
        w = weights[active]
        if step == 1 and orthonormal:
            coef = design.T @ targets  # least squares on orthonormal columns: a projection
            residual = torch.linalg.vector_norm(targets - design @ coef, dim=2)
        else:
            coef, residual = weighted_fit(design, targets[active], w, None if len(rows) == n else rows)
        step_upper = residual.max(dim=1).values
        step_lower = torch.sqrt((w * residual**2).sum(dim=1))
        if step == 1:
            least_squares[active] = step_upper
        better = step_upper < upper[active]
        coef_best[active[better]] = coef[better]
        weights_best[active[better]] = w[better]
        higher = step_lower > lower[active]
        weights_lower[active[higher]] = w[higher]
        upper[active] = torch.minimum(upper[active], step_upper)
        lower[active] = torch.maximum(lower[active], step_lower)
        iterations[active] = step
        done = (upper[active] - lower[active]) <= tol * upper[active] + atol[active].to(design.dtype)
        new_w = w * residual**power
        new_w = torch.where(new_w >= prune * new_w.max(dim=1, keepdim=True).values, new_w, 0.0)
        total = new_w.sum(dim=1, keepdim=True)
        weights[active] = torch.where(total > 0, new_w / total.clamp(min=torch.finfo(design.dtype).tiny), w)
        active = active[~done]
        if active.numel() == 0:
            break
        rows = torch.nonzero((weights[active] > 0).any(dim=0)).squeeze(1)
    if design is exact_design:
        return MinimaxResult(upper, torch.minimum(lower, upper), least_squares, coef_best, iterations, weights_best)
    # certify in full precision: the best map, the best lower-bound weights, and least squares
    uniform = torch.full_like(weights_best, 1.0 / n, dtype=exact_design.dtype)
    coef_ls, residual_ls = weighted_fit(exact_design, exact_targets, uniform)
    coef_up, residual_up = weighted_fit(exact_design, exact_targets, weights_best.to(exact_design.dtype))
    w_low = weights_lower.to(exact_design.dtype)
    _, residual_low = weighted_fit(exact_design, exact_targets, w_low)
    ls_value, up_value = residual_ls.max(dim=1).values, residual_up.max(dim=1).values
    use_ls = ls_value < up_value
    upper_exact = torch.where(use_ls, ls_value, up_value)
    coef_exact = torch.where(use_ls[:, None, None], coef_ls, coef_up)
    weights_exact = torch.where(use_ls[:, None], uniform, weights_best.to(exact_design.dtype))
    lower_exact = torch.sqrt((w_low * residual_low**2).sum(dim=1))
    return MinimaxResult(upper_exact, torch.minimum(lower_exact, upper_exact), ls_value, coef_exact, iterations,
                         weights_exact)


# ---------------------------------------------------------------------------------------------
# the all-pairs engine


@dataclass
class IntrinsicResult:
    names: list[str]
    matrices: dict[str, np.ndarray]  # measure -> (K, K)
    ranks: np.ndarray  # (K,) numerical rank of each centred matrix
    dims: np.ndarray
    iterations: np.ndarray  # (K, K) Lawson iterations for d_aff
    seconds: dict[str, float] = field(default_factory=dict)
    weights: np.ndarray | None = None  # (K, K, N) float32: weights of the map attaining d_aff (i -> j)


def _pad_columns(blocks: Sequence[torch.Tensor]) -> torch.Tensor:
    width = max(max(b.shape[1] for b in blocks), 1)
    out = blocks[0].new_zeros((len(blocks), blocks[0].shape[0], width))
    for k, block in enumerate(blocks):
        out[k, :, : block.shape[1]] = block
    return out


def _target_batches(count: int, n: int, width: int, p: int, itemsize: int, block_mb: int) -> int:
    """How many targets fit into one Lawson batch: (b, N, p) weighted design + (b, N, q) targets x 2."""
    per_target = n * (p + 3 * width) * itemsize
    return max(1, min(count, block_mb * 2**20 // max(per_target, 1)))


def _svcca_keep(s: torch.Tensor) -> int:
    if s.numel() == 0:
        return 0
    share = torch.cumsum(s**2, 0) / (s**2).sum()
    return int(torch.searchsorted(share, torch.tensor(SVCCA_VARIANCE, dtype=s.dtype, device=s.device)).item()) + 1


def _baselines_for_source(fi: Factors, factors: Sequence[Factors], targets: Sequence[int]) -> dict[str, list[float]]:
    """CCA family, CKA, Procrustes and d_iso of source ``fi`` against each target (small matrices)."""
    stacked = torch.cat([factors[j].Q for j in targets], dim=1)
    cross = fi.Q.T @ stacked  # (r_i, sum r_j): one large product for all targets
    out: dict[str, list[float]] = {k: [] for k in ("procrustes", "cca_r2", "cca_rho", "pwcca", "svcca", "cka", "d_iso")}
    keep_i = _svcca_keep(fi.s)
    start = 0
    for j in targets:
        fj = factors[j]
        M = cross[:, start : start + fj.rank]
        start += fj.rank
        m = min(fi.rank, fj.rank)
        if m == 0:  # a constant encoder: correlations are undefined; d_iso maps everything to the mean
            for key in out:
                out[key].append(float("nan"))
            out["d_iso"][-1] = float(torch.linalg.vector_norm(fj.Q * fj.s, dim=1).max()) if fi.rank == 0 else float("nan")
            continue
        A, rho, _ = torch.linalg.svd(M, full_matrices=False)
        rho = rho[:m].clamp(max=1.0)
        out["cca_r2"].append(float(1 - (rho**2).mean()))
        out["cca_rho"].append(float(1 - rho.mean()))
        # PWCCA: weights of the mapped-from side's canonical variates h_k = Q_i a_k
        alpha = (A[:, :m].T @ (fi.s[:, None] * fi.Vt)).abs().sum(dim=1)
        out["pwcca"].append(float(1 - (alpha * rho).sum() / alpha.sum()))
        keep_j = _svcca_keep(fj.s)
        rho_sv = torch.linalg.svdvals(M[:keep_i, :keep_j])[: min(keep_i, keep_j)].clamp(max=1.0)
        out["svcca"].append(float(1 - rho_sv.mean()))
        scaled = fi.s[:, None] * M * fj.s[None, :]  # X_c^T Y_c in the two SVD bases
        cka = (scaled**2).sum() / (torch.linalg.vector_norm(fi.s**2) * torch.linalg.vector_norm(fj.s**2))
        out["cka"].append(float(1 - cka))
        P, sigma, Qt = torch.linalg.svd(scaled, full_matrices=False)
        out["procrustes"].append(float(2 - 2 * sigma.sum() / (torch.linalg.vector_norm(fi.s) * torch.linalg.vector_norm(fj.s))))
        # d_iso: residual of y_c ~ x_c R in target coordinates: Q_j S_j - Q_i S_i P Qt
        residual = fj.Q * fj.s - fi.Q @ (fi.s[:, None] * (P @ Qt))
        out["d_iso"].append(float(torch.linalg.vector_norm(residual, dim=1).max()))
    return out


def pairwise_intrinsic(
    representations: Sequence[np.ndarray],
    names: Sequence[str] | None = None,
    settings: SolverSettings | None = None,
) -> IntrinsicResult:
    """Every measure of the module docstring for every ordered pair; see there for conventions."""
    settings = settings or SolverSettings()
    count = len(representations)
    names = list(names) if names is not None else [str(k) for k in range(count)]
    rows = {rep.shape[0] for rep in representations}
    if len(rows) != 1:
        raise ValueError(f"all encoders need the same examples (rows); got row counts {sorted(rows)}")
    n = rows.pop()
    wanted = set(settings.measures)
    timer: dict[str, float] = {"factorise": 0.0, "baselines": 0.0, "d_aff": 0.0, "d_lin": 0.0}
    started = time.monotonic()
    factors = [factorise(rep, settings.multiplier, settings.dtype, settings.device, uncentred="d_lin" in wanted)
               for rep in representations]
    timer["factorise"] = time.monotonic() - started
    matrices = {name: np.zeros((count, count)) for name in (*MEASURES, "d_lin_lower")}
    weights = np.zeros((count, count, n), dtype=np.float32) if settings.keep_weights else None
    iterations = np.zeros((count, count), dtype=int)
    # each target in its own coordinates (same row norms and residuals as the data), built once
    target_parts = [(f.Q * f.s, f.row_norm_max) for f in factors]
    raw_parts = [(f.Q_raw * f.s_raw, f.raw_row_norm_max) for f in factors] if "d_lin" in wanted else []
    for i, fi in enumerate(factors):
        others = [j for j in range(count) if j != i]
        if not others:
            continue
        tick = time.monotonic()
        if wanted & {"procrustes", "cca_r2", "cca_rho", "pwcca", "svcca", "cka", "d_iso"}:
            for key, values in _baselines_for_source(fi, factors, others).items():
                matrices[key][i, others] = values
        timer["baselines"] += time.monotonic() - tick
        tick = time.monotonic()
        if wanted & {"d_aff", "d_aff_lower", "d_aff_ls", "d_aff_msd", "psi_norm"}:
            for block, result in _solve_blocks(fi.affine_design(), target_parts, others, settings):
                matrices["d_aff"][i, block] = result.upper.cpu().numpy()
                matrices["d_aff_lower"][i, block] = result.lower.cpu().numpy()
                matrices["d_aff_ls"][i, block] = result.least_squares.cpu().numpy()
                iterations[i, block] = result.iterations.cpu().numpy()
                if weights is not None:
                    weights[i, block] = result.weights.float().cpu().numpy()
                # linear part in original coordinates: V_i diag(1/s_i) C V_j^T -> ||diag(1/s_i) C||_2
                linear = result.coef[:, : fi.rank, :] / fi.s[None, :, None]
                if fi.rank > 0:
                    matrices["psi_norm"][i, block] = torch.linalg.matrix_norm(linear, ord=2).cpu().numpy()
                log.info("d_aff: source %d/%d '%s' (rank %d) -> %d targets: %s iterations, max gap %.2e",
                         i + 1, count, names[i], fi.rank, len(block), result.iterations.tolist(),
                         float(((result.upper - result.lower) / result.upper.clamp(min=1e-300)).max()))
        timer["d_aff"] += time.monotonic() - tick
        tick = time.monotonic()
        if "d_lin" in wanted:
            for block, result in _solve_blocks(fi.Q_raw, raw_parts, others, settings):
                matrices["d_lin"][i, block] = result.upper.cpu().numpy()
                matrices["d_lin_lower"][i, block] = result.lower.cpu().numpy()
        timer["d_lin"] += time.monotonic() - tick
        log.info("source %d/%d '%s' done (%.1f s so far)", i + 1, count, names[i], time.monotonic() - started)
    dims = np.array([f.dim for f in factors])
    matrices["d_aff_msd"] = matrices["d_aff"] ** 2 / dims[None, :]
    for key in matrices:
        np.fill_diagonal(matrices[key], 0.0)
    np.fill_diagonal(matrices["psi_norm"], 1.0)  # the identity map
    ranks = np.array([f.rank for f in factors])
    families = {"d_aff": ("d_aff", "d_aff_lower", "d_aff_ls", "d_aff_msd", "psi_norm"), "d_lin": ("d_lin", "d_lin_lower"),
                "baselines": ("procrustes", "cca_r2", "cca_rho", "pwcca", "svcca", "cka", "d_iso")}
    computed = {m for members in families.values() if wanted & set(members) for m in members}
    return IntrinsicResult(names, {k: v for k, v in matrices.items() if k in computed}, ranks, dims, iterations, timer,
                           weights)


def _solve_blocks(
    design: torch.Tensor, targets: Sequence[tuple[torch.Tensor, float]], chosen: list[int], settings: SolverSettings,
) -> Iterator[tuple[list[int], MinimaxResult]]:
    """Minimax fits of ``design`` onto the chosen targets (matrix, largest row norm), in memory-bounded batches."""
    n, p = design.shape
    itemsize = design.element_size()
    for block in _blocks(chosen, n, max(targets[j][0].shape[1] for j in chosen), p, itemsize, settings.block_mb):
        stacked = _pad_columns([targets[j][0] for j in block])
        # below 10 eps(float32) x the target's scale a residual is float32 rounding: stop there
        atol = torch.tensor([10 * FLOAT32_EPS * targets[j][1] for j in block], dtype=design.dtype, device=design.device)
        yield block, minimax_fit(design, stacked, atol, settings.tol, settings.max_iter, settings.power,
                                 iterate_dtype=settings.iterate_dtype, orthonormal=True)


def _blocks(items: list[int], n: int, width: int, p: int, itemsize: int, block_mb: int) -> list[list[int]]:
    size = _target_batches(len(items), n, width, p, itemsize, block_mb)
    return [items[k : k + size] for k in range(0, len(items), size)]


def pairwise_affine_ls(
    representations: Sequence[np.ndarray],
    names: Sequence[str] | None = None,
    multiplier: float = 5.0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
    block_mb: int = 256,
) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares ``d_aff_ls`` for all ordered pairs and the ranks (one Lawson step)."""
    settings = SolverSettings(max_iter=1, multiplier=multiplier, dtype=dtype, device=device, block_mb=block_mb,
                              measures=("d_aff_ls",))
    result = pairwise_intrinsic(representations, names, settings)
    return result.matrices["d_aff_ls"], result.ranks


def affine_map(
    X: np.ndarray, Y: np.ndarray, weights: np.ndarray, multiplier: float = 5.0, dtype: torch.dtype = torch.float64,
) -> tuple[np.ndarray, np.ndarray]:
    """Rebuild the affine map ``x -> x @ A + b`` of X's encoder onto Y's from its solver weights.

    It is the weighted least-squares fit (same rank rule, same design, same routine as the engine),
    so with the weights stored by :func:`pairwise_intrinsic` its largest residual is that pair's ``d_aff``.
    """
    fi = factorise(X, multiplier, dtype, "cpu")
    w = torch.as_tensor(np.asarray(weights), dtype=dtype)
    target = torch.as_tensor(np.asarray(Y), dtype=dtype)
    coef = WeightedLeastSquares(fi.affine_design(), w).solve(target)
    return map_in_original_coordinates(fi, coef)


def map_in_original_coordinates(fi: Factors, coef: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """``(A, b)`` with ``x @ A + b`` equal to ``[(x - mu) V S^-1, 1/sqrt(N)] @ coef`` (the design's map)."""
    n = fi.Q.shape[0]
    linear = fi.Vt.T @ (coef[: fi.rank] / fi.s[:, None])
    bias = coef[fi.rank] / math.sqrt(n) - fi.mean @ linear
    return linear.cpu().numpy(), bias.cpu().numpy()
