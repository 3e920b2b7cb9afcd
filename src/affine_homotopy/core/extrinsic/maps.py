"""Start maps and classifier logits shared by every phase of the extrinsic engine."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..linalg import Factors, WeightedLeastSquares, residual_norms
from .settings import ExtrinsicSettings


def as_tensor(array: np.ndarray, settings: ExtrinsicSettings) -> torch.Tensor:
    return torch.tensor(np.asarray(array), dtype=settings.dtype, device=settings.device)  # a copy: inputs may be read-only


class PairMaps:
    """Start maps for the classifiers of one pair ``i -> j``, *composed* and *least_squares*. The map
    ``A_ij`` is the intrinsic engine's weighted least squares on ``[U_i, 1/sqrt(N)]`` with the stored
    solver weights (as :func:`affine_homotopy.core.intrinsic.affine_map`), factorised once per pair."""

    def __init__(self, design: torch.Tensor, weights: torch.Tensor | None) -> None:
        self.U = design[:, :-1]
        self.root = math.sqrt(design.shape[0])
        self.fit: WeightedLeastSquares | None = None
        if weights is not None:
            self.fit = WeightedLeastSquares(design, weights, torch.nonzero(weights > 0).squeeze(1))

    def starts(self, logits: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
               lam: float) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """``{"composed": (A, c), "least_squares": (A, c)}``, A (r, G, C), c (G, C), for G classifiers
        ``weight`` (G, D', C), ``bias`` (G, C) with logits (N, G, C) on the target. *composed*: the
        classifier after ``A_ij`` (the logits are linear in the target; a stack's padded rows of ``W``
        meet zeros); *least_squares*: the logits fitted by ordinary least squares."""
        n, groups, n_classes = logits.shape
        rank = self.U.shape[1]
        flat = logits.reshape(n, -1)
        # least squares on the design [sqrt(N) U, 1]: U^T 1 = 0 and U^T U = I decouple it
        least_squares = ((self.U.T @ flat / self.root).reshape(rank, groups, n_classes),
                         flat.mean(dim=0).reshape(groups, n_classes))
        coef = lam * torch.einsum("pd,gdc->pgc", self.coef, weight[:, : self.coef.shape[1]])
        composed = (coef[:rank] / self.root, coef[rank] / self.root + lam * bias)
        return {"composed": composed, "least_squares": least_squares}

    def fit_target(self, Y: torch.Tensor, target: Factors) -> float:
        """Fit ``A_ij`` to the target's rank-truncated representation (as ``d_aff``, or by least squares
        without weights); returns its largest residual on ``Y`` (N, D) itself, the value Lemma 5.2's
        composed candidate uses: at most ``sqrt(d_aff^2 + tail^2)`` (the target's ``tail_row_norm_max``)."""
        self.design = torch.cat([self.U, self.U.new_full((self.U.shape[0], 1), 1.0 / self.root)], dim=1)
        truncated = target.with_basis(Y).truncated()
        self.coef = self.design.T @ truncated if self.fit is None else self.fit.solve(truncated)
        del truncated
        self.residual_norms = residual_norms(self.design, Y, self.coef)
        return float(self.residual_norms.max())

    def residual_rows(self, Y: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """``y_n - A_ij(x_n)`` for the given examples (after :meth:`fit_target`); columns beyond the fitted
        target's width (the padding of a stack) are 0."""
        width = self.coef.shape[1]
        residual = Y[rows, :width] - self.design[rows] @ self.coef
        return torch.nn.functional.pad(residual, (0, Y.shape[1] - width))


def classifier_logits(Y: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, lam: float) -> torch.Tensor:
    """(N, G, C) logits of G classifiers ``weight`` (G, D, C), ``bias`` (G, C) on Y (N, D)."""
    g, d, k = weight.shape
    return lam * ((Y @ weight.permute(1, 0, 2).reshape(d, g * k)).reshape(-1, g, k) + bias)


def pad_width(weight: torch.Tensor, rows: int) -> torch.Tensor:
    """Zero rows appended to ``weight`` (..., D, C) up to ``rows`` (targets of different widths share one stack)."""
    extra = rows - weight.shape[-2]
    return weight if extra == 0 else torch.cat([weight, weight.new_zeros((*weight.shape[:-2], extra, weight.shape[-1]))], dim=-2)


def project_to_ball(weight: torch.Tensor, radius: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Nearest point of ``{W : ||W||_2 <= radius}`` for each (D, C) matrix of ``weight`` (H, D, C):
    singular values clipped at the radius (exact in the spectral and Frobenius norms). Returns the
    projected weights and their spectral norms (H,)."""
    U, S, Vh = torch.linalg.svd(weight, full_matrices=False)
    outside = S[:, 0] > radius
    clipped = torch.minimum(S, radius[:, None])
    projected = torch.where(outside[:, None, None], (U * clipped[:, None, :]) @ Vh, weight)
    return projected, torch.where(outside, clipped[:, 0], S[:, 0])


def stack_starts(per_target: list[dict[str, tuple[torch.Tensor, torch.Tensor]]]
                 ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """One start per name for the heads of several targets (:meth:`PairMaps.starts`), head-major."""
    return {name: (torch.cat([s[name][0] for s in per_target], dim=1), torch.cat([s[name][1] for s in per_target]))
            for name in ("composed", "least_squares")}
