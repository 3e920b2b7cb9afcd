"""One phase per measure for source ``i`` onto each target of ``ctx.others``: :func:`d_psi` (the task
probe), :func:`d_worst` (also the random-label probes), :func:`d_worst_search` (searched from d_worst's
classifiers). Each returns ``upper``, attained by a map, and ``lower`` (NaN: no certificate)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..linalg import consecutive_blocks
from .bounds import LemmaTally
from .fixed import HeadNames
from .local import HeadResult, Heads
from .prepare import PreparedInputs, SourceContext, classifier_logits, pad_width, project_to_ball, stack_starts
from .search import Classifiers, SearchedClassifier, SearchOutcome, SearchPoint, WorstCaseSearch, raw_map
from .settings import ExtrinsicSettings


@dataclass
class TaskValues:
    """``d_psi`` of one source onto each target."""

    upper: np.ndarray  # (H,) per target in ``others``
    lower: np.ndarray  # (H,)
    result: HeadResult
    lemma: LemmaTally


def d_psi(prep: PreparedInputs, ctx: SourceContext, settings: ExtrinsicSettings) -> TaskValues:
    task, others = prep.task, ctx.others
    starts = [ctx.pair_maps[j].starts(task.logits[j], task.weight[j], task.bias[j], settings.inverse_temperature)
              for j in others]
    heads = Heads(torch.softmax(torch.cat([task.logits[j] for j in others], dim=1), dim=2), stack_starts(starts))
    result = ctx.solver.values(heads, HeadNames([prep.names[j] for j in others], ["task"] * len(others)))
    upper = result.upper.cpu().numpy()
    lemma = ctx.lemma.tally([upper[[slot]] for slot in range(len(others))], [task.norms[[j]] for j in others])
    return TaskValues(upper=upper, lower=result.lower.cpu().numpy(), result=result, lemma=lemma)


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
    lemma: LemmaTally  # the random classifiers


@dataclass
class RandomWorst:
    """One target's random classifiers: their values, the largest with its classifier and map, and the
    largest certified lower bound among them and the task probe."""

    values: np.ndarray  # (G,)
    norms: np.ndarray  # (G,)
    lower: float
    seed: int
    W: torch.Tensor  # (Dmax, C)
    b: torch.Tensor  # (C,)
    A: torch.Tensor  # (r, C)
    c: torch.Tensor  # (C,)
    row: dict[str, object]  # diagnostics

    @property
    def upper(self) -> float:
        return float(self.values.max())


def d_worst(prep: PreparedInputs, ctx: SourceContext, task: TaskValues, settings: ExtrinsicSettings) -> WorstValues:
    others = ctx.others
    found: dict[int, RandomWorst] = {}
    for block in consecutive_blocks(others, [len(prep.randoms[j]) for j in others], prep.heads_per_block):
        block = [j for j in block if len(prep.randoms[j])]
        if block:
            found.update(_random_block(prep, ctx, block, task, settings))
    win = {j: found[j] for h, j in enumerate(others) if j in found and found[j].upper > task.upper[h]}
    width, A, c = prep.Y.shape[2], task.result.A, task.result.c
    clf = Classifiers(torch.stack([win[j].W if j in win else pad_width(prep.task.weight[j][0], width) for j in others]),
                      torch.stack([win[j].b if j in win else prep.task.bias[j][0] for j in others]))
    lemma = ctx.lemma.tally([found[j].values if j in found else np.zeros(0) for j in others],
                            [found[j].norms if j in found else np.zeros(0) for j in others])
    return WorstValues(
        upper=np.array([win[j].upper if j in win else task.upper[h] for h, j in enumerate(others)]),
        lower=np.array([found[j].lower if j in found else task.lower[h] for h, j in enumerate(others)]),
        index=np.array([win[j].seed if j in win else -1 for j in others]), clf=clf,
        A=torch.stack([win[j].A if j in win else A[:, h] for h, j in enumerate(others)], dim=1),
        c=torch.stack([win[j].c if j in win else c[h] for h, j in enumerate(others)]),
        rows={j: f.row for j, f in found.items()}, lemma=lemma)


def _random_block(prep: PreparedInputs, ctx: SourceContext, block: list[int], task: TaskValues,
                  settings: ExtrinsicSettings) -> dict[int, RandomWorst]:
    """The random classifiers of the targets ``block``, solved together: cheap upper bounds first (the
    starts), then certificates for those that can be the largest with the task probe."""
    lam = settings.inverse_temperature
    randoms = [prep.randoms[j] for j in block]
    logits = [classifier_logits(prep.tensors[j], r.weight, r.bias, lam) for j, r in zip(block, randoms)]
    starts = [ctx.pair_maps[j].starts(lg, r.weight, r.bias, lam) for j, lg, r in zip(block, logits, randoms)]
    heads = Heads(torch.softmax(torch.cat(logits, dim=1), dim=2), stack_starts(starts))
    names = HeadNames([prep.names[j] for j, r in zip(block, randoms) for _ in range(len(r))],
                      [f"random_{int(seed)}" for r in randoms for seed in r.seeds])
    result = ctx.solver.upper_bounds(heads)
    found, offset = {}, 0
    for j, random in zip(block, randoms):
        slot = ctx.others.index(j)
        members = np.arange(offset, offset + len(random))
        offset += len(random)
        # the task probe (certified by d_psi) competes with this target's random classifiers
        upper = np.concatenate([[task.upper[slot]], result.upper[members].cpu().numpy()])
        lowers = np.concatenate([[task.lower[slot]], np.full(members.size, np.nan)])
        result, lowers, certified_here = ctx.solver.close_worst(heads, result, members, names, upper, lowers,
                                                                np.arange(upper.size) == 0)
        lower = float(np.nanmax(lowers))
        values = result.upper[members].cpu().numpy()
        best = int(values.argmax())
        found[j] = RandomWorst(values, random.norms, lower, int(random.seeds[best]),
                               pad_width(random.weight[best], prep.Y.shape[2]), random.bias[best],
                               result.A[:, members[best]], result.c[members[best]], row={
            "random_median": float(np.median(values)), "random_certified": int(certified_here),
            "random_soft_label_iterations": result.soft_label_iterations,
            "random_refine_iterations": result.refine_iterations,
            "random_refine_stalled": int(result.stalled[members].sum()) if result.stalled is not None else 0,
        })
    return found


@dataclass
class SearchValues:
    """``d_worst_search`` of one source onto each target (at least ``d_worst``)."""

    upper: np.ndarray  # (H,)
    lower: np.ndarray  # (H,)
    searched: dict[int, SearchedClassifier]  # per target
    rows: dict[int, dict[str, object]]
    lemma: LemmaTally  # every classifier the search evaluated


def d_worst_search(prep: PreparedInputs, ctx: SourceContext, worst: WorstValues,
                   settings: ExtrinsicSettings) -> SearchValues:
    search = WorstCaseSearch(ctx.Z, prep.Y, prep.y_mean, prep.y_scale, ctx.i, ctx.others, ctx.pair_maps, settings,
                             ctx.solver, prep.names, ctx.lemma)
    radius = torch.as_tensor(prep.radius[ctx.others], dtype=settings.dtype, device=settings.device)
    point, lemma = _projected_start(search, worst, radius, settings)
    aimed_count = min(settings.search_candidates, prep.n)
    if aimed_count:  # classifiers aimed at the map's largest residuals: a better start when they win
        aimed = search.residual_classifiers(aimed_count, radius, prep.task.n_classes)
        heads, width, n_classes = len(ctx.others), aimed.W.shape[1], prep.task.n_classes
        aimed_W = aimed.W.reshape(heads, aimed_count, width, n_classes)
        aimed_b = aimed.b.reshape(heads, aimed_count, n_classes)
        chunk = max(1, min(aimed_count, prep.heads_per_block // heads))
        for first in range(0, aimed_count, chunk):
            part = Classifiers(aimed_W[:, first : first + chunk].reshape(-1, width, n_classes),
                               aimed_b[:, first : first + chunk].reshape(-1, n_classes))
            point, tally = _try_aimed(search, point, part)
            lemma = lemma + tally
    found = search.run(point, radius)
    return _search_values(prep, ctx, worst, found, lemma + found.lemma)


def _projected_start(search: WorstCaseSearch, worst: WorstValues, radius: torch.Tensor,
                     settings: ExtrinsicSettings) -> tuple[SearchPoint, LemmaTally]:
    """d_worst's classifiers in the search's ball (only a configured radius can move one: their values
    are then solved again)."""
    W, _ = project_to_ball(worst.clf.W, radius)
    as_tensor = dict(dtype=settings.dtype, device=settings.device)
    point = SearchPoint(Classifiers(W, worst.clf.b.clone()), torch.tensor(worst.upper, **as_tensor),
                        torch.tensor(worst.lower, **as_tensor), worst.A.clone(), worst.c.clone())
    if settings.search_radius is None:
        return point, LemmaTally.empty(len(search.others))
    found = search.evaluate(point.clf, (point.A, point.c))
    result, finite = found.result, found.finite
    lemma = search.observe(result.upper, torch.linalg.matrix_norm(W, ord=2), finite)
    return SearchPoint(point.clf, torch.where(finite, result.upper, torch.zeros_like(result.upper)),
                       torch.where(finite, result.lower, torch.full_like(result.lower, math.nan)), result.A,
                       result.c), lemma


def _try_aimed(search: WorstCaseSearch, start: SearchPoint, part: Classifiers) -> tuple[SearchPoint, LemmaTally]:
    """``start`` with aimed classifiers ``part`` (``group`` per head) accepted in place of a head's classifier
    (:meth:`WorstCaseSearch.take_better`), and Lemma 5.2 on them."""
    group = part.W.shape[0] // len(search.others)
    found = search.scores(part, group)
    point, _, result = search.take_better(start, part, found)
    return point, search.observe(result.upper, torch.linalg.matrix_norm(part.W, ord=2), found.finite, group)


def _search_values(prep: PreparedInputs, ctx: SourceContext, worst: WorstValues, found: SearchOutcome,
                   lemma: LemmaTally) -> SearchValues:
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
                        searched=searched, rows=rows, lemma=lemma)
