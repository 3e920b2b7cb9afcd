"""The multi-class certificate (core.extrinsic.multiclass): its slabs are sound and exact where the maths
says so, at two classes they are the two-class slabs, and its interval contains independently computed
optima."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from affine_homotopy.core.extrinsic.binary import BinaryTarget
from affine_homotopy.core.extrinsic.settings import ExtrinsicSettings
from affine_homotopy.core.extrinsic.multiclass import (
    MulticlassLP,
    SlabLevels,
    certify,
    certify_classifier,
    class_pairs,
    from_lp_map,
    radius_factor,
    to_lp_map,
)


def slab_levels(P: np.ndarray, k: int, l: int) -> SlabLevels:
    N, C = P.shape
    return SlabLevels(P[:, k], P[:, l], np.zeros(N, bool), np.zeros(N), C)


def random_simplex(rng: np.random.Generator, n: int, C: int) -> np.ndarray:
    return rng.dirichlet(np.full(C, 1.5), size=n)


def test_two_class_slab_ends_are_the_binary_slab_at_t_over_sqrt2() -> None:
    rng = np.random.default_rng(0)
    P = random_simplex(rng, 400, 2)
    levels, binary = slab_levels(P, 1, 0), BinaryTarget(P[:, 1], P[:, 0])
    for t in (1e-4, 0.03, 0.2, 0.5, 0.9):
        for ours, theirs in ((levels.hi(t), binary.hi(t / math.sqrt(2))), (levels.lo(t), binary.lo(t / math.sqrt(2)))):
            assert np.array_equal(np.isfinite(ours), np.isfinite(theirs))
            finite = np.isfinite(theirs)
            np.testing.assert_allclose(ours[finite], theirs[finite], rtol=0, atol=1e-12)


@pytest.mark.parametrize("C", [3, 4, 5])
def test_slabs_contain_every_ratio_of_the_ball_and_their_ends_are_on_its_boundary(C: int) -> None:
    """Soundness by sampling: every point of the simplex within t of p has its log-ratios inside the
    slabs; exactness: at each finite end the hyperplane s_k = r s_l is at distance exactly t from p within
    the plane sum s = 1 (so no wider slab is implied by the ball)."""
    rng = np.random.default_rng(C)
    for _ in range(20):
        p = random_simplex(rng, 1, C)[0]
        t = float(rng.uniform(0.02, 0.6))
        directions = rng.standard_normal((20000, C))
        directions -= directions.mean(axis=1, keepdims=True)
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        s = p + directions * t * rng.uniform(0, 1, (20000, 1)) ** (1 / (C - 1))
        s = s[(s > 0).all(axis=1)]
        for k in range(C):
            for l in range(C):
                if k == l:
                    continue
                levels = slab_levels(p[None], k, l)
                ratio = np.log(s[:, k] / s[:, l])
                assert (ratio <= levels.hi(t)[0] + 1e-12).all() and (ratio >= levels.lo(t)[0] - 1e-12).all()
                for end in (levels.hi(t)[0], levels.lo(t)[0]):
                    if np.isfinite(end):
                        r = math.exp(end)
                        normal = np.zeros(C)
                        normal[k], normal[l] = 1.0, -r
                        normal -= normal.mean()
                        assert abs(p[k] - r * p[l]) / np.linalg.norm(normal) == pytest.approx(t, rel=1e-9)


def test_slab_rates_are_the_derivatives_of_the_ends() -> None:
    rng = np.random.default_rng(3)
    P = random_simplex(rng, 50, 4)
    levels = slab_levels(P, 0, 2)
    t, h = 0.07, 1e-6
    hi_rate, lo_rate = levels.rates(t)
    for rate, end in ((hi_rate, levels.hi), (lo_rate, levels.lo)):
        finite = np.isfinite(end(t + h)) & np.isfinite(end(t - h))
        with np.errstate(invalid="ignore"):
            numeric = (end(t + h) - end(t - h)) / (2 * h)
        np.testing.assert_allclose(rate[finite], numeric[finite], rtol=1e-5, atol=1e-7)


def test_pairs_are_all_pairs_up_to_three_classes_then_against_the_most_probable() -> None:
    rng = np.random.default_rng(4)
    n, k, l = class_pairs(random_simplex(rng, 5, 3))
    assert n.size == 15 and set(zip(k[n == 0], l[n == 0])) == {(0, 1), (0, 2), (1, 2)}
    P = random_simplex(rng, 5, 5)
    n, k, l = class_pairs(P)
    assert n.size == 20 and (l == P.argmax(axis=1)[n]).all() and (k != l).all()


def test_lp_map_round_trip_keeps_the_probabilities() -> None:
    rng = np.random.default_rng(5)
    A, c = rng.standard_normal((6, 4)), rng.standard_normal(4)
    A2, c2 = from_lp_map(to_lp_map(A, c), 4)
    Z = rng.standard_normal((10, 6))
    softmax = lambda u: np.exp(u - u.max(1, keepdims=True)) / np.exp(u - u.max(1, keepdims=True)).sum(1, keepdims=True)
    np.testing.assert_allclose(softmax(Z @ A + c), softmax(Z @ A2 + c2), atol=1e-14)


def problem(seed: int, N: int, r: int, C: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    """Whitened source [Z, 1] and a target classifier's probabilities on a related representation."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, r + 4))
    Z = X[:, :r] + noise * rng.standard_normal((N, r))
    Z -= Z.mean(axis=0)
    U = np.linalg.svd(Z, full_matrices=False)[0]
    logits = X @ rng.standard_normal((r + 4, C))
    P = np.exp(logits - logits.max(axis=1, keepdims=True))
    return np.hstack([U * math.sqrt(N), np.ones((N, 1))]), P / P.sum(axis=1, keepdims=True)


def largest_error(design: np.ndarray, P: np.ndarray, x: np.ndarray) -> float:
    lp = MulticlassLP(torch.as_tensor(design), P)
    return float(lp.errors(lp.logits(x)).max())


def global_minimum(design: np.ndarray, P: np.ndarray, starts: int, seed: int) -> float:
    """An independent estimate of t*: many random starts of Nelder-Mead on a steep smooth maximum, then on
    the exact maximum."""
    rng = np.random.default_rng(seed)
    columns = (P.shape[1] - 1) * design.shape[1]
    best = math.inf
    for _ in range(starts):
        x = rng.standard_normal(columns)
        for objective in (lambda v: 0.02 * np.log(np.exp(_errors(design, P, v) / 0.02).sum()),
                          lambda v: _errors(design, P, v).max()):
            x = minimize(objective, x, method="Nelder-Mead", options={"maxiter": 4000, "xatol": 1e-10,
                                                                      "fatol": 1e-12}).x
        best = min(best, largest_error(design, P, x))
    return best


def _errors(design: np.ndarray, P: np.ndarray, x: np.ndarray) -> np.ndarray:
    u = np.hstack([design @ x.reshape(P.shape[1] - 1, -1).T, np.zeros((len(P), 1))])
    s = np.exp(u - u.max(axis=1, keepdims=True))
    return np.linalg.norm(s / s.sum(axis=1, keepdims=True) - P, axis=1)


@pytest.mark.parametrize("C", [3, 4])
def test_interval_contains_an_independent_global_minimum(C: int) -> None:
    design, P = problem(seed=10 + C, N=12, r=1, C=C, noise=0.8)
    settings = ExtrinsicSettings(tol=1e-6, atol=1e-9)
    found = certify_classifier(torch.as_tensor(design[:, :-1]), P, np.zeros((1, C)), np.zeros(C), settings)
    reference = global_minimum(design, P, starts=6, seed=C)
    assert found.interval.lower <= reference + 1e-9
    assert found.interval.upper <= reference * (1 + 1e-2)  # from a zero start, the LP maps refined
    assert found.interval.upper == pytest.approx(largest_error(design, P, found.coef), rel=1e-12)
    assert found.interval.relative_gap < 0.1


def test_lower_bound_is_below_every_map_tried() -> None:
    design, P = problem(seed=1, N=200, r=6, C=3, noise=0.4)
    found = certify(MulticlassLP(torch.as_tensor(design), P), [np.zeros(2 * 7)], tol=1e-4, atol=1e-9)
    rng = np.random.default_rng(0)
    for scale in (0.01, 0.1, 1.0):
        for _ in range(50):
            x = found.coef + scale * rng.standard_normal(found.coef.size)
            assert found.interval.lower <= largest_error(design, P, x) + 1e-12
    assert found.interval.lower > 0.5 * found.interval.upper  # the relaxation is informative


def test_an_exact_map_is_found_exactly() -> None:
    rng = np.random.default_rng(2)
    design, _ = problem(seed=2, N=100, r=4, C=3, noise=0.1)
    x = rng.standard_normal(2 * 5)
    u = np.hstack([design @ x.reshape(2, -1).T, np.zeros((100, 1))])
    P = np.exp(u) / np.exp(u).sum(axis=1, keepdims=True)
    found = certify(MulticlassLP(torch.as_tensor(design), P), [x + 0.05 * rng.standard_normal(10)], tol=1e-3,
                    atol=1e-6)
    assert found.interval.upper <= 1e-6 and found.interval.stop == "floor"


def test_two_classes_through_the_general_path_agree_with_the_two_class_path() -> None:
    from affine_homotopy.core.extrinsic import binary

    design, P = problem(seed=7, N=150, r=5, C=2, noise=0.5)
    general = certify(MulticlassLP(torch.as_tensor(design), P), [np.zeros(6)], tol=1e-8, atol=1e-12, max_lp=200)
    lp = binary.ChebyshevLP(binary.Design.of(design), "two classes")
    # the two-class path's logit gap is u_0 - u_1 of class 0's probability, the general path's too
    problems = [binary.BinaryProblem(lp, BinaryTarget(P[:, 0], P[:, 1]), [np.zeros(6)])]
    two_class = binary.certify(problems, tol=1e-8, atol=1e-12, max_lp=200)[0].interval
    assert general.interval.within_tol and two_class.within_tol
    assert general.interval.lower == pytest.approx(two_class.lower, abs=1e-7)
    assert general.interval.upper == pytest.approx(two_class.upper, abs=1e-7)


def test_radius_factor_is_exact_at_two_classes() -> None:
    assert radius_factor(2) == pytest.approx(1 / math.sqrt(2), abs=1e-15)
