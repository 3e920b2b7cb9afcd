"""Linear softmax probes (the paper's task classifiers ``psi'``) and their metrics.

A probe is multinomial logistic regression ``p(y | h) = softmax(h W + b)`` on one encoder's
representations ``h`` (rows). It is fitted by full-batch L-BFGS (deterministic) on features
standardised with the fit split's mean and standard deviation; the L2 penalty
``l2 / 2 * ||W_std||_F^2`` (bias unpenalised) acts on those standardised weights, and the
standardisation is folded back into ``W`` and ``b`` so that the stored probe applies to raw
representations. ``l2`` is chosen from a grid by accuracy on a deterministic hold-out of the fit
split (ties go to the stronger penalty), then the probe is refitted on the whole fit split.

Random-label probes (the classifiers of the paper's worst-case measure, Eq. 23) are the same model
fitted to labels drawn uniformly from ``0..C-1`` with a seeded generator (:func:`random_labels`,
seed ``s`` for classifier ``s``), with a fixed ``l2`` (the workflow passes the task probe's chosen
penalty). :func:`fit_softmax_probes` fits many label sets on the same representations as one
multi-head problem: the loss is the *sum* of the heads' losses, so heads do not interact and each
head's optimum is that of its separate fit; the heads share the standardisation and every matrix
product.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

log = logging.getLogger(__name__)


@dataclass
class SoftmaxProbe:
    weight: np.ndarray  # (D, C): logits = X @ weight + bias
    bias: np.ndarray  # (C,)
    l2: float
    iterations: int
    validation_accuracy: dict[float, float] = field(default_factory=dict)

    def logits(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=np.float64) @ self.weight + self.bias

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return softmax(self.logits(X))

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.logits(X).argmax(axis=1)


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)


def _standardise(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = X.mean(axis=0)
    std = X.std(axis=0)
    floor = max(float(std.max()), 1.0) * 1e-8
    std = np.where(std > floor, std, 1.0)  # constant features: leave unscaled, they carry nothing
    return mean, std


def _lbfgs_logistic(
    Z: torch.Tensor, y: torch.Tensor, n_classes: int, l2: float, max_iter: int
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Penalised softmax regression; ``y`` (N,) gives one head, (N, H) gives H separate heads.

    Returns ``weight`` (D, C) and ``bias`` (C,) for one head, (H, D, C) and (H, C) for several.
    """
    single = y.ndim == 1
    labels = y[:, None] if single else y
    n, heads = labels.shape
    weight = torch.zeros(Z.shape[1], heads * n_classes, dtype=Z.dtype, device=Z.device, requires_grad=True)
    bias = torch.zeros(heads * n_classes, dtype=Z.dtype, device=Z.device, requires_grad=True)
    optimizer = torch.optim.LBFGS(
        [weight, bias], lr=1.0, max_iter=max_iter, history_size=20,
        tolerance_grad=1e-9, tolerance_change=1e-12, line_search_fn="strong_wolfe",
    )
    flat_labels = labels.reshape(-1)

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        logits = (Z @ weight + bias).reshape(n * heads, n_classes)
        # sum over heads of each head's mean cross entropy: the heads' problems stay separate
        loss = torch.nn.functional.cross_entropy(logits, flat_labels, reduction="sum") / n
        loss = loss + 0.5 * l2 * (weight**2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    iterations = int(optimizer.state[optimizer._params[0]].get("n_iter", 0))
    w = weight.detach().reshape(-1, heads, n_classes).permute(1, 0, 2)
    b = bias.detach().reshape(heads, n_classes)
    return (w[0], b[0], iterations) if single else (w, b, iterations)


def fit_softmax_probe(
    X: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    l2_grid: Sequence[float] = (1e-4, 1e-3, 1e-2, 1e-1),
    validation_fraction: float = 0.2,
    max_iter: int = 500,
    seed: int = 0,
) -> SoftmaxProbe:
    """Fit a probe on (X, y); see the module docstring for the conventions."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    if X.ndim != 2 or X.shape[0] != y.shape[0]:
        raise ValueError(f"X must be (N, D) with one label per row; got X {X.shape}, y {y.shape}")
    if y.min() < 0 or y.max() >= n_classes:
        raise ValueError(f"labels must lie in 0..{n_classes - 1}, found {y.min()}..{y.max()}")
    mean, std = _standardise(X)
    Z = torch.from_numpy((X - mean) / std)
    labels = torch.from_numpy(y)
    scores: dict[float, float] = {}
    grid = sorted(set(float(v) for v in l2_grid))
    if len(grid) > 1:
        order = np.random.default_rng(seed).permutation(len(y))
        n_val = max(1, int(round(validation_fraction * len(y))))
        val, fit = torch.from_numpy(order[:n_val]), torch.from_numpy(order[n_val:])
        for l2 in grid:
            w, b, _ = _lbfgs_logistic(Z[fit], labels[fit], n_classes, l2, max_iter)
            scores[l2] = float(((Z[val] @ w + b).argmax(1) == labels[val]).double().mean())
        best = max(grid, key=lambda l2: (scores[l2], l2))
    else:
        best = grid[0]
    w, b, iterations = _lbfgs_logistic(Z, labels, n_classes, best, max_iter)
    w_np, b_np = w.numpy(), b.numpy()
    weight = w_np / std[:, None]
    bias = b_np - (mean / std) @ w_np
    log.info("probe fitted: l2=%g after %d L-BFGS iterations (hold-out accuracies %s)", best, iterations, scores)
    return SoftmaxProbe(weight, bias, best, iterations, scores)


@dataclass
class ProbeSet:
    """Several probes on the same representations: ``logits[h] = X @ weight[h] + bias[h]``."""

    weight: np.ndarray  # (H, D, C)
    bias: np.ndarray  # (H, C)
    l2: float
    iterations: int

    def predict(self, X: np.ndarray) -> np.ndarray:
        """(N, H) predicted classes."""
        logits = np.einsum("nd,hdc->nhc", np.asarray(X, dtype=np.float64), self.weight) + self.bias
        return logits.argmax(axis=2)


def random_labels(n: int, n_classes: int, seeds: Sequence[int]) -> np.ndarray:
    """(n, len(seeds)) labels, column ``k`` uniform on ``0..n_classes-1`` from ``default_rng(seeds[k])``."""
    return np.stack([np.random.default_rng(seed).integers(0, n_classes, n) for seed in seeds], axis=1)


def fit_softmax_probes(
    X: np.ndarray,
    Y: np.ndarray,
    n_classes: int,
    l2: float,
    max_iter: int = 500,
    device: torch.device | str = "cpu",
) -> ProbeSet:
    """Fit one probe per column of ``Y`` (N, H) on the same ``X`` as one multi-head problem.

    Same model, standardisation and penalty as :func:`fit_softmax_probe` with ``l2_grid=[l2]``
    (no hold-out search); the summed loss keeps the heads separate, so each head equals its own
    fit up to the optimiser's tolerance.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.int64)
    if Y.ndim != 2 or X.ndim != 2 or X.shape[0] != Y.shape[0]:
        raise ValueError(f"X must be (N, D) and Y (N, H); got X {X.shape}, Y {Y.shape}")
    if Y.size and (Y.min() < 0 or Y.max() >= n_classes):
        raise ValueError(f"labels must lie in 0..{n_classes - 1}, found {Y.min()}..{Y.max()}")
    mean, std = _standardise(X)
    Z = torch.from_numpy((X - mean) / std).to(device)
    w, b, iterations = _lbfgs_logistic(Z, torch.from_numpy(Y).to(device), n_classes, float(l2), max_iter)
    w_np, b_np = w.cpu().numpy(), b.cpu().numpy()
    weight = w_np / std[None, :, None]
    bias = b_np - np.einsum("d,hdc->hc", mean / std, w_np)
    log.info("%d probes fitted jointly: l2=%g after %d L-BFGS iterations", Y.shape[1], l2, iterations)
    return ProbeSet(weight, bias, float(l2), iterations)


# ---------------------------------------------------------------------------------------------
# metrics (binary F1 for the positive class 1, as GLUE reports it)


def accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.mean(np.asarray(y_true) == np.asarray(y_pred)))


def f1_binary(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    tp = float(np.sum((y_pred == 1) & (y_true == 1)))
    fp = float(np.sum((y_pred == 1) & (y_true != 1)))
    fn = float(np.sum((y_pred != 1) & (y_true == 1)))
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def matthews_corrcoef(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Multiclass Matthews correlation (Gorodkin's R_K); 0 when undefined."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    classes = np.union1d(y_true, y_pred)
    confusion = np.zeros((len(classes), len(classes)))
    np.add.at(confusion, (np.searchsorted(classes, y_true), np.searchsorted(classes, y_pred)), 1)
    t, p = confusion.sum(axis=1), confusion.sum(axis=0)
    c, s = np.trace(confusion), confusion.sum()
    denominator = np.sqrt((s**2 - p @ p) * (s**2 - t @ t))
    return 0.0 if denominator == 0 else float((c * s - t @ p) / denominator)


METRICS = {"accuracy": accuracy, "f1": f1_binary, "mcc": matthews_corrcoef}


def score(metrics: Sequence[str], y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    return {name: METRICS[name](y_true, y_pred) for name in metrics}
