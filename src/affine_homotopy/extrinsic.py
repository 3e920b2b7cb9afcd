"""Extrinsic (task-level) distances through linear softmax probes.

``d_psi`` (the paper's Eq. 20, fixed classifier), entry ``(i, j)`` in the project's orientation
(row ``i`` mapped onto column ``j``):

    d_psi(i -> j) = min over affine psi of  max_n || softmax(psi'_j(H_j[n])) - softmax(psi(H_i[n])) ||_2

where ``psi'_j`` is encoder ``j``'s task probe. Values lie in ``[0, sqrt(2)]`` (L2 distance between
probability vectors); the diagonal is 0 exactly (``psi = psi'_j`` attains it).

Estimator (this version): every candidate map gives a valid upper bound, and the smaller one is
reported:

1. *composed*: ``psi'_j`` composed with the least-squares affine map ``i -> j`` (the map behind
   ``d_aff``; Lemma 5.2's construction);
2. *soft-label fit*: starting from (1), minimise the soft-label cross-entropy between
   ``softmax(psi(H_i))`` and ``softmax(psi'_j(H_j))`` by full-batch L-BFGS.

The fit works in the whitened coordinates ``sqrt(N) U_i`` of the source (orthonormal basis of its
centred column space after the rank rule), which is the same family of affine maps but well
conditioned. For one source, all targets' maps are fitted together as one multi-head problem (the
loss separates across heads), so a source costs a few large matrix products per iteration.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .linalg import CentredBasis, centred_basis
from .probes import SoftmaxProbe

log = logging.getLogger(__name__)


@dataclass
class ExtrinsicResult:
    distances: np.ndarray  # (K, K)
    winning_start: list[list[str]]  # "composed" or "soft_label_fit" per pair ("" on the diagonal)
    iterations: list[int]  # L-BFGS iterations per source


def _max_prob_error(target: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """Per head: max over rows of the L2 distance between probability vectors; (N, H, C) inputs."""
    return torch.linalg.vector_norm(target - torch.softmax(logits, dim=-1), dim=-1).max(dim=0).values


def fixed_classifier_distances(
    representations: Sequence[np.ndarray],
    probes: Sequence[SoftmaxProbe],
    names: Sequence[str] | None = None,
    multiplier: float = 5.0,
    max_iter: int = 300,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
) -> ExtrinsicResult:
    """``d_psi`` for every ordered pair of encoders (see the module docstring)."""
    count = len(representations)
    if len(probes) != count:
        raise ValueError("one probe per encoder is required")
    names = list(names) if names is not None else [str(k) for k in range(count)]
    n = representations[0].shape[0]
    n_classes = probes[0].weight.shape[1]
    tensors = [torch.as_tensor(np.asarray(rep)).to(device=device, dtype=dtype) for rep in representations]
    targets = torch.stack(
        [torch.softmax(t @ torch.as_tensor(p.weight, dtype=dtype, device=device)
                       + torch.as_tensor(p.bias, dtype=dtype, device=device), dim=1)
         for t, p in zip(tensors, probes)],
        dim=1,
    )  # (N, K, C)
    distances = np.zeros((count, count))
    winners = [["" for _ in range(count)] for _ in range(count)]
    iterations: list[int] = []
    for i in range(count):
        basis = centred_basis(tensors[i], multiplier, dtype, device)
        others = [j for j in range(count) if j != i]
        init_w, init_b = _composed_start(basis, tensors, probes, others, dtype, device)
        whitened = basis.U * math.sqrt(n)
        heads = targets[:, others, :]
        composed_logits = (whitened @ init_w.reshape(basis.rank, -1)).reshape(n, len(others), n_classes) + init_b
        composed = _max_prob_error(heads, composed_logits)
        weight, bias, steps = _soft_label_fit(whitened, heads, init_w, init_b, max_iter)
        fitted_logits = (whitened @ weight.reshape(basis.rank, -1)).reshape(n, len(others), n_classes) + bias
        fitted = _max_prob_error(heads, fitted_logits)
        for slot, j in enumerate(others):
            best_fit = float(fitted[slot]) <= float(composed[slot])
            distances[i, j] = float(min(fitted[slot], composed[slot]))
            winners[i][j] = "soft_label_fit" if best_fit else "composed"
        iterations.append(steps)
        log.info("d_psi: source %d/%d '%s' done (%d L-BFGS iterations)", i + 1, count, names[i], steps)
    return ExtrinsicResult(distances, winners, iterations)


def _composed_start(
    basis: CentredBasis,
    tensors: Sequence[torch.Tensor],
    probes: Sequence[SoftmaxProbe],
    others: Sequence[int],
    dtype: torch.dtype,
    device: torch.device | str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Heads ``psi'_j o (LS affine map i -> j)`` in whitened coordinates: (rank, H, C), (H, C)."""
    n = basis.n_rows
    weights, biases = [], []
    for j in others:
        w = torch.as_tensor(probes[j].weight, dtype=dtype, device=device)
        b = torch.as_tensor(probes[j].bias, dtype=dtype, device=device)
        mean_j = tensors[j].mean(dim=0)
        coefficients = basis.U.T @ (tensors[j] - mean_j)  # LS map: Y_j ~ mean_j + U_i coefficients
        weights.append(coefficients @ w / math.sqrt(n))
        biases.append(mean_j @ w + b)
    return torch.stack(weights, dim=1), torch.stack(biases, dim=0)


def _soft_label_fit(
    whitened: torch.Tensor, heads: torch.Tensor, init_w: torch.Tensor, init_b: torch.Tensor, max_iter: int
) -> tuple[torch.Tensor, torch.Tensor, int]:
    n, n_heads, n_classes = heads.shape
    rank = whitened.shape[1]
    weight = init_w.clone().requires_grad_(True)
    bias = init_b.clone().requires_grad_(True)
    optimizer = torch.optim.LBFGS(
        [weight, bias], lr=1.0, max_iter=max_iter, history_size=20,
        tolerance_grad=1e-10, tolerance_change=1e-14, line_search_fn="strong_wolfe",
    )

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        logits = (whitened @ weight.reshape(rank, -1)).reshape(n, n_heads, n_classes) + bias
        # soft-label cross entropy, summed over heads (they separate), averaged over examples
        loss = -(heads * torch.log_softmax(logits, dim=-1)).sum() / n
        loss.backward()
        return loss

    optimizer.step(closure)
    steps = int(optimizer.state[optimizer._params[0]].get("n_iter", 0))
    return weight.detach(), bias.detach(), steps
