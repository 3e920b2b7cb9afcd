"""d_psi and d_worst: zero for an encoder and its affine images, asymmetric under rank truncation,
ordered (d_worst >= d_psi), within Lemma 5.2's bound, and consistent with affine_map."""

from __future__ import annotations

import numpy as np
import pytest

from affine_homotopy.derived import random_affine, svd_truncate
from affine_homotopy.extrinsic import (
    ExtrinsicSettings,
    extrinsic_distances,
    fixed_classifier_distances,
    lemma_bound,
    softmax_lipschitz,
    tightness_summary,
)
from affine_homotopy.intrinsic import SolverSettings, affine_map, pairwise_intrinsic
from affine_homotopy.probes import fit_softmax_probe, fit_softmax_probes, random_labels, softmax


@pytest.fixture(scope="module")
def task() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 10)) * np.linspace(3.0, 0.5, 10)  # energy decays along directions
    logits = x @ rng.standard_normal((10, 2))
    y = (logits[:, 0] - logits[:, 1] + rng.standard_normal(300) > 0).astype(int)
    return x, y


@pytest.fixture(scope="module")
def study(task):
    """Four encoders (self, affine image, rank-truncated copy, a nonlinear one), all measures."""
    x, y = task
    rng = np.random.default_rng(1)
    image, _ = random_affine(x, x[:2], seed=1, layer=0)
    truncated, _, _ = svd_truncate(x, x[:2], fraction=0.3)
    other = np.tanh(x @ rng.standard_normal((10, 7)))
    reps = [x, image, truncated, other]
    probes = [fit_softmax_probe(r, y, 2, l2_grid=[1e-2]) for r in reps]
    randoms = [fit_softmax_probes(r, random_labels(len(y), 2, range(4)), 2, 1e-2) for r in reps]
    intrinsic = pairwise_intrinsic(reps, settings=SolverSettings(keep_weights=True, measures=("d_aff",)))
    result = extrinsic_distances(reps, probes, None, intrinsic.weights, randoms)
    return reps, probes, intrinsic, result


def test_self_and_affine_image_are_zero_both_ways(study) -> None:
    _, _, _, result = study
    for matrix in (result.d_psi, result.d_worst):
        assert matrix[0, 1] < 1e-6 and matrix[1, 0] < 1e-6
        assert np.all(np.diag(matrix) == 0)


def test_duplicate_encoder_is_zero(task) -> None:
    x, y = task
    probe = fit_softmax_probe(x, y, 2, l2_grid=[1e-2])
    d = fixed_classifier_distances([x, x.copy()], [probe, probe]).d_psi
    assert d.max() < 1e-6


def test_truncation_is_asymmetric_in_the_theorys_direction(study) -> None:
    _, _, _, result = study
    # the full encoder reproduces anything the truncated one has (Thm 4.1 direction), not back
    assert result.d_psi[0, 2] < 1e-6 and result.d_worst[0, 2] < 1e-6
    assert result.d_psi[2, 0] > 0.05


def test_worst_case_dominates_and_bound_holds_on_every_pair(study) -> None:
    _, probes, intrinsic, result = study
    bound = lemma_bound(probes, intrinsic.matrices["d_aff"])
    off = ~np.eye(len(probes), dtype=bool)
    assert np.all(result.d_worst >= result.d_psi)
    assert np.all(result.d_psi[off] <= bound[off] * (1 + 1e-6) + 1e-9)
    assert np.all((result.d_psi >= 0) & (result.d_psi <= np.sqrt(2)))
    summary = tightness_summary(result.d_psi, bound, result.d_worst)
    assert summary["violations"] == 0 and summary["d_worst_below_d_psi"] == 0
    assert 0 < summary["tightness_median"] <= 1


def test_softmax_lipschitz_constant_is_half_lambda_and_attained() -> None:
    rng = np.random.default_rng(3)
    for lam in (1.0, 2.5):
        c = softmax_lipschitz(lam)
        assert c == pytest.approx(lam / 2)
        z = rng.standard_normal((2000, 3)) * 3
        dz = rng.standard_normal((2000, 3)) * 1e-3
        ratios = np.linalg.norm(softmax(lam * (z + dz)) - softmax(lam * z), axis=1) / np.linalg.norm(dz, axis=1)
        assert ratios.max() <= c * (1 + 1e-3)
        # equal logits on two classes, step along (1, -1): the Jacobian's top eigenvalue lam / 2
        step = np.array([[1e-6, -1e-6]])
        ratio = np.linalg.norm(softmax(lam * step) - softmax(np.zeros((1, 2)))) / np.linalg.norm(step)
        assert ratio == pytest.approx(c, rel=1e-6)


def test_composed_start_is_the_probe_composed_with_affine_map(study) -> None:
    """The batched weighted fit equals psi'_j o intrinsic.affine_map(weights[i, j]) (pair 3 -> 0)."""
    reps, probes, intrinsic, _ = study
    linear, bias = affine_map(reps[3], reps[0], intrinsic.weights[3, 0])
    mapped = reps[3] @ linear + bias
    residual = np.linalg.norm(mapped - reps[0], axis=1).max()
    assert residual == pytest.approx(intrinsic.matrices["d_aff"][3, 0], rel=1e-4)
    expected = np.linalg.norm(probes[0].predict_proba(reps[0]) - probes[0].predict_proba(mapped), axis=1).max()
    only_composed = ExtrinsicSettings(max_iter=1, rounds=0)
    result = extrinsic_distances([reps[3], reps[0]], [probes[3], probes[0]], None,
                                 intrinsic.weights[np.ix_([3, 0], [3, 0])], None, only_composed)
    row = next(r for r in result.diagnostics if r["mapped_to"] == "1")
    assert row["composed"] == pytest.approx(expected, rel=1e-6, abs=1e-9)


def test_value_is_attained_and_never_worse_than_its_candidates(study) -> None:
    reps, probes, _, result = study
    for row in result.diagnostics:
        candidates = [row[k] for k in ("composed", "least_squares", "soft_label", "refined")]
        assert row["d_psi"] == pytest.approx(min(candidates))
    # the plain least-squares composition (a textbook lstsq) is one admissible map: d_psi may not exceed it
    design = np.hstack([reps[3], np.ones((len(reps[3]), 1))])
    coef, *_ = np.linalg.lstsq(design, reps[0], rcond=None)
    candidate = np.linalg.norm(probes[0].predict_proba(reps[0]) - softmax((design @ coef) @ probes[0].weight
                                                                          + probes[0].bias), axis=1).max()
    assert result.d_psi[3, 0] <= candidate + 1e-9


def test_deterministic(study, task) -> None:
    reps, probes, intrinsic, result = study
    randoms = [fit_softmax_probes(r, random_labels(len(task[1]), 2, range(4)), 2, 1e-2) for r in reps]
    again = extrinsic_distances(reps, probes, None, intrinsic.weights, randoms)
    np.testing.assert_array_equal(again.d_psi, result.d_psi)
    np.testing.assert_array_equal(again.d_worst, result.d_worst)
