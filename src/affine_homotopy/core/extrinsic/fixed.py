"""Fixed-classifier distances of one source: certified on two-class tasks, the local search otherwise.

Every phase of the engine (task probes, random-label probes, the search) asks this one solver for
the values of a batch of heads (one classifier each, on one target each), so that a number means
the same thing whichever phase produced it:

* two classes (``settings.certified``): the local starts (composed, least squares, soft label) seed
  :func:`affine_homotopy.core.extrinsic.binary.certify`, which returns ``[lower, upper]`` to ``tol``; the
  value is ``upper``, attained by an explicit map; each classifier gets its own working set of
  half-spaces, its LPs solved by the dense interior-point kernel (:mod:`affine_homotopy.core.lp`);
* more classes: :func:`affine_homotopy.core.extrinsic.local.fit_heads` (starts and the smooth-max
  refinement, with stall restarts); ``lower`` is NaN: an upper bound without a certificate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from .binary import BinaryTarget, ChebyshevLP, certify
from .local import HeadResult, Heads, fit_heads
from .settings import ExtrinsicSettings


class FixedClassifierSolver:
    """Values of fixed-classifier distances for the heads of one source ``Z`` (whitened, rank-ruled)."""

    def __init__(self, Z: torch.Tensor, settings: ExtrinsicSettings, source_name: str) -> None:
        self.Z, self.settings, self.source_name = Z, settings, source_name
        self._design: np.ndarray | None = None
        self.lp_count = 0
        self.max_gap = 0.0
        self.highs_fallbacks = 0  # LPs the interior-point kernel could not certify, solved by HiGHS

    def certifies(self, n_classes: int) -> bool:
        return n_classes == 2 and self.settings.certified

    @property
    def design(self) -> np.ndarray:
        if self._design is None:  # [Z, 1] in float64 on the CPU: the LP's constraint rows
            Z = self.Z.detach().to(dtype=torch.float64, device="cpu").numpy()
            self._design = np.hstack([Z, np.ones((Z.shape[0], 1))])
        return self._design

    def solve(self, heads: Heads, targets: Sequence[str], labels: Sequence[str], settings: ExtrinsicSettings | None = None,
              soft_label: bool = True, certify_heads: bool = True, searched: bool = False,
              dominated_below: float | np.ndarray = -math.inf) -> HeadResult:
        """Values of every head; ``targets[h]``/``labels[h]`` name head ``h``'s target encoder and
        classifier (error messages). ``certify_heads=False`` on two classes returns the best start's
        values (upper bounds, ``lower`` NaN; without the local refinement): :meth:`certify` closes
        the heads that can matter later. ``searched``, ``dominated_below`` (scalar or per head):
        see :meth:`certify`."""
        settings = settings or self.settings
        if not self.certifies(heads.P.shape[2]):
            result = fit_heads(self.Z, heads, settings, soft_label)
            return _with_certificate_fields(result)
        if not certify_heads:
            # cheap upper bounds for choosing what to certify: the starts without the smooth-max
            # refinement (looser, so a few more heads get certified, but 2x cheaper on the demo's
            # d_worst: 15.2 against 32.4 CPU s; the certified values agree to tol)
            return _with_certificate_fields(fit_heads(self.Z, heads, settings, soft_label, refine_heads=False))
        result = _with_certificate_fields(fit_heads(self.Z, heads, settings, soft_label, refine_heads=False))
        self.certify(heads, result, range(heads.P.shape[1]), targets, labels, searched, dominated_below)
        return result

    def certify(self, heads: Heads, result: HeadResult, select: Sequence[int] | torch.Tensor, targets: Sequence[str],
                labels: Sequence[str], searched: bool = False, dominated_below: float | np.ndarray = -math.inf
                ) -> None:
        """Certify heads ``select`` of a two-class ``result`` in place: value = upper, lower, map.
        ``dominated_below`` (scalar, or one value per head of ``result``): stop a head once its upper
        bound is at most this (it cannot be the largest, or cannot be accepted); its value is then
        that upper bound and its ``lower`` NaN. ``searched``: the worst-case search's classifiers,
        whose only question is whether they exceed ``dominated_below`` (the acceptance threshold):
        their LPs run at the threshold's level until that is settled
        (:class:`.binary.ChebyshevLP`, :func:`.binary.certify`); an accepted one is then closed to
        ``tol`` as any other."""
        # one BLAS thread: the LP loop's products are (N, r) x (r,) matrix-vector products, which
        # threads only slow down (and their summation order would then depend on the thread count)
        with threadpool_limits(limits=1, user_api="blas"):
            self._certify(heads, result, select, targets, labels, searched, dominated_below)

    def _certify(self, heads: Heads, result: HeadResult, select: Sequence[int] | torch.Tensor, targets: Sequence[str],
                 labels: Sequence[str], searched: bool, dominated_below: float | np.ndarray) -> None:
        settings = self.settings
        below = np.broadcast_to(np.asarray(dominated_below, dtype=float), (result.value.shape[0],))
        P = heads.P.detach().to(dtype=torch.float64, device="cpu").numpy()
        rank = self.Z.shape[1]
        for h in [int(k) for k in select]:
            if not math.isfinite(float(result.value[h])):
                continue  # a non-finite classifier stays NaN (skipped by its caller)
            A, c = result.A[:, h], result.c[h]
            start = torch.cat([A[:, 0] - A[:, 1], (c[0] - c[1])[None]]).detach().to(torch.float64).cpu().numpy()
            lp = ChebyshevLP(self.design, f"{self.source_name} -> {targets[h]}, classifier {labels[h]}")
            target = BinaryTarget(P[:, h, 0], P[:, h, 1])
            interval = certify(lp, target, [start], settings.tol, settings.atol, settings.max_lp,
                               dominated_below=float(below[h]), decide=searched)
            self.lp_count += interval.lps
            self.highs_fallbacks += lp.fallbacks
            if interval.stop != "dominated":
                self.max_gap = max(self.max_gap, interval.gap if interval.upper > settings.atol else 0.0)
            half = torch.as_tensor(interval.coef / 2, dtype=result.A.dtype, device=result.A.device)
            result.A[:, h, 0], result.A[:, h, 1] = half[:rank], -half[:rank]
            result.c[h, 0], result.c[h, 1] = half[rank], -half[rank]
            result.value[h] = interval.upper
            result.lower[h] = interval.lower if interval.stop != "dominated" else math.nan
            result.lps[h] = interval.lps
            result.stop[h] = interval.stop
            result.cert_residual[h] = interval.cert_residual


def _with_certificate_fields(result: HeadResult) -> HeadResult:
    heads = result.value.shape[0]
    result.value = result.value.clone()
    result.A, result.c = result.A.clone(), result.c.clone()
    result.lower = torch.full_like(result.value, math.nan)
    result.lps = np.zeros(heads, dtype=int)
    result.stop = ["local"] * heads
    result.cert_residual = np.zeros(heads)
    return result
