"""Fixed-classifier distances of one source for a batch of heads (one classifier on one target each),
every one certified by the dense interior-point kernel (:mod:`affine_homotopy.core.lp`) on Z's device:
on two classes the local starts seed :func:`.binary.certify`, which certifies the heads of one call
together, their LPs batched on the source's ``[Z, 1]``; on more classes the local search's map seeds
:func:`.multiclass.certify_classifier`, one head at a time."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from .binary import BinaryProblem, BinaryTarget, Certificate, ChebyshevLP, Design, certify
from .local import HeadResult, Heads, fit_heads
from .multiclass import MulticlassCertificate, certify_classifier, from_lp_map
from .settings import ExtrinsicSettings


@dataclass
class HeadNames:
    """Head ``h``'s target encoder and classifier (error messages). ``search``: the worst-case search's
    classifiers, whose LPs decide a threshold first (docs/method.md)."""

    targets: list[str]
    labels: list[str]
    search: bool = False


class FixedClassifierSolver:
    """Values of fixed-classifier distances for the heads of one source ``Z`` (whitened, rank-ruled)."""

    def __init__(self, Z: torch.Tensor, settings: ExtrinsicSettings, source_name: str) -> None:
        self.Z, self.settings, self.source_name = Z, settings, source_name
        self.lp_count, self.max_gap = 0, 0.0
        # per target encoder: the certificate residual of every certificate that rests on LP duals, and
        # the LPs the interior-point kernel could not certify (solved by HiGHS)
        self.residuals: dict[str, list[float]] = defaultdict(list)
        self.fallbacks: Counter[str] = Counter()

    @property
    def highs_fallbacks(self) -> int:
        return sum(self.fallbacks.values())

    @cached_property
    def design(self) -> Design:
        """``[Z, 1]`` in float64 on Z's device (the LPs are solved there) and on the CPU: the LP's rows."""
        Z = self.Z.detach().to(dtype=torch.float64)
        return Design.of(torch.cat([Z, Z.new_ones((Z.shape[0], 1))], dim=1))

    def upper_bounds(self, heads: Heads, settings: ExtrinsicSettings | None = None,
                     soft_label: bool = True) -> HeadResult:
        """Upper bounds of every head: on two classes the best start without the smooth-max refinement
        (looser, so a few more heads get certified, but far cheaper; the two-class certificate starts with
        its own smooth-max refinement), else the local search's values (the multi-class certificate's start)."""
        return fit_heads(self.Z, heads, settings or self.settings, soft_label, refine_heads=heads.P.shape[2] > 2)

    def values(self, heads: Heads, names: HeadNames, settings: ExtrinsicSettings | None = None,
               soft_label: bool = True, below: float | np.ndarray = -math.inf) -> HeadResult:
        """Every head's value, certified (``below``: :meth:`certify`)."""
        result = self.upper_bounds(heads, settings, soft_label)
        return self.certify(heads, result, range(heads.P.shape[1]), names, below)

    def certify(self, heads: Heads, result: HeadResult, select: Iterable[int], names: HeadNames,
                below: float | np.ndarray = -math.inf) -> HeadResult:
        """A copy of the two-class ``result`` with heads ``select`` certified. ``below`` (scalar or per
        head): a head whose upper bound falls to it cannot matter and stops there (its ``lower`` NaN)."""
        below = np.broadcast_to(np.asarray(below, dtype=float), (result.upper.shape[0],))
        P = heads.P.detach().to(dtype=torch.float64, device="cpu").numpy()
        chosen = [h for h in map(int, select) if math.isfinite(float(result.upper[h]))]  # a non-finite head stays NaN
        if P.shape[2] > 2:
            return self._certify_multiclass(P, result, chosen, names, below)
        problems = [self._problem(P, result, h, names, float(below[h])) for h in chosen]
        settings = self.settings
        # one BLAS thread: the LP loop's scoring products are (N, r) x (r,) matrix-vector products, which
        # threads only slow down (and their summation order would then depend on the thread count)
        with threadpool_limits(limits=1, user_api="blas"):
            found = certify(problems, settings.tol, settings.atol, settings.max_lp, decide=names.search)
        for h, problem, certificate in zip(chosen, problems, found):
            self._count(names.targets[h], certificate, problem.lp.fallbacks)
        return _with_certificates(result, dict(zip(chosen, found)))

    def _certify_multiclass(self, P: np.ndarray, result: HeadResult, chosen: list[int], names: HeadNames,
                            below: np.ndarray) -> HeadResult:
        """:meth:`certify` for three or more classes: one head at a time (:func:`.multiclass.certify_classifier`)."""
        found = {}
        with threadpool_limits(limits=1, user_api="blas"):
            for h in chosen:
                A, c = (v.detach().to(torch.float64).cpu().numpy() for v in (result.A[:, h], result.c[h]))
                found[h] = certify_classifier(self.Z, P[:, h], A, c, self.settings, float(below[h]), names.search)
                self._count(names.targets[h], found[h], found[h].fallbacks)
        return _with_certificates(result, found)

    def _problem(self, P: np.ndarray, result: HeadResult, h: int, names: HeadNames, below: float) -> BinaryProblem:
        """Head ``h``'s LPs, target and start (its map's logit gap)."""
        A, c = result.A[:, h], result.c[h]
        start = torch.cat([A[:, 0] - A[:, 1], (c[0] - c[1])[None]]).detach().to(torch.float64).cpu().numpy()
        lp = ChebyshevLP(self.design, f"{self.source_name} -> {names.targets[h]}, classifier {names.labels[h]}")
        return BinaryProblem(lp, BinaryTarget(P[:, h, 0], P[:, h, 1]), [start], below)

    def _count(self, target: str, found: Certificate | MulticlassCertificate, fallbacks: int) -> None:
        """A certificate's LPs, HiGHS fallbacks, residual and gap in the source's totals."""
        interval = found.interval
        self.lp_count += interval.iterations
        self.fallbacks[target] += fallbacks
        if interval.iterations and interval.lower > 0:  # a lower bound of 0 rests on no duals
            self.residuals[target].append(float(found.cert_residual))
        if interval.stop != "dominated":
            self.max_gap = max(self.max_gap, interval.relative_gap if interval.upper > self.settings.atol else 0.0)

    def close_worst(self, heads: Heads, result: HeadResult, members: np.ndarray, names: HeadNames,
                    upper: np.ndarray, lower: np.ndarray, settled: np.ndarray) -> tuple[HeadResult, np.ndarray, int]:
        """Certify heads ``members``, largest upper bound first, until the largest value is known to
        ``tol`` (:func:`next_to_certify`). ``upper``, ``lower``, ``settled``: the contenders, ``members``
        last. Returns the result, the contenders' lower bounds and how many heads were certified."""
        upper, lower, settled = upper.copy(), lower.copy(), settled.copy()
        offset = upper.size - members.size
        done = 0
        while (pick := next_to_certify(upper, lower, settled, self.settings)) is not None:
            k, below = pick
            h = int(members[k - offset])
            result = self.certify(heads, result, [h], names, below)
            upper[k], lower[k] = float(result.upper[h]), float(result.lower[h])
            settled[k] = True  # closed, or dominated
            done += 1
        return result, lower, done


def next_to_certify(upper: np.ndarray, lower: np.ndarray, settled: np.ndarray, settings: ExtrinsicSettings
                    ) -> tuple[int, float] | None:
    """Which contender to certify next, and below which value its solve may stop (a contender below the
    best lower bound cannot be the worst); None once ``max upper - max lower <= tol * max upper``."""
    top = float(upper.max())
    best_lower = float(np.nanmax(lower)) if np.isfinite(lower).any() else 0.0
    k = int(upper.argmax())
    if top <= settings.atol or top - best_lower <= settings.tol * top or settled[k]:
        return None  # closed, or the worst contender's own interval did not close (max_lp): its gap is reported
    # solved until its interval closes, or until its upper bound falls to the best lower bound (it
    # cannot be the worst)
    return k, best_lower


def _with_certificates(result: HeadResult, certificates: dict[int, Certificate | MulticlassCertificate]
                       ) -> HeadResult:
    """A copy of ``result`` whose heads ``certificates`` hold their certified value, bounds and map."""
    upper, lower, A, c = result.upper.clone(), result.lower.clone(), result.A.clone(), result.c.clone()
    lps, stop = result.lps.copy(), list(result.stop)
    rank = A.shape[0]
    for h, found in certificates.items():
        interval = found.interval
        if isinstance(found, MulticlassCertificate):
            A_h, c_h = from_lp_map(found.coef, A.shape[2])
            A[:, h], c[h] = (torch.as_tensor(v, dtype=A.dtype, device=A.device) for v in (A_h, c_h))
        else:
            half = torch.as_tensor(found.coef / 2, dtype=A.dtype, device=A.device)
            A[:, h, 0], A[:, h, 1] = half[:rank], -half[:rank]
            c[h, 0], c[h, 1] = half[rank], -half[rank]
        upper[h] = interval.upper
        lower[h] = interval.lower if interval.stop != "dominated" else math.nan
        lps[h], stop[h] = interval.iterations, interval.stop
    return replace(result, upper=upper, lower=lower, A=A, c=c, lps=lps, stop=stop)
