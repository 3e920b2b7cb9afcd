"""The per-source phases of the extrinsic engine: the task probe's distance (:func:`task_probe_distances`,
``d_psi``), the worst case over random-label probes (:func:`random_probe_worst_case`, ``d_worst``) and
the searched worst case (:func:`searched_worst_case`, ``d_worst_search``).

Orientation: source ``i`` is mapped onto each target ``j`` of ``ctx.others``. Conventions: docs/method.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..linalg import consecutive_blocks
from .local import HeadResult, Heads
from .maps import classifier_logits, pad_width, project_to_ball
from .prepare import PreparedInputs, SourceContext, stack_starts
from .search import Classifiers, SearchedClassifier, WorstCaseSearch, raw_map
from .settings import ExtrinsicSettings


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
    heads = Heads(torch.softmax(torch.cat([prep.task_logits[j] for j in others], dim=1), dim=2), stack_starts(starts))
    result = ctx.solver.solve(heads, [prep.names[j] for j in others], ["task"] * len(others))
    value = result.value.cpu().numpy()
    for slot, j in enumerate(others):
        prep.lemma.add(ctx.i, j, value[[slot]], prep.task_norms[[j]])
    return FixedValues(value=value, lower=result.lower.cpu().numpy(), result=result)


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


def close_worst_case(value: np.ndarray, lower: np.ndarray, certified: np.ndarray, certify, tol: float, atol: float,
                     certify_largest: bool = False, floor: float = -math.inf) -> int:
    """Certify classifiers, largest upper bound first, until ``max upper - max lower <= tol * max upper``.

    ``value``/``lower`` (classifiers,) are updated in place by ``certify(k, dominated_below)``; only
    the maximum needs a certificate: a classifier whose upper bound is below the best lower bound
    cannot be the worst, so its solve may stop there (its ``lower`` then stays NaN).
    ``certify_largest``: also until the classifier with the largest upper bound has its own interval
    (it is then used on its own: the search's start). ``floor``: only a classifier above it matters
    (the search's acceptance threshold): nothing is certified once every upper bound is at most
    ``floor``, and a solve stops as soon as its upper bound falls to ``floor``. Returns how many
    classifiers were certified here."""
    done = 0
    while True:
        upper = float(value.max())
        best_lower = float(np.nanmax(lower)) if np.isfinite(lower).any() else 0.0
        k = int(value.argmax())
        if upper <= floor:
            return done  # no classifier can matter: their values need no certificate
        closed = upper <= atol or upper - best_lower <= tol * upper
        if closed and (certified[k] or not certify_largest or not math.isfinite(upper)):
            return done
        if certified[k]:
            return done  # the worst classifier's own interval did not close (max_lp): its gap is reported
        # solved until its interval closes, or until its upper bound falls to the best lower bound
        # (it cannot be the worst) or to the floor (it cannot matter); without a floor, the search's
        # start (certify_largest) is solved to the end
        below = max(best_lower, floor) if math.isfinite(floor) else (-math.inf if certify_largest else best_lower)
        certify(k, below)
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
        heads = Heads(torch.softmax(torch.cat(logits, dim=1), dim=2), stack_starts(starts))
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

                certified_here = close_worst_case(values, lowers, certified, certify, settings.tol, settings.atol)
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
    return WorstCaseValues(value=value, lower=lower, index=index, W=W, b=b, A=A, c=c, rows=rows)


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
    start_value = value.clone()
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
            # for d_worst, so that the choice of the search's start rests on values within tol. Two
            # classes skip the soft-label fit: its values are only upper bounds to choose what to
            # certify, each certificate's smooth start replaces it, and it cost about half the
            # search's CPU time on a real pair at N = 2,000 (it grows with N times the classifiers)
            certified = ctx.solver.certifies(prep.n_classes)
            result, finite, evaluated = search.evaluate(part, None, settings, not certified, group, certify=False)
            if certified:
                for slot in range(heads):
                    members = np.arange(slot * group, (slot + 1) * group)
                    values = result.value[members].nan_to_num(nan=-math.inf).cpu().numpy()
                    lowers = np.full(group, np.nan)

                    def certify(k: int, dominated_below: float) -> None:
                        search.certify(evaluated, result, [members[k]], group, dominated_below)
                        values[k], lowers[k] = float(result.value[members[k]]), float(result.lower[members[k]])

                    # a classifier that cannot beat the acceptance threshold cannot replace the start:
                    # its solve stops there, which decides as the full solve would
                    threshold = float(value[slot]) * (1 + settings.search_accept_rtol)
                    close_worst_case(values, lowers, np.zeros(group, dtype=bool), certify, settings.tol, settings.atol,
                                     certify_largest=True, floor=threshold)
            observe(result.value, torch.linalg.matrix_norm(part.W, ord=2), finite, group)
            values = result.value.nan_to_num(nan=-math.inf)
            if result.stop is not None:  # a solve stopped at a threshold never wins (its value is a bound)
                dominated = torch.tensor([stop == "dominated" for stop in result.stop], device=values.device)
                values = torch.where(dominated, torch.full_like(values, -math.inf), values)
            values = values.reshape(heads, group)
            top = values.max(dim=1)
            pick = torch.arange(heads, device=values.device) * group + top.indices
            better = top.values > value * (1 + settings.search_accept_rtol)
            W[better], b[better] = part.W[pick][better], part.b[pick][better]
            value = torch.where(better, top.values, value)
            lower = torch.where(better, result.lower[pick], lower)
            A[:, better], c[better] = result.A[:, pick][:, better], result.c[pick][better]
    aimed_value = value.clone()
    best = search.run(Classifiers(W, b), value, lower, A, c, radius, observe)
    values = best["value"].cpu().numpy()
    lowers = best["lower"].cpu().numpy()
    improved = values > worst.value
    searched, rows = {}, {}
    for slot, j in enumerate(others):
        linear, bias = raw_map(ctx.factors, best["A"][:, slot], best["c"][slot])
        path = (float(start_value[slot]), float(aimed_value[slot]), *best["path"][:, slot].tolist())
        searched[j] = SearchedClassifier(best["W"][slot, : prep.widths[j]].cpu().numpy(), best["b"][slot].cpu().numpy(),
                                         linear, bias, float(values[slot]), path)
        rows[j] = {"search_accepted_steps": int(best["accepted"][slot]), "search_norm": float(best["norm"][slot]),
                   "search_improved": bool(improved[slot])}
    return SearchValues(value=np.where(improved, values, worst.value), lower=np.where(improved, lowers, worst.lower),
                        improved=improved, searched=searched, rows=rows)
