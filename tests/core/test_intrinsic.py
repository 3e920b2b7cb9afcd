"""d_aff (least-squares estimator): exact properties and an independent computation."""

from __future__ import annotations

import numpy as np
import torch
import pytest

from affine_homotopy.models.derived import random_affine, svd_truncate
from affine_homotopy.core.intrinsic import IntrinsicSettings, factorise, pairwise_intrinsic
from affine_homotopy.core.linalg import numerical_rank, rank_threshold


def pairwise_affine_ls(reps: list[np.ndarray], block_mb: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """The engine's least-squares ``d_aff_ls`` for all ordered pairs (its first, uniform-weight fit) and the ranks."""
    settings = IntrinsicSettings(max_iter=1, measures=("d_aff_ls",), block_mb=block_mb)
    result = pairwise_intrinsic(reps, settings=settings)
    return result.matrices["d_aff_ls"], result.ranks


def low_rank_data(rng: np.random.Generator, n: int, d: int, rank: int) -> np.ndarray:
    return rng.standard_normal((n, rank)) @ rng.standard_normal((rank, d)) + rng.standard_normal(d)


def lstsq_max_residual(source: np.ndarray, target: np.ndarray) -> float:
    """Textbook: least squares with an intercept column, then the largest row L2 residual."""
    design = np.hstack([source, np.ones((len(source), 1))])
    coefficients, *_ = np.linalg.lstsq(design, target, rcond=None)
    return float(np.linalg.norm(target - design @ coefficients, axis=1).max())


def test_matches_independent_lstsq_with_different_dims() -> None:
    rng = np.random.default_rng(0)
    reps = [rng.standard_normal((300, d)) for d in (20, 35, 12)]
    distances, ranks = pairwise_affine_ls(reps)
    assert list(ranks) == [20, 35, 12]
    for i in range(3):
        for j in range(3):
            expected = 0.0 if i == j else lstsq_max_residual(reps[i], reps[j])
            assert distances[i, j] == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_exact_affine_image_is_zero_both_ways() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((400, 30))
    image, _ = random_affine(x, x[:5], seed=3, layer=0, condition_number=4.0)
    distances, _ = pairwise_affine_ls([x, image])
    scale = np.linalg.norm(x - x.mean(0), axis=1).max()
    assert distances[0, 1] < 1e-9 * scale and distances[1, 0] < 1e-9 * scale


def test_invariant_to_affine_image_of_the_source() -> None:
    rng = np.random.default_rng(2)
    source, target = rng.standard_normal((250, 16)), rng.standard_normal((250, 10))
    moved, _ = random_affine(source, source[:3], seed=7, layer=1)
    before, _ = pairwise_affine_ls([source, target])
    after, _ = pairwise_affine_ls([moved, target])
    assert after[0, 1] == pytest.approx(before[0, 1], rel=1e-8)


def test_svd_truncation_is_asymmetric_as_theory_says() -> None:
    rng = np.random.default_rng(3)
    full = rng.standard_normal((500, 24))
    truncated, _, kept = svd_truncate(full, full[:2], fraction=0.5)
    assert kept == 12
    distances, ranks = pairwise_affine_ls([full, truncated])
    assert list(ranks) == [24, 12]
    assert distances[0, 1] < 1e-9  # full -> truncated: a projection, exact
    assert distances[1, 0] > 1.0  # truncated -> full: half the directions are lost


def test_rank_rule_drops_numerical_noise_and_matches_formula() -> None:
    rng = np.random.default_rng(4)
    x = low_rank_data(rng, 200, 40, 7).astype(np.float32)
    basis = factorise(x, 5.0, torch.float64, "cpu", uncentred=False)
    assert basis.rank == 7
    s = np.linalg.svd(x - x.mean(0), compute_uv=False)
    threshold = rank_threshold(s[0], 200, 40, 5.0)
    assert threshold == pytest.approx(5 * s[0] * np.finfo(np.float32).eps * 200)
    assert numerical_rank(s, 200, 40) == int((s > threshold).sum())


@pytest.mark.parametrize("n,d", [(20, 50), (60, 8)])
def test_fewer_rows_than_dims_and_constant_and_duplicated(n: int, d: int) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((n, d))
    x[:, 0] = 3.0  # constant column
    x[-1] = x[0]  # duplicated row
    y = rng.standard_normal((n, 6))
    distances, ranks = pairwise_affine_ls([x, y])
    assert ranks[0] <= min(n - 1, d - 1)
    assert np.isfinite(distances).all()
    assert distances[0, 1] == pytest.approx(lstsq_max_residual(x, y), rel=1e-7, abs=1e-10)


def test_blocking_does_not_change_results() -> None:
    rng = np.random.default_rng(6)
    reps = [rng.standard_normal((500, d)) for d in (30, 20, 40, 10)]
    whole, _ = pairwise_affine_ls(reps, block_mb=1024)
    blocked, _ = pairwise_affine_ls(reps, block_mb=1)  # forces one target per block
    np.testing.assert_allclose(blocked, whole, rtol=1e-12)


def test_float32_iterations_still_certify_the_float64_interval() -> None:
    """Iterating in float32 and certifying in float64 brackets the same optimum as float64 throughout."""
    import torch

    from affine_homotopy.core.intrinsic import IntrinsicSettings, pairwise_intrinsic

    rng = np.random.default_rng(7)
    reps = [rng.standard_normal((300, 12)), np.tanh(rng.standard_normal((300, 12)) @ rng.standard_normal((12, 9)))]
    exact = pairwise_intrinsic(reps, settings=IntrinsicSettings(tol=1e-6, max_iter=3000)).matrices
    mixed = pairwise_intrinsic(reps, settings=IntrinsicSettings(tol=1e-3, iterate_dtype=torch.float32)).matrices
    for i, j in ((0, 1), (1, 0)):
        assert mixed["d_aff_lower"][i, j] <= exact["d_aff"][i, j] * (1 + 1e-9)
        assert mixed["d_aff"][i, j] >= exact["d_aff_lower"][i, j] * (1 - 1e-9)
        assert mixed["d_aff"][i, j] - mixed["d_aff_lower"][i, j] <= 2e-3 * mixed["d_aff"][i, j]
        assert mixed["d_aff_ls"][i, j] == pytest.approx(exact["d_aff_ls"][i, j], rel=1e-10)
