"""The extrinsic engine's inputs on its device: probes, factorisations and search radii for every
encoder (:func:`prepare`), and one source's whitened basis, start maps and solver (:func:`source_context`).

Orientation: a pair ``(i, j)`` maps encoder ``i`` (source) onto encoder ``j`` (target). Conventions: docs/method.md.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ...errors import NumericalError
from ..linalg import Factors, consecutive_blocks, factorise
from ..probes import ProbeSet, SoftmaxProbe
from .bounds import LemmaCheck
from .fixed import FixedClassifierSolver
from .maps import PairMaps, as_tensor, classifier_logits
from .settings import ExtrinsicSettings

log = logging.getLogger(__name__)


def finite_classifiers(Y: torch.Tensor, probe_set: ProbeSet, settings: ExtrinsicSettings
                        ) -> tuple[torch.Tensor, torch.Tensor, np.ndarray, np.ndarray]:
    """The classifiers of ``probe_set`` whose logits on ``Y`` are finite: weights, biases, their
    indices in the set and their spectral norms."""
    weight, bias = as_tensor(probe_set.weight, settings), as_tensor(probe_set.bias, settings)
    if weight.shape[0] == 0:
        return weight, bias, np.zeros(0, dtype=int), np.zeros(0)
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
    return weight[keep], bias[keep], keep.cpu().numpy(), norms.cpu().numpy()


@dataclass
class PreparedInputs:
    """Phase 0: the encoders on the engine's device, their probes, factorisations and search radii."""

    names: list[str]
    n: int
    widths: list[int]
    Y: torch.Tensor  # (K, N, Dmax): every encoder, zero columns padding the narrower ones
    tensors: list[torch.Tensor]  # views into Y, (N, D_k)
    task_w: list[torch.Tensor]  # (1, D_k, C)
    task_b: list[torch.Tensor]  # (1, C)
    task_logits: list[torch.Tensor]  # (N, 1, C), lam included
    task_norms: np.ndarray  # (K,) spectral norms of the task probes
    n_classes: int
    y_mean: torch.Tensor  # (K, Dmax)
    y_scale: torch.Tensor  # (K,) RMS centred row norm
    factors: list[Factors]  # without bases (restored per source)
    randoms: list[tuple[torch.Tensor, torch.Tensor, np.ndarray, np.ndarray]] | None  # weight, bias, seeds, norms
    skipped: np.ndarray
    radius: np.ndarray
    lemma: LemmaCheck
    heads_per_block: int


def prepare(representations: Sequence[np.ndarray], probes: Sequence[SoftmaxProbe], names: list[str],
            random_probes: Sequence[ProbeSet] | None, d_aff: np.ndarray | None, settings: ExtrinsicSettings
            ) -> PreparedInputs:
    count = len(representations)
    n = representations[0].shape[0]
    lam = settings.inverse_temperature
    widths = [rep.shape[1] for rep in representations]
    # all encoders in one (K, N, Dmax) stack: the search's target-side products are one batched product
    Y = torch.zeros((count, n, max(widths)), dtype=settings.dtype, device=settings.device)
    for k, rep in enumerate(representations):
        Y[k, :, : widths[k]] = as_tensor(rep, settings)
    tensors = [Y[k, :, : widths[k]] for k in range(count)]
    task_w = [as_tensor(p.weight, settings)[None] for p in probes]
    task_b = [as_tensor(p.bias, settings)[None] for p in probes]
    n_classes = task_w[0].shape[2]
    task_logits = [classifier_logits(t, w, b, lam) for t, w, b in zip(tensors, task_w, task_b)]
    for j, logits in enumerate(task_logits):
        if not bool(torch.isfinite(logits).all()):
            raise NumericalError(f"the task probe of encoder '{names[j]}' gives non-finite logits on its own "
                                 "representations; refit it (probe weights must be finite and moderate)")
    task_norms = np.array([float(torch.linalg.matrix_norm(w[0], ord=2)) for w in task_w])
    y_mean = Y.mean(dim=1)
    y_scale = torch.stack([torch.sqrt((torch.linalg.vector_norm(t - y_mean[k, : widths[k]], dim=1) ** 2).mean())
                           for k, t in enumerate(tensors)])
    factors = [factorise(t, settings.rank_multiplier, settings.dtype, settings.device).without_basis() for t in tensors]
    lemma = LemmaCheck(count, d_aff, lam, np.array([f.tail_row_norm_max for f in factors]),
                       np.array([f.row_norm_max for f in factors]))
    skipped = np.zeros(count, dtype=int)
    radius = np.zeros(count)
    randoms = None
    if random_probes is not None:
        randoms = []
        for j in range(count):
            randoms.append(finite_classifiers(tensors[j], random_probes[j], settings))
            skipped[j] = random_probes[j].weight.shape[0] - len(randoms[j][2])
            if skipped[j]:
                log.warning("encoder '%s': %d of %d random classifiers skipped: their logits or weight norm "
                            "overflow (non-finite)", names[j], skipped[j], random_probes[j].weight.shape[0])
            largest = max([task_norms[j], *randoms[j][3]])
            radius[j] = largest if settings.search_radius is None else settings.search_radius
        searching = "d_worst_search" in settings.measures and (settings.search_steps or settings.search_candidates)
        if searching and not any(len(r[2]) for r in randoms):
            log.info("no random classifiers (n_random_classifiers: 0): the worst-case search starts from each "
                     "target's task probe, in the ball of its norm%s",
                     "" if settings.search_radius is None else f" (configured radius {settings.search_radius:g})")
    itemsize = torch.tensor([], dtype=settings.dtype).element_size()
    # a random head costs about ten (N, C) tensors at once, plus its refinement working set
    per_head = itemsize * n_classes * (10 * n + settings.working_set * 4)
    heads_per_block = max(1, settings.block_mb * 2**20 // max(per_head, 1))
    return PreparedInputs(names=names, n=n, widths=widths, Y=Y, tensors=tensors, task_w=task_w, task_b=task_b,
                          task_logits=task_logits, task_norms=task_norms, n_classes=n_classes, y_mean=y_mean,
                          y_scale=y_scale, factors=factors, randoms=randoms, skipped=skipped, radius=radius,
                          lemma=lemma, heads_per_block=heads_per_block)


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

    @property
    def rank(self) -> int:
        return self.Z.shape[1]


def source_context(prep: PreparedInputs, i: int, others: list[int], map_weights: np.ndarray | None,
                   settings: ExtrinsicSettings, drifted: list[str]) -> SourceContext:
    factors = prep.factors[i].with_basis(prep.tensors[i])
    design = factors.affine_design()
    rank = design.shape[1] - 1
    Z = design[:, :rank] * math.sqrt(prep.n)
    pair_maps = {j: PairMaps(design, None if map_weights is None else as_tensor(map_weights[i, j], settings))
                 for j in others}
    lemma = prep.lemma
    for j in others:
        lemma.rebuilt[i, j] = pair_maps[j].fit_target(prep.tensors[j], prep.factors[j])
        if lemma.d_aff is not None and map_weights is not None and \
                lemma.rebuilt[i, j] - lemma.d_aff[i, j] > lemma.allowance(i, j):
            drifted.append(f"{prep.names[i]} -> {prep.names[j]} ({lemma.rebuilt[i, j]:.6g} vs {lemma.d_aff[i, j]:.6g})")
    return SourceContext(i=i, others=others, factors=factors, Z=Z, pair_maps=pair_maps,
                         solver=FixedClassifierSolver(Z, settings, prep.names[i]))


def stack_starts(per_target: list[dict[str, tuple[torch.Tensor, torch.Tensor]]]
                  ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    return {name: (torch.cat([s[name][0] for s in per_target], dim=1), torch.cat([s[name][1] for s in per_target]))
            for name in ("composed", "least_squares")}


