"""One phase per measure for source ``i`` onto each target of ``ctx.others``: :func:`d_psi` (the task
probe), :func:`d_worst` (also the random-label probes), :func:`d_worst_search` (searched from d_worst's
classifiers). Each returns ``upper``, attained by a map, and ``lower`` (NaN: no certificate)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..linalg import consecutive_blocks
from .fixed import HeadNames
from .local import HeadResult, Heads
from .maps import classifier_logits, pad_width, project_to_ball, stack_starts
from .prepare import PreparedInputs, SourceContext
from .search import Classifiers, SearchedClassifier, SearchOutcome, SearchPoint, WorstCaseSearch, raw_map
from .settings import ExtrinsicSettings


@dataclass
class TaskValues:
    """``d_psi`` of one source onto each target."""

    upper: np.ndarray  # (H,) per target in ``others``
    lower: np.ndarray  # (H,)
    result: HeadResult


def d_psi(prep: PreparedInputs, ctx: SourceContext, settings: ExtrinsicSettings) -> TaskValues:
    task, others = prep.task, ctx.others
    starts = [ctx.pair_maps[j].starts(task.logits[j], task.weight[j], task.bias[j], settings.inverse_temperature)
              for j in others]
    heads = Heads(torch.softmax(torch.cat([task.logits[j] for j in others], dim=1), dim=2), stack_starts(starts))
    result = ctx.solver.values(heads, HeadNames([prep.names[j] for j in others], ["task"] * len(others)))
    upper = result.upper.cpu().numpy()
    for slot, j in enumerate(others):
        prep.lemma.add(ctx.i, j, upper[[slot]], task.norms[[j]])
    return TaskValues(upper=upper, lower=result.lower.cpu().numpy(), result=result)


@dataclass
class WorstValues:
    """``d_worst`` of one source onto each target: the largest fixed-classifier distance over the
    target's task and random-label probes, and the classifier (and map) attaining it: the search's start."""

    upper: np.ndarray  # (H,)
    lower: np.ndarray  # (H,) the largest certified lower bound among the classifiers (NaN: none)
    index: np.ndarray  # (H,) -1 = the task probe, s = random seed s
    clf: Classifiers  # the worst classifier: W (H, Dmax, C), b (H, C)
    A: torch.Tensor  # (r, H, C) its map
    c: torch.Tensor  # (H, C)
    rows: dict[int, dict[str, object]]  # per target: diagnostics


def d_worst(prep: PreparedInputs, ctx: SourceContext, task: TaskValues, settings: ExtrinsicSettings) -> WorstValues:
    others, width = ctx.others, prep.Y.shape[2]
    W = torch.stack([pad_width(prep.task.weight[j][0], width) for j in others])
    b = torch.cat([prep.task.bias[j] for j in others])
    worst = WorstValues(task.upper.copy(), task.lower.copy(), np.full(len(others), -1), Classifiers(W, b),
                        task.result.A.clone(), task.result.c.clone(), {})
    counts = [len(prep.randoms[j]) for j in others]
    for block in consecutive_blocks(others, counts, prep.heads_per_block):
        block = [j for j in block if len(prep.randoms[j])]
        if block:
            _random_block(prep, ctx, block, worst, settings)
    return worst


def _random_block(prep: PreparedInputs, ctx: SourceContext, block: list[int], worst: WorstValues,
                  settings: ExtrinsicSettings) -> None:
    """The random classifiers of the targets ``block``, solved together: cheap upper bounds first (the
    starts), then, on two classes, certificates for the largest only; each target's worst replaces
    its entry of ``worst`` where it beats the task probe."""
    lam, width = settings.inverse_temperature, prep.Y.shape[2]
    randoms = [prep.randoms[j] for j in block]
    logits = [classifier_logits(prep.tensors[j], r.weight, r.bias, lam) for j, r in zip(block, randoms)]
    starts = [ctx.pair_maps[j].starts(lg, r.weight, r.bias, lam) for j, lg, r in zip(block, logits, randoms)]
    heads = Heads(torch.softmax(torch.cat(logits, dim=1), dim=2), stack_starts(starts))
    names = HeadNames([prep.names[j] for j, r in zip(block, randoms) for _ in range(len(r))],
                      [f"random_{int(seed)}" for r in randoms for seed in r.seeds])
    result = ctx.solver.upper_bounds(heads)
    offset = 0
    for j, found in zip(block, randoms):
        slot = ctx.others.index(j)
        members = np.arange(offset, offset + len(found))
        offset += len(found)
        certified_here = 0
        if ctx.solver.certifies(prep.task.n_classes):
            # the task probe (certified by d_psi) competes with this target's random classifiers
            upper = np.concatenate([[worst.upper[slot]], result.upper[members].cpu().numpy()])
            lower = np.concatenate([[worst.lower[slot]], np.full(members.size, np.nan)])
            settled = np.arange(upper.size) == 0
            result, lower, certified_here = ctx.solver.close_worst(heads, result, members, names, upper, lower,
                                                                   settled)
            worst.lower[slot] = float(np.nanmax(lower))
        values = result.upper[members].cpu().numpy()
        prep.lemma.add(ctx.i, j, values, found.norms)
        best = int(values.argmax())
        if values[best] > worst.upper[slot]:
            worst.upper[slot], worst.index[slot] = float(values[best]), int(found.seeds[best])
            worst.clf.W[slot], worst.clf.b[slot] = pad_width(found.weight[best], width), found.bias[best]
            worst.A[:, slot], worst.c[slot] = result.A[:, members[best]], result.c[members[best]]
        worst.rows[j] = {
            "random_median": float(np.median(values)), "random_certified": int(certified_here),
            "random_soft_label_iterations": result.soft_label_iterations,
            "random_refine_iterations": result.refine_iterations,
            "random_refine_stalled": int(result.stalled[members].sum()) if result.stalled is not None else 0,
        }


@dataclass
class SearchValues:
    """``d_worst_search`` of one source onto each target (at least ``d_worst``)."""

    upper: np.ndarray  # (H,)
    lower: np.ndarray  # (H,)
    searched: dict[int, SearchedClassifier]  # per target
    rows: dict[int, dict[str, object]]


def d_worst_search(prep: PreparedInputs, ctx: SourceContext, worst: WorstValues,
                   settings: ExtrinsicSettings) -> SearchValues:
    search = WorstCaseSearch(ctx.Z, prep.Y, prep.y_mean, prep.y_scale, ctx.i, ctx.others, ctx.pair_maps, settings,
                             ctx.solver, prep.names, prep.lemma)
    radius = torch.as_tensor(prep.radius[ctx.others], dtype=settings.dtype, device=settings.device)
    point = _projected_start(search, worst, radius, settings)
    aimed_count = min(settings.search_candidates, prep.n)
    if aimed_count:  # classifiers aimed at the map's largest residuals: a better start when they win
        aimed = search.residual_classifiers(aimed_count, radius, prep.task.n_classes)
        heads, width, n_classes = len(ctx.others), aimed.W.shape[1], prep.task.n_classes
        aimed_W = aimed.W.reshape(heads, aimed_count, width, n_classes)
        aimed_b = aimed.b.reshape(heads, aimed_count, n_classes)
        chunk = max(1, min(aimed_count, prep.heads_per_block // heads))
        for first in range(0, aimed_count, chunk):
            _try_aimed(search, point, Classifiers(aimed_W[:, first : first + chunk].reshape(-1, width, n_classes),
                                                  aimed_b[:, first : first + chunk].reshape(-1, n_classes)), settings)
    return _search_values(prep, ctx, worst, search.run(point, radius))


def _projected_start(search: WorstCaseSearch, worst: WorstValues, radius: torch.Tensor,
                     settings: ExtrinsicSettings) -> SearchPoint:
    """d_worst's classifiers in the search's ball (only a configured radius can move one: their values
    are then solved again)."""
    W, _ = project_to_ball(worst.clf.W, radius)
    as_tensor = dict(dtype=settings.dtype, device=settings.device)
    point = SearchPoint(Classifiers(W, worst.clf.b.clone()), torch.tensor(worst.upper, **as_tensor),
                        torch.tensor(worst.lower, **as_tensor), worst.A.clone(), worst.c.clone())
    if settings.search_radius is None:
        return point
    found = search.evaluate(point.clf, (point.A, point.c), settings, True)
    result, finite = found.result, found.finite
    search.observe(result.upper, torch.linalg.matrix_norm(W, ord=2), finite)
    return SearchPoint(point.clf, torch.where(finite, result.upper, torch.zeros_like(result.upper)),
                       torch.where(finite, result.lower, torch.full_like(result.lower, math.nan)), result.A, result.c)


def _try_aimed(search: WorstCaseSearch, point: SearchPoint, part: Classifiers, settings: ExtrinsicSettings) -> None:
    """Aimed classifiers ``part`` (``group`` per head) replace a head's start where one beats it by
    more than the acceptance threshold."""
    heads, solver = len(search.others), search.solver
    group = part.W.shape[0] // heads
    # the local estimator's values first; on two classes the largest are then certified, as for
    # d_worst, so that the choice of the search's start rests on values within tol. Two classes skip
    # the soft-label fit: its values are only upper bounds to choose what to certify, each
    # certificate's smooth start replaces it, and its cost grows with N times the classifiers
    certified = solver.certifies(part.W.shape[2])
    found = search.estimate(part, group, soft_label=not certified)
    result = found.result
    if certified:
        for slot in range(heads):
            members = np.arange(slot * group, (slot + 1) * group)
            # a classifier that cannot beat the acceptance threshold cannot replace the start: its
            # solve stops there, which decides as the full solve would
            threshold = float(point.upper[slot]) * (1 + settings.search_accept_rtol)
            result, _, _ = solver.close_worst(found.heads, result, members, search.names(group),
                                              result.upper[members].nan_to_num(nan=-math.inf).cpu().numpy(),
                                              np.full(group, np.nan), np.zeros(group, dtype=bool),
                                              certify_largest=True, floor=threshold)
    search.observe(result.upper, torch.linalg.matrix_norm(part.W, ord=2), found.finite, group)
    values = result.upper.nan_to_num(nan=-math.inf)
    # a solve stopped at a threshold never wins (its value is a bound)
    dominated = torch.tensor([stop == "dominated" for stop in result.stop], device=values.device)
    values = torch.where(dominated, torch.full_like(values, -math.inf), values).reshape(heads, group)
    top = values.max(dim=1)
    pick = torch.arange(heads, device=values.device) * group + top.indices
    point.take(top.values > point.upper * (1 + settings.search_accept_rtol), part, result, pick)


def _search_values(prep: PreparedInputs, ctx: SourceContext, worst: WorstValues, found: SearchOutcome
                   ) -> SearchValues:
    """The searched classifiers, and where they beat d_worst's, their values."""
    best = found.best
    upper, lower = best.upper.cpu().numpy(), best.lower.cpu().numpy()
    improved = upper > worst.upper
    searched, rows = {}, {}
    for slot, j in enumerate(ctx.others):
        linear, bias = raw_map(ctx.factors, best.A[:, slot], best.c[slot])
        searched[j] = SearchedClassifier(best.clf.W[slot, : prep.widths[j]].cpu().numpy(),
                                         best.clf.b[slot].cpu().numpy(), linear, bias, float(upper[slot]))
        rows[j] = {"search_accepted_steps": int(found.accepted[slot]), "search_norm": float(found.norm[slot]),
                   "search_improved": bool(improved[slot])}
    return SearchValues(upper=np.where(improved, upper, worst.upper), lower=np.where(improved, lower, worst.lower),
                        searched=searched, rows=rows)
