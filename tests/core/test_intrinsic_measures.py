"""All-pairs intrinsic measures: certified d_aff interval vs an independent SOCP solver, baselines vs
textbook formulas, invariances and edge cases.

Every expected value is computed here, independently of :mod:`affine_homotopy.core.intrinsic`, with
numpy / scipy / cvxpy only. Conventions follow the module docstring of ``intrinsic.py``: entry
``(i, j)`` maps encoder ``i`` (row, mapped from) onto encoder ``j`` (column, mapped to).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from affine_homotopy.core.intrinsic import (MEASURES, IntrinsicSettings, pairwise_intrinsic, solver_table,
                                            undefined_relative_note)


def cvxpy():
    """cvxpy (the test extra), imported by the tests that use the independent SOCP solver and only by them.

    Without it those tests skip with this reason, which fails the run (tests/conftest.py: no silent skips).
    """
    return pytest.importorskip("cvxpy", reason="cvxpy (pip install -e '.[test]') is the independent SOCP solver")


F32_EPS = float(np.finfo(np.float32).eps)
BASELINES = ("procrustes", "cca_r2", "cca_rho", "pwcca", "svcca", "cka")
D_AFF_FAMILY = ("d_aff", "d_aff_lower", "d_aff_ls", "d_aff_msd", "psi_norm")


def run(reps: list[np.ndarray], tol: float = 1e-6, max_iter: int = 20000, **kwargs):
    return pairwise_intrinsic(reps, settings=IntrinsicSettings(tol=tol, max_iter=max_iter, **kwargs))


# ---------------------------------------------------------------------------------------------
# independent references


def socp_minimax(source: np.ndarray, target: np.ndarray, bias: bool = True) -> float:
    """Eq. 19 by a generic conic solver: min t s.t. ||y_n - x_n A - b||_2 <= t (SOC constraints)."""
    cp = cvxpy()
    n, q = target.shape
    A = cp.Variable((source.shape[1], q))
    t = cp.Variable()
    fitted = source @ A
    if bias:
        b = cp.Variable((1, q))
        fitted = fitted + np.ones((n, 1)) @ b
    constraints = [cp.SOC(t * np.ones(n), target - fitted, axis=1)]
    problem = cp.Problem(cp.Minimize(t), constraints)
    problem.solve(solver="CLARABEL")
    assert problem.status == cp.OPTIMAL, problem.status
    return float(problem.value)


def enclosing_ball_radius(points: np.ndarray) -> float:
    cp = cvxpy()
    centre = cp.Variable(points.shape[1])
    t = cp.Variable()
    problem = cp.Problem(cp.Minimize(t), [cp.norm(points[n] - centre, 2) <= t for n in range(len(points))])
    problem.solve(solver="CLARABEL")
    assert problem.status == cp.OPTIMAL, problem.status
    return float(problem.value)


def centre(x: np.ndarray) -> np.ndarray:
    return x - x.mean(axis=0)


def ding(x: np.ndarray) -> np.ndarray:
    c = centre(x)
    return c / np.linalg.norm(c)


def lstsq_max_residual(source: np.ndarray, target: np.ndarray) -> float:
    design = np.hstack([source, np.ones((len(source), 1))])
    coefficients, *_ = np.linalg.lstsq(design, target, rcond=None)
    return float(np.linalg.norm(target - design @ coefficients, axis=1).max())


def procrustes_ref(x: np.ndarray, y: np.ndarray) -> float:
    return 2 - 2 * np.linalg.norm(ding(x).T @ ding(y), ord="nuc")


def cka_ref(x: np.ndarray, y: np.ndarray) -> float:
    X, Y = centre(x), centre(y)
    return 1 - np.linalg.norm(Y.T @ X) ** 2 / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y))


def inverse_sqrt(S: np.ndarray) -> np.ndarray:
    values, vectors = np.linalg.eigh(S)
    return (vectors / np.sqrt(values)) @ vectors.T


def cca_whitened(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Textbook CCA by covariance whitening: rho and the unit-norm canonical variates of ``x``."""
    X, Y = centre(x), centre(y)
    Wx, Wy = inverse_sqrt(X.T @ X), inverse_sqrt(Y.T @ Y)
    U, rho, _ = np.linalg.svd(Wx @ (X.T @ Y) @ Wy)
    m = min(x.shape[1], y.shape[1])
    variates = X @ (Wx @ U[:, :m])  # (N, m), orthonormal columns
    return rho[:m], variates


def canonical_correlations(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Singular values of Qx^T Qy with orthonormal bases of the centred column spaces."""
    Qx, Qy = scipy.linalg.orth(centre(x)), scipy.linalg.orth(centre(y))
    rho = np.linalg.svd(Qx.T @ Qy, compute_uv=False)
    return np.minimum(rho[: min(Qx.shape[1], Qy.shape[1])], 1.0)


def pwcca_ref(x: np.ndarray, y: np.ndarray) -> float:
    """Morcos et al. (2018) compute_pwcca with the canonical directions of ``x`` (mapped from)."""
    rho, variates = cca_whitened(x, y)
    P, _ = np.linalg.qr(variates)  # orthonormalised directions, as in compute_pwcca
    weights = np.abs(P.T @ centre(x)).sum(axis=1)
    weights = weights / weights.sum()
    return 1 - float((weights * rho).sum())


def svcca_keep(x: np.ndarray) -> int:
    s = np.linalg.svd(centre(x), compute_uv=False)
    share = np.cumsum(s**2) / (s**2).sum()
    assert np.abs(share - 0.99).min() > 1e-6  # no tie with the threshold in the test data
    return int(np.argmax(share >= 0.99)) + 1


def svcca_ref(x: np.ndarray, y: np.ndarray) -> float:
    reduced = []
    for z in (x, y):
        U, s, _ = np.linalg.svd(centre(z), full_matrices=False)
        keep = svcca_keep(z)
        reduced.append(U[:, :keep] * s[:keep])  # the projections onto the leading directions
    rho = canonical_correlations(*reduced)
    return 1 - float(rho.mean())


def d_iso_ref(x: np.ndarray, y: np.ndarray) -> float:
    X, Y = centre(x), centre(y)
    if x.shape[1] == y.shape[1]:
        R, _ = scipy.linalg.orthogonal_procrustes(X, Y)
    else:
        U, _, Vt = np.linalg.svd(X.T @ Y, full_matrices=False)
        R = U @ Vt
    return float(np.linalg.norm(Y - X @ R, axis=1).max())


def random_orthogonal(rng: np.random.Generator, d: int) -> np.ndarray:
    Q, R = np.linalg.qr(rng.standard_normal((d, d)))
    return Q * np.sign(np.diag(R))


def well_conditioned(rng: np.random.Generator, d: int, condition: float = 4.0) -> np.ndarray:
    return random_orthogonal(rng, d) @ np.diag(np.linspace(1.0, condition, d)) @ random_orthogonal(rng, d)


def intervals_agree(res_a, res_b, a: tuple[int, int], b: tuple[int, int]) -> None:
    """Two certified intervals for the same optimum must overlap (and be close)."""
    lo_a, up_a = res_a.matrices["d_aff_lower"][a], res_a.matrices["d_aff"][a]
    lo_b, up_b = res_b.matrices["d_aff_lower"][b], res_b.matrices["d_aff"][b]
    assert lo_a <= up_b * (1 + 1e-9) and lo_b <= up_a * (1 + 1e-9)
    assert up_a == pytest.approx(up_b, rel=1e-4)


# ---------------------------------------------------------------------------------------------
# 1. the certified interval against an independent conic solver

SOCP_CASES = [  # (seed, N, D_i, D_j, heavy-tailed rows)
    (0, 40, 3, 2, False),
    (1, 60, 5, 4, False),
    (2, 80, 6, 5, True),
    (3, 50, 4, 3, True),
]


def socp_case(seed: int, n: int, di: int, dj: int, heavy: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if heavy:  # Student t with 2 degrees of freedom: a few rows far out dominate the maximum
        return rng.standard_t(2, (n, di)) + 2.0, rng.standard_t(2, (n, dj)) - 1.0
    return rng.standard_normal((n, di)) + 1.0, rng.standard_normal((n, dj)) + 1.5


@pytest.mark.parametrize("case", SOCP_CASES, ids=lambda c: f"seed{c[0]}-N{c[1]}-{c[2]}x{c[3]}{'-heavy' if c[4] else ''}")
def test_certified_interval_contains_socp_optimum(case) -> None:
    seed, n, di, dj, heavy = case
    x, y = socp_case(seed, n, di, dj, heavy)
    tol = 1e-5
    result = run([x, y], tol=tol, max_iter=20000)
    assert list(result.ranks) == [di, dj]
    assert (result.iterations[~np.eye(2, dtype=bool)] < 20000).all()  # converged, not capped
    for (i, j), (source, target) in {(0, 1): (x, y), (1, 0): (y, x)}.items():
        optimum = socp_minimax(source, target)
        lower, upper = result.matrices["d_aff_lower"][i, j], result.matrices["d_aff"][i, j]
        assert lower <= optimum * (1 + 1e-6), f"lower bound {lower} above the optimum {optimum}"
        assert upper >= optimum * (1 - 1e-6), f"upper bound {upper} below the optimum {optimum}"
        atol = 10 * F32_EPS * np.linalg.norm(centre(target), axis=1).max()
        assert upper - lower <= (tol * upper + atol) * (1 + 1e-9)
        assert lower == pytest.approx(optimum, rel=1e-4)
        assert upper == pytest.approx(optimum, rel=1e-4)

        linear_optimum = socp_minimax(source, target, bias=False)  # uncentred data, no bias
        d_lin = result.matrices["d_lin"][i, j]
        assert linear_optimum * (1 - 1e-6) <= d_lin <= linear_optimum * (1 + 1e-3)
        assert d_lin >= upper * (1 - 1e-3)  # fewer maps than the affine class


# ---------------------------------------------------------------------------------------------
# 2. least squares, msd, psi_norm


def test_least_squares_msd_and_diagonal() -> None:
    rng = np.random.default_rng(10)
    reps = [rng.standard_normal((60, d)) + rng.standard_normal(d) for d in (5, 3, 4)]
    result = run(reps, tol=1e-4)
    m = result.matrices
    assert set(MEASURES) <= set(m)
    assert list(result.dims) == [5, 3, 4]
    for i in range(3):
        for j in range(3):
            if i == j:
                continue
            assert m["d_aff_ls"][i, j] == pytest.approx(lstsq_max_residual(reps[i], reps[j]), rel=1e-9)
            assert m["d_aff_lower"][i, j] <= m["d_aff"][i, j] <= m["d_aff_ls"][i, j] * (1 + 1e-12)
            assert m["d_aff_msd"][i, j] == pytest.approx(m["d_aff"][i, j] ** 2 / reps[j].shape[1], rel=1e-12)
            assert np.isfinite(m["psi_norm"][i, j]) and m["psi_norm"][i, j] > 0
    assert np.all(np.diag(m["psi_norm"]) == 1.0)
    for key in MEASURES:
        if key != "psi_norm":
            assert np.all(np.diag(m[key]) == 0.0), key


@pytest.mark.parametrize("dj", [4, 6])
def test_exact_linear_image_has_zero_distance_and_map_norm(dj: int) -> None:
    rng = np.random.default_rng(11 + dj)
    x = rng.standard_normal((50, 4))
    A = rng.standard_normal((4, dj))  # full row rank: the exact map is unique
    y = x @ A + rng.standard_normal(dj)
    result = run([x, y], tol=1e-6)
    scale = np.linalg.norm(centre(y), axis=1).max()
    assert result.matrices["d_aff"][0, 1] < 1e-9 * scale
    assert result.matrices["psi_norm"][0, 1] == pytest.approx(np.linalg.norm(A, 2), rel=1e-8)
    if dj == 4:  # invertible: exact both ways, inverse map
        assert result.matrices["d_aff"][1, 0] < 1e-9 * np.linalg.norm(centre(x), axis=1).max()
        assert result.matrices["psi_norm"][1, 0] == pytest.approx(np.linalg.norm(np.linalg.inv(A), 2), rel=1e-8)


# ---------------------------------------------------------------------------------------------
# 3. baselines against textbook computations


def spectrum_data(rng: np.random.Generator, n: int, scales: list[float]) -> np.ndarray:
    """Gaussian data with a decaying spectrum (so the 99 % SVCCA rule drops directions)."""
    d = len(scales)
    return rng.standard_normal((n, d)) @ np.diag(scales) @ random_orthogonal(rng, d) + rng.standard_normal(d)


@pytest.fixture(scope="module")
def baseline_case():
    rng = np.random.default_rng(20)
    shared = rng.standard_normal((50, 3))
    reps = [
        spectrum_data(rng, 50, [3.0, 2.0, 1.0, 0.05]),  # D = 4
        np.hstack([shared, rng.standard_normal((50, 3))]) @ well_conditioned(rng, 6) + 0.3 * spectrum_data(rng, 50, [1] * 6),
        spectrum_data(rng, 50, [4.0, 2.5, 1.5, 1.0, 0.5, 0.04, 0.02]),  # D = 7
        np.hstack([shared, 0.2 * rng.standard_normal((50, 2))]),  # D = 5, shares 3 directions with rep 1
    ]
    return reps, run(reps, tol=1e-3)


def test_baselines_match_textbook_formulas(baseline_case) -> None:
    reps, result = baseline_case
    keeps = [svcca_keep(r) for r in reps]
    assert any(k < r.shape[1] for k, r in zip(keeps, reps))  # the SVCCA rule really truncates
    m = result.matrices
    for i in range(len(reps)):
        for j in range(len(reps)):
            if i == j:
                continue
            x, y = reps[i], reps[j]
            rho = canonical_correlations(x, y)
            rho_whitened, _ = cca_whitened(x, y)
            np.testing.assert_allclose(rho, rho_whitened, rtol=1e-8)  # the two references agree
            expected = {
                "procrustes": procrustes_ref(x, y),
                "cka": cka_ref(x, y),
                "cca_r2": 1 - float((rho**2).mean()),
                "cca_rho": 1 - float(rho.mean()),
                "pwcca": pwcca_ref(x, y),
                "svcca": svcca_ref(x, y),
                "d_iso": d_iso_ref(x, y),
            }
            for key, value in expected.items():
                assert m[key][i, j] == pytest.approx(value, rel=1e-8, abs=1e-12), (key, i, j)


def test_symmetric_baselines_and_pwcca_asymmetry(baseline_case) -> None:
    reps, result = baseline_case
    m = result.matrices
    for key in ("procrustes", "cca_r2", "cca_rho", "svcca", "cka"):
        np.testing.assert_allclose(m[key], m[key].T, rtol=1e-9, atol=1e-12, err_msg=key)
    # PWCCA weights come from the mapped-from side: (i, j) and (j, i) genuinely differ
    for i, j in [(0, 1), (1, 3), (2, 3)]:
        forward, backward = pwcca_ref(reps[i], reps[j]), pwcca_ref(reps[j], reps[i])
        assert abs(forward - backward) > 1e-4  # the test data tells the two sides apart
        assert m["pwcca"][i, j] == pytest.approx(forward, rel=1e-8)
        assert m["pwcca"][j, i] == pytest.approx(backward, rel=1e-8)
    assert np.all((m["procrustes"] >= -1e-12) & (m["procrustes"] <= 2))
    for key in ("cca_r2", "cca_rho", "pwcca", "svcca", "cka"):
        assert np.all((m[key] >= -1e-12) & (m[key] <= 1 + 1e-12)), key


# ---------------------------------------------------------------------------------------------
# 4. invariances


@pytest.mark.parametrize("moved", [0, 1])
def test_baselines_invariant_to_similarity_transforms(moved: int) -> None:
    rng = np.random.default_rng(30 + moved)
    x = spectrum_data(rng, 50, [2.0, 1.5, 1.0, 0.6, 0.3])
    y = x[:, :4] @ rng.standard_normal((4, 4)) + 0.5 * rng.standard_normal((50, 4))
    reps = [x, y]
    other = 1 - moved
    settings = {"tol": 1e-3, "measures": (*BASELINES, "d_iso")}
    before = run(reps, **settings)
    z = reps[moved]
    shift = 5 * rng.standard_normal(z.shape[1])
    rotation = random_orthogonal(rng, z.shape[1])

    # translation and isotropic scale: every baseline unchanged
    scaled = run([3.7 * z + shift if k == moved else r for k, r in enumerate(reps)], **settings)
    for key in BASELINES:
        np.testing.assert_allclose(scaled.matrices[key], before.matrices[key], rtol=1e-8, atol=1e-12, err_msg=key)

    # rotation (and translation): all but PWCCA unchanged, and d_iso too (an isometry is absorbed)
    rotated_reps = [z @ rotation + shift if k == moved else r for k, r in enumerate(reps)]
    rotated = run(rotated_reps, **settings)
    for key in (*BASELINES, "d_iso"):
        if key != "pwcca":
            np.testing.assert_allclose(rotated.matrices[key], before.matrices[key], rtol=1e-8, atol=1e-12, err_msg=key)
    # PWCCA's Morcos weights sum |<h_k, x_d>| over the mapped-from encoder's neurons x_d: rotating
    # the mapped-to encoder leaves it unchanged, rotating the mapped-from one need not
    assert rotated.matrices["pwcca"][other, moved] == pytest.approx(before.matrices["pwcca"][other, moved], rel=1e-8)
    assert rotated.matrices["pwcca"][moved, other] == pytest.approx(
        pwcca_ref(rotated_reps[moved], rotated_reps[other]), rel=1e-8)


def test_d_aff_invariances() -> None:
    rng = np.random.default_rng(40)
    x, y = rng.standard_normal((60, 5)), rng.standard_t(3, (60, 4))
    base = run([x, y], tol=1e-5)
    # invertible affine map of the mapped-from encoder: same column space, same optimum
    moved = run([x @ well_conditioned(rng, 5) + rng.standard_normal(5), y], tol=1e-5)
    intervals_agree(base, moved, (0, 1), (0, 1))
    # the mapped-to encoder scaled by c (and rotated, translated): distance scales by c
    c = 2.5
    scaled = run([x, c * y @ random_orthogonal(rng, 4) - 7.0], tol=1e-5)
    for key in ("d_aff", "d_aff_lower"):
        assert scaled.matrices[key][0, 1] == pytest.approx(c * base.matrices[key][0, 1], rel=1e-4)
    assert scaled.matrices["d_aff_lower"][0, 1] <= c * base.matrices["d_aff"][0, 1] * (1 + 1e-9)
    assert c * base.matrices["d_aff_lower"][0, 1] <= scaled.matrices["d_aff"][0, 1] * (1 + 1e-9)
    assert scaled.matrices["d_aff_ls"][0, 1] == pytest.approx(c * base.matrices["d_aff_ls"][0, 1], rel=1e-9)


def test_d_iso_is_symmetric_for_equal_widths() -> None:
    rng = np.random.default_rng(50)
    reps = [rng.standard_normal((50, 5)) * s + rng.standard_normal(5) for s in (1.0, 2.0, 0.5)]
    m = run(reps, tol=1e-3).matrices["d_iso"]
    np.testing.assert_allclose(m, m.T, rtol=1e-9)
    for i, j in [(0, 1), (1, 2), (0, 2)]:
        assert m[i, j] == pytest.approx(d_iso_ref(reps[i], reps[j]), rel=1e-8)


# ---------------------------------------------------------------------------------------------
# 5. edge cases


def test_fewer_rows_than_dims_interpolates() -> None:
    rng = np.random.default_rng(60)
    x, y = rng.standard_normal((20, 50)), rng.standard_normal((20, 30))
    result = run([x, y], tol=1e-6)
    assert list(result.ranks) == [19, 19]  # centred rank N - 1
    m = result.matrices
    for i, (source, target) in enumerate([(x, y), (y, x)]):
        j = 1 - i
        scale = np.linalg.norm(centre(target), axis=1).max()
        assert m["d_aff"][i, j] < 1e-9 * scale
        assert m["d_aff_ls"][i, j] < 1e-9 * scale
        assert m["procrustes"][i, j] == pytest.approx(procrustes_ref(source, target), rel=1e-8)
        assert m["cka"][i, j] == pytest.approx(cka_ref(source, target), rel=1e-8)
        assert abs(m["cca_rho"][i, j]) < 1e-9 and abs(m["cca_r2"][i, j]) < 1e-9  # same column space


def test_constant_column_changes_nothing_and_acts_as_bias_for_d_lin() -> None:
    rng = np.random.default_rng(61)
    x, y = rng.standard_normal((50, 4)), rng.standard_normal((50, 3)) + 2.0
    with_constant = np.hstack([x, np.full((50, 1), 3.0)])
    plain = run([x, y], tol=1e-5)
    padded = run([with_constant, y], tol=1e-5)
    assert list(padded.ranks) == [4, 3]
    intervals_agree(plain, padded, (0, 1), (0, 1))
    intervals_agree(plain, padded, (1, 0), (1, 0))
    for key in (*BASELINES, "d_iso", "d_aff_ls"):
        np.testing.assert_allclose(padded.matrices[key], plain.matrices[key], rtol=1e-8, atol=1e-12, err_msg=key)
    assert padded.matrices["psi_norm"][0, 1] == pytest.approx(plain.matrices["psi_norm"][0, 1], rel=1e-3)
    # uncentred, a constant column lets a linear map carry a bias: d_lin(x|c -> y) = d_aff(x -> y)
    optimum = socp_minimax(x, y)
    assert optimum * (1 - 1e-6) <= padded.matrices["d_lin"][0, 1] <= optimum * (1 + 1e-4)
    assert plain.matrices["d_lin"][0, 1] > optimum * (1 + 1e-3)  # without it the bias is missed


def test_duplicated_rows() -> None:
    rng = np.random.default_rng(62)
    x, y = rng.standard_normal((45, 4)), rng.standard_t(3, (45, 3))
    dup = np.r_[np.arange(45), [0, 0, 7, 44]]
    # the same example repeated: the max over rows, hence d_aff, is unchanged
    base = run([x, y], tol=1e-5)
    repeated = run([x[dup], y[dup]], tol=1e-5)
    intervals_agree(base, repeated, (0, 1), (0, 1))
    intervals_agree(base, repeated, (1, 0), (1, 0))
    # identical source rows with different targets: no map separates them; compare with the SOCP
    x_dup = x.copy()
    x_dup[1] = x_dup[0]
    x_dup[2] = x_dup[0]
    result = run([x_dup, y], tol=1e-5)
    optimum = socp_minimax(x_dup, y)
    assert result.matrices["d_aff_lower"][0, 1] <= optimum * (1 + 1e-6)
    assert result.matrices["d_aff"][0, 1] >= optimum * (1 - 1e-6)
    assert result.matrices["d_aff"][0, 1] == pytest.approx(optimum, rel=1e-4)
    # rows 0, 1, 2 share one image, so some residual is at least half their largest distance
    spread = max(np.linalg.norm(y[a] - y[b]) for a in range(3) for b in range(3))
    assert result.matrices["d_aff"][0, 1] >= spread / 2 * (1 - 1e-9)


@pytest.mark.parametrize("row", ["exact", "rounding"])
def test_rank_zero_source_gives_enclosing_ball_radius(row: str) -> None:
    rng = np.random.default_rng(63)
    # 0.5 averages exactly; a random row leaves float64 rounding noise in the centred matrix
    value = np.full(4, 0.5) if row == "exact" else rng.standard_normal(4)
    x = np.tile(value, (30, 1))
    y = rng.standard_normal((30, 3)) + 1.0
    result = run([x, y], tol=1e-6)
    radius = enclosing_ball_radius(y)
    m = result.matrices
    assert m["d_aff_lower"][0, 1] <= radius * (1 + 1e-6)
    assert m["d_aff"][0, 1] >= radius * (1 - 1e-6)
    assert m["d_aff"][0, 1] == pytest.approx(radius, rel=1e-5)
    # a constant nonzero row is a linear image of the constant 1: d_lin is the same radius
    assert m["d_lin"][0, 1] == pytest.approx(radius, rel=1e-5)
    # the least-squares map of a constant source is the mean
    assert m["d_aff_ls"][0, 1] == pytest.approx(np.linalg.norm(centre(y), axis=1).max(), rel=1e-9)
    # and the reverse: any map sends everything onto the single point, exactly
    assert m["d_aff"][1, 0] <= 1e-12 * np.linalg.norm(value)


def test_d_aff_rel_is_d_aff_over_an_independent_enclosing_radius() -> None:
    rng = np.random.default_rng(65)
    x = rng.standard_normal((40, 3))
    y = np.tanh(x @ rng.standard_normal((3, 2))) + 0.3 * rng.standard_normal((40, 2)) + 2.0
    result = run([x, y], tol=1e-6, measures=("d_aff", "d_aff_rel"))
    m, interval = result.matrices, result.intervals["d_aff_rel"][0, 1]
    radius = enclosing_ball_radius(y)  # cvxpy's SOCP, not the engine's solver
    exact = socp_minimax(x, y) / radius
    assert interval.certified and 0 <= interval.lower <= exact * (1 + 1e-6) and exact <= interval.upper * (1 + 1e-6)
    assert (m["d_aff_rel"][0, 1], m["d_aff_rel_lower"][0, 1]) == (interval.upper, interval.lower)
    assert m["d_aff_rel"][0, 1] == pytest.approx(m["d_aff"][0, 1] / radius, rel=1e-5)
    table = solver_table(result)
    assert table[0]["d_aff_rel"] == m["d_aff_rel"][0, 1] and table[0]["d_aff_rel_lower"] == interval.lower


@pytest.mark.parametrize("seed", [0, 1])
def test_d_aff_rel_of_an_independent_noise_source_is_close_to_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, p, q = 2000, 3, 2
    # every target row on the unit circle: each one touches the enclosing ball, so a map beating the
    # constant must fit all N rows with its (p + 1) q parameters (a Gaussian target's ball rests on a
    # handful of extreme rows, which a few parameters can fit)
    angles = rng.uniform(0, 2 * np.pi, n)
    y = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    interval = run([rng.standard_normal((n, p)), y], tol=1e-3, measures=("d_aff_rel",)).intervals["d_aff_rel"][0, 1]
    overfitting = np.sqrt((p + 1) * q / n)
    assert interval.upper <= 1 and interval.lower >= 1 - overfitting - interval.gap, interval


def test_d_aff_rel_onto_a_target_without_spread_is_nan_with_a_note() -> None:
    rng = np.random.default_rng(66)
    x, y = rng.standard_normal((30, 3)), np.tile(rng.standard_normal(2), (30, 1))
    result = pairwise_intrinsic([x, y], ["x", "flat"], IntrinsicSettings(measures=("d_aff", "d_aff_rel")))
    assert np.isnan(result.matrices["d_aff_rel"][0, 1]) and np.isnan(result.matrices["d_aff_rel_lower"][0, 1])
    assert np.isfinite(result.matrices["d_aff"][0, 1])  # d_aff onto it stays reported
    assert 0 <= result.matrices["d_aff_rel"][1, 0] <= 1
    note = undefined_relative_note(result)
    assert note is not None and "flat" in note and "'x'" not in note
    assert undefined_relative_note(run([x, rng.standard_normal((30, 2))], measures=("d_aff_rel",))) is None


def test_rank_zero_source_with_rounding_noise_has_rank_zero() -> None:
    rng = np.random.default_rng(63)
    x = np.tile(rng.standard_normal(4), (30, 1))
    y = rng.standard_normal((30, 3)) + 1.0
    result = run([x, y], tol=1e-6)
    assert result.ranks[0] == 0
    assert result.matrices["psi_norm"][0, 1] == 0.0  # no direction to map: the linear part is exactly zero


def test_svd_truncated_copy_is_asymmetric() -> None:
    rng = np.random.default_rng(64)
    full = rng.standard_normal((60, 6)) @ well_conditioned(rng, 6) + rng.standard_normal(6)
    U, s, Vt = np.linalg.svd(centre(full), full_matrices=False)
    keep = 3
    truncated = full.mean(0) + (U[:, :keep] * s[:keep]) @ Vt[:keep]
    result = run([full, truncated], tol=1e-6)
    assert list(result.ranks) == [6, keep]
    m = result.matrices
    assert m["d_aff"][0, 1] < 1e-9 * s[0]  # full -> truncated: a projection
    # truncated -> full: the uniform-weight least squares is a certified lower bound of the maximum
    lost = np.sqrt((s[keep:] ** 2).sum() / len(full))
    assert m["d_aff"][1, 0] >= lost * (1 - 1e-9)
    assert m["d_aff_lower"][1, 0] >= lost * (1 - 1e-9)
    assert m["d_aff"][1, 0] > 0.1 * s[keep] / np.sqrt(len(full))


def test_exact_affine_image_is_zero_both_ways() -> None:
    rng = np.random.default_rng(65)
    x = rng.standard_normal((50, 5))
    y = x @ well_conditioned(rng, 5, 10.0) + rng.standard_normal(5)
    m = run([x, y], tol=1e-6).matrices
    assert m["d_aff"][0, 1] < 1e-9 * np.linalg.norm(centre(y), axis=1).max()
    assert m["d_aff"][1, 0] < 1e-9 * np.linalg.norm(centre(x), axis=1).max()
    assert abs(m["cca_rho"][0, 1]) < 1e-9 and abs(m["pwcca"][0, 1]) < 1e-9 and abs(m["pwcca"][1, 0]) < 1e-9


def test_results_independent_of_block_size() -> None:
    rng = np.random.default_rng(66)
    reps = [rng.standard_normal((50, d)) + rng.standard_normal(d) for d in (4, 6, 3, 5)]
    reps.append(reps[0] @ rng.standard_normal((4, 2)))  # a lower-rank image, exact from rep 0
    batched = run(reps, tol=1e-3, block_mb=1024)
    single = run(reps, tol=1e-3, block_mb=0)  # one target per Lawson batch
    assert set(batched.matrices) == set(single.matrices)
    for key in MEASURES:
        np.testing.assert_allclose(single.matrices[key], batched.matrices[key], rtol=1e-9, atol=1e-12, err_msg=key)
    np.testing.assert_array_equal(single.ranks, batched.ranks)
