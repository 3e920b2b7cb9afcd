"""Derived encoders: ranks, invertibility, noise level, split consistency, seeds."""

from __future__ import annotations

import numpy as np
import pytest

from affine_homotopy.models.derived import derive, gaussian_noise, random_affine, svd_truncate
from affine_homotopy.core.linalg import rms


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((300, 20)), rng.standard_normal((50, 20))


@pytest.mark.parametrize("fraction,kept", [(0.2, 4), (0.5, 10), (1.0, 20)])
def test_svd_truncate_keeps_the_stated_share_of_rank(data, fraction, kept) -> None:
    train, dev = data
    new_train, new_dev, k = svd_truncate(train, dev, fraction)
    assert k == kept
    assert np.linalg.matrix_rank(new_train - new_train.mean(0), tol=1e-8) == kept
    assert new_dev.shape == dev.shape


def test_random_affine_is_invertible_with_stated_condition_number(data) -> None:
    train, dev = data
    new_train, new_dev = random_affine(train, dev, seed=0, layer=0, condition_number=4.0)
    design = np.hstack([new_train, np.ones((len(new_train), 1))])
    coef, *_ = np.linalg.lstsq(design, train, rcond=None)
    np.testing.assert_allclose(design @ coef, train, atol=1e-9)
    matrix, *_ = np.linalg.lstsq(np.hstack([train, np.ones((300, 1))]), new_train, rcond=None)
    s = np.linalg.svd(matrix[:-1], compute_uv=False)
    assert s[0] / s[-1] == pytest.approx(4.0, rel=1e-6)
    # the same map on both splits
    np.testing.assert_allclose(np.hstack([dev, np.ones((50, 1))]) @ matrix, new_dev, atol=1e-9)


def test_gaussian_noise_has_the_relative_size_asked_for(data) -> None:
    train, dev = data
    noisy, noisy_dev = gaussian_noise(train, dev, sigma=0.5, seed=0, layer=0)
    assert np.std(noisy - train) == pytest.approx(0.5 * rms(train), rel=0.02)
    assert not np.allclose(noisy_dev - dev, (noisy - train)[:50])  # independent noise per split


def test_derive_is_seeded_per_layer_and_reproducible(data) -> None:
    train, dev = data
    stack_train, stack_dev = np.stack([train, 2 * train]), np.stack([dev, 2 * dev])
    spec = {"transform": "random_affine", "seed": 3}
    a = derive(spec, stack_train, stack_dev, [1, 4])
    b = derive(spec, stack_train, stack_dev, [1, 4])
    np.testing.assert_array_equal(a[0], b[0])
    only_layer_4 = derive(spec, stack_train[1:], stack_dev[1:], [4])
    np.testing.assert_array_equal(a[0][1], only_layer_4[0][0])  # independent of the other layers
    assert a[0].dtype == np.float32
