"""Intrinsic (representation-level) distances between encoders, for all ordered pairs at once.

Orientation convention, used by every matrix this project writes: entry ``(i, j)`` is encoder ``i``
(row, *mapped from*) mapped onto encoder ``j`` (column, *mapped to*). In the paper's notation
(Eq. 19, ``d_Aff(H, G)`` maps ``G`` onto ``H``) entry ``(i, j)`` is ``d_Aff(H_j, H_i)``. Small means
"``i`` carries everything ``j`` has, up to the map". Theory (Thm 4.1): mapping a higher-rank encoder
onto a lower-rank one can be exact, the reverse cannot.

Measures (all distances; 0 = identical up to the map class; names are the CSV file stems)

``d_aff``
    Eq. 19, ``min over affine psi of max_n ||y_n - psi(x_n)||_2`` (L2 norm in the target's space,
    not divided by ``D``). A second-order-cone problem, solved by the certified minimax solvers of
    :mod:`affine_homotopy.core.minimax` (``SolverSettings.solver``: ``jacobi``, a Jacobi-scaled dual
    ascent with Anderson mixing and a monotone safeguard, by default; ``lawson``, Lawson's
    iteratively reweighted least squares, as an option). Both certify an interval at every step:
    for weights ``w`` on the simplex, ``sqrt(min_psi sum_n w_n ||y_n - psi(x_n)||^2)`` is a
    **lower bound** (a maximum is at least any weighted mean) and the largest residual of any
    fitted map is an **upper bound**. The iteration stops when ``upper - lower <= tol * upper +
    atol`` (``atol`` = 10 eps(float32) times the target's largest centred row norm: below it a
    residual is float32 rounding) or after ``max_iter`` weighted fits (``converged`` false).
    ``d_aff`` is the upper bound (attained by a map), ``d_aff_lower`` the lower.
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
    As ``d_aff`` with a linear map (no bias), on uncentred representations. Opt-in (not in the
    paper's tables): pairs whose residuals are effectively one-dimensional (a full-rank encoder whose
    span lacks the target's mean) need hundreds of fits; see :mod:`affine_homotopy.core.minimax`.
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

Every measure works on the rank-ruled orthonormal bases of :mod:`affine_homotopy.core.linalg` (directions
at float32 rounding level are dropped), so encoders may differ in width and ``N < D`` is fine.

Engine: each encoder is factorised once (``X - mu = Q diag(s) V^T``, and the uncentred ``X`` for
``d_lin``). Pair work uses only ``Q``, ``s`` and ``V``: the target ``Y_j`` is represented as
``Q_j diag(s_j)``, which has the same row norms and residuals as ``Y_j`` itself. For each source,
``Q_i^T [Q_1 ... Q_K]`` is one matrix product, and the solver iterations of a block of targets are
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

from ..errors import ConfigError
from .linalg import Factors, WeightedLeastSquares, factorise, float32_floor, thin_svd
from .minimax import DEFAULT_MEMORY, DEFAULT_SOLVER, SOLVERS, MinimaxResult, minimax_fit
from .measures import BASELINES, D_AFF_FAMILY, INTRINSIC_MEASURES

log = logging.getLogger(__name__)

MEASURES = INTRINSIC_MEASURES  # the file stems of intrinsic/<task>/<layer>/ (the registry: measures.py)
SVCCA_VARIANCE = 0.99


@dataclass
class SolverSettings:
    tol: float = 1e-3
    max_iter: int = 1000
    multiplier: float = 5.0  # the rank rule's n
    solver: str = DEFAULT_SOLVER  # a key of affine_homotopy.core.minimax.SOLVERS: "jacobi" or "lawson"
    power: float = 1.0  # lawson only: weight update w <- w * r**power (1 = classical Lawson)
    anderson_memory: int = DEFAULT_MEMORY  # jacobi only: Anderson mixing memory (0 = plain steps)
    block_mb: int = 1024
    dtype: torch.dtype = torch.float64
    device: torch.device | str = "cpu"
    measures: tuple[str, ...] = MEASURES
    keep_weights: bool = False  # return the weights of each d_aff map (to rebuild it: affine_map)
    iterate_dtype: torch.dtype | None = None  # e.g. float32: faster iterations, bounds certified in dtype
    working_set: bool = True  # large N: solve on a working set of rows, checked on all (minimax.working_set_fit)


# ---------------------------------------------------------------------------------------------
# the all-pairs engine


@dataclass
class IntrinsicResult:
    names: list[str]
    matrices: dict[str, np.ndarray]  # measure -> (K, K)
    ranks: np.ndarray  # (K,) numerical rank of each centred matrix
    dims: np.ndarray
    iterations: np.ndarray  # (K, K) weighted least-squares fits of the minimax solver for d_aff
    seconds: dict[str, float] = field(default_factory=dict)
    weights: np.ndarray | None = None  # (K, K, N) float64: weights of the map attaining d_aff (i -> j)
    solver: str = DEFAULT_SOLVER
    # (K, K) bool: the d_aff interval met the stopping test (gap <= tol * upper + atol); else max_iter stopped it
    converged: np.ndarray | None = None
    lin_iterations: np.ndarray | None = None  # (K, K) as `iterations`, for d_lin (None unless computed)
    lin_converged: np.ndarray | None = None  # (K, K) as `converged`, for d_lin


def _pad_columns(blocks: Sequence[torch.Tensor]) -> torch.Tensor:
    width = max(max(b.shape[1] for b in blocks), 1)
    out = blocks[0].new_zeros((len(blocks), blocks[0].shape[0], width))
    for k, block in enumerate(blocks):
        out[k, :, : block.shape[1]] = block
    return out


def _target_batches(count: int, n: int, width: int, p: int, itemsize: int, block_mb: int, memory: int = 0) -> int:
    """How many targets fit into one solver batch.

    Per target: the weighted design and the leverage product (N, p) each, targets, fit and residual
    (N, q) each, the Anderson history 2 (memory + 1) N and about ten N-vectors of solver state.
    """
    per_target = n * (2 * p + 3 * width + 2 * (memory + 1) + 10) * itemsize
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
        A, rho, _ = thin_svd(M)
        rho = rho[:m].clamp(max=1.0)
        out["cca_r2"].append(float(1 - (rho**2).mean()))
        out["cca_rho"].append(float(1 - rho.mean()))
        # PWCCA: weights of the mapped-from side's canonical variates h_k = Q_i a_k
        alpha = (A[:, :m].T @ (fi.s[:, None] * fi.Vt)).abs().sum(dim=1)
        out["pwcca"].append(float(1 - (alpha * rho).sum() / alpha.sum()))
        keep_j = _svcca_keep(fj.s)
        rho_sv = thin_svd(M[:keep_i, :keep_j])[1][: min(keep_i, keep_j)].clamp(max=1.0)
        out["svcca"].append(float(1 - rho_sv.mean()))
        scaled = fi.s[:, None] * M * fj.s[None, :]  # X_c^T Y_c in the two SVD bases
        cka = (scaled**2).sum() / (torch.linalg.vector_norm(fi.s**2) * torch.linalg.vector_norm(fj.s**2))
        out["cka"].append(float(1 - cka))
        P, sigma, Qt = thin_svd(scaled)
        out["procrustes"].append(float(2 - 2 * sigma.sum() / (torch.linalg.vector_norm(fi.s) * torch.linalg.vector_norm(fj.s))))
        # d_iso: residual of y_c ~ x_c R in target coordinates: Q_j S_j - Q_i S_i P Qt
        residual = fj.Q * fj.s - fi.Q @ (fi.s[:, None] * (P @ Qt))
        out["d_iso"].append(float(torch.linalg.vector_norm(residual, dim=1).max()))
    return out


def pairwise_intrinsic(
    representations: Sequence[np.ndarray],
    names: Sequence[str] | None = None,
    settings: SolverSettings | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
) -> IntrinsicResult:
    """Every measure of the module docstring for every ordered pair; see there for conventions.

    ``pairs``: the ordered pairs ``(i, j)`` (``i`` mapped onto ``j``, ``i != j``) to compute, instead of
    all of them; only the encoders they name are factorised, and the matrices hold NaN at the pairs
    not computed (the diagonal stays 0, ``psi_norm``'s 1). ``representations`` may be numpy arrays
    or torch tensors (moved to ``settings.device``).
    """
    settings = settings or SolverSettings()
    if settings.solver not in SOLVERS:
        raise ConfigError(f"unknown minimax solver {settings.solver!r} (config key 'intrinsic.solver'); "
                          f"choose one of {sorted(SOLVERS)}")
    count = len(representations)
    names = list(names) if names is not None else [str(k) for k in range(count)]
    rows = {rep.shape[0] for rep in representations}
    if len(rows) != 1:
        raise ValueError(f"all encoders need the same examples (rows); got row counts {sorted(rows)}")
    n = rows.pop()
    wanted = set(settings.measures)
    if pairs is None:
        chosen = {i: [j for j in range(count) if j != i] for i in range(count)}
    else:
        bad = [pair for pair in pairs if len(pair) != 2 or pair[0] == pair[1]
               or not all(0 <= int(k) < count for k in pair)]
        if bad:
            raise ValueError(f"pairs {bad}: each pair is (i, j) with i != j, both in 0..{count - 1}")
        chosen = {i: sorted({int(b) for a, b in pairs if int(a) == i}) for i in range(count)}
    used = {i for i, targets in chosen.items() if targets} | {j for targets in chosen.values() for j in targets}
    timer: dict[str, float] = {"factorise": 0.0, "baselines": 0.0, "d_aff": 0.0, "d_lin": 0.0}
    started = time.monotonic()
    factors = [factorise(rep, settings.multiplier, settings.dtype, settings.device, uncentred="d_lin" in wanted)
               if k in used else None for k, rep in enumerate(representations)]
    timer["factorise"] = time.monotonic() - started
    matrices = {name: np.zeros((count, count)) for name in (*MEASURES, "d_lin_lower")}
    # float64: the map rebuilt from them must reproduce d_aff (an ill-conditioned weighted fit amplifies rounding)
    weights = np.zeros((count, count, n), dtype=np.float64) if settings.keep_weights else None
    iterations = np.zeros((count, count), dtype=int)
    converged = np.ones((count, count), dtype=bool)
    lin_iterations = np.zeros((count, count), dtype=int)
    lin_converged = np.ones((count, count), dtype=bool)
    # each target in its own coordinates (same row norms and residuals as the data), built once
    target_parts = [(f.Q * f.s, f.row_norm_max) if f is not None else None for f in factors]
    raw_parts = ([(f.Q_raw * f.s_raw, f.raw_row_norm_max) if f is not None else None for f in factors]
                 if "d_lin" in wanted else [])
    for i, fi in enumerate(factors):
        others = chosen[i]
        if not others or fi is None:
            continue
        tick = time.monotonic()
        if wanted & set(BASELINES):
            for key, values in _baselines_for_source(fi, factors, others).items():
                matrices[key][i, others] = values
        timer["baselines"] += time.monotonic() - tick
        tick = time.monotonic()
        if wanted & set(D_AFF_FAMILY):
            for block, result in _solve_blocks(fi.affine_design(), target_parts, others, settings):
                matrices["d_aff"][i, block] = result.upper.cpu().numpy()
                matrices["d_aff_lower"][i, block] = result.lower.cpu().numpy()
                matrices["d_aff_ls"][i, block] = result.least_squares.cpu().numpy()
                iterations[i, block] = result.iterations.cpu().numpy()
                converged[i, block] = result.converged.cpu().numpy()
                if weights is not None:
                    weights[i, block] = result.weights.double().cpu().numpy()
                # linear part in original coordinates: V_i diag(1/s_i) C V_j^T -> ||diag(1/s_i) C||_2
                linear = result.coef[:, : fi.rank, :] / fi.s[None, :, None]
                if fi.rank > 0:
                    matrices["psi_norm"][i, block] = torch.linalg.matrix_norm(linear, ord=2).cpu().numpy()
                # an exact fit (d_aff at float32 noise) stops at the absolute floor whatever its relative gap
                log.info("d_aff (%s): source %d/%d '%s' (rank %d) -> %d targets: %s iterations, %d/%d reached tol "
                         "or the float32 floor, largest relative gap %.2e", settings.solver, i + 1, count, names[i],
                         fi.rank, len(block), result.iterations.tolist(), int(result.converged.sum()), len(block),
                         float(((result.upper - result.lower) / result.upper.clamp(min=1e-300)).max()))
        timer["d_aff"] += time.monotonic() - tick
        tick = time.monotonic()
        if "d_lin" in wanted:
            for block, result in _solve_blocks(fi.Q_raw, raw_parts, others, settings):
                matrices["d_lin"][i, block] = result.upper.cpu().numpy()
                matrices["d_lin_lower"][i, block] = result.lower.cpu().numpy()
                lin_iterations[i, block] = result.iterations.cpu().numpy()
                lin_converged[i, block] = result.converged.cpu().numpy()
        timer["d_lin"] += time.monotonic() - tick
        log.info("source %d/%d '%s' done (%.1f s so far)", i + 1, count, names[i], time.monotonic() - started)
    dims = np.array([int(rep.shape[1]) for rep in representations])
    matrices["d_aff_msd"] = matrices["d_aff"] ** 2 / dims[None, :]
    if pairs is not None:  # the pairs not asked for were not computed
        skipped = np.ones((count, count), dtype=bool)
        for i, targets in chosen.items():
            skipped[i, targets] = False
        for key in matrices:
            matrices[key][skipped] = np.nan
    for key in matrices:
        np.fill_diagonal(matrices[key], 0.0)
    np.fill_diagonal(matrices["psi_norm"], 1.0)  # the identity map
    ranks = np.array([f.rank if f is not None else -1 for f in factors])  # -1: not factorised (in no pair)
    families = {"d_aff": D_AFF_FAMILY, "d_lin": ("d_lin", "d_lin_lower"), "baselines": BASELINES}
    computed = {m for members in families.values() if wanted & set(members) for m in members}
    lin = "d_lin" in computed
    return IntrinsicResult(names, {k: v for k, v in matrices.items() if k in computed}, ranks, dims, iterations, timer,
                           weights, settings.solver, converged, lin_iterations if lin else None,
                           lin_converged if lin else None)


def solver_table(result: IntrinsicResult) -> list[dict[str, object]]:
    """One row per ordered pair ``i != j`` for ``d_aff_solver.csv``: the certified intervals, the solver,
    its weighted fits (``iterations``) and whether the interval met the stopping test (``converged``)."""
    names, m = result.names, result.matrices
    rows: list[dict[str, object]] = []
    for i, j in ((i, j) for i in range(len(names)) for j in range(len(names)) if i != j):
        upper, lower = m["d_aff"][i, j], m["d_aff_lower"][i, j]
        row: dict[str, object] = {
            "mapped_from": names[i], "mapped_to": names[j], "d_aff": upper, "d_aff_lower": lower,
            "gap": upper - lower, "relative_gap": (upper - lower) / upper if upper > 0 else 0.0,
            "d_aff_ls": m["d_aff_ls"][i, j], "iterations": int(result.iterations[i, j]),
            "d_lin": m["d_lin"][i, j] if "d_lin" in m else float("nan"),
            "d_lin_lower": m["d_lin_lower"][i, j] if "d_lin" in m else float("nan"),
            "solver": result.solver,
            "converged": bool(result.converged[i, j]) if result.converged is not None else True,
        }
        if result.lin_iterations is not None and result.lin_converged is not None:
            row["d_lin_iterations"] = int(result.lin_iterations[i, j])
            row["d_lin_converged"] = bool(result.lin_converged[i, j])
        rows.append(row)
    return rows


def missed_tol_warning(result: IntrinsicResult, tol: float, max_iter: int) -> str | None:
    """One line counting the pairs whose interval missed ``tol`` at ``max_iter`` (d_aff and d_lin), or None."""
    off = ~np.eye(len(result.names), dtype=bool)
    counts = {name: int((~flags[off]).sum()) for name, flags in
              (("d_aff", result.converged), ("d_lin", result.lin_converged)) if flags is not None}
    if not any(counts.values()):
        return None
    return (", ".join(f"{c} of {int(off.sum())} {name} pairs" for name, c in counts.items())
            + f" stopped at max_iter = {max_iter} ({result.solver} solver) without reaching the certified gap "
            f"tol = {tol:g}; their intervals are still certified but wider (d_aff_solver.csv: columns converged, "
            "d_lin_converged). Raise intrinsic.max_iter or tol to remove this warning.")


def _solve_blocks(
    design: torch.Tensor, targets: Sequence[tuple[torch.Tensor, float]], chosen: list[int], settings: SolverSettings,
) -> Iterator[tuple[list[int], MinimaxResult]]:
    """Minimax fits of ``design`` onto the chosen targets (matrix, largest row norm), in memory-bounded batches."""
    n, p = design.shape
    itemsize = design.element_size()
    memory = settings.anderson_memory if settings.solver == "jacobi" else 0
    width = max(targets[j][0].shape[1] for j in chosen)
    for block in _blocks(chosen, n, width, p, itemsize, settings.block_mb, memory):
        stacked = _pad_columns([targets[j][0] for j in block])
        # below 10 eps(float32) x the target's scale a residual is float32 rounding: stop there
        atol = torch.tensor([float32_floor(targets[j][1]) for j in block], dtype=design.dtype, device=design.device)
        yield block, minimax_fit(design, stacked, atol, settings.tol, settings.max_iter, solver=settings.solver,
                                 power=settings.power, memory=settings.anderson_memory,
                                 iterate_dtype=settings.iterate_dtype, orthonormal=True,
                                 working_set=settings.working_set)


def _blocks(items: list[int], n: int, width: int, p: int, itemsize: int, block_mb: int,
            memory: int = 0) -> list[list[int]]:
    size = _target_batches(len(items), n, width, p, itemsize, block_mb, memory)
    return [items[k : k + size] for k in range(0, len(items), size)]


def pairwise_affine_ls(
    representations: Sequence[np.ndarray],
    names: Sequence[str] | None = None,
    multiplier: float = 5.0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
    block_mb: int = 256,
) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares ``d_aff_ls`` for all ordered pairs and the ranks (the solvers' first, uniform-weight fit)."""
    settings = SolverSettings(max_iter=1, multiplier=multiplier, dtype=dtype, device=device, block_mb=block_mb,
                              measures=("d_aff_ls",))
    result = pairwise_intrinsic(representations, names, settings)
    return result.matrices["d_aff_ls"], result.ranks


def affine_map(
    X: np.ndarray, Y: np.ndarray, weights: np.ndarray, multiplier: float = 5.0, dtype: torch.dtype = torch.float64,
) -> tuple[np.ndarray, np.ndarray]:
    """Rebuild the affine map ``x -> x @ A + b`` of X's encoder onto Y's from its solver weights.

    It is the weighted least-squares fit (same rank rule, same design, same routine as the engine),
    so with the weights stored by :func:`pairwise_intrinsic` its largest residual on Y's rank-truncated
    representation is that pair's ``d_aff`` (on Y itself: at most ``sqrt(d_aff^2 + tail^2)``, tail the
    largest row norm the rank rule discarded from Y).
    """
    fi = factorise(X, multiplier, dtype, "cpu")
    w = torch.as_tensor(np.asarray(weights), dtype=dtype)
    # the engine maps onto the target's rank-truncated representation; on Y itself each residual
    # grows by at most the target's discarded tail (Factors.tail_row_norm_max)
    target = factorise(Y, multiplier, dtype, "cpu").truncated()
    coef = WeightedLeastSquares(fi.affine_design(), w).solve(target)
    return map_in_original_coordinates(fi, coef)


def map_in_original_coordinates(fi: Factors, coef: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """``(A, b)`` with ``x @ A + b`` equal to ``[(x - mu) V S^-1, 1/sqrt(N)] @ coef`` (the design's map)."""
    n = fi.Q.shape[0]
    linear = fi.Vt.T @ (coef[: fi.rank] / fi.s[:, None])
    bias = coef[fi.rank] / math.sqrt(n) - fi.mean @ linear
    return linear.cpu().numpy(), bias.cpu().numpy()
