"""Softmax probes: accuracy on separable data, determinism, the optimum, and the metrics."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from affine_homotopy.core.probes import (
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
    # no seeds (n_random_classifiers: 0, or d_worst not selected): no columns, not an error
    assert random_labels(7, 3, range(0)).shape == (7, 0)


def _reference_sgd(x: np.ndarray, y: np.ndarray, n_classes: int, lr: float, epochs: int, batch: int, seed: int):
    """Independent implementation of the paper's probe fit: nn.Linear, autograd, torch.optim.SGD."""
    import torch

    torch.manual_seed(seed)
    layer = torch.nn.Linear(x.shape[1], n_classes, dtype=torch.float64)
    optimizer = torch.optim.SGD(layer.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    X, Y = torch.as_tensor(x), torch.as_tensor(y)
    for _ in range(epochs):
        order = torch.randperm(len(X), generator=generator)
        for start in range(0, len(X), batch):
            index = order[start : start + batch]
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(layer(X[index]), Y[index]).backward()
            optimizer.step()
    return layer.weight.detach().numpy().T, layer.bias.detach().numpy()


def test_sgd_random_probes_follow_the_papers_protocol_head_by_head() -> None:
    """The multi-head SGD fit equals one nn.Linear + torch.optim.SGD run per head and learning rate,
    and every head keeps the learning rate with the best training accuracy (first among ties)."""
    import torch

    from affine_homotopy.core.probes import fit_random_probes_sgd

    x, _ = blobs(5, n=150, d=6, classes=3, spread=1.0)
    labels = random_labels(len(x), 3, range(3))
    rates = (0.01, 0.5)
    fitted = fit_random_probes_sgd(x, labels, 3, rates, epochs=3, batch_size=16, seed=7, dtype=torch.float64)
    assert fitted.weight.shape == (3, 6, 3) and fitted.l2 == 0.0
    for head in range(labels.shape[1]):
        runs = [_reference_sgd(x, labels[:, head], 3, lr, 3, 16, 7) for lr in rates]
        accuracies = [float(((x @ w + b).argmax(1) == labels[:, head]).mean()) for w, b in runs]
        chosen = int(np.argmax(accuracies))
        assert fitted.learning_rate[head] == rates[chosen]
        np.testing.assert_allclose(fitted.weight[head], runs[chosen][0], atol=1e-12)
        np.testing.assert_allclose(fitted.bias[head], runs[chosen][1], atol=1e-12)
    np.testing.assert_allclose(fitted.train_accuracy(x, labels), [
        float(((x @ fitted.weight[h] + fitted.bias[h]).argmax(1) == labels[:, h]).mean()) for h in range(3)])
    np.testing.assert_allclose(fitted.norms(), [np.linalg.svd(w, compute_uv=False)[0] for w in fitted.weight])


def test_sgd_weight_decay_shrinks_the_weights() -> None:
    from affine_homotopy.core.probes import fit_random_probes_sgd

    x, _ = blobs(6, n=200, d=8, classes=2, spread=1.0)
    labels = random_labels(len(x), 2, range(4))
    free = fit_random_probes_sgd(x, labels, 2, (0.1,), epochs=5, batch_size=32)
    decayed = fit_random_probes_sgd(x, labels, 2, (0.1,), epochs=5, batch_size=32, l2=1.0)
    assert np.all(decayed.norms() < free.norms())


def test_random_probe_method_dispatch() -> None:
    from affine_homotopy.core.probes import fit_random_probes, fit_random_probes_sgd

    x, _ = blobs(7, n=120, d=5, classes=2, spread=1.0)
    labels = random_labels(len(x), 2, range(2))
    lbfgs = fit_random_probes(x, labels, 2, {"method": "lbfgs"}, task_l2=0.1, lbfgs_max_iter=50)
    np.testing.assert_array_equal(lbfgs.weight, fit_softmax_probes(x, labels, 2, 0.1, 50).weight)
    spec = {"method": "sgd", "epochs": 2, "batch_size": 16, "learning_rates": [0.1], "l2": 0.0, "seed": 3}
    sgd = fit_random_probes(x, labels, 2, spec, task_l2=0.1)
    np.testing.assert_array_equal(sgd.weight, fit_random_probes_sgd(x, labels, 2, (0.1,), 2, 16, 0.0, 3).weight)
    with pytest.raises(ValueError, match="'sgd' or 'lbfgs'"):
        fit_random_probes(x, labels, 2, {"method": "adam"}, task_l2=0.1)


def encoder_with_rounding_columns(seed: int, n: int = 600, d: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """float32 representations whose first four columns are constant up to float32 rounding (as in
    the last layers of some sentence encoders), and labels that the other columns carry."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)) * 0.1
    x[:, 0], x[:, 1] = 0.5, -0.25
    x[:, 2] = 0.3 + 4e-8 * rng.standard_normal(n)
    x[:, 3] = 0.7 + 5e-7 * rng.standard_normal(n)
    x = x.astype(np.float32)
    y = (x[:, 4] + 0.5 * x[:, 5] + 0.05 * rng.standard_normal(n) > 0).astype(int)
    return x, y


def test_columns_at_the_rounding_level_get_no_weight_and_small_real_columns_keep_theirs() -> None:
    x, y = encoder_with_rounding_columns(6)
    x64 = x.astype(np.float64)
    assert np.all(x64[:, 2:4].std(0) > 0)  # rounding noise, not constants
    probe = fit_softmax_probe(x, y, 2)
    np.testing.assert_array_equal(probe.weight[:4], 0.0)
    heads = fit_softmax_probes(x, random_labels(len(y), 2, range(3)), 2, l2=0.01, max_iter=200)
    np.testing.assert_array_equal(heads.weight[:, :4], 0.0)
    # a column 1e-3 as wide as the others is signal, not rounding: standardised and used
    small = x64.copy()
    small[:, 4:6] *= 1e-3
    small_probe, probe64 = fit_softmax_probe(small, y, 2), fit_softmax_probe(x64, y, 2)
    assert accuracy(y, probe64.predict(x64)) > 0.8
    np.testing.assert_array_equal(small_probe.predict(small), probe64.predict(x64))
    scaled_back = small_probe.weight[4:6] * small[:, 4:6].std(0)[:, None]
    np.testing.assert_allclose(scaled_back, probe64.weight[4:6] * x64[:, 4:6].std(0)[:, None], rtol=1e-6, atol=1e-9)
    assert np.abs(scaled_back).min() > 0.1


def test_an_encoder_with_rounding_columns_is_at_d_psi_zero_from_its_affine_image() -> None:
    """d_psi is invariant under invertible affine maps of the source (Eq. 20): the image A x + b of an
    encoder reproduces the encoder's own task probe exactly, whatever x's near-constant columns hold."""
    from affine_homotopy import api

    x, y = encoder_with_rounding_columns(7)
    rng = np.random.default_rng(8)
    linear = rng.standard_normal((x.shape[1], x.shape[1])) / 4.0
    image = (x.astype(np.float64) @ linear + rng.standard_normal(x.shape[1])).astype(np.float32)
    probe = fit_softmax_probe(x, y, 2)
    assert np.linalg.norm(probe.weight, 2) < 100  # no weight on rounding noise
    result = api.d_psi(image, x, (probe.weight, probe.bias))
    assert result.certified
    assert result.value < 1e-3
