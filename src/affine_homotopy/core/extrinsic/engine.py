"""The extrinsic engine: every phase of one (task, layer) for an explicit list of ordered pairs.

Phases, each a function returning a dataclass: :func:`prepare` (inputs, probes, factorisations),
:func:`task_probe_distances` (``d_psi``), :func:`random_probe_worst_case` (``d_worst``),
:func:`searched_worst_case` (``d_worst_search``); Lemma 5.2's checks run alongside
(:class:`~affine_homotopy.core.extrinsic.bounds.LemmaCheck`) and :func:`extrinsic_distances` assembles one
:class:`ExtrinsicResult` holding every matrix the workflow writes.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from ...errors import ConfigError, NumericalError
from ..linalg import Factors, consecutive_blocks, factorise
from ..probes import ProbeSet, SoftmaxProbe
from .bounds import LemmaCheck, lemma_bound
from .fixed import FixedClassifierSolver
from .local import STARTS, HeadResult, Heads
from .maps import PairMaps, as_tensor, classifier_logits, pad_width, project_to_ball
from .search import Classifiers, SearchedClassifier, WorstCaseSearch, raw_map
from .settings import ExtrinsicSettings

log = logging.getLogger(__name__)


@dataclass
class ExtrinsicResult:
    """Every matrix of one (task, layer), K x K, row mapped onto column (NaN off the computed pairs;
    0 on the diagonal). ``*_lower`` are certified lower bounds (NaN where no certificate exists: more
    than two classes, or ``certified=False``); the values are upper bounds attained by explicit maps."""

    names: list[str]
    pairs: list[tuple[int, int]]
    n_classes: int
    certified: bool  # two classes and settings.certified: every fixed-classifier value has an interval
    d_psi: np.ndarray
    d_psi_lower: np.ndarray
    diagnostics: list[dict[str, object]]  # one row per computed ordered pair
    seconds: dict[str, float] = field(default_factory=dict)
    d_worst: np.ndarray | None = None  # None without random classifiers
    d_worst_lower: np.ndarray | None = None
    worst_classifier: np.ndarray | None = None  # int: -1 = the task probe, s = random seed s
    d_worst_search: np.ndarray | None = None
    d_worst_search_lower: np.ndarray | None = None
    bound: np.ndarray | None = None  # Lemma 5.2 for the task probe, c(lam) ||W_j||_2 d_aff; None without d_aff
    bound_slack: np.ndarray | None = None  # the bound's share of the target's discarded tail (LemmaCheck)
    bound_worst: np.ndarray | None = None  # c(lam) max_k ||W_k||_2 d_aff over every classifier evaluated
    bound_worst_slack: np.ndarray | None = None
    bound_violations: np.ndarray | None = None  # classifiers breaking their own Lemma 5.2 bound
    radius: np.ndarray | None = None  # (K,) the search ball's radius per target
    skipped: np.ndarray | None = None  # (K,) random classifiers skipped per target (non-finite logits)
    searched: dict[tuple[int, int], SearchedClassifier] = field(default_factory=dict)

    def matrices(self) -> dict[str, np.ndarray]:
        """The workflow's matrices by file stem (``d_psi`` -> ``d_psi.csv``), those that exist."""
        names = ("d_psi", "d_psi_lower", "d_worst", "d_worst_lower", "d_worst_search", "d_worst_search_lower",
                 "bound", "bound_worst")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}

    def check_bounds(self) -> None:
        """Lemma 5.2 on every pair and every evaluated classifier (NumericalError; see
        :func:`~affine_homotopy.core.extrinsic.bounds.check_bounds`)."""
        from .bounds import check_bounds

        if self.bound is not None:
            check_bounds(np.nan_to_num(self.d_psi), self.bound, self.bound_violations, self.bound_slack)


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


class PhaseClock:
    """Wall and CPU seconds (``time.process_time``: all threads) of consecutive phases, summed into
    ``seconds[phase]`` and ``seconds["cpu_" + phase]``; each ``stop`` ends one phase and starts the next."""

    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds = seconds
        self.start()

    def start(self) -> None:
        self.wall, self.cpu = time.monotonic(), time.process_time()

    def stop(self, phase: str) -> None:
        self.seconds[phase] += time.monotonic() - self.wall
        self.seconds["cpu_" + phase] += time.process_time() - self.cpu
        self.start()


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
    return PreparedInputs(names, n, widths, Y, tensors, task_w, task_b, task_logits, task_norms, n_classes, y_mean,
                          y_scale, factors, randoms, skipped, radius, lemma, heads_per_block)


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
    return SourceContext(i, others, factors, Z, pair_maps, FixedClassifierSolver(Z, settings, prep.names[i]))


def _stack_starts(per_target: list[dict[str, tuple[torch.Tensor, torch.Tensor]]]
                  ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    return {name: (torch.cat([s[name][0] for s in per_target], dim=1), torch.cat([s[name][1] for s in per_target]))
            for name in ("composed", "least_squares")}


@dataclass
class FixedValues:
    """Phase 1 for one source: the task probe's distance onto each target (``d_psi``)."""

    value: np.ndarray  # (H,) per target in ``others``
    lower: np.ndarray  # (H,) NaN: uncertified
    result: HeadResult


def task_probe_distances(prep: PreparedInputs, ctx: SourceContext, settings: ExtrinsicSettings) -> FixedValues:
    lam = settings.inverse_temperature
    others = ctx.others
    starts = [ctx.pair_maps[j].starts(prep.task_logits[j], prep.task_w[j], prep.task_b[j], lam) for j in others]
    heads = Heads(torch.softmax(torch.cat([prep.task_logits[j] for j in others], dim=1), dim=2), _stack_starts(starts))
    result = ctx.solver.solve(heads, [prep.names[j] for j in others], ["task"] * len(others))
    value = result.value.cpu().numpy()
    for slot, j in enumerate(others):
        prep.lemma.add(ctx.i, j, value[[slot]], prep.task_norms[[j]])
    return FixedValues(value, result.lower.cpu().numpy(), result)


@dataclass
class WorstCaseValues:
    """Phase 2 for one source: the largest fixed-classifier distance over each target's task and
    random-label probes (``d_worst``), and the classifier (and map) attaining it: the search's start."""

    value: np.ndarray  # (H,)
    lower: np.ndarray  # (H,) the largest certified lower bound among the classifiers (NaN: none)
    index: np.ndarray  # (H,) -1 = the task probe, s = random seed s
    W: torch.Tensor  # (H, Dmax, C) the worst classifier
    b: torch.Tensor  # (H, C)
    A: torch.Tensor  # (r, H, C) its map
    c: torch.Tensor  # (H, C)
    rows: dict[int, dict[str, object]]  # per target: diagnostics


def _close_worst_case(value: np.ndarray, lower: np.ndarray, certified: np.ndarray, certify, tol: float, atol: float,
                      certify_largest: bool = False) -> int:
    """Certify classifiers, largest upper bound first, until ``max upper - max lower <= tol * max upper``.

    ``value``/``lower`` (classifiers,) are updated in place by ``certify(k, dominated_below)``; only
    the maximum needs a certificate: a classifier whose upper bound is below the best lower bound
    cannot be the worst, so its solve may stop there (its ``lower`` then stays NaN).
    ``certify_largest``: also until the classifier with the largest upper bound has its own interval
    (it is then used on its own: the search's start). Returns how many classifiers were certified here."""
    done = 0
    while True:
        upper = float(value.max())
        best_lower = float(np.nanmax(lower)) if np.isfinite(lower).any() else 0.0
        k = int(value.argmax())
        closed = upper <= atol or upper - best_lower <= tol * upper
        if closed and (certified[k] or not certify_largest or not math.isfinite(upper)):
            return done
        if certified[k]:
            return done  # the worst classifier's own interval did not close (max_lp): its gap is reported
        # solved until its interval closes, or (for the maximum's value alone) until its upper bound
        # falls to the best lower bound: then it cannot be the worst
        certify(k, -math.inf if certify_largest else best_lower)
        certified[k] = True  # settled: closed, or dominated
        done += 1


def random_probe_worst_case(prep: PreparedInputs, ctx: SourceContext, task: FixedValues,
                            settings: ExtrinsicSettings) -> WorstCaseValues:
    lam = settings.inverse_temperature
    others = ctx.others
    width = prep.Y.shape[2]
    W = torch.stack([pad_width(prep.task_w[j][0], width) for j in others])
    b = torch.cat([prep.task_b[j] for j in others])
    A, c = task.result.A.clone(), task.result.c.clone()
    value, lower = task.value.copy(), task.lower.copy()
    index = np.full(len(others), -1)
    rows: dict[int, dict[str, object]] = {}
    counts = [len(prep.randoms[j][2]) for j in others]
    for block in consecutive_blocks(others, counts, prep.heads_per_block):
        block = [j for j in block if len(prep.randoms[j][2])]
        if not block:
            continue
        logits = [classifier_logits(prep.tensors[j], prep.randoms[j][0], prep.randoms[j][1], lam) for j in block]
        starts = [ctx.pair_maps[j].starts(lg, prep.randoms[j][0], prep.randoms[j][1], lam) for j, lg in zip(block, logits)]
        heads = Heads(torch.softmax(torch.cat(logits, dim=1), dim=2), _stack_starts(starts))
        targets = [prep.names[j] for j, lg in zip(block, logits) for _ in range(lg.shape[1])]
        labels = [f"random_{int(seed)}" for j in block for seed in prep.randoms[j][2]]
        # two classes: cheap upper bounds first (the starts), then certificates for the largest only
        result = ctx.solver.solve(heads, targets, labels, certify_heads=False)
        certifies = ctx.solver.certifies(prep.n_classes)
        offset = 0
        for j, lg in zip(block, logits):
            slot = others.index(j)
            heads_j = np.arange(offset, offset + lg.shape[1])
            certified_here = 0
            if certifies:
                # the task probe (certified in phase 1) competes with this target's random classifiers
                values = np.concatenate([[value[slot]], result.value[heads_j].cpu().numpy()])
                lowers = np.concatenate([[lower[slot]], np.full(heads_j.size, np.nan)])
                certified = np.zeros(values.size, dtype=bool)
                certified[0] = True

                def certify(k: int, dominated_below: float) -> None:
                    ctx.solver.certify(heads, result, [heads_j[k - 1]], targets, labels, dominated_below=dominated_below)
                    values[k], lowers[k] = float(result.value[heads_j[k - 1]]), float(result.lower[heads_j[k - 1]])

                certified_here = _close_worst_case(values, lowers, certified, certify, settings.tol, settings.atol)
                lower[slot] = float(np.nanmax(lowers))
            randoms_values = result.value[heads_j].cpu().numpy()
            prep.lemma.add(ctx.i, j, randoms_values, prep.randoms[j][3])
            best = int(randoms_values.argmax())
            if randoms_values[best] > value[slot]:
                value[slot], index[slot] = float(randoms_values[best]), int(prep.randoms[j][2][best])
                W[slot] = pad_width(prep.randoms[j][0][best], width)
                b[slot] = prep.randoms[j][1][best]
                A[:, slot], c[slot] = result.A[:, heads_j[best]], result.c[heads_j[best]]
            rows[j] = {
                "random_median": float(np.median(randoms_values)),
                "random_certified": int(certified_here),
                "random_soft_label_iterations": result.soft_label_iterations,
                "random_refine_iterations": result.refine_iterations,
                "random_refine_stalled": int(result.stalled[heads_j].sum()) if result.stalled is not None else 0,
            }
            offset += lg.shape[1]
    return WorstCaseValues(value, lower, index, W, b, A, c, rows)


@dataclass
class SearchValues:
    """Phase 3 for one source: the searched worst case ``d_worst_search`` (at least ``d_worst``)."""

    value: np.ndarray  # (H,)
    lower: np.ndarray  # (H,)
    improved: np.ndarray  # (H,) bool: the search beat d_worst
    searched: dict[int, SearchedClassifier]  # per target
    rows: dict[int, dict[str, object]]


def searched_worst_case(prep: PreparedInputs, ctx: SourceContext, worst: WorstCaseValues,
                        settings: ExtrinsicSettings) -> SearchValues:
    others, i = ctx.others, ctx.i
    device, dtype = settings.device, settings.dtype
    search = WorstCaseSearch(ctx.Z, prep.Y, prep.y_mean, prep.y_scale, i, others, ctx.pair_maps, settings,
                             ctx.solver, prep.names)

    def observe(values: torch.Tensor, norms: torch.Tensor, finite: torch.Tensor, group: int = 1) -> None:
        for slot, j in enumerate(others):
            keep = finite[slot * group : (slot + 1) * group]
            prep.lemma.add(i, j, values[slot * group : (slot + 1) * group][keep].cpu().numpy(),
                           norms[slot * group : (slot + 1) * group][keep].cpu().numpy())

    radius = torch.as_tensor(prep.radius[others], dtype=dtype, device=device)
    W, _ = project_to_ball(worst.W, radius)  # only a configured radius can move a start
    b, A, c = worst.b.clone(), worst.A.clone(), worst.c.clone()
    value = torch.as_tensor(worst.value, dtype=dtype, device=device)
    lower = torch.as_tensor(worst.lower, dtype=dtype, device=device)
    if settings.search_radius is not None:  # the projected starts need their own values
        result, finite = search.evaluate(Classifiers(W, b), (A, c), settings, True)
        observe(result.value, torch.linalg.matrix_norm(W, ord=2), finite)
        value = torch.where(finite, result.value, torch.zeros_like(result.value))
        lower = torch.where(finite, result.lower, torch.full_like(result.lower, math.nan))
        A, c = result.A, result.c
    aimed_count = min(settings.search_candidates, prep.n)
    if aimed_count:  # classifiers aimed at the map's largest residuals: a better start when they win
        aimed = search.residual_classifiers(aimed_count, radius, prep.n_classes)
        heads = len(others)
        width = aimed.W.shape[1]
        aimed_W = aimed.W.reshape(heads, aimed_count, width, prep.n_classes)
        aimed_b = aimed.b.reshape(heads, aimed_count, prep.n_classes)
        chunk = max(1, min(aimed_count, prep.heads_per_block // heads))
        for first in range(0, aimed_count, chunk):
            part = Classifiers(aimed_W[:, first : first + chunk].reshape(-1, width, prep.n_classes),
                               aimed_b[:, first : first + chunk].reshape(-1, prep.n_classes))
            group = part.W.shape[0] // heads
            # the local estimator's values first; on two classes the largest are then certified, as
            # for d_worst, so that the choice of the search's start rests on values within tol
            result, finite, evaluated = search.evaluate(part, None, settings, True, group, certify=False)
            if ctx.solver.certifies(prep.n_classes):
                for slot in range(heads):
                    members = np.arange(slot * group, (slot + 1) * group)
                    values = result.value[members].nan_to_num(nan=-math.inf).cpu().numpy()
                    lowers = np.full(group, np.nan)

                    def certify(k: int, dominated_below: float) -> None:
                        search.certify(evaluated, result, [members[k]], group, dominated_below)
                        values[k], lowers[k] = float(result.value[members[k]]), float(result.lower[members[k]])

                    _close_worst_case(values, lowers, np.zeros(group, dtype=bool), certify, settings.tol, settings.atol,
                                      certify_largest=True)
            observe(result.value, torch.linalg.matrix_norm(part.W, ord=2), finite, group)
            values = result.value.nan_to_num(nan=-math.inf).reshape(heads, group)
            top = values.max(dim=1)
            pick = torch.arange(heads, device=values.device) * group + top.indices
            better = top.values > value * (1 + settings.search_accept_rtol)
            W[better], b[better] = part.W[pick][better], part.b[pick][better]
            value = torch.where(better, top.values, value)
            lower = torch.where(better, result.lower[pick], lower)
            A[:, better], c[better] = result.A[:, pick][:, better], result.c[pick][better]
    best = search.run(Classifiers(W, b), value, lower, A, c, radius, observe)
    values = best["value"].cpu().numpy()
    lowers = best["lower"].cpu().numpy()
    improved = values > worst.value
    searched, rows = {}, {}
    for slot, j in enumerate(others):
        linear, bias = raw_map(ctx.factors, best["A"][:, slot], best["c"][slot])
        searched[j] = SearchedClassifier(best["W"][slot, : prep.widths[j]].cpu().numpy(), best["b"][slot].cpu().numpy(),
                                         linear, bias, float(values[slot]))
        rows[j] = {"search_accepted_steps": int(best["accepted"][slot]), "search_norm": float(best["norm"][slot]),
                   "search_improved": bool(improved[slot])}
    return SearchValues(np.where(improved, values, worst.value),
                        np.where(improved, lowers, worst.lower), improved, searched, rows)


def _diagnostic_rows(prep: PreparedInputs, ctx: SourceContext, result: HeadResult, matrices: dict[str, np.ndarray],
                     worst_index: np.ndarray | None, worst_rows: dict[int, dict[str, object]],
                     atol: float) -> list[dict[str, object]]:
    """One ``d_psi_diagnostics.csv`` row per pair of one source: values, certified gaps, the local
    search's starts and stalls, Lemma 5.2's slack, and the worst case's classifiers and search."""
    names, i, others = prep.names, ctx.i, ctx.others
    d_psi, d_psi_lower = matrices["d_psi"], matrices["d_psi_lower"]
    d_worst, d_worst_lower = matrices.get("d_worst"), matrices.get("d_worst_lower")
    d_search, d_search_lower = matrices.get("d_worst_search"), matrices.get("d_worst_search_lower")
    worst_case = d_worst is not None
    lemma = prep.lemma
    rows = []
    for slot, j in enumerate(others):
        winner = result.start_names[int(result.winner[slot])]
        row: dict[str, object] = {
            "mapped_from": names[i], "mapped_to": names[j], "d_psi": d_psi[i, j],
            "d_psi_lower": d_psi_lower[i, j], "d_psi_gap": _gap(d_psi[i, j], d_psi_lower[i, j], atol),
            "d_psi_lps": int(result.lps[slot]), "d_psi_stop": result.stop[slot],
            "d_psi_cert_residual": float(result.cert_residual[slot]),
            **{name: float(result.candidates[name][slot]) for name in (*STARTS, "refined") if name in result.candidates},
            "winning_start": winner,
            "refine_stalled": bool(result.stalled[slot]) if result.stalled is not None else False,
            "refine_restart_improved": (bool(result.restarted_improved[slot])
                                        if result.restarted_improved is not None else False),
            "soft_label_iterations": result.soft_label_iterations,
            "soft_label_grad_norm": float(result.soft_label_grad[slot]),
            "refine_iterations": result.refine_iterations,
            "refine_grad_norm": float(result.refine_grad[slot]),
            "source_rank": ctx.rank,
            "d_aff_rebuilt": lemma.rebuilt[i, j],
            "target_tail": lemma.tail[j],
            "bound_slack": lemma.c * prep.task_norms[j] * lemma.excess(i, j),
            "bound_violations": int(lemma.violations[i, j]),
        }
        if worst_case:
            row.update({
                "d_worst": d_worst[i, j], "d_worst_lower": d_worst_lower[i, j],
                "d_worst_gap": _gap(d_worst[i, j], d_worst_lower[i, j], atol),
                "worst_classifier": "task" if worst_index[i, j] < 0 else f"random_{worst_index[i, j]}",
                "classifiers_evaluated": int(lemma.evaluated[i, j]),
                "bound_worst_slack": lemma.c * lemma.norm_max[i, j] * lemma.excess(i, j),
                "classifiers_skipped": int(prep.skipped[j]),
                **worst_rows.get(j, {}),
            })
        if d_search is not None:
            row.update({
                "d_worst_search": d_search[i, j], "d_worst_search_lower": d_search_lower[i, j],
                "d_worst_search_gap": _gap(d_search[i, j], d_search_lower[i, j], atol),
                "search_radius": max(prep.radius[j], lemma.norm_max[i, j]),
            })
        rows.append(row)
    return rows


def _pairs_by_source(pairs: Sequence[tuple[int, int]] | None, count: int) -> list[tuple[int, list[int]]]:
    if pairs is None:
        pairs = [(i, j) for i in range(count) for j in range(count) if i != j]
    by_source: dict[int, list[int]] = {}
    for i, j in pairs:
        if not (0 <= i < count and 0 <= j < count) or i == j:
            raise ValueError(f"pair ({i}, {j}) is not an ordered pair of two different encoders among {count}")
        by_source.setdefault(int(i), []).append(int(j))
    return sorted((i, sorted(set(js))) for i, js in by_source.items())


def _gap(value: float, lower: float, atol: float) -> float:
    """Relative gap of a certified interval: 0 when closed by the absolute floor (value <= atol), NaN
    without a certificate."""
    if value <= atol:
        return 0.0
    return (value - lower) / value if math.isfinite(lower) else math.nan


def extrinsic_distances(
    representations: Sequence[np.ndarray],
    probes: Sequence[SoftmaxProbe],
    names: Sequence[str] | None = None,
    map_weights: np.ndarray | None = None,
    random_probes: Sequence[ProbeSet] | None = None,
    settings: ExtrinsicSettings | None = None,
    d_aff: np.ndarray | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
) -> ExtrinsicResult:
    """``d_psi`` for the ordered ``pairs`` (default: all), and with ``random_probes`` also ``d_worst``
    and ``d_worst_search``; with ``d_aff`` Lemma 5.2's bounds (``bound``, ``bound_worst``) and checks.

    ``map_weights`` (K, K, N): the intrinsic solver's weights, ``[i, j]`` for the map ``i -> j``
    (``d_aff_weights.npy``); without them the composed start uses the least-squares map.
    ``random_probes[j]``: encoder ``j``'s random-label classifiers (possibly none: the search then
    starts from the task probe). See the package docstring for every convention.
    """
    settings = settings or ExtrinsicSettings()
    count = len(representations)
    names = list(names) if names is not None else [str(k) for k in range(count)]
    if len(probes) != count or (random_probes is not None and len(random_probes) != count):
        raise ValueError("one task probe (and one random probe set, if any) per encoder is required")
    rows = {rep.shape[0] for rep in representations}
    if len(rows) != 1:
        raise ValueError(f"all encoders need the same examples (rows); got row counts {sorted(rows)}")
    n = rows.pop()
    if map_weights is not None and np.shape(map_weights) != (count, count, n):
        raise ValueError(f"map weights must be (K, K, N) = {(count, count, n)}, got {np.shape(map_weights)}")
    if d_aff is not None and np.shape(d_aff) != (count, count):
        raise ValueError(f"d_aff must be (K, K) = {(count, count)}, got {np.shape(d_aff)}")
    if settings.search_radius is not None and not settings.search_radius > 0:
        raise ConfigError(f"the worst-case search radius must be > 0, got {settings.search_radius}")
    by_source = _pairs_by_source(pairs, count)
    prep = prepare(representations, probes, names, random_probes, d_aff, settings)
    # d_worst (and the search, which starts from its classifiers) only when selected and given random classifiers
    worst_case = prep.randoms is not None and "d_worst" in settings.measures
    search = worst_case and "d_worst_search" in settings.measures
    certified = settings.certified and prep.n_classes == 2
    if prep.n_classes > 2:
        log.info("%d classes: fixed-classifier distances by the local search (upper bounds without a "
                 "certificate; the certified method needs two classes)", prep.n_classes)

    def matrix() -> np.ndarray:
        out = np.full((count, count), np.nan)
        np.fill_diagonal(out, 0.0)
        return out

    d_psi, d_psi_lower = matrix(), matrix()
    d_worst, d_worst_lower = (matrix() if worst_case else None for _ in range(2))
    d_search, d_search_lower = (matrix() if search else None for _ in range(2))
    worst_index = np.full((count, count), -1, dtype=int) if worst_case else None
    searched: dict[tuple[int, int], SearchedClassifier] = {}
    diagnostics: list[dict[str, object]] = []
    drifted: list[str] = []
    seconds = {f"{kind}{phase}": 0.0 for kind in ("", "cpu_") for phase in ("d_psi", "d_worst", "d_worst_search")}
    clock = PhaseClock(seconds)
    stalls = restarts = lp_count = restarted_lps = ipm_fallbacks = 0
    max_gap = 0.0
    for i, others in by_source:
        clock.start()
        ctx = source_context(prep, i, others, map_weights, settings, drifted)
        task = task_probe_distances(prep, ctx, settings)
        d_psi[i, others], d_psi_lower[i, others] = task.value, task.lower
        clock.stop("d_psi")
        worst_rows: dict[int, dict[str, object]] = {}
        if worst_case:
            worst = random_probe_worst_case(prep, ctx, task, settings)
            d_worst[i, others], d_worst_lower[i, others] = worst.value, worst.lower
            worst_index[i, others] = worst.index
            worst_rows = worst.rows
            clock.stop("d_worst")
        if search:
            d_search[i, others], d_search_lower[i, others] = worst.value, worst.lower
            if settings.search_steps or settings.search_candidates:
                found = searched_worst_case(prep, ctx, worst, settings)
                d_search[i, others], d_search_lower[i, others] = found.value, found.lower
                searched.update({(i, j): clf for j, clf in found.searched.items()})
                for j, row in found.rows.items():
                    worst_rows.setdefault(j, {}).update(row)
            clock.stop("d_worst_search")
        result = task.result
        if result.stalled is not None:
            stalls += int(result.stalled.sum())
            restarts += int(result.restarted_improved.sum())
        lp_count += ctx.solver.lp_count
        restarted_lps += ctx.solver.restarted_lps
        ipm_fallbacks += ctx.solver.ipm_fallbacks
        max_gap = max(max_gap, ctx.solver.max_gap)
        matrices = {"d_psi": d_psi, "d_psi_lower": d_psi_lower}
        if worst_case:
            matrices.update(d_worst=d_worst, d_worst_lower=d_worst_lower)
        if search:
            matrices.update(d_worst_search=d_search, d_worst_search_lower=d_search_lower)
        diagnostics += _diagnostic_rows(prep, ctx, result, matrices, worst_index, worst_rows, settings.atol)
        log.info("source %d/%d '%s' (rank %d): d_psi %s%s%s", i + 1, count, names[i], ctx.rank,
                 np.array2string(d_psi[i, others], precision=4),
                 "" if d_worst is None else ", d_worst " + np.array2string(d_worst[i, others], precision=4),
                 "" if d_search is None else ", d_worst_search " + np.array2string(d_search[i, others], precision=4))
    log.info("seconds: %s", {k: round(v, 2) for k, v in seconds.items()})
    if certified:
        log.info("certified fixed-classifier distances (two classes): %d LPs, largest relative gap %.2e (tol %g, "
                 "atol %g)", lp_count, max_gap, settings.tol, settings.atol)
        if restarted_lps:
            log.info("%d warm-started LPs of the search hit HiGHS's iteration cap and were solved again on a fresh "
                     "model", restarted_lps)
        if ipm_fallbacks:
            log.info("%d LPs stalled the dual simplex (HiGHS's iteration cap) and were solved by the interior-point "
                     "method with crossover", ipm_fallbacks)
        if max_gap > settings.tol:
            log.warning("some certified intervals stayed wider than tol after max_lp = %d LPs (largest gap %.2e): "
                        "see the *_gap columns of d_psi_diagnostics.csv", settings.max_lp, max_gap)
    if stalls:
        log.info("local search: %d task-probe refinements made no progress from their best start and were restarted "
                 "from the other starts; %d of them improved (columns refine_stalled, refine_restart_improved)",
                 stalls, restarts)
    if drifted:
        log.warning("%d pairs: the d_aff map rebuilt from the stored solver weights has a largest residual above "
                    "d_aff by more than the target's discarded tail allows (column d_aff_rebuilt): d_aff and the "
                    "weights disagree (a stale or altered file?); Lemma 5.2 is checked against d_aff as it stands: %s",
                    len(drifted), "; ".join(drifted[:5]))
    if worst_case:
        off = ~np.isnan(d_psi) & ~np.eye(count, dtype=bool)
        if np.any(d_worst[off] < d_psi[off]) or (search and np.any(d_search[off] < d_worst[off])):
            raise NumericalError("d_psi <= d_worst <= d_worst_search broke: a bug, the maxima are over nested sets")
    lemma = prep.lemma
    bound = bound_slack = bound_worst_slack = None
    if d_aff is not None:
        bound = lemma_bound(probes, d_aff, settings.inverse_temperature)
        excess = np.array([[lemma.excess(i, j) if i != j else 0.0 for j in range(count)] for i in range(count)])
        bound_slack = lemma.c * prep.task_norms[None, :] * excess
        bound_worst_slack = lemma.c * lemma.norm_max * excess
    return ExtrinsicResult(
        names, [(i, j) for i, others in by_source for j in others], prep.n_classes, certified, d_psi, d_psi_lower,
        diagnostics, seconds, d_worst, d_worst_lower, worst_index, d_search, d_search_lower, bound, bound_slack,
        lemma.bound_worst() if worst_case else None, bound_worst_slack if worst_case else None, lemma.violations,
        prep.radius if worst_case else None,
        prep.skipped if worst_case else None, searched)


def fixed_classifier_distances(
    representations: Sequence[np.ndarray],
    probes: Sequence[SoftmaxProbe],
    names: Sequence[str] | None = None,
    map_weights: np.ndarray | None = None,
    settings: ExtrinsicSettings | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
) -> ExtrinsicResult:
    """``d_psi`` only (no random classifiers, no search); see :func:`extrinsic_distances`."""
    return extrinsic_distances(representations, probes, names, map_weights, None, settings, pairs=pairs)
