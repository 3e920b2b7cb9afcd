"""d_psi: zero for an encoder and its affine images, asymmetric under rank truncation, bounded."""

from __future__ import annotations

import numpy as np
import pytest

from affine_homotopy.derived import random_affine, svd_truncate
from affine_homotopy.extrinsic import fixed_classifier_distances
from affine_homotopy.intrinsic import pairwise_affine_ls
from affine_homotopy.probes import fit_softmax_probe, softmax


@pytest.fixture(scope="module")
def task() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400, 12)) * np.linspace(3.0, 0.5, 12)  # energy decays along directions
    logits = x @ rng.standard_normal((12, 2))
    y = (logits[:, 0] - logits[:, 1] + rng.standard_normal(400) > 0).astype(int)
    return x, y


def test_self_and_affine_image_are_zero_both_ways(task) -> None:
    x, y = task
    image, _ = random_affine(x, x[:2], seed=1, layer=0)
    probes = [fit_softmax_probe(r, y, 2, l2_grid=[1e-3]) for r in (x, image)]
    result = fixed_classifier_distances([x, image], probes)
    assert result.distances[0, 1] < 1e-6 and result.distances[1, 0] < 1e-6
    assert np.all(np.diag(result.distances) == 0)


def test_truncation_is_asymmetric(task) -> None:
    x, y = task
    truncated, _, _ = svd_truncate(x, x[:2], fraction=0.25)
    probes = [fit_softmax_probe(r, y, 2, l2_grid=[1e-3]) for r in (x, truncated)]
    d = fixed_classifier_distances([x, truncated], probes).distances
    assert d[0, 1] < 1e-6  # the full encoder reproduces the truncated one's probe exactly
    assert d[1, 0] > 0.05  # the truncated encoder has lost directions the full probe uses


def test_never_worse_than_the_composed_map_and_within_lemma_bound(task) -> None:
    """Lemma 5.2: d_psi <= Lip(softmax) * ||W_j||_2 * (max residual of any affine map i -> j)."""
    x, y = task
    rng = np.random.default_rng(1)
    other = np.tanh(x @ rng.standard_normal((12, 9)))  # a nonlinear, different-width encoder
    reps = [x, other]
    probes = [fit_softmax_probe(r, y, 2, l2_grid=[1e-3]) for r in reps]
    d_psi = fixed_classifier_distances(reps, probes).distances
    d_ls, _ = pairwise_affine_ls(reps)
    lipschitz_softmax = 1.0  # the softmax is 1-Lipschitz in L2 at inverse temperature 1
    for i, j in ((0, 1), (1, 0)):
        bound = lipschitz_softmax * np.linalg.norm(probes[j].weight, 2) * d_ls[i, j]
        assert d_psi[i, j] <= bound + 1e-9
        assert 0 <= d_psi[i, j] <= np.sqrt(2)


def test_value_is_attained_by_some_affine_map(task) -> None:
    """The reported number is an upper bound certified by an actual map: recompute a lower one."""
    x, y = task
    rng = np.random.default_rng(2)
    other = np.tanh(x @ rng.standard_normal((12, 12)))
    probes = [fit_softmax_probe(r, y, 2, l2_grid=[1e-3]) for r in (x, other)]
    d = fixed_classifier_distances([x, other], probes).distances
    # the plain composition with the LS map is one admissible candidate: d_psi may not exceed it
    design = np.hstack([x, np.ones((len(x), 1))])
    coef, *_ = np.linalg.lstsq(design, other, rcond=None)
    composed = softmax((design @ coef) @ probes[1].weight + probes[1].bias)
    candidate = np.linalg.norm(probes[1].predict_proba(other) - composed, axis=1).max()
    assert d[0, 1] <= candidate + 1e-9
