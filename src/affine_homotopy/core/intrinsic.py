"""Intrinsic (representation-level) distances between encoders for ordered pairs: the certified
``d_aff`` family (:mod:`affine_homotopy.core.minimax`), ``d_aff_rel``, ``d_lin``, ``d_iso`` and the CCA, CKA and
Procrustes baselines, each encoder factorised once under the rank rule (:mod:`affine_homotopy.core.linalg`).

Orientation: entry ``(i, j)`` of every matrix is encoder ``i`` (row) mapped onto encoder ``j`` (column),
the paper's ``d_Aff(H_j, H_i)``. Conventions: docs/method.md.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ..errors import ConfigError
from .interval import Interval
from .linalg import Factors, WeightedLeastSquares, factorise, float32_floor, thin_svd
from .minimax import DEFAULT_MEMORY, DEFAULT_SOLVER, MinimaxResult, check_solver, minimax_fit
from .measures import BASELINES, D_AFF_FAMILY, INTRINSIC_MEASURES
from .pairs import PairPlan, PhaseClock, plan_pairs

log = logging.getLogger(__name__)

MEASURES = INTRINSIC_MEASURES  # the file stems of intrinsic/<task>/<layer>/ (the registry: measures.py)
SVCCA_VARIANCE = 0.99


@dataclass
class IntrinsicSettings:
    """Settings of the intrinsic engine (a study's config becomes these in
    :func:`affine_homotopy.study.settings.intrinsic_settings`)."""

    tol: float = 1e-3
    max_iter: int = 1000
    rank_multiplier: float = 5.0  # the rank rule's n (linalg.rank_threshold)
    solver: str = DEFAULT_SOLVER  # a key of affine_homotopy.core.minimax.SOLVERS: "jacobi" or "lawson"
    lawson_power: float = 1.0  # lawson only: weight update w <- w * r**power (1 = classical Lawson)
    anderson_memory: int = DEFAULT_MEMORY  # jacobi only: Anderson mixing memory (0 = plain steps)
    block_mb: int = 1024
    dtype: torch.dtype = torch.float64
    device: torch.device | str = "cpu"
    measures: tuple[str, ...] = MEASURES
    keep_weights: bool = False  # return the weights of each d_aff map (to rebuild it: affine_map)
    iterate_dtype: torch.dtype | None = None  # e.g. float32: faster iterations, bounds certified in dtype
    working_set: bool = True  # large N: solve on a working set of rows, checked on all (minimax.working_set_fit)

    def __post_init__(self) -> None:
        """A ConfigError naming the first field out of range (its ``argument``), before any work."""
        check_solver(self.solver)
        checks = (("tol", self.tol > 0, "a positive relative gap"), ("max_iter", self.max_iter >= 1, "at least 1"),
                  ("rank_multiplier", self.rank_multiplier > 0, "positive"),
                  ("anderson_memory", self.anderson_memory >= 0, "at least 0"))
        for name, ok, needed in checks:
            if not ok:
                raise ConfigError(f"{name} must be {needed}, got {getattr(self, name)!r}", argument=name,
                                  value=getattr(self, name))
        unknown = [m for m in self.measures if m not in MEASURES]
        if unknown:
            raise ConfigError(f"measures {list(self.measures)} names unknown measure(s) {unknown}; choose from "
                              f"{', '.join(MEASURES)}", argument="measures", value=self.measures)


# ---------------------------------------------------------------------------------------------
# the all-pairs engine


@dataclass
class IntrinsicResult:
    """The measures of one engine call: (K, K) matrices, row ``i`` mapped onto column ``j``."""

    names: list[str]
    matrices: dict[str, np.ndarray]  # measure (file stem) -> (K, K); NaN at the pairs not computed
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
    # measure ("d_aff", "d_aff_rel", "d_lin") -> {(i, j): the pair's certified interval}, for the pairs computed
    intervals: dict[str, dict[tuple[int, int], Interval]] = field(default_factory=dict)


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
    settings: IntrinsicSettings | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
) -> IntrinsicResult:
    """Every selected measure (``settings.measures``) for the ordered ``pairs`` (default: all).

    ``pairs``: ``(i, j)``, ``i`` mapped onto ``j``, ``i != j``; only the encoders they name are
    factorised, and the matrices hold NaN at the pairs not computed (the diagonal stays 0,
    ``psi_norm``'s 1). ``representations`` may be numpy arrays or torch tensors (moved to
    ``settings.device``), all with the same rows.
    """
    settings = settings or IntrinsicSettings()
    names = list(names) if names is not None else [str(k) for k in range(len(representations))]
    plan = plan_pairs(representations, pairs)
    lin = "d_lin" in settings.measures
    clock = PhaseClock(("factorise", "baselines", "d_aff", "d_lin"))
    factors = [factorise(rep, settings.rank_multiplier, settings.dtype, settings.device, uncentred=lin)
               if k in plan.used else None for k, rep in enumerate(representations)]
    clock.stop("factorise")
    tables = _PairTables.empty(plan.count, plan.n, settings.keep_weights)
    targets = _Targets.of(factors, lin)
    if "d_aff_rel" in settings.measures:
        targets.radii = enclosing_radii(factors, targets.affine, sorted({j for _, js in plan.by_source for j in js}),
                                        settings)
    for i, others in plan.by_source:
        clock.start()
        _source_pairs(i, others, factors, targets, tables, settings, clock, f"{i + 1}/{plan.count} '{names[i]}'")
        log.info("source %d/%d '%s' done (%.1f s so far)", i + 1, plan.count, names[i], clock.elapsed)
    dims = np.array([int(rep.shape[1]) for rep in representations])
    return tables.result(names, plan, factors, dims, settings, clock.seconds)


@dataclass
class _Targets:
    """Each factorised target in its own coordinates, ``(Q diag(s), largest row norm)``: the same row
    norms and residuals as the data; ``raw`` for ``d_lin`` (uncentred), empty without it."""

    affine: list[tuple[torch.Tensor, float] | None]
    raw: list[tuple[torch.Tensor, float] | None]
    radii: dict[int, Interval] = field(default_factory=dict)  # d_aff_rel only: each target's enclosing radius

    @classmethod
    def of(cls, factors: Sequence[Factors | None], lin: bool) -> "_Targets":
        return cls([(f.Q * f.s, f.row_norm_max) if f is not None else None for f in factors],
                   [(f.Q_raw * f.s_raw, f.raw_row_norm_max) if f is not None else None for f in factors]
                   if lin else [])


@dataclass
class _PairTables:
    """The engine's (K, K) outputs, filled source by source."""

    matrices: dict[str, np.ndarray]
    weights: np.ndarray | None
    iterations: np.ndarray
    converged: np.ndarray
    lin_iterations: np.ndarray
    lin_converged: np.ndarray
    intervals: dict[str, dict[tuple[int, int], Interval]] = field(
        default_factory=lambda: {"d_aff": {}, "d_aff_rel": {}, "d_lin": {}})

    @classmethod
    def empty(cls, count: int, n: int, keep_weights: bool) -> "_PairTables":
        return cls(
            matrices={name: np.zeros((count, count)) for name in (*MEASURES, "d_lin_lower", "d_aff_rel_lower")},
            # float64: the map rebuilt from them must reproduce d_aff (an ill-conditioned fit amplifies rounding)
            weights=np.zeros((count, count, n), dtype=np.float64) if keep_weights else None,
            iterations=np.zeros((count, count), dtype=int), converged=np.ones((count, count), dtype=bool),
            lin_iterations=np.zeros((count, count), dtype=int), lin_converged=np.ones((count, count), dtype=bool),
        )

    def _add_intervals(self, measure: str, i: int, block: list[int], result: MinimaxResult, iterations: np.ndarray,
                       converged: np.ndarray) -> None:
        for k, j in enumerate(block):
            interval = self.intervals[measure][i, j] = result.interval(k)
            self.matrices[measure][i, j], self.matrices[f"{measure}_lower"][i, j] = interval.upper, interval.lower
            iterations[i, j], converged[i, j] = interval.iterations, interval.within_tol

    def add_d_aff(self, i: int, fi: Factors, block: list[int], result: MinimaxResult) -> None:
        matrices = self.matrices
        self._add_intervals("d_aff", i, block, result, self.iterations, self.converged)
        matrices["d_aff_ls"][i, block] = result.least_squares.cpu().numpy()
        if self.weights is not None:
            self.weights[i, block] = result.weights.double().cpu().numpy()
        # linear part in original coordinates: V_i diag(1/s_i) C V_j^T -> ||diag(1/s_i) C||_2
        linear = result.coef[:, : fi.rank, :] / fi.s[None, :, None]
        if fi.rank > 0:
            matrices["psi_norm"][i, block] = torch.linalg.matrix_norm(linear, ord=2).cpu().numpy()

    def add_d_aff_rel(self, i: int, block: list[int], radii: dict[int, Interval]) -> None:
        for j in block:
            interval = self.intervals["d_aff_rel"][i, j] = relative_interval(self.intervals["d_aff"][i, j], radii[j])
            self.matrices["d_aff_rel"][i, j], self.matrices["d_aff_rel_lower"][i, j] = interval.upper, interval.lower

    def add_d_lin(self, i: int, block: list[int], result: MinimaxResult) -> None:
        self._add_intervals("d_lin", i, block, result, self.lin_iterations, self.lin_converged)

    def result(self, names: list[str], plan: PairPlan, factors: Sequence[Factors | None], dims: np.ndarray,
               settings: IntrinsicSettings, seconds: dict[str, float]) -> IntrinsicResult:
        """The finished matrices (NaN off the plan, the identity map on the diagonal), those selected."""
        matrices = self.matrices
        matrices["d_aff_msd"] = matrices["d_aff"] ** 2 / dims[None, :]
        skipped = plan.skipped()
        for key in matrices:
            matrices[key][skipped] = np.nan
            np.fill_diagonal(matrices[key], 0.0)
        np.fill_diagonal(matrices["psi_norm"], 1.0)  # the identity map
        wanted = set(settings.measures)
        families = {"d_aff": D_AFF_FAMILY, "d_aff_rel": ("d_aff_rel", "d_aff_rel_lower"),
                    "d_lin": ("d_lin", "d_lin_lower"), "baselines": BASELINES}
        computed = {m for members in families.values() if wanted & set(members) for m in members}
        lin = "d_lin" in computed
        return IntrinsicResult(
            names=names, matrices={k: v for k, v in matrices.items() if k in computed},
            ranks=np.array([f.rank if f is not None else -1 for f in factors]),  # -1: not factorised (in no pair)
            dims=dims, iterations=self.iterations, seconds=seconds, weights=self.weights, solver=settings.solver,
            converged=self.converged, lin_iterations=self.lin_iterations if lin else None,
            lin_converged=self.lin_converged if lin else None,
            intervals={m: pairs for m, pairs in self.intervals.items() if m in computed},
        )


def _source_pairs(i: int, others: list[int], factors: Sequence[Factors | None], targets: _Targets,
                  tables: _PairTables, settings: IntrinsicSettings, clock: PhaseClock, label: str) -> None:
    """Source ``i`` against its targets ``others``: the baselines, then ``d_aff``'s and ``d_lin``'s
    minimax fits in memory-bounded blocks, each phase on ``clock``."""
    wanted = set(settings.measures)
    fi = factors[i]
    if wanted & set(BASELINES):
        for key, values in _baselines_for_source(fi, factors, others).items():
            tables.matrices[key][i, others] = values
    clock.stop("baselines")
    if wanted & {*D_AFF_FAMILY, "d_aff_rel"}:
        for block, result in _solve_blocks(fi.affine_design(), targets.affine, others, settings):
            tables.add_d_aff(i, fi, block, result)
            if "d_aff_rel" in wanted:
                tables.add_d_aff_rel(i, block, targets.radii)
            # an exact fit (d_aff at float32 noise) stops at the absolute floor whatever its relative gap
            log.info("d_aff (%s): source %s (rank %d) -> %d targets: %s iterations, %d/%d reached tol "
                     "or the float32 floor, largest relative gap %.2e", settings.solver, label, fi.rank,
                     len(block), result.iterations.tolist(), int(result.converged.sum()), len(block),
                     float(((result.upper - result.lower) / result.upper.clamp(min=1e-300)).max()))
    clock.stop("d_aff")
    if "d_lin" in wanted:
        for block, result in _solve_blocks(fi.Q_raw, targets.raw, others, settings):
            tables.add_d_lin(i, block, result)
    clock.stop("d_lin")


def enclosing_radii(factors: Sequence[Factors | None], affine: Sequence[tuple[torch.Tensor, float] | None],
                    chosen: list[int], settings: IntrinsicSettings) -> dict[int, Interval]:
    """``R_j = min_c max_n ||y_n - c||``, the radius of the smallest ball enclosing each chosen target's
    rank-ruled representation: ``d_aff`` from a constant source (a constant-only design), certified to
    ``tol / 100`` so that its gap adds little to ``d_aff_rel``'s. A rank-0 target has radius 0."""
    radii = {j: Interval(0.0, 0.0, stop="rank 0", within_tol=True) for j in chosen if factors[j].rank == 0}
    spread = [j for j in chosen if j not in radii]
    if spread:
        n = affine[spread[0]][0].shape[0]
        constant = affine[spread[0]][0].new_full((n, 1), 1 / math.sqrt(n))  # orthonormal: one unit column
        finer = replace(settings, tol=settings.tol / 100)
        for block, result in _solve_blocks(constant, affine, spread, finer):
            radii.update({j: result.interval(k) for k, j in enumerate(block)})
    return radii


def relative_interval(d_aff: Interval, radius: Interval) -> Interval:
    """``d_aff / R``'s certified interval, ``[lower / upper(R), min(1, upper / lower(R))]``: 1 is the
    constant map's value, which every affine map can reach. Undefined (both ends NaN) unless ``lower(R)``
    is a positive certificate: a target without spread has no scale to compare with."""
    if not (radius.certified and radius.lower > 0):
        return Interval(math.nan, math.nan, stop="undefined: target without spread")
    ratio = d_aff.ratio(radius)
    upper = min(1.0, ratio.upper)
    return replace(ratio, lower=min(ratio.lower, upper), upper=upper)


def undefined_relative_note(result: IntrinsicResult) -> str | None:
    """One line naming the targets whose ``d_aff_rel`` is NaN (no spread under the rank rule), or None."""
    undefined = sorted({j for (_, j), interval in result.intervals.get("d_aff_rel", {}).items()
                        if math.isnan(interval.upper)})
    if not undefined:
        return None
    return (f"d_aff_rel is NaN onto {', '.join(result.names[j] for j in undefined)}: the target's representations "
            "have no spread under the rank rule (rank 0, or a certified enclosing radius of 0), so there is no "
            "scale to divide by; d_aff onto it is still reported")


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
        if "d_aff_rel" in m:
            row["d_aff_rel"], row["d_aff_rel_lower"] = m["d_aff_rel"][i, j], m["d_aff_rel_lower"][i, j]
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
            "d_lin_converged). Raise max_iter or tol to remove this warning.")


def _solve_blocks(
    design: torch.Tensor, targets: Sequence[tuple[torch.Tensor, float]], chosen: list[int],
    settings: IntrinsicSettings,
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
                                 power=settings.lawson_power, memory=settings.anderson_memory,
                                 iterate_dtype=settings.iterate_dtype, orthonormal=True,
                                 working_set=settings.working_set)


def _blocks(items: list[int], n: int, width: int, p: int, itemsize: int, block_mb: int,
            memory: int = 0) -> list[list[int]]:
    size = _target_batches(len(items), n, width, p, itemsize, block_mb, memory)
    return [items[k : k + size] for k in range(0, len(items), size)]


def affine_map(
    X: np.ndarray, Y: np.ndarray, weights: np.ndarray, rank_multiplier: float = 5.0, dtype: torch.dtype = torch.float64,
) -> tuple[np.ndarray, np.ndarray]:
    """Rebuild the affine map ``x -> x @ A + b`` of X's encoder onto Y's from its solver weights.

    It is the weighted least-squares fit (same rank rule, same design, same routine as the engine),
    so with the weights stored by :func:`pairwise_intrinsic` its largest residual on Y's rank-truncated
    representation is that pair's ``d_aff`` (on Y itself: at most ``sqrt(d_aff^2 + tail^2)``, tail the
    largest row norm the rank rule discarded from Y).
    """
    fi = factorise(X, rank_multiplier, dtype, "cpu")
    w = torch.as_tensor(np.asarray(weights), dtype=dtype)
    # the engine maps onto the target's rank-truncated representation; on Y itself each residual
    # grows by at most the target's discarded tail (Factors.tail_row_norm_max)
    target = factorise(Y, rank_multiplier, dtype, "cpu").truncated()
    coef = WeightedLeastSquares(fi.affine_design(), w).solve(target)
    return map_in_original_coordinates(fi, coef)


def map_in_original_coordinates(fi: Factors, coef: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """``(A, b)`` with ``x @ A + b`` equal to ``[(x - mu) V S^-1, 1/sqrt(N)] @ coef`` (the design's map)."""
    n = fi.Q.shape[0]
    linear = fi.Vt.T @ (coef[: fi.rank] / fi.s[:, None])
    bias = coef[fi.rank] / math.sqrt(n) - fi.mean @ linear
    return linear.cpu().numpy(), bias.cpu().numpy()
