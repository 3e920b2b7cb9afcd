"""Statistics of Table 1: Mantel permutation test, encoder bootstrap, classical correlations."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from affine_homotopy.core import stats


def random_matrix(rng: np.random.Generator, k: int) -> np.ndarray:
    m = rng.random((k, k))
    np.fill_diagonal(m, 0.0)
    return m


def planted(rng: np.random.Generator, k: int, noise: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """y depends on x through encoder-level effects (columns easy to map to) plus small noise."""
    column, row = rng.random(k), rng.random(k)
    x = column[None, :] + 0.3 * row[:, None] + noise * rng.random((k, k))
    y = 2.0 * x + noise * rng.random((k, k))
    np.fill_diagonal(x, 0.0)
    np.fill_diagonal(y, 0.0)
    return x, y


@pytest.mark.parametrize("method", ["spearman", "pearson"])
def test_correlation_matches_scipy_over_ordered_pairs(method: str) -> None:
    rng = np.random.default_rng(0)
    x, y = random_matrix(rng, 9), random_matrix(rng, 9)
    a, b = stats.off_diagonal(x), stats.off_diagonal(y)
    expected = (sps.spearmanr if method == "spearman" else sps.pearsonr)(a, b)
    assert stats.correlation(x, y, method) == pytest.approx(expected[0], abs=1e-12)
    assert stats.classical_p(x, y, method) == pytest.approx(expected[1], rel=1e-9)


@pytest.mark.parametrize("method", ["spearman", "pearson"])
def test_planted_relation_gives_a_small_permutation_p(method: str) -> None:
    x, y = planted(np.random.default_rng(1), 12)
    result = stats.mantel(x, y, method, n_permutations=10_000, seed=0)
    assert result.statistic > 0.8 and not result.exact and result.n_permutations == 10_000
    assert result.p_value == pytest.approx(1 / 10_001)  # nothing beats the true labelling


@pytest.mark.slow  # 80 Mantel tests of 2,000 permutations each
def test_independent_matrices_give_roughly_uniform_p() -> None:
    rng = np.random.default_rng(2)
    p = np.array([stats.mantel(random_matrix(rng, 10), random_matrix(rng, 10), "spearman", 2_000, seed=s).p_value
                  for s in range(80)])
    assert 0.3 < p.mean() < 0.7
    assert sps.kstest(p, "uniform").pvalue > 0.01
    assert (p < 0.05).mean() < 0.15


@pytest.mark.parametrize("method", ["spearman", "pearson"])
def test_mantel_matches_direct_enumeration_for_five_encoders(method: str) -> None:
    rng = np.random.default_rng(3)
    x, y = planted(rng, 5, noise=1.0)
    test = sps.spearmanr if method == "spearman" else sps.pearsonr
    observed = test(stats.off_diagonal(x), stats.off_diagonal(y))[0]
    extreme = 0
    for perm in itertools.permutations(range(5)):
        p = list(perm)
        relabelled = y[np.ix_(p, p)]  # rows and columns together
        value = test(stats.off_diagonal(x), stats.off_diagonal(relabelled))[0]
        extreme += abs(value) >= abs(observed) - 1e-12
    result = stats.mantel(x, y, method, n_permutations=10_000)
    assert result.exact and result.n_permutations == 120
    assert result.statistic == pytest.approx(observed, abs=1e-12)
    assert result.p_value == pytest.approx(extreme / 120)


def test_mantel_is_seeded_and_ties_do_not_break_it() -> None:
    rng = np.random.default_rng(4)
    x, y = random_matrix(rng, 9), np.round(random_matrix(rng, 9), 1)  # many ties
    first = stats.mantel(x, y, "spearman", 10_000, seed=7)
    assert first == stats.mantel(x, y, "spearman", 10_000, seed=7)
    assert 0 < first.p_value <= 1


@pytest.mark.parametrize("method", ["spearman", "pearson"])
def test_bootstrap_ci_contains_the_estimate(method: str) -> None:
    for seed in range(3):
        x, y = planted(np.random.default_rng(10 + seed), 10, noise=0.5)
        low, high = stats.bootstrap_ci(x, y, method, n_bootstrap=1_000, seed=seed)
        assert low <= stats.correlation(x, y, method) <= high
        assert -1 <= low < high <= 1


def test_bootstrap_never_pairs_an_encoder_with_itself() -> None:
    # x, y are zero on the diagonal and 1 + tiny elsewhere: a self pair would add (0, 0) points and a
    # spurious correlation of one.
    rng = np.random.default_rng(5)
    x, y = 1 + 1e-3 * random_matrix(rng, 6), 1 + 1e-3 * random_matrix(rng, 6)
    np.fill_diagonal(x, 0.0)
    np.fill_diagonal(y, 0.0)
    values = stats.bootstrap_distribution(x, y, "pearson", n_bootstrap=500, seed=0)
    assert np.nanmax(np.abs(values)) < 0.999


def test_full_correlation_record_and_group() -> None:
    rng = np.random.default_rng(6)
    names = [f"e{k}" for k in range(7)]
    x, y = planted(rng, 7)
    fx, fy = pd.DataFrame(x, names, names), pd.DataFrame(y, names, names)
    records = stats.full_correlation(fx, fy, group=names[:5], n_permutations=10_000, n_bootstrap=200)
    assert [r["statistic"] for r in records] == ["spearman", "pearson"]
    assert all(r["n_pairs"] == 20 and r["n_encoders"] == 5 and r["exact"] for r in records)
    with pytest.raises(ValueError, match="same encoders"):
        stats.full_correlation(fx, fy.iloc[::-1, ::-1])


def test_vector_permutation_test() -> None:
    a = np.arange(8.0)
    rho, p = stats.permutation_test_vectors(a, a**2, n_permutations=100_000)
    assert rho == pytest.approx(1.0) and p == pytest.approx(2 / 40320)  # exact, two-sided: identity and reversal


@pytest.mark.parametrize("method", ["spearman", "pearson"])
def test_bootstrap_weights_equal_materialised_resamples(method: str) -> None:
    """The weighted form equals resampling encoders and recomputing on the resampled matrix."""
    rng = np.random.default_rng(8)
    x, y = random_matrix(rng, 7), np.round(random_matrix(rng, 7), 1)  # ties in y
    fast = stats.bootstrap_distribution(x, y, method, n_bootstrap=50, seed=3)
    draws = np.random.default_rng(3).integers(0, 7, size=(50, 7))
    test = sps.spearmanr if method == "spearman" else sps.pearsonr
    for value, d in zip(fast, draws):
        keep = d[:, None] != d[None, :]
        a, b = x[np.ix_(d, d)][keep], y[np.ix_(d, d)][keep]
        expected = test(a, b)[0] if len(set(d)) >= 3 else np.nan
        assert value == pytest.approx(expected, abs=1e-10, nan_ok=True)


def test_exact_pairs_tie_whatever_their_rounding_noise() -> None:
    """Pairs at rounding level (1e-16 to 1e-7 of the largest value) are exact: two draws of that
    noise, and the same pairs at exactly 0, give the same Table 1 record (scipy's Spearman on the
    zeroed values is the independent reference); values above the floor are left as they are."""
    rng = np.random.default_rng(11)
    names = [f"e{k}" for k in range(6)]
    x, y = planted(rng, 6)
    exact = np.zeros((6, 6), dtype=bool)
    exact[[0, 1, 2, 3], [1, 0, 3, 2]] = True  # two pairs of copies, both directions
    zeroed_x, zeroed_y = np.where(exact, 0.0, x), np.where(exact, 0.0, y)
    records = []
    for draw in range(2):
        noise = np.random.default_rng(draw).uniform(1e-16, 1e-7, (2, 6, 6))
        noisy_x, noisy_y = np.where(exact, noise[0] * x.max(), x), np.where(exact, noise[1] * y.max(), y)
        records.append(stats.full_correlation(pd.DataFrame(noisy_x, names, names), pd.DataFrame(noisy_y, names, names),
                                              n_permutations=2_000, n_bootstrap=100))
    assert records[0] == records[1]
    off = ~np.eye(6, dtype=bool)
    rho = sps.spearmanr(zeroed_x[off], zeroed_y[off])[0]
    assert records[0][0]["estimate"] == pytest.approx(rho, abs=1e-12)
    # the floor is relative to the largest value: a small real value (2e-6 of it) is not an exact pair
    small = x.copy()
    small[4, 5] = 2e-6 * x.max()
    np.testing.assert_array_equal(stats.tie_exact_pairs(small), small)
    tied = stats.tie_exact_pairs(np.where(exact, 5e-7 * x.max(), x))
    np.testing.assert_array_equal(tied, zeroed_x)
