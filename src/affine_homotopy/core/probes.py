"""Linear softmax probes (the paper's task classifiers ``psi'``) and their metrics.

A probe is multinomial logistic regression ``p(y | h) = softmax(h W + b)`` on one encoder's
representations ``h`` (rows). It is fitted by full-batch L-BFGS (deterministic: scipy's L-BFGS-B
with the analytic gradient, in float64) on features standardised with the fit split's mean and
standard deviation; the objective is the mean cross entropy plus the L2 penalty
``l2 / 2 * ||W_std||_F^2`` (bias unpenalised) on those standardised weights, and the
standardisation is folded back into ``W`` and ``b`` so that the stored probe applies to raw
representations. A column at the rounding level (its centred norm at or below the rank rule's
threshold, :mod:`affine_homotopy.core.linalg`) gets weight 0: the measures map encoders through
their rank-ruled bases, so a probe that read rounding noise would be a classifier no other encoder,
not even its own affine image, could follow. ``l2`` is chosen from a grid by accuracy on a
deterministic hold-out of the fit split (ties go to the stronger penalty), then the probe is
refitted on the whole fit split.

Random-label probes (the classifiers of the paper's worst-case measure, Eq. 23) are fitted to
labels drawn uniformly from ``0..C-1`` with a seeded generator (:func:`random_labels`, seed ``s``
for classifier ``s``), in one of two ways; both fit many label sets on the same representations as
one multi-head problem whose loss is the *sum* of the heads' losses, so heads do not interact:

* :func:`fit_random_probes_sgd` (the default): the paper's protocol (Appendix F). Plain mini-batch
  SGD on the mean cross entropy of ``softmax(h W + b)`` on the *raw* representations, batch 64,
  20 epochs, no penalty, PyTorch's ``nn.Linear`` initialisation under seed 42 and one shuffling
  order for every classifier (the paper re-seeds each run), for each learning rate in
  {1e-2, 1e-1, 2e-1, 4e-1}; each classifier keeps the learning rate with the best training
  accuracy. The stopping point, not a penalty, limits the weights: these probes are as sharp as
  the paper's.
* :func:`fit_softmax_probes`: the task probe's model (standardised features, full-batch L-BFGS in
  PyTorch, on the caller's device) with a fixed ``l2``. With the task probe's chosen penalty these
  come out nearly flat.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.optimize
import torch

from ..errors import ConfigError, DataError
from .linalg import rank_cutoff

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


def _standardise(X: np.ndarray, rank_multiplier: float = 5.0) -> tuple[np.ndarray, np.ndarray]:
    """The fit split's column means and scales: ``Z = (X - mean) / scale``, the column's standard deviation.

    A column whose centred norm (``std * sqrt(N)``) is at or below the rank rule's threshold for
    ``X`` (:func:`affine_homotopy.core.linalg.rank_cutoff` with ``rank_multiplier``) is rounding
    noise and gets scale ``inf``: its ``Z`` column is 0 and the probe's weight on it 0. Scaled to
    unit variance instead, float32 rounding in a constant column (a std of 1e-7 of the column's
    value) would become a feature like any other, and the probe's weight on it, folded back to raw
    units, would be about ``1 / std``: logits that follow rounding noise, which no map of another
    encoder's rank-ruled basis can follow (an encoder would then be far, in ``d_psi``, from its own
    affine image).
    """
    mean, std, cutoff = column_spread(X, rank_multiplier)
    signal = std * math.sqrt(X.shape[0]) > cutoff
    return mean, np.where(signal, std, np.inf)


def column_spread(X: np.ndarray, rank_multiplier: float = 5.0) -> tuple[np.ndarray, np.ndarray, float]:
    """``X``'s column means, column standard deviations (as ``X.std(axis=0)`` computes them) and the rank
    rule's threshold for ``X`` (:func:`affine_homotopy.core.linalg.rank_cutoff`), which a column's
    centred norm ``std * sqrt(N)`` must exceed to carry signal (:func:`_standardise`)."""
    X = np.asarray(X, dtype=np.float64)
    n, dim = X.shape
    mean = X.mean(axis=0)
    centred = X - mean
    std = np.sqrt((centred * centred).mean(axis=0))  # numpy's std, without centring X a second time
    # sigma_1 of the centred matrix, from its (D, D) Gram matrix: the rank rule's scale
    sigma_max = math.sqrt(max(float(np.linalg.eigvalsh(centred.T @ centred)[-1]), 0.0)) if dim else 0.0
    data_scale = float(np.sqrt((X**2).sum(axis=1)).max()) if n else 0.0
    return mean, std, rank_cutoff(sigma_max, n, dim, rank_multiplier, data_scale)


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


def _lbfgs_softmax(
    Z: np.ndarray, y: np.ndarray, n_classes: int, l2: float, max_iter: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """One head of :func:`_lbfgs_logistic`'s objective, by scipy's L-BFGS-B with the analytic gradient.

    Returns ``weight`` (D, C), ``bias`` (C,) and the iteration count. Numpy in float64 on the CPU:
    a single task probe is a small problem, where PyTorch's per-step overhead (autograd, the
    Python-level two-loop recursion) would dominate the fit.
    """
    n, dim = Z.shape
    one_hot = np.zeros((n, n_classes))
    one_hot[np.arange(n), y] = 1.0
    split = dim * n_classes

    def loss_and_gradient(theta: np.ndarray) -> tuple[float, np.ndarray]:
        weight, bias = theta[:split].reshape(dim, n_classes), theta[split:]
        logits = Z @ weight + bias
        logits -= logits.max(axis=1, keepdims=True)
        exp = np.exp(logits)
        total = exp.sum(axis=1)
        loss = (np.log(total).sum() - (logits * one_hot).sum()) / n + 0.5 * l2 * float((weight**2).sum())
        residual = (exp / total[:, None] - one_hot) / n  # d(mean cross entropy) / d(logits)
        gradient = np.concatenate([(Z.T @ residual + l2 * weight).ravel(), residual.sum(axis=0)])
        return float(loss), gradient

    # the same stopping rules as the multi-head fit: largest gradient entry 1e-9, or a stalled loss
    result = scipy.optimize.minimize(
        loss_and_gradient, np.zeros(split + n_classes), jac=True, method="L-BFGS-B",
        options={"maxiter": max_iter, "maxcor": 20, "gtol": 1e-9, "ftol": 1e-15},
    )
    return result.x[:split].reshape(dim, n_classes), result.x[split:], int(result.nit)


def fit_softmax_probe(
    X: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    l2_grid: Sequence[float] = (1e-4, 1e-3, 1e-2, 1e-1),
    validation_fraction: float = 0.2,
    max_iter: int = 500,
    seed: int = 0,
    rank_multiplier: float = 5.0,
) -> SoftmaxProbe:
    """Fit a probe on (X, y); see the module docstring for the conventions. ``rank_multiplier``: the
    rank rule's ``n`` (as for ``d_aff``), for the columns that are rounding noise
    (:func:`_standardise`)."""
    X = np.asarray(X, dtype=np.float64)
    # a copy: labels read from a parquet table are a read-only view, which torch.from_numpy warns about
    y = np.array(y, dtype=np.int64)
    if X.ndim != 2 or X.shape[0] != y.shape[0]:
        raise DataError(f"X must be (N, D) with one label per row; got X {X.shape}, y {y.shape}",
                        argument="X", value=X.shape)
    if y.min() < 0 or y.max() >= n_classes:
        raise DataError(f"labels must lie in 0..{n_classes - 1}, found {y.min()}..{y.max()}", argument="y")
    mean, scale = _standardise(X, rank_multiplier)
    Z = (X - mean) / scale
    scores: dict[float, float] = {}
    grid = sorted(set(float(v) for v in l2_grid))
    if len(grid) > 1:
        order = np.random.default_rng(seed).permutation(len(y))
        n_val = max(1, int(round(validation_fraction * len(y))))
        val, fit = order[:n_val], order[n_val:]
        Z_fit, y_fit = Z[fit], y[fit]
        for l2 in grid:
            w, b, _ = _lbfgs_softmax(Z_fit, y_fit, n_classes, l2, max_iter)
            scores[l2] = float(((Z[val] @ w + b).argmax(1) == y[val]).mean())
        best = max(grid, key=lambda l2: (scores[l2], l2))
    else:
        best = grid[0]
    w, b, iterations = _lbfgs_softmax(Z, y, n_classes, best, max_iter)
    weight = w / scale[:, None]
    bias = b - (mean / scale) @ w
    log.info("probe fitted: l2=%g after %d L-BFGS iterations (hold-out accuracies %s)", best, iterations, scores)
    return SoftmaxProbe(weight, bias, best, iterations, scores)


@dataclass
class ProbeSet:
    """Several probes on the same representations: ``logits[h] = X @ weight[h] + bias[h]``."""

    weight: np.ndarray  # (H, D, C)
    bias: np.ndarray  # (H, C)
    l2: float
    iterations: int
    learning_rate: np.ndarray | None = None  # (H,) SGD: each head's chosen learning rate

    def norms(self) -> np.ndarray:
        """(H,) spectral norms ``||W_h||_2`` (Lemma 5.2's factor for each classifier)."""
        if self.weight.shape[0] == 0:
            return np.zeros(0)
        return np.linalg.norm(np.asarray(self.weight, dtype=np.float64), ord=2, axis=(1, 2))

    def train_accuracy(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """(H,) accuracy of each head on its own labels ``Y[:, h]``."""
        return (self.predict(X) == np.asarray(Y)).mean(axis=0)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """(N, H) predicted classes."""
        logits = np.einsum("nd,hdc->nhc", np.asarray(X, dtype=np.float64), self.weight) + self.bias
        return logits.argmax(axis=2)


def random_labels(n: int, n_classes: int, seeds: Sequence[int]) -> np.ndarray:
    """(n, len(seeds)) labels, column ``k`` uniform on ``0..n_classes-1`` from ``default_rng(seeds[k])``
    ((n, 0) without seeds: no random-label probes)."""
    columns = [np.random.default_rng(seed).integers(0, n_classes, n) for seed in seeds]
    return np.stack(columns, axis=1) if columns else np.zeros((n, 0), dtype=np.int64)


def fit_softmax_probes(
    X: np.ndarray,
    Y: np.ndarray,
    n_classes: int,
    l2: float,
    max_iter: int = 500,
    device: torch.device | str = "cpu",
    rank_multiplier: float = 5.0,
) -> ProbeSet:
    """Fit one probe per column of ``Y`` (N, H) on the same ``X`` as one multi-head problem.

    Same model, standardisation and penalty as :func:`fit_softmax_probe` with ``l2_grid=[l2]``
    (no hold-out search); the summed loss keeps the heads separate, so each head equals its own
    fit up to the optimiser's tolerance.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.array(Y, dtype=np.int64)  # a writable copy (torch.from_numpy warns on read-only arrays)
    if Y.ndim != 2 or X.ndim != 2 or X.shape[0] != Y.shape[0]:
        raise DataError(f"X must be (N, D) and Y (N, H); got X {X.shape}, Y {Y.shape}", argument="X", value=X.shape)
    if Y.size and (Y.min() < 0 or Y.max() >= n_classes):
        raise DataError(f"labels must lie in 0..{n_classes - 1}, found {Y.min()}..{Y.max()}", argument="Y")
    mean, scale = _standardise(X, rank_multiplier)
    Z = torch.from_numpy((X - mean) / scale).to(device)
    w, b, iterations = _lbfgs_logistic(Z, torch.from_numpy(Y).to(device), n_classes, float(l2), max_iter)
    w_np, b_np = w.cpu().numpy(), b.cpu().numpy()
    weight = w_np / scale[None, :, None]
    bias = b_np - np.einsum("d,hdc->hc", mean / scale, w_np)
    log.info("%d probes fitted jointly: l2=%g after %d L-BFGS iterations", Y.shape[1], l2, iterations)
    return ProbeSet(weight, bias, float(l2), iterations)


PAPER_LEARNING_RATES = (1e-2, 1e-1, 2e-1, 4e-1)


def fit_random_probes_sgd(
    X: np.ndarray,
    Y: np.ndarray,
    n_classes: int,
    learning_rates: Sequence[float] = PAPER_LEARNING_RATES,
    epochs: int = 20,
    batch_size: int = 64,
    l2: float = 0.0,
    seed: int = 42,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    progress: bool = False,
) -> ProbeSet:
    """The paper's random-label probes (module docstring), one per column of ``Y`` (N, H).

    All ``H x len(learning_rates)`` runs are one multi-head problem: every step is two matrix
    products over the batch. With plain SGD and the summed loss each head receives exactly its
    own gradient, so every head follows the path of its separate run. ``l2`` adds
    ``l2 / 2 * ||W||_F^2`` (weight decay; 0 as in the paper). A run whose weights become
    non-finite counts as accuracy -1 and is never chosen when another learning rate is finite.
    """
    X, Y = _sgd_inputs(X, Y, n_classes, learning_rates, epochs, batch_size)
    n, dim = X.shape
    heads, rates = Y.shape[1], len(learning_rates)
    runs = heads * rates  # run g: learning rate g // heads, labels of head g % heads
    Xt = torch.as_tensor(X).to(device=device, dtype=dtype)
    labels = torch.as_tensor(Y).to(device).repeat(1, rates)  # (N, runs)
    # nn.Linear's initialisation under the seed, shared by every run as in the paper
    torch.manual_seed(seed)
    init = torch.nn.Linear(dim, n_classes, dtype=dtype)
    weight = init.weight.detach().T.to(device).reshape(dim, 1, n_classes).repeat(1, runs, 1).reshape(dim, -1)
    bias = init.bias.detach().to(device).repeat(runs)
    step = torch.tensor(learning_rates, dtype=dtype, device=device).repeat_interleave(heads)  # (runs,)
    step_columns = step.repeat_interleave(n_classes)  # (runs * C,)
    generator = torch.Generator().manual_seed(seed)
    for epoch in range(epochs):
        order = torch.randperm(n, generator=generator).to(device)
        _sgd_epoch(Xt, labels, weight, bias, step_columns, l2, batch_size, order)
        if progress:
            log.info("random-label probes: epoch %d/%d", epoch + 1, epochs)
    W = weight.reshape(dim, runs, n_classes).permute(1, 0, 2).reshape(rates, heads, dim, n_classes)
    b = bias.reshape(rates, heads, n_classes)
    best = _best_learning_rates(Xt, Y, W, b)
    chosen = torch.arange(heads, device=device)
    weight_np = W[best, chosen].to(torch.float64).cpu().numpy()
    bias_np = b[best, chosen].to(torch.float64).cpu().numpy()
    chosen_rates = np.asarray(learning_rates, dtype=np.float64)[best.cpu().numpy()]
    log.info("%d random-label probes by SGD (%d epochs, batch %d, learning rates %s): chosen rates %s",
             heads, epochs, batch_size, list(learning_rates),
             {float(r): int((chosen_rates == r).sum()) for r in learning_rates})
    return ProbeSet(weight_np, bias_np, float(l2), epochs * math.ceil(n / batch_size), chosen_rates)


def _sgd_inputs(X: np.ndarray, Y: np.ndarray, n_classes: int, learning_rates: Sequence[float], epochs: int,
                batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """``X`` (N, D), writable, and the labels ``Y`` (N, H) as int64, or a ValueError naming what is wrong."""
    X = np.asarray(X)
    if not X.flags.writeable:  # e.g. memory-mapped embeddings: torch.as_tensor warns on read-only arrays
        X = np.array(X)
    Y = np.array(Y, dtype=np.int64)
    if Y.ndim != 2 or X.ndim != 2 or X.shape[0] != Y.shape[0]:
        raise DataError(f"X must be (N, D) and Y (N, H); got X {X.shape}, Y {Y.shape}", argument="X", value=X.shape)
    if Y.size and (Y.min() < 0 or Y.max() >= n_classes):
        raise DataError(f"labels must lie in 0..{n_classes - 1}, found {Y.min()}..{Y.max()}", argument="Y")
    if not learning_rates or min(learning_rates) <= 0 or epochs < 1 or batch_size < 1:
        raise ConfigError("learning rates must be positive, epochs and batch size at least 1",
                          argument="learning_rates", value=learning_rates)
    return X, Y


def _sgd_epoch(Xt: torch.Tensor, labels: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
               step_columns: torch.Tensor, l2: float, batch_size: int, order: torch.Tensor) -> None:
    """One epoch of plain SGD on every run at once, in the batches of ``order``, updating ``weight``
    (D, runs C) and ``bias`` (runs C,) in place; ``step_columns``: each column's learning rate."""
    n_classes = weight.shape[1] // labels.shape[1]
    runs = labels.shape[1]
    run_index = torch.arange(runs, device=Xt.device)[None, :]
    for start in range(0, Xt.shape[0], batch_size):
        index = order[start : start + batch_size]
        batch = Xt[index]
        probs = torch.softmax((batch @ weight + bias).reshape(-1, runs, n_classes), dim=2)
        rows = torch.arange(len(index), device=Xt.device)[:, None]
        probs[rows, run_index, labels[index]] -= 1.0  # d(cross entropy)/d(logits)
        grad = probs.reshape(len(index), -1) / len(index)
        grad_weight = batch.T @ grad
        if l2:
            grad_weight += l2 * weight
        weight -= step_columns * grad_weight
        bias -= step_columns * grad.sum(dim=0)


def _best_learning_rates(Xt: torch.Tensor, Y: np.ndarray, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(H,) per head, the index of the learning rate whose run has the best training accuracy (the first
    maximum: the smallest rate among ties); a run whose weights are not finite counts as accuracy -1."""
    rates, heads, dim, n_classes = W.shape
    finite = torch.isfinite(W).all(dim=(2, 3)) & torch.isfinite(b).all(dim=2)  # (rates, heads)
    predicted = (Xt @ torch.nan_to_num(W).permute(2, 0, 1, 3).reshape(dim, -1)).reshape(-1, rates, heads, n_classes)
    predicted = (predicted + torch.nan_to_num(b)).argmax(dim=3)  # (N, rates, heads)
    accuracy = (predicted == torch.as_tensor(Y).to(Xt.device)[:, None, :]).to(torch.float64).mean(dim=0)
    accuracy = torch.where(finite, accuracy, torch.full_like(accuracy, -1.0))
    return accuracy.argmax(dim=0)


def fit_random_probes(
    X: np.ndarray, Y: np.ndarray, n_classes: int, spec: Mapping[str, object], task_l2: float,
    lbfgs_max_iter: int = 100, device: torch.device | str = "cpu", rank_multiplier: float = 5.0,
) -> ProbeSet:
    """Random-label probes by ``spec["method"]``: ``sgd`` (the
    paper's protocol, :func:`fit_random_probes_sgd`, with the spec's epochs, batch size, learning
    rates, l2 and seed) or ``lbfgs`` (:func:`fit_softmax_probes` with the task probe's ``task_l2``
    and the rank rule's ``rank_multiplier``)."""
    method = spec.get("method", "sgd")
    if method == "sgd":
        return fit_random_probes_sgd(
            X, Y, n_classes, tuple(spec.get("learning_rates", PAPER_LEARNING_RATES)), int(spec.get("epochs", 20)),
            int(spec.get("batch_size", 64)), float(spec.get("l2", 0.0)), int(spec.get("seed", 42)), device=device)
    if method == "lbfgs":
        return fit_softmax_probes(X, Y, n_classes, task_l2, lbfgs_max_iter, device, rank_multiplier)
    raise ConfigError(f"random probe method must be 'sgd' or 'lbfgs', got {method!r}", argument="spec", value=method)


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


# ---------------------------------------------------------------------------------------------
# the probe file of one (task, encoder, layer): probes/<task>/weights/<encoder>/<layer>.npz
