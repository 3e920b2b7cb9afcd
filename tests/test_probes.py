"""Softmax probes: accuracy on separable data, determinism, the optimum, and the metrics."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from affine_homotopy.probes import (
    accuracy,
    f1_binary,
    fit_softmax_probe,
    fit_softmax_probes,
    matthews_corrcoef,
    random_labels,
    softmax,
)


def blobs(seed: int, n: int = 600, d: int = 10, classes: int = 3, spread: float = 4.0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((classes, d)) * spread
    y = rng.integers(0, classes, n)
    return centres[y] + rng.standard_normal((n, d)), y


def test_beats_chance_on_separable_data() -> None:
    x, y = blobs(0)
    x_dev, y_dev = blobs(0, n=300)  # same centres (same seed), fresh noise is not needed for this check
    probe = fit_softmax_probe(x, y, 3)
    assert accuracy(y_dev, probe.predict(x_dev)) > 0.9
    assert probe.predict_proba(x).sum(axis=1) == pytest.approx(np.ones(len(x)))


def test_deterministic() -> None:
    x, y = blobs(1)
    a, b = fit_softmax_probe(x, y, 3), fit_softmax_probe(x, y, 3)
    np.testing.assert_array_equal(a.weight, b.weight)
    np.testing.assert_array_equal(a.bias, b.bias)
    assert a.l2 == b.l2


def test_reaches_the_optimum_of_the_documented_objective() -> None:
    """Independent check: scipy's L-BFGS-B on the same standardised, penalised objective."""
    x, y = blobs(2, n=300, d=5, classes=2, spread=1.0)
    l2 = 0.01
    probe = fit_softmax_probe(x, y, 2, l2_grid=[l2], max_iter=1000)
    mean, std = x.mean(0), x.std(0)
    z = (x - mean) / std

    def objective(theta: np.ndarray) -> float:
        w, b = theta[:10].reshape(5, 2), theta[10:]
        logp = np.log(softmax(z @ w + b))
        return float(-logp[np.arange(len(y)), y].mean() + 0.5 * l2 * (w**2).sum())

    reference = minimize(objective, np.zeros(12), method="L-BFGS-B", options={"gtol": 1e-10, "maxiter": 5000})
    # probe in standardised coordinates: W_std = W_raw * std
    ours = np.concatenate([(probe.weight * std[:, None]).ravel(), probe.bias + mean @ probe.weight])
    assert objective(ours) == pytest.approx(reference.fun, abs=1e-8)
    np.testing.assert_allclose(probe.predict_proba(x), softmax(z @ reference.x[:10].reshape(5, 2) + reference.x[10:]), atol=1e-4)


def test_metrics_against_hand_computed_values() -> None:
    y_true = np.array([1, 1, 1, 0, 0, 0, 1, 0])
    y_pred = np.array([1, 0, 1, 0, 1, 0, 1, 0])
    tp, fp, fn, tn = 3, 1, 1, 3
    assert accuracy(y_true, y_pred) == pytest.approx(6 / 8)
    assert f1_binary(y_true, y_pred) == pytest.approx(2 * tp / (2 * tp + fp + fn))
    expected = (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    assert matthews_corrcoef(y_true, y_pred) == pytest.approx(expected)
    assert matthews_corrcoef(y_true, np.ones_like(y_true)) == 0.0  # undefined -> 0, as GLUE does


def test_rejects_bad_labels() -> None:
    x, y = blobs(3)
    with pytest.raises(ValueError, match="labels must lie"):
        fit_softmax_probe(x, y + 5, 3)


def test_multi_head_fit_equals_separate_fits() -> None:
    x, _ = blobs(4, n=300, d=6, classes=3)
    labels = random_labels(len(x), 3, range(4))
    joint = fit_softmax_probes(x, labels, 3, l2=0.05, max_iter=1000)
    for head in range(labels.shape[1]):
        alone = fit_softmax_probe(x, labels[:, head], 3, l2_grid=[0.05], max_iter=1000)
        probs = softmax(x @ joint.weight[head] + joint.bias[head])
        np.testing.assert_allclose(probs, alone.predict_proba(x), atol=1e-5)
    np.testing.assert_array_equal(joint.predict(x)[:, 0], (x @ joint.weight[0] + joint.bias[0]).argmax(1))


def test_random_labels_are_seeded_and_uniform() -> None:
    a, b = random_labels(5000, 3, [0, 1]), random_labels(5000, 3, [0, 1])
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a[:, 0], a[:, 1])
    assert set(np.unique(a)) == {0, 1, 2} and np.bincount(a[:, 0]).min() > 1500
    np.testing.assert_array_equal(a[:, 1], np.random.default_rng(1).integers(0, 3, 5000))
