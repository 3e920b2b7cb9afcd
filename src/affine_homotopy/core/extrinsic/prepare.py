"""The engine's inputs on its device: every encoder's probes, factorisation and search radius
(:func:`prepare`), and one source's whitened basis, start maps, Lemma 5.2 check and solver
(:func:`source_context`); the start maps and classifier logits every phase shares."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ...errors import NumericalError
from ..linalg import Factors, WeightedLeastSquares, consecutive_blocks, factorise, residual_norms
from ..probes import ProbeSet, SoftmaxProbe
from .bounds import LemmaCheck, softmax_lipschitz
from .fixed import FixedClassifierSolver
from .settings import ExtrinsicSettings

log = logging.getLogger(__name__)

# the intrinsic solver's weights per pair, [i, j] for the map i -> j: a (K, K, N) array, or a mapping
# from the pairs computed to their (N,) weights
MapWeights = np.ndarray | Mapping[tuple[int, int], np.ndarray]


@dataclass
class RandomClassifiers:
    """One encoder's random-label classifiers whose logits and norms are finite."""

    weight: torch.Tensor  # (G, D, C)
    bias: torch.Tensor  # (G, C)
    seeds: np.ndarray  # (G,) int: their indices in the probe set (random_<seed> in the diagnostics)
    norms: np.ndarray  # (G,) spectral norms

    def __len__(self) -> int:
        return len(self.seeds)


def finite_classifiers(Y: torch.Tensor, probe_set: ProbeSet, settings: ExtrinsicSettings) -> RandomClassifiers:
    """The classifiers of ``probe_set`` whose logits on ``Y`` and spectral norms are finite."""
    weight, bias = as_tensor(probe_set.weight, settings), as_tensor(probe_set.bias, settings)
    if weight.shape[0] == 0:
        return RandomClassifiers(weight, bias, np.zeros(0, dtype=int), np.zeros(0))
    finite = torch.isfinite(weight).all(dim=(1, 2)) & torch.isfinite(bias).all(dim=1)
    for block in consecutive_blocks(list(range(weight.shape[0])), [1] * weight.shape[0], 64):
        rows = torch.tensor(block, device=weight.device)
        logits = classifier_logits(Y, torch.nan_to_num(weight[rows]), torch.nan_to_num(bias[rows]),
                                    settings.inverse_temperature)
        finite[rows] &= torch.isfinite(logits).all(dim=2).all(dim=0)
    keep = torch.nonzero(finite).squeeze(1)
    norms = torch.linalg.matrix_norm(weight[keep], ord=2)
    keep_norm = torch.isfinite(norms)
    keep, norms = keep[keep_norm], norms[keep_norm]
    return RandomClassifiers(weight[keep], bias[keep], keep.cpu().numpy(), norms.cpu().numpy())


@dataclass
class TaskProbes:
    """Every encoder's task probe on the engine's device (None for an encoder that is only a source)."""

    weight: list[torch.Tensor | None]  # (1, D_k, C)
    bias: list[torch.Tensor | None]  # (1, C)
    logits: list[torch.Tensor | None]  # (N, 1, C), lam included
    norms: np.ndarray  # (K,) spectral norms (NaN: no probe)
    n_classes: int


@dataclass
class PreparedInputs:
    """Phase 0: the encoders on the engine's device, their probes, factorisations and search radii."""

    names: list[str]
    n: int
    widths: list[int]
    Y: torch.Tensor  # (K, N, Dmax): every encoder, zero columns padding the narrower ones
    tensors: list[torch.Tensor]  # views into Y, (N, D_k)
    task: TaskProbes
    y_mean: torch.Tensor  # (K, Dmax)
    y_scale: torch.Tensor  # (K,) RMS centred row norm
    factors: list[Factors]  # without bases (restored per source)
    randoms: list[RandomClassifiers] | None
    skipped: np.ndarray  # (K,) random classifiers skipped (non-finite)
    radius: np.ndarray  # (K,) the search ball's radius per target
    d_aff: np.ndarray | None  # (K, K) float64, for Lemma 5.2
    heads_per_block: int


def prepare(representations: Sequence[np.ndarray], probes: Sequence[SoftmaxProbe | None], names: list[str],
            random_probes: Sequence[ProbeSet] | None, d_aff: np.ndarray | None, settings: ExtrinsicSettings
            ) -> PreparedInputs:
    count = len(representations)
    n = representations[0].shape[0]
    widths = [rep.shape[1] for rep in representations]
    # all encoders in one (K, N, Dmax) stack: the search's target-side products are one batched product
    Y = torch.zeros((count, n, max(widths)), dtype=settings.dtype, device=settings.device)
    for k, rep in enumerate(representations):
        Y[k, :, : widths[k]] = as_tensor(rep, settings)
    tensors = [Y[k, :, : widths[k]] for k in range(count)]
    task = _task_probes(tensors, probes, names, settings)
    y_mean = Y.mean(dim=1)
    y_scale = torch.stack([torch.sqrt((torch.linalg.vector_norm(t - y_mean[k, : widths[k]], dim=1) ** 2).mean())
                           for k, t in enumerate(tensors)])
    factors = [factorise(t, settings.rank_multiplier, settings.dtype, settings.device).without_basis() for t in tensors]
    randoms, skipped, radius = None, np.zeros(count, dtype=int), np.zeros(count)
    if random_probes is not None:
        randoms = [finite_classifiers(tensors[j], random_probes[j], settings) for j in range(count)]
        skipped, radius = _skipped_and_radius(randoms, random_probes, task.norms, names, settings)
    itemsize = torch.tensor([], dtype=settings.dtype).element_size()
    # a random head costs about ten (N, C) tensors at once, plus its refinement working set
    per_head = itemsize * task.n_classes * (10 * n + settings.working_set * 4)
    heads_per_block = max(1, settings.block_mb * 2**20 // max(per_head, 1))
    return PreparedInputs(names=names, n=n, widths=widths, Y=Y, tensors=tensors, task=task, y_mean=y_mean,
                          y_scale=y_scale, factors=factors, randoms=randoms, skipped=skipped, radius=radius,
                          d_aff=None if d_aff is None else np.asarray(d_aff, dtype=np.float64),
                          heads_per_block=heads_per_block)


def _task_probes(tensors: list[torch.Tensor], probes: Sequence[SoftmaxProbe | None], names: list[str],
                 settings: ExtrinsicSettings) -> TaskProbes:
    weight = [None if p is None else as_tensor(p.weight, settings)[None] for p in probes]
    bias = [None if p is None else as_tensor(p.bias, settings)[None] for p in probes]
    logits = [None if w is None else classifier_logits(t, w, b, settings.inverse_temperature)
              for t, w, b in zip(tensors, weight, bias)]
    for j, found in enumerate(logits):
        if found is not None and not bool(torch.isfinite(found).all()):
            raise NumericalError(f"the task probe of encoder '{names[j]}' gives non-finite logits on its own "
                                 "representations; refit it (probe weights must be finite and moderate)")
    norms = np.array([math.nan if w is None else float(torch.linalg.matrix_norm(w[0], ord=2)) for w in weight])
    return TaskProbes(weight, bias, logits, norms, next(w for w in weight if w is not None).shape[2])


def _skipped_and_radius(randoms: list[RandomClassifiers], random_probes: Sequence[ProbeSet], task_norms: np.ndarray,
                        names: list[str], settings: ExtrinsicSettings) -> tuple[np.ndarray, np.ndarray]:
    """Per encoder: how many random classifiers were skipped (non-finite), and the search ball's radius
    (the configured one, or the largest norm among its task probe and random classifiers)."""
    skipped = np.array([random_probes[j].weight.shape[0] - len(r) for j, r in enumerate(randoms)], dtype=int)
    for j in np.flatnonzero(skipped):
        log.warning("encoder '%s': %d of %d random classifiers skipped: their logits or weight norm "
                    "overflow (non-finite)", names[j], skipped[j], random_probes[j].weight.shape[0])
    radius = np.array([max([task_norms[j], *r.norms]) if settings.search_radius is None else settings.search_radius
                       for j, r in enumerate(randoms)], dtype=float)
    searching = "d_worst_search" in settings.measures and (settings.search_steps or settings.search_candidates)
    if searching and not any(len(r) for r in randoms):
        log.info("no random classifiers: the worst-case search starts from each target's task probe, in the "
                 "ball of its norm%s", "" if settings.search_radius is None else
                 f" (configured radius {settings.search_radius:g})")
    return skipped, radius


@dataclass
class SourceContext:
    """One source ``i`` and the targets it is mapped onto: its whitened basis, its pairs' start maps
    and its fixed-classifier solver (one LP model per pair on two-class tasks)."""

    i: int
    others: list[int]
    factors: Factors  # with basis
    Z: torch.Tensor  # (N, r): sqrt(N) U, the whitened rank-ruled basis
    pair_maps: dict[int, PairMaps]
    solver: FixedClassifierSolver
    lemma: LemmaCheck
    drifted: list[str]  # pairs whose map rebuilt from the stored weights disagrees with d_aff

    @property
    def rank(self) -> int:
        return self.Z.shape[1]


def source_context(prep: PreparedInputs, i: int, others: list[int], map_weights: MapWeights | None,
                   settings: ExtrinsicSettings) -> SourceContext:
    """Source ``i``'s basis, its pairs' start maps (each fitted to its target: Lemma 5.2's rebuilt
    residual) and its solver."""
    factors = prep.factors[i].with_basis(prep.tensors[i])
    design = factors.affine_design()
    rank = design.shape[1] - 1
    Z = design[:, :rank] * math.sqrt(prep.n)
    pair_maps = {j: PairMaps(design, None if map_weights is None else as_tensor(map_weights[i, j], settings),
                             prep.tensors[j], prep.factors[j]) for j in others}
    rebuilt = np.array([pair_maps[j].rebuilt for j in others])
    lemma = LemmaCheck(softmax_lipschitz(settings.inverse_temperature),
                       None if prep.d_aff is None else prep.d_aff[i, others],
                       np.array([prep.factors[j].tail_row_norm_max for j in others], dtype=np.float64),
                       np.array([prep.factors[j].row_norm_max for j in others], dtype=np.float64), rebuilt)
    checked = map_weights is not None and lemma.d_aff is not None
    drifted = [f"{prep.names[i]} -> {prep.names[j]} ({rebuilt[h]:.6g} vs {lemma.d_aff[h]:.6g})"
               for h, j in enumerate(others) if checked and lemma.drifted(h)]
    return SourceContext(i=i, others=others, factors=factors, Z=Z, pair_maps=pair_maps, lemma=lemma,
                         solver=FixedClassifierSolver(Z, settings, prep.names[i]), drifted=drifted)


def as_tensor(array: np.ndarray, settings: ExtrinsicSettings) -> torch.Tensor:
    # a copy: inputs may be read-only
    return torch.tensor(np.asarray(array), dtype=settings.dtype, device=settings.device)


class PairMaps:
    """Start maps for the classifiers of one pair ``i -> j``, *composed* and *least_squares*. The map
    ``A_ij`` is fitted to the target ``Y`` (N, D)'s rank-truncated representation as ``d_aff`` (the
    intrinsic engine's weighted least squares on ``[U_i, 1/sqrt(N)]`` with the stored solver weights),
    or by least squares without weights. ``rebuilt``: its largest residual on ``Y`` itself, the value
    Lemma 5.2's composed candidate uses: at most ``sqrt(d_aff^2 + tail^2)`` (:class:`.bounds.LemmaCheck`)."""

    def __init__(self, design: torch.Tensor, weights: torch.Tensor | None, Y: torch.Tensor, target: Factors) -> None:
        self.U = design[:, :-1]
        self.root = math.sqrt(design.shape[0])
        fit = None if weights is None else WeightedLeastSquares(design, weights, torch.nonzero(weights > 0).squeeze(1))
        self.design = torch.cat([self.U, self.U.new_full((self.U.shape[0], 1), 1.0 / self.root)], dim=1)
        truncated = target.with_basis(Y).truncated()
        self.coef = self.design.T @ truncated if fit is None else fit.solve(truncated)
        del truncated
        self.residual_norms = residual_norms(self.design, Y, self.coef)
        self.rebuilt = float(self.residual_norms.max())

    def starts(self, logits: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
               lam: float) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """``{"composed": (A, c), "least_squares": (A, c)}``, A (r, G, C), c (G, C), for G classifiers
        ``weight`` (G, D', C), ``bias`` (G, C) with logits (N, G, C) on the target. *composed*: the
        classifier after ``A_ij`` (the logits are linear in the target; a stack's padded rows of ``W``
        meet zeros); *least_squares*: the logits fitted by ordinary least squares."""
        n, groups, n_classes = logits.shape
        rank = self.U.shape[1]
        flat = logits.reshape(n, -1)
        # least squares on the design [sqrt(N) U, 1]: U^T 1 = 0 and U^T U = I decouple it
        least_squares = ((self.U.T @ flat / self.root).reshape(rank, groups, n_classes),
                         flat.mean(dim=0).reshape(groups, n_classes))
        coef = lam * torch.einsum("pd,gdc->pgc", self.coef, weight[:, : self.coef.shape[1]])
        composed = (coef[:rank] / self.root, coef[rank] / self.root + lam * bias)
        return {"composed": composed, "least_squares": least_squares}

    def residual_rows(self, Y: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """``y_n - A_ij(x_n)`` for the given examples; columns beyond the target's width (the padding of a
        stack) are 0."""
        width = self.coef.shape[1]
        residual = Y[rows, :width] - self.design[rows] @ self.coef
        return torch.nn.functional.pad(residual, (0, Y.shape[1] - width))


def classifier_logits(Y: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, lam: float) -> torch.Tensor:
    """(N, G, C) logits of G classifiers ``weight`` (G, D, C), ``bias`` (G, C) on Y (N, D)."""
    g, d, k = weight.shape
    return lam * ((Y @ weight.permute(1, 0, 2).reshape(d, g * k)).reshape(-1, g, k) + bias)


def pad_width(weight: torch.Tensor, rows: int) -> torch.Tensor:
    """Zero rows appended to ``weight`` (..., D, C) up to ``rows`` (targets of different widths share one stack)."""
    extra = rows - weight.shape[-2]
    if extra == 0:
        return weight
    return torch.cat([weight, weight.new_zeros((*weight.shape[:-2], extra, weight.shape[-1]))], dim=-2)


def project_to_ball(weight: torch.Tensor, radius: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Nearest point of ``{W : ||W||_2 <= radius}`` for each (D, C) matrix of ``weight`` (H, D, C):
    singular values clipped at the radius (exact in the spectral and Frobenius norms). Returns the
    projected weights and their spectral norms (H,)."""
    U, S, Vh = torch.linalg.svd(weight, full_matrices=False)
    outside = S[:, 0] > radius
    clipped = torch.minimum(S, radius[:, None])
    projected = torch.where(outside[:, None, None], (U * clipped[:, None, :]) @ Vh, weight)
    return projected, torch.where(outside, clipped[:, 0], S[:, 0])


def stack_starts(per_target: list[dict[str, tuple[torch.Tensor, torch.Tensor]]]
                 ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """One start per name for the heads of several targets (:meth:`PairMaps.starts`), head-major."""
    return {name: (torch.cat([s[name][0] for s in per_target], dim=1), torch.cat([s[name][1] for s in per_target]))
            for name in ("composed", "least_squares")}
