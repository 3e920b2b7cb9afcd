"""The searched worst case ``d_worst_search``: projected gradient ascent on each pair's classifier."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from ..intrinsic import map_in_original_coordinates
from .fixed import FixedClassifierSolver
from .local import HeadResult, Heads, logits_of
from .maps import PairMaps, project_to_ball
from .settings import ExtrinsicSettings

log = logging.getLogger(__name__)


@dataclass
class Classifiers:
    """One classifier per head (the worst-case search): weights padded to the stack's width."""

    W: torch.Tensor  # (H, Dmax, C)
    b: torch.Tensor  # (H, C)


class WorstCaseSearch:
    """Projected gradient ascent on the classifier ``psi'`` of each pair ``i -> j`` (docs/method.md).

    One instance per source ``i``; heads are its targets ``others``. Target-side products run on the
    stack of all targets' representations (``Y`` (K, N, Dmax), one batched product per step); the
    inner values come from the source's :class:`FixedClassifierSolver` for all heads at once, each
    started from the map of the classifier it steps from (certified on two-class tasks: a step is
    then judged on exact values, and accepted only when it raises the value by more than
    ``search_accept_rtol``, far above their tolerance, so that the path does not depend on the last
    bits of the inputs).
    """

    def __init__(self, Z: torch.Tensor, Y: torch.Tensor, y_mean: torch.Tensor, y_scale: torch.Tensor,
                 source: int, others: list[int], pair_maps: dict[int, PairMaps], settings: ExtrinsicSettings,
                 solver: FixedClassifierSolver, names: list[str]) -> None:
        self.Z, self.Y, self.source, self.others = Z, Y, source, others
        self.solver, self.names = solver, names
        self.y_mean, self.y_scale = y_mean[others], y_scale[others]  # (H, Dmax), (H,)
        self.pair_maps, self.settings = pair_maps, settings
        self.lam = settings.inverse_temperature
        # steps are scored on small working sets (each head's worst examples, warm-started): cheap, and
        # the final classifiers are scored again with the full estimator
        self.step_settings = replace(settings, working_budget=settings.working_set)
        self.tau = settings.search_temperature

    def logits(self, clf: Classifiers, group: int = 1) -> torch.Tensor:
        """(N, H * group, C) target logits ``lam (y_n W + b)``: ``group`` classifiers per head (head-major),
        each on its head's target."""
        k, n, width = self.Y.shape
        heads, n_classes = len(self.others), clf.W.shape[2]
        W = self.Y.new_zeros((k, width, group * n_classes))
        W[self.others] = clf.W.reshape(heads, group, width, n_classes).permute(0, 2, 1, 3).reshape(heads, width, -1)
        full = torch.bmm(self.Y, W)  # (K, N, group * C): one batched product over all targets
        full = full[self.others].reshape(heads, n, group, n_classes).permute(1, 0, 2, 3)
        return self.lam * (full.reshape(n, heads * group, n_classes) + clf.b)

    def evaluate(self, clf: Classifiers, warm: tuple[torch.Tensor, torch.Tensor] | None,
                 settings: ExtrinsicSettings, soft_label: bool, group: int = 1, certify: bool = True,
                 dominated_below: float | np.ndarray = -math.inf):
        """The fixed-classifier values of each classifier (``group`` per head); NaN for a non-finite one.

        ``warm``: a map (A, c) to start every head from too (the one of the classifier it steps from).
        Returns ``(result, finite)``, and with ``certify=False`` also the heads' problems, so that
        :meth:`certify` can close chosen heads later (two classes). ``dominated_below`` (per head):
        the acceptance threshold; a certified head stops once its upper bound is at most this (its
        value is then that upper bound, its lower bound NaN), and its LPs decide that question first
        (:meth:`FixedClassifierSolver.certify`, ``searched``)."""
        logits = self.logits(clf, group)
        finite = torch.isfinite(logits).all(dim=(0, 2))
        logits = torch.where(finite[None, :, None], logits, torch.zeros_like(logits))
        heads, width, n_classes = len(self.others), clf.W.shape[1], clf.W.shape[2]
        # a non-finite classifier is scored as NaN below; zeros keep its starts finite meanwhile
        W = torch.where(finite[:, None, None], clf.W, torch.zeros_like(clf.W)).reshape(heads, group, width, n_classes)
        b = torch.where(finite[:, None], clf.b, torch.zeros_like(clf.b)).reshape(heads, group, n_classes)
        per_head = [self.pair_maps[j].starts(logits[:, h * group : (h + 1) * group], W[h], b[h], self.lam)
                    for h, j in enumerate(self.others)]
        starts = {name: (torch.cat([s[name][0] for s in per_head], dim=1), torch.cat([s[name][1] for s in per_head]))
                  for name in ("composed", "least_squares")}
        if warm is not None:
            starts["warm"] = warm
        problems = Heads(torch.softmax(logits, dim=2), starts)
        result = self.solver.solve(problems, self._targets(group), self._labels(group), settings, soft_label,
                                   certify_heads=certify, searched=True, dominated_below=dominated_below)
        result.value = torch.where(finite, result.value, torch.full_like(result.value, math.nan))
        if certify:
            return result, finite
        return result, finite, problems

    def _targets(self, group: int) -> list[str]:
        return [self.names[j] for j in self.others for _ in range(group)]

    def _labels(self, group: int) -> list[str]:
        return [f"searched {k}" for _ in self.others for k in range(group)]

    def certify(self, problems: Heads, result: HeadResult, heads: list[int], group: int,
                dominated_below: float = -math.inf) -> None:
        """Certify chosen heads of an :meth:`evaluate` result made with ``certify=False``."""
        self.solver.certify(problems, result, heads, self._targets(group), self._labels(group), searched=True,
                            dominated_below=dominated_below)

    def residual_classifiers(self, count: int, radius: torch.Tensor, n_classes: int) -> Classifiers:
        """``count`` classifiers per head aimed at what the map cannot reproduce (heads h*count..).

        For the examples with the largest residuals ``r_n = y_n - A_ij(x_n)`` of the composed start's
        map: ``W = radius (r_n / ||r_n||) v^T`` with ``v = (e_a - e_b) / sqrt(2)`` a class contrast
        (``||W||_2 = radius``), and the bias putting the midpoint of ``y_n`` and ``A_ij(x_n)`` on the
        decision boundary between classes ``a`` and ``b``: the composed map then errs most there.
        """
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
                direction = residual[k] / torch.linalg.vector_norm(residual[k]).clamp(min=torch.finfo(residual.dtype).tiny)
                W = radius[slot] * direction[:, None] * contrast[None, :]
                middle = self.Y[j, top[k]] - residual[k] / 2
                Ws.append(W)
                bs.append(-(middle @ W))
        if not Ws:
            return Classifiers(self.Y.new_zeros((0, width, n_classes)), self.Y.new_zeros((0, n_classes)))
        return Classifiers(torch.stack(Ws), torch.stack(bs))

    def ascent_direction(self, clf: Classifiers, A: torch.Tensor, c: torch.Tensor) -> Classifiers:
        """Unit-length ascent direction of the smooth maximum of the errors with the maps fixed.

        By Danskin's theorem the gradient of ``min_psi max_n e_n`` in the classifier is that of
        ``max_n e_n`` at the best map; the smooth maximum's weights stand in for the minimax dual
        weights. The bias is stepped as the mean logit, scaled by the target's RMS centred row norm,
        so that a unit step moves the logits by comparable amounts through ``W`` and ``b``.
        """
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

    def run(self, clf: Classifiers, value: torch.Tensor, lower: torch.Tensor, A: torch.Tensor, c: torch.Tensor,
            radius: torch.Tensor, observe) -> dict[str, torch.Tensor]:
        """``steps`` accepted-or-halved ascent steps from ``clf`` (value, lower bound and map known);
        ``observe(values, norms, finite)`` sees every classifier evaluated. Returns the best
        classifiers, their values, lower bounds (NaN: uncertified) and maps, and ``path`` (steps, H):
        the best values after each step."""
        settings = self.settings
        heads = len(self.others)
        certified = self.solver.certifies(clf.W.shape[2])
        best = {"W": clf.W.clone(), "b": clf.b.clone(), "value": value.clone(), "lower": lower.clone(),
                "A": A.clone(), "c": c.clone()}
        length = settings.search_step_size * radius
        accepted = torch.zeros(heads, dtype=torch.long, device=value.device)
        step_settings = settings if certified else self.step_settings
        path = []
        if settings.search_steps and not certified:
            # steps are scored by the warm-started fit: score the start the same way first, so that a
            # step is accepted for a larger distance, not for a less converged inner fit
            result, finite = self.evaluate(clf, (A, c), step_settings, soft_label=False)
            smaller = finite & (result.value < best["value"])
            best["value"][smaller] = result.value[smaller]
            best["A"][:, smaller], best["c"][smaller] = result.A[:, smaller], result.c[smaller]
        for _ in range(settings.search_steps):
            current = Classifiers(best["W"], best["b"])
            direction = self.ascent_direction(current, best["A"], best["c"])
            candidate, norms = self.step(current, direction, length, radius)
            threshold = best["value"] * (1 + settings.search_accept_rtol)
            # certified: a step whose upper bound falls to the acceptance threshold is rejected
            # whatever its exact value, so its LPs settle that question first and stop there (the
            # same decisions, fewer LPs)
            result, finite = self.evaluate(candidate, (best["A"], best["c"]), step_settings, soft_label=False,
                                           dominated_below=threshold.cpu().numpy() if certified else -math.inf)
            observe(result.value, norms, finite)
            better = finite & (result.value > threshold)
            accepted += better.long()
            best["W"][better], best["b"][better] = candidate.W[better], candidate.b[better]
            best["value"][better], best["lower"][better] = result.value[better], result.lower[better]
            best["A"][:, better], best["c"][better] = result.A[:, better], result.c[better]
            length = torch.minimum(torch.where(better, 1.5 * length, 0.5 * length), radius)
            path.append(best["value"].clone())
            log.debug("search step: %d/%d heads improved; values %s", int(better.sum()), heads,
                      np.array2string(best["value"].cpu().numpy(), precision=4))
        if not certified:
            # a local value is only as good as its inner fit: score the final classifiers once more with
            # every start (soft-label fit included) and the full refinement, and keep the smaller value
            result, finite = self.evaluate(Classifiers(best["W"], best["b"]), (best["A"], best["c"]), settings, True)
            smaller = finite & (result.value < best["value"])
            best["value"][smaller] = result.value[smaller]
            best["A"][:, smaller], best["c"][smaller] = result.A[:, smaller], result.c[smaller]
        best["accepted"] = accepted
        best["path"] = torch.stack(path) if path else value.new_zeros((0, heads))
        best["norm"] = torch.linalg.matrix_norm(best["W"], ord=2)
        return best


@dataclass
class SearchedClassifier:
    """The classifier behind ``d_worst_search[i, j]`` and the affine map attaining its value.

    ``value = max_n || softmax(lam (y_n W + b)) - softmax(x_n linear + bias) ||_2`` exactly, with
    ``x`` encoder ``i``'s and ``y`` encoder ``j``'s representations. ``path``: the pair's best value
    as the search went, what each part bought: its start (d_worst's classifier), after the aimed
    classifiers, then after each ascent step (on more classes, before the final rescoring).
    """

    W: np.ndarray  # (D_j, C)
    b: np.ndarray  # (C,)
    linear: np.ndarray  # (D_i, C): the map into logits
    bias: np.ndarray  # (C,)
    value: float
    path: tuple[float, ...] = ()


def raw_map(factors, A: torch.Tensor, c: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """A whitened-coordinates map ``Z A + c`` (Z = sqrt(N) U) as ``x linear + bias`` on raw rows."""
    root = math.sqrt(factors.Q.shape[0])  # Z A + c = [U, 1/sqrt(N)] @ [sqrt(N) A; sqrt(N) c]
    return map_in_original_coordinates(factors, torch.cat([root * A, root * c[None]]))

