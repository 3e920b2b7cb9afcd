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
from .local import HeadResult, Heads, logits_of
from .prepare import PairMaps, project_to_ball, stack_starts
from .settings import ExtrinsicSettings

log = logging.getLogger(__name__)


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

    def take(self, better: torch.Tensor, clf: Classifiers, result: HeadResult, pick: torch.Tensor | None = None
             ) -> None:
        """Move the heads ``better`` to their classifier of ``clf`` (row ``pick[h]``, default ``h``)."""
        rows = slice(None) if pick is None else pick
        self.clf.W[better], self.clf.b[better] = clf.W[rows][better], clf.b[rows][better]
        self.upper[better], self.lower[better] = result.upper[rows][better], result.lower[rows][better]
        self.A[:, better], self.c[better] = result.A[:, rows][:, better], result.c[rows][better]

    def keep_smaller(self, evaluation: Evaluation) -> None:
        """A rescored value replaces the head's value where it is smaller (a better inner fit)."""
        result = evaluation.result
        smaller = evaluation.finite & (result.upper < self.upper)
        self.upper[smaller] = result.upper[smaller]
        self.A[:, smaller], self.c[smaller] = result.A[:, smaller], result.c[smaller]


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
        # steps are scored on small working sets (each head's worst examples, warm-started): cheap, and
        # the final classifiers are scored again with the full estimator
        self.step_settings = replace(settings, working_budget=settings.working_set)
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

    def evaluate(self, clf: Classifiers, warm: tuple[torch.Tensor, torch.Tensor] | None, settings: ExtrinsicSettings,
                 soft_label: bool, below: float | np.ndarray = -math.inf) -> Evaluation:
        """Values of one classifier per head; ``below`` (per head): the acceptance threshold, which a
        certified head's LPs decide first (:meth:`FixedClassifierSolver.certify`)."""
        heads, finite = self.problems(clf, warm)
        result = self.solver.values(heads, self.names(1), settings, soft_label, below)
        return Evaluation(_masked(result, finite), finite, heads)

    def estimate(self, clf: Classifiers, group: int, soft_label: bool) -> Evaluation:
        """Upper bounds of ``group`` classifiers per head (:meth:`FixedClassifierSolver.upper_bounds`)."""
        heads, finite = self.problems(clf, None, group)
        result = self.solver.upper_bounds(heads, self.settings, soft_label)
        return Evaluation(_masked(result, finite), finite, heads)

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
        settings = self.settings
        heads = len(self.others)
        certified = self.solver.certifies(start.clf.W.shape[2])
        best = start.copy()
        length = settings.search_step_size * radius
        accepted = torch.zeros(heads, dtype=torch.long, device=start.upper.device)
        lemma = LemmaTally.empty(heads)
        step_settings = settings if certified else self.step_settings
        if settings.search_steps and not certified:
            # steps are scored by the warm-started fit: score the start the same way first, so that a
            # step is accepted for a larger distance, not for a less converged inner fit
            best.keep_smaller(self.evaluate(start.clf, (start.A, start.c), step_settings, soft_label=False))
        for _ in range(settings.search_steps):
            current = Classifiers(best.clf.W, best.clf.b)
            direction = self.ascent_direction(current, best.A, best.c)
            candidate, norms = self.step(current, direction, length, radius)
            threshold = best.upper * (1 + settings.search_accept_rtol)
            # certified: a step whose upper bound falls to the acceptance threshold is rejected
            # whatever its exact value, so its LPs settle that question first and stop there (the
            # same decisions, fewer LPs)
            found = self.evaluate(candidate, (best.A, best.c), step_settings, soft_label=False,
                                  below=threshold.cpu().numpy() if certified else -math.inf)
            lemma = lemma + self.observe(found.result.upper, norms, found.finite)
            better = found.finite & (found.result.upper > threshold)
            accepted += better.long()
            best.take(better, candidate, found.result)
            length = torch.minimum(torch.where(better, 1.5 * length, 0.5 * length), radius)
            log.debug("search step: %d/%d heads improved; values %s", int(better.sum()), heads,
                      np.array2string(best.upper.cpu().numpy(), precision=4))
        if not certified:
            # a local value is only as good as its inner fit: score the final classifiers once more with
            # every start (soft-label fit included) and the full refinement, and keep the smaller value
            best.keep_smaller(self.evaluate(Classifiers(best.clf.W, best.clf.b), (best.A, best.c), settings, True))
        return SearchOutcome(best, accepted, torch.linalg.matrix_norm(best.clf.W, ord=2), lemma)


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
