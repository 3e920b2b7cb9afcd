"""The searched worst case ``d_worst_search``: projected gradient ascent on each pair's classifier."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from ..intrinsic import map_in_original_coordinates
from .bounds import LemmaCheck, LemmaTally
from .fixed import FixedClassifierSolver, HeadNames
from .local import HeadResult, Heads, refine_round, errors_of, logits_of
from .prepare import PairMaps, project_to_ball, stack_starts
from .settings import ExtrinsicSettings

log = logging.getLogger(__name__)

# a step's second direction (at the smooth maximum's own minimiser, :meth:`WorstCaseSearch.smooth_map`)
# is tried only where it differs from the first by more than this (distance of the unit directions):
# closer, the two classifiers differ by less than a tenth of the step
DISTINCT_DIRECTIONS = 0.1
# L-BFGS rounds of :meth:`WorstCaseSearch.smooth_map`: enough that its directions from different maps agree
# far inside DISTINCT_DIRECTIONS (tested)
SMOOTH_MAP_ROUNDS = 5


@dataclass
class Classifiers:
    """One classifier per head (the worst-case search): weights padded to the stack's width."""

    W: torch.Tensor  # (H, Dmax, C)
    b: torch.Tensor  # (H, C)


@dataclass
class Evaluation:
    """Values of a batch of classifiers (``upper`` NaN: non-finite), and their problems (to certify later)."""

    result: HeadResult
    finite: torch.Tensor  # (H,) bool
    heads: Heads


@dataclass
class SearchPoint:
    """The search's classifier per head, its value (``lower`` NaN: uncertified) and the map attaining it."""

    clf: Classifiers
    upper: torch.Tensor  # (H,)
    lower: torch.Tensor  # (H,)
    A: torch.Tensor  # (r, H, C)
    c: torch.Tensor  # (H, C)

    def copy(self) -> SearchPoint:
        clf = Classifiers(self.clf.W.clone(), self.clf.b.clone())
        return SearchPoint(clf, self.upper.clone(), self.lower.clone(), self.A.clone(), self.c.clone())

    def take(self, better: torch.Tensor, clf: Classifiers, result: HeadResult, pick: torch.Tensor) -> None:
        """Move the heads ``better`` to their classifier of ``clf`` (row ``pick[h]``)."""
        self.clf.W[better], self.clf.b[better] = clf.W[pick][better], clf.b[pick][better]
        self.upper[better], self.lower[better] = result.upper[pick][better], result.lower[pick][better]
        self.A[:, better], self.c[better] = result.A[:, pick][:, better], result.c[pick][better]


@dataclass
class SearchOutcome:
    """Per head: the best point :meth:`WorstCaseSearch.run` found, its accepted steps, its spectral norm,
    and Lemma 5.2 on the steps."""

    best: SearchPoint
    accepted: torch.Tensor
    norm: torch.Tensor
    lemma: LemmaTally


class WorstCaseSearch:
    """Projected gradient ascent on the classifier of each pair ``i -> j`` (docs/method.md): one head per
    target of ``others``, the targets' products batched over the stack ``Y`` (K, N, Dmax), each head's
    inner value warm-started from the map of the classifier it steps from."""

    def __init__(self, Z: torch.Tensor, Y: torch.Tensor, y_mean: torch.Tensor, y_scale: torch.Tensor,
                 source: int, others: list[int], pair_maps: dict[int, PairMaps], settings: ExtrinsicSettings,
                 solver: FixedClassifierSolver, names: list[str], lemma: LemmaCheck | None = None) -> None:
        self.Z, self.Y, self.source, self.others = Z, Y, source, others
        self.solver, self.encoder_names, self.lemma = solver, names, lemma
        self.y_mean, self.y_scale = y_mean[others], y_scale[others]  # (H, Dmax), (H,)
        self.pair_maps, self.settings = pair_maps, settings
        self.lam = settings.inverse_temperature
        self.tau = settings.search_temperature

    def logits(self, clf: Classifiers, group: int = 1) -> torch.Tensor:
        """(N, H * group, C) target logits ``lam (y_n W + b)``, ``group`` classifiers per head (head-major)."""
        k, n, width = self.Y.shape
        heads, n_classes = len(self.others), clf.W.shape[2]
        W = self.Y.new_zeros((k, width, group * n_classes))
        W[self.others] = clf.W.reshape(heads, group, width, n_classes).permute(0, 2, 1, 3).reshape(heads, width, -1)
        full = torch.bmm(self.Y, W)  # (K, N, group * C): one batched product over all targets
        full = full[self.others].reshape(heads, n, group, n_classes).permute(1, 0, 2, 3)
        return self.lam * (full.reshape(n, heads * group, n_classes) + clf.b)

    def problems(self, clf: Classifiers, warm: tuple[torch.Tensor, torch.Tensor] | None, group: int = 1
                 ) -> tuple[Heads, torch.Tensor]:
        """The problems of ``clf`` (``group`` per head), which are finite; ``warm``: a map (A, c) to start from too."""
        logits = self.logits(clf, group)
        finite = torch.isfinite(logits).all(dim=(0, 2))
        logits = torch.where(finite[None, :, None], logits, torch.zeros_like(logits))
        heads, width, n_classes = len(self.others), clf.W.shape[1], clf.W.shape[2]
        # a non-finite classifier is scored as NaN; zeros keep its starts finite meanwhile
        W = torch.where(finite[:, None, None], clf.W, torch.zeros_like(clf.W)).reshape(heads, group, width, n_classes)
        b = torch.where(finite[:, None], clf.b, torch.zeros_like(clf.b)).reshape(heads, group, n_classes)
        starts = stack_starts([self.pair_maps[j].starts(logits[:, h * group : (h + 1) * group], W[h], b[h], self.lam)
                               for h, j in enumerate(self.others)])
        if warm is not None:
            starts["warm"] = warm
        return Heads(torch.softmax(logits, dim=2), starts), finite

    def evaluate(self, clf: Classifiers, warm: tuple[torch.Tensor, torch.Tensor] | None) -> Evaluation:
        """Certified values of one classifier per head (:meth:`FixedClassifierSolver.values`)."""
        heads, finite = self.problems(clf, warm)
        result = self.solver.values(heads, self.names(1))
        return Evaluation(_masked(result, finite), finite, heads)

    def scores(self, clf: Classifiers, group: int, warm: tuple[torch.Tensor, torch.Tensor] | None = None
               ) -> Evaluation:
        """Upper bounds of ``group`` classifiers per head (:meth:`FixedClassifierSolver.upper_bounds`), each
        attained by a map: they order the classifiers for :meth:`take_better`; ``warm``: each head's map
        (A, c), a start for its classifiers. No soft-label fit: these values only order the classifiers,
        each certificate's own start replaces them, and its cost grows with N times the classifiers."""
        if warm is not None:
            warm = (warm[0].repeat_interleave(group, dim=1), warm[1].repeat_interleave(group, dim=0))
        heads, finite = self.problems(clf, warm, group)
        result = self.solver.upper_bounds(heads, soft_label=False)
        return Evaluation(_masked(result, finite), finite, heads)

    def take_better(self, start: SearchPoint, part: Classifiers, found: Evaluation
                    ) -> tuple[SearchPoint, torch.Tensor, HeadResult]:
        """``start`` with classifiers of ``part`` (``group`` per head, scored by :meth:`scores`) accepted by
        the acceptance rule, which heads moved, and the classifiers' values. Each head's classifiers are
        tried largest upper bound first, each against the best so far: one replaces it only when its
        certified value exceeds ``best (1 + search_accept_rtol)``, a question its LPs settle first and only
        as far as it needs (:meth:`FixedClassifierSolver.certify` with the threshold as ``below``); one
        whose upper bound is at most the threshold costs no LP. The heads' classifiers of one rank are
        certified in one call (batched)."""
        heads = len(self.others)
        group = part.W.shape[0] // heads
        result, best = found.result, start.copy()
        moved = torch.zeros(heads, dtype=torch.bool, device=start.upper.device)
        order = result.upper.nan_to_num(nan=-math.inf).reshape(heads, group).argsort(dim=1, descending=True)
        for rank in range(group):
            members = torch.arange(heads, device=order.device) * group + order[:, rank]
            threshold = best.upper * (1 + self.settings.search_accept_rtol)
            contenders = result.upper[members] > threshold  # NaN: a non-finite classifier never is
            if bool(contenders.any()):
                below = np.full(result.upper.shape[0], -math.inf)
                below[members[contenders].cpu().numpy()] = threshold[contenders].cpu().numpy()
                result = self.solver.certify(found.heads, result, members[contenders].tolist(), self.names(group),
                                             below)
            # a solve stopped at the threshold ends with its upper bound at most the threshold
            accepted = contenders & (result.upper[members] > threshold)
            best.take(accepted, part, result, members)
            moved |= accepted
        return best, moved, result

    def names(self, group: int) -> HeadNames:
        return HeadNames([self.encoder_names[j] for j in self.others for _ in range(group)],
                         [f"searched {k}" for _ in self.others for k in range(group)], search=True)

    def observe(self, values: torch.Tensor, norms: torch.Tensor, finite: torch.Tensor, group: int = 1) -> LemmaTally:
        """Lemma 5.2 for every finite classifier evaluated (``group`` per head)."""
        parts = [slice(h * group, (h + 1) * group) for h in range(len(self.others))]
        return self.lemma.tally([values[part][finite[part]].cpu().numpy() for part in parts],
                                [norms[part][finite[part]].cpu().numpy() for part in parts])

    def residual_classifiers(self, count: int, radius: torch.Tensor, n_classes: int) -> Classifiers:
        """``count`` classifiers per head aimed at the largest residuals of the ``d_aff`` map (docs/method.md)."""
        width = self.Y.shape[2]
        Ws, bs = [], []
        for slot, j in enumerate(self.others):
            pair = self.pair_maps[j]
            top = pair.residual_norms.topk(min(count, len(pair.residual_norms))).indices
            residual = pair.residual_rows(self.Y[j], top)  # (count, Dmax); padded columns stay 0
            for k in range(len(top)):
                a, b = k % n_classes, (k + 1) % n_classes
                contrast = residual.new_zeros(n_classes)
                contrast[a], contrast[b] = 2**-0.5, -(2**-0.5)
                tiny = torch.finfo(residual.dtype).tiny
                direction = residual[k] / torch.linalg.vector_norm(residual[k]).clamp(min=tiny)
                W = radius[slot] * direction[:, None] * contrast[None, :]
                middle = self.Y[j, top[k]] - residual[k] / 2
                Ws.append(W)
                bs.append(-(middle @ W))
        if not Ws:
            return Classifiers(self.Y.new_zeros((0, width, n_classes)), self.Y.new_zeros((0, n_classes)))
        return Classifiers(torch.stack(Ws), torch.stack(bs))

    def ascent_direction(self, clf: Classifiers, A: torch.Tensor, c: torch.Tensor) -> Classifiers:
        """Unit ascent direction of the smooth maximum of the errors, the maps fixed (Danskin: the
        gradient of ``min_psi max_n e_n`` is that of ``max_n e_n`` at the best map). The bias steps as
        the mean logit scaled by the target's RMS centred row norm, comparable with ``W``'s steps."""
        n = self.Z.shape[0]
        P = torch.softmax(self.logits(clf), dim=2)  # (N, H, C)
        diff = P - torch.softmax(logits_of(self.Z, A, c), dim=2)
        squared = (diff**2).sum(dim=2)  # (N, H)
        scale = squared.max(dim=0).values.clamp(min=torch.finfo(P.dtype).tiny)
        weights = torch.softmax(squared / (self.tau * scale), dim=0)
        v = weights[:, :, None] * 2 * diff
        g = self.lam * (P * v - P * (P * v).sum(dim=2, keepdim=True))  # (N, H, C): d objective / d logits
        k = self.Y.shape[0]
        G = g.new_zeros((k, n, g.shape[2]))
        G[self.others] = g.permute(1, 0, 2)
        g_sum = g.sum(dim=0)  # (H, C)
        grad_W = torch.bmm(self.Y.transpose(1, 2), G)[self.others] - self.y_mean[:, :, None] * g_sum[:, None, :]
        grad_beta = g_sum * self.y_scale[:, None]
        norm = torch.sqrt((grad_W**2).sum(dim=(1, 2)) + (grad_beta**2).sum(dim=1)).clamp(min=torch.finfo(P.dtype).tiny)
        return Classifiers(grad_W / norm[:, None, None], grad_beta / norm[:, None])

    def step(self, clf: Classifiers, direction: Classifiers, length: torch.Tensor,
             radius: torch.Tensor) -> tuple[Classifiers, torch.Tensor]:
        """Move ``length`` (H,) along ``direction`` keeping the mean logit's parametrisation, then project."""
        beta = (self.y_mean[:, None, :] @ clf.W).squeeze(1) + clf.b  # mean logit (H, C)
        W, norms = project_to_ball(clf.W + length[:, None, None] * direction.W, radius)
        beta = beta + (length * self.y_scale)[:, None] * direction.b
        return Classifiers(W, beta - (self.y_mean[:, None, :] @ W).squeeze(1)), norms

    def run(self, start: SearchPoint, radius: torch.Tensor) -> SearchOutcome:
        """``search_steps`` accepted-or-halved ascent steps from ``start``."""
        heads = len(self.others)
        best = start.copy()
        length = self.settings.search_step_size * radius
        accepted = torch.zeros(heads, dtype=torch.long, device=start.upper.device)
        lemma = LemmaTally.empty(heads)
        for _ in range(self.settings.search_steps):
            part, norms, distinct = self.candidates(best, length, radius)
            found = self.scores(part, 2, warm=(best.A, best.c))
            # the second direction's classifier where it adds nothing: neither certified nor kept
            same = torch.stack([torch.zeros_like(distinct), ~distinct], dim=1).flatten()
            found = replace(found, result=_masked(found.result, ~same), finite=found.finite & ~same)
            best, better, result = self.take_better(best, part, found)
            lemma = lemma + self.observe(result.upper, norms, found.finite, group=2)
            accepted += better.long()
            length = torch.minimum(torch.where(better, 1.5 * length, 0.5 * length), radius)
            log.debug("search step: %d/%d heads improved; values %s", int(better.sum()), heads,
                      np.array2string(best.upper.cpu().numpy(), precision=4))
        return SearchOutcome(best, accepted, torch.linalg.matrix_norm(best.clf.W, ord=2), lemma)

    def candidates(self, best: SearchPoint, length: torch.Tensor, radius: torch.Tensor
                   ) -> tuple[Classifiers, torch.Tensor, torch.Tensor]:
        """Two steps of ``length`` per head (head-major), their spectral norms, and where the second
        differs from the first (:data:`DISTINCT_DIRECTIONS`). The first ascends the smooth maximum at the
        map the inner solve returned; the second at :meth:`smooth_map`'s, where the gradient with the map
        held fixed is the smoothed inner value's own gradient (Danskin), whichever optimal map the solver
        returned: an interior point's is the centre of its optimal face, with fewer errors near the
        largest than a vertex, and a direction taken there can miss every gain."""
        current = Classifiers(best.clf.W, best.clf.b)
        first = self.ascent_direction(current, best.A, best.c)
        second = self.ascent_direction(current, *self.smooth_map(current, best.A, best.c))
        distance = torch.sqrt(((first.W - second.W) ** 2).sum(dim=(1, 2)) + ((first.b - second.b) ** 2).sum(dim=1))
        steps = [self.step(current, direction, length, radius) for direction in (first, second)]
        part = Classifiers(torch.stack([s.W for s, _ in steps], dim=1).flatten(0, 1),
                           torch.stack([s.b for s, _ in steps], dim=1).flatten(0, 1))
        return part, torch.stack([norm for _, norm in steps], dim=1).flatten(), distance > DISTINCT_DIRECTIONS

    def smooth_map(self, clf: Classifiers, A: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The map minimising :meth:`ascent_direction`'s smooth maximum (``search_temperature``, all
        examples), from ``(A, c)``: :data:`SMOOTH_MAP_ROUNDS` L-BFGS rounds, each scaled by its start's
        largest error as the direction is, so that their fixed point is the direction's own minimiser."""
        P = torch.softmax(self.logits(clf), dim=2)
        W, b = A.permute(1, 0, 2).contiguous(), c.clone()
        for _ in range(SMOOTH_MAP_ROUNDS):
            errors = errors_of(self.Z, W.permute(1, 0, 2), b, P)
            W, b, _, _ = refine_round(self.Z, P, W, b, errors, errors.max(dim=0).values, P.shape[0], self.tau,
                                       True, self.settings, 1.0)
            W, b = W.detach(), b.detach()
        return W.permute(1, 0, 2).contiguous(), b


@dataclass
class SearchedClassifier:
    """The classifier behind ``d_worst_search[i, j]`` and the map attaining ``value = max_n ||softmax(lam
    (y_n W + b)) - softmax(x_n linear + bias)||_2`` (``x``: encoder ``i``, ``y``: encoder ``j``)."""

    W: np.ndarray  # (D_j, C)
    b: np.ndarray  # (C,)
    linear: np.ndarray  # (D_i, C): the map into logits
    bias: np.ndarray  # (C,)
    value: float


def raw_map(factors, A: torch.Tensor, c: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """A whitened-coordinates map ``Z A + c`` (Z = sqrt(N) U) as ``x linear + bias`` on raw rows."""
    root = math.sqrt(factors.Q.shape[0])  # Z A + c = [U, 1/sqrt(N)] @ [sqrt(N) A; sqrt(N) c]
    return map_in_original_coordinates(factors, torch.cat([root * A, root * c[None]]))


def _masked(result: HeadResult, finite: torch.Tensor) -> HeadResult:
    """``result`` with the values of non-finite classifiers NaN."""
    return replace(result, upper=torch.where(finite, result.upper, torch.full_like(result.upper, math.nan)))
