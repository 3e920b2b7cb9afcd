"""d_psi and d_worst: zero for an encoder and its affine images, asymmetric under rank truncation,
ordered (d_worst >= d_psi), within Lemma 5.2's bound, and consistent with affine_map."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from affine_homotopy.models.derived import random_affine, svd_truncate
from affine_homotopy.core.extrinsic import (
    ExtrinsicSettings,
    extrinsic_distances,
    lemma_bound,
    softmax_lipschitz,
)
from affine_homotopy.jobs.extrinsic_tables import tightness_summary
from affine_homotopy.core.intrinsic import IntrinsicSettings, affine_map, pairwise_intrinsic
from affine_homotopy.core.probes import fit_softmax_probe, fit_softmax_probes, random_labels, softmax


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
    intrinsic = pairwise_intrinsic(reps, settings=IntrinsicSettings(keep_weights=True, measures=("d_aff",)))
    result = extrinsic_distances(reps, probes, None, intrinsic.weights, randoms)
    return reps, probes, intrinsic, result


def test_self_and_affine_image_are_zero_both_ways(study) -> None:
    _, _, _, result = study
    for matrix in (result.values.d_psi, result.values.d_worst):
        assert matrix[0, 1] < 1e-6 and matrix[1, 0] < 1e-6
        assert np.all(np.diag(matrix) == 0)


def test_duplicate_encoder_is_zero(task) -> None:
    x, y = task
    probe = fit_softmax_probe(x, y, 2, l2_grid=[1e-2])
    d = extrinsic_distances([x, x.copy()], [probe, probe]).values.d_psi
    assert d.max() < 1e-6


def test_truncation_is_asymmetric_in_the_theorys_direction(study) -> None:
    _, _, _, result = study
    # the full encoder reproduces anything the truncated one has (Thm 4.1 direction), not back
    assert result.values.d_psi[0, 2] < 1e-6 and result.values.d_worst[0, 2] < 1e-6
    assert result.values.d_psi[2, 0] > 0.05


def test_worst_case_dominates_and_bound_holds_on_every_pair(study) -> None:
    _, probes, intrinsic, result = study
    bound = lemma_bound(probes, intrinsic.matrices["d_aff"])
    off = ~np.eye(len(probes), dtype=bool)
    assert np.all(result.values.d_worst >= result.values.d_psi)
    assert np.all(result.values.d_psi[off] <= bound[off] * (1 + 1e-6) + 1e-9)
    assert np.all((result.values.d_psi >= 0) & (result.values.d_psi <= np.sqrt(2)))
    summary = tightness_summary(result.values.d_psi, bound, result.values.d_worst)
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
        # two classes: the certified value is the best of its starts and of the LP's maps, so never above a start
        candidates = [row[k] for k in ("composed", "least_squares", "soft_label", "refined") if k in row]
        assert row["d_psi"] <= min(candidates) * (1 + 1e-12) + 1e-15
    # the plain least-squares composition (a textbook lstsq) is one admissible map: d_psi may not exceed it
    design = np.hstack([reps[3], np.ones((len(reps[3]), 1))])
    coef, *_ = np.linalg.lstsq(design, reps[0], rcond=None)
    candidate = np.linalg.norm(probes[0].predict_proba(reps[0]) - softmax((design @ coef) @ probes[0].weight
                                                                          + probes[0].bias), axis=1).max()
    assert result.values.d_psi[3, 0] <= candidate + 1e-9


def test_deterministic(study, task) -> None:
    reps, probes, intrinsic, result = study
    randoms = [fit_softmax_probes(r, random_labels(len(task[1]), 2, range(4)), 2, 1e-2) for r in reps]
    again = extrinsic_distances(reps, probes, None, intrinsic.weights, randoms)
    np.testing.assert_array_equal(again.values.d_psi, result.values.d_psi)
    np.testing.assert_array_equal(again.values.d_worst, result.values.d_worst)


# ---------------------------------------------------------------------------------------------
# the worst case: paper-style d_worst and the searched d_worst_search


@pytest.fixture(scope="module")
def worst(study, task):
    """Random-label probes by the paper's SGD protocol, the search with aimed classifiers and ascent
    steps, and d_aff so that every evaluated classifier is checked against its own bound."""
    from affine_homotopy.core.probes import fit_random_probes_sgd

    reps, probes, intrinsic, _ = study
    randoms = [fit_random_probes_sgd(r, random_labels(len(task[1]), 2, range(4)), 2, epochs=5) for r in reps]
    settings = ExtrinsicSettings(search_steps=3, search_candidates=4)
    result = extrinsic_distances(reps, probes, None, intrinsic.weights, randoms, settings, intrinsic.matrices["d_aff"])
    return reps, probes, randoms, intrinsic, result


def test_worst_case_ordering_and_every_classifiers_bound(worst) -> None:
    _, probes, randoms, intrinsic, result = worst
    off = ~np.eye(len(probes), dtype=bool)
    values = result.values
    assert np.all(values.d_psi <= values.d_worst) and np.all(values.d_worst <= values.d_worst_search)
    assert np.all(np.diag(result.values.d_worst_search) == 0) and np.all(result.values.d_worst_search <= np.sqrt(2))
    assert result.bounds.violations.sum() == 0 and np.all(result.bounds.violations >= 0)
    # bound_worst = c max_k ||W_k|| d_aff over evaluated classifiers: at least the task probe's bound,
    # at most the ball's (every classifier lies in it), and above d_worst_search
    bound = lemma_bound(probes, intrinsic.matrices["d_aff"])
    ball = softmax_lipschitz() * result.worst_case.radius[None, :] * intrinsic.matrices["d_aff"]
    assert np.all(result.bounds.worst[off] >= bound[off] * (1 - 1e-12))
    assert np.all(result.bounds.worst[off] <= ball[off] * (1 + 1e-9))
    assert np.all(result.values.d_worst_search[off] <= result.bounds.worst[off] * (1 + 1e-6) + 1e-9)
    # the ball's radius: the largest norm among each target's classifiers (random and task)
    for j, (probe, rp) in enumerate(zip(probes, randoms)):
        assert result.worst_case.radius[j] == pytest.approx(max(np.linalg.norm(probe.weight, 2), *rp.norms()),
                                                            rel=1e-9)


def test_searched_values_are_attained_inside_the_ball(worst) -> None:
    """Independent check: each pair's searched classifier and map reproduce the reported value."""
    reps, _, _, _, result = worst
    assert len(result.worst_case.searched) == 4 * 3
    for (i, j), found in result.worst_case.searched.items():
        target = softmax(reps[j] @ found.W + found.b)  # inverse temperature 1
        mapped = softmax(reps[i] @ found.linear + found.bias)
        assert np.linalg.norm(target - mapped, axis=1).max() == pytest.approx(found.value, rel=1e-7, abs=1e-10)
        assert np.linalg.norm(found.W, 2) <= result.worst_case.radius[j] * (1 + 1e-9)
        assert result.values.d_worst_search[i, j] == pytest.approx(max(result.values.d_worst[i, j], found.value),
                                                                   rel=1e-12)


def test_search_beats_flat_random_probes(task) -> None:
    """A truncated source cannot reproduce what its target has in the dropped directions: classifiers
    aimed there (and the ascent) find a larger distance than nearly flat random-label probes."""
    x, _ = task
    y = (x[:, 0] > 0).astype(int)  # the task lives in the leading direction, which the truncation keeps
    truncated, _, _ = svd_truncate(x, x[:2], fraction=0.3)
    reps = [truncated, x]
    probes = [fit_softmax_probe(r, y, 2, l2_grid=[1e-2]) for r in reps]
    flat = [fit_softmax_probes(r, random_labels(len(y), 2, range(3)), 2, 10.0) for r in reps]
    intrinsic = pairwise_intrinsic(reps, settings=IntrinsicSettings(keep_weights=True, measures=("d_aff",)))
    result = extrinsic_distances(reps, probes, None, intrinsic.weights, flat, ExtrinsicSettings(search_steps=2),
                                 intrinsic.matrices["d_aff"])
    assert result.values.d_worst_search[0, 1] > 1.2 * result.values.d_worst[0, 1]
    assert result.bounds.violations.sum() == 0


def test_no_random_classifiers_search_starts_from_the_task_probe(study, caplog) -> None:
    from affine_homotopy.core.probes import ProbeSet

    reps, probes, intrinsic, _ = study
    empty = [ProbeSet(np.zeros((0, r.shape[1], 2)), np.zeros((0, 2)), 0.0, 0) for r in reps]
    with caplog.at_level("INFO", logger="affine_homotopy.core.extrinsic"):
        result = extrinsic_distances(reps[2:], probes[2:], None, intrinsic.weights[2:, 2:], empty[2:],
                                     ExtrinsicSettings(search_steps=1, search_candidates=2),
                                     intrinsic.matrices["d_aff"][2:, 2:])
    assert "starts from each target's task probe" in caplog.text
    np.testing.assert_array_equal(result.values.d_worst, result.values.d_psi)
    assert np.all(result.worst_case.classifier[~np.eye(2, dtype=bool)] == -1)
    assert np.all(result.values.d_worst_search >= result.values.d_worst)
    np.testing.assert_allclose(result.worst_case.radius, [np.linalg.norm(p.weight, 2) for p in probes[2:]])


def test_configured_radius_bounds_every_classifier(worst) -> None:
    reps, probes, randoms, intrinsic, _ = worst
    radius = 0.5 * min(np.linalg.norm(p.weight, 2) for p in probes)
    result = extrinsic_distances(reps, probes, None, intrinsic.weights, randoms,
                                 ExtrinsicSettings(search_steps=1, search_candidates=2, search_radius=radius),
                                 intrinsic.matrices["d_aff"])
    assert all(np.linalg.norm(found.W, 2) <= radius * (1 + 1e-9) for found in result.worst_case.searched.values())
    assert np.all(result.values.d_worst_search >= result.values.d_worst) and result.bounds.violations.sum() == 0
    with pytest.raises(ValueError, match="radius must be > 0"):
        extrinsic_distances(reps, probes, None, None, randoms, ExtrinsicSettings(search_radius=0.0))


def test_overflowing_classifier_is_skipped_and_counted(study, task, caplog) -> None:
    from affine_homotopy.core.probes import ProbeSet

    reps, probes, intrinsic, _ = study
    randoms = [fit_softmax_probes(r, random_labels(len(task[1]), 2, range(2)), 2, 1e-2) for r in reps]
    huge = randoms[1]
    randoms[1] = ProbeSet(np.concatenate([huge.weight, np.full((1, *huge.weight.shape[1:]), 1e308)]),
                          np.concatenate([huge.bias, np.zeros((1, 2))]), huge.l2, 0)
    with caplog.at_level("WARNING", logger="affine_homotopy.core.extrinsic"):
        result = extrinsic_distances(reps, probes, None, intrinsic.weights, randoms,
                                     ExtrinsicSettings(search_steps=1, search_candidates=1), intrinsic.matrices["d_aff"])
    assert "1 of 3 random classifiers skipped" in caplog.text
    np.testing.assert_array_equal(result.worst_case.skipped, [0, 1, 0, 0])
    for matrix in (result.values.d_psi, result.values.d_worst, result.values.d_worst_search, result.bounds.worst):
        assert np.isfinite(matrix).all()
    assert all(np.isfinite(float(v)) for row in result.diagnostics for v in row.values() if isinstance(v, float))
    assert {row["classifiers_skipped"] for row in result.diagnostics if row["mapped_to"] == "1"} == {1}


def test_every_classifier_is_checked_against_its_own_bound() -> None:
    """The per-classifier check: d_k <= c ||W_k|| d_aff, with the rebuilt map's residual where it is larger."""
    from affine_homotopy.core.extrinsic.bounds import LemmaCheck

    # source 0 onto target 1 (d_aff 0.1) and source 1 onto target 0 (d_aff 0.2), rebuilt maps at d_aff
    check = LemmaCheck(0.5, np.array([0.1]), np.array([1e-3]), np.array([1.0]), np.array([0.1]))
    tally = check.tally([np.array([0.04, 0.06, 0.5])], [np.array([1.0, 1.0, 10.0])])  # bounds 0.05, 0.05, 0.5
    other = LemmaCheck(0.5, np.array([0.2]), np.array([1e-3]), np.array([1.0]), np.array([0.2]))
    assert other.tally([np.array([0.1])], [np.array([1.0])]).violations.sum() == 0  # bound 0.1: equal is fine
    np.testing.assert_array_equal(tally.violations, [1])
    np.testing.assert_array_equal(tally.evaluated, [3])
    np.testing.assert_array_equal(tally.norm_max, [10.0])
    merged = tally + check.tally([np.array([0.01])], [np.array([20.0])])
    np.testing.assert_array_equal(merged.norm_max, [20.0])
    np.testing.assert_array_equal(merged.evaluated, [4])
    np.testing.assert_array_equal(merged.violations, [1])
    # target 1's rank rule discarded rows up to 0.1 long: the rebuilt map may reach sqrt(0.1^2 + 0.1^2)
    relaxed = LemmaCheck(0.5, np.array([0.1]), np.array([0.1]), np.array([1.0]), np.array([0.13]))
    assert relaxed.tally([np.array([0.06])], [np.array([1.0])]).violations.sum() == 0  # 0.5 * 0.13 = 0.065
    assert relaxed.excess(0) == pytest.approx(0.03)
    # beyond sqrt(0.1^2 + 0.01^2): d_aff and the weights disagree, d_aff is checked as it is
    stale = LemmaCheck(0.5, np.array([0.1]), np.array([0.01]), np.array([1.0]), np.array([0.13]))
    assert stale.tally([np.array([0.06])], [np.array([1.0])]).violations.sum() == 1 and stale.excess(0) == 0.0
    assert stale.drifted(0) and not relaxed.drifted(0)


def test_identical_encoders_meet_the_bound_at_the_rank_rules_tail() -> None:
    """Two copies of one encoder whose rank rule discards a small tail: d_aff is 0 on the truncated
    target, d_psi is at most c ||W|| tail, and the Lemma 5.2 check accepts it (no NumericalError)."""
    from affine_homotopy.core.extrinsic import check_bounds, extrinsic_distances, lemma_bound
    from affine_homotopy.core.intrinsic import IntrinsicSettings, pairwise_intrinsic
    from affine_homotopy.core.linalg import factorise

    rng = np.random.default_rng(3)
    n = 300
    X = rng.normal(size=(n, 6)) @ rng.normal(size=(6, 12))
    X[:, 5] += 1e-4 * rng.normal(size=n)  # below the rank rule: a discarded tail
    assert factorise(X).tail_row_norm_max > 0
    labels = (X[:, 0] > 0).astype(int)
    reps = [X, X.copy()]
    intrinsic = pairwise_intrinsic(reps, ["a", "b"], IntrinsicSettings(measures=("d_aff",), keep_weights=True, tol=1e-3))
    assert intrinsic.matrices["d_aff"].max() < 1e-9
    probes = [fit_softmax_probe(r, labels, 2) for r in reps]
    result = extrinsic_distances(reps, probes, ["a", "b"], map_weights=intrinsic.weights, d_aff=intrinsic.matrices["d_aff"])
    assert result.bounds.violations.sum() == 0
    slack = np.zeros((2, 2))
    for row in result.diagnostics:
        slack[["a", "b"].index(row["mapped_from"]), ["a", "b"].index(row["mapped_to"])] = row["bound_slack"]
        assert row["d_aff_rebuilt"] <= factorise(X).tail_row_norm_max * (1 + 1e-6) + 1e-12
    check_bounds(result.values.d_psi, lemma_bound(probes, intrinsic.matrices["d_aff"]), result.bounds.violations,
                 slack)


def test_a_broken_bound_is_a_numerical_error(worst) -> None:
    """check_bounds (run by the extrinsic job before it writes anything) raises on any violation."""
    from affine_homotopy.errors import NumericalError
    from affine_homotopy.core.extrinsic import check_bounds

    _, probes, _, intrinsic, result = worst
    bound = lemma_bound(probes, intrinsic.matrices["d_aff"])
    check_bounds(result.values.d_psi, bound, result.bounds.violations)
    broken = np.zeros_like(result.bounds.violations)
    broken[0, 2] = 3
    with pytest.raises(NumericalError, match="3 evaluated classifiers .*Lemma 5.2.*bound_worst.csv"):
        check_bounds(result.values.d_psi, bound, broken)
    with pytest.raises(NumericalError, match="Lemma 5.2.*bound.csv"):
        check_bounds(result.values.d_psi, bound / 10)


def _one_pair_search(temperature: float = 0.1, solver=None):
    """A search of one pair (a 5-wide source, a 4-wide target padded to 5), a random classifier on the
    target and a random map, for the ascent's tests."""
    import math

    from affine_homotopy.core.extrinsic.fixed import FixedClassifierSolver
    from affine_homotopy.core.extrinsic.prepare import PairMaps
    from affine_homotopy.core.extrinsic.search import Classifiers, WorstCaseSearch
    from affine_homotopy.core.linalg import factorise

    rng = np.random.default_rng(4)
    n = 120
    x = rng.standard_normal((n, 5))
    target = np.tanh(x @ rng.standard_normal((5, 4)))
    Y = torch.zeros((2, n, 5), dtype=torch.float64)
    Y[0], Y[1, :, :4] = torch.as_tensor(x), torch.as_tensor(target)
    design = factorise(Y[0]).affine_design()
    Z = design[:, :-1] * math.sqrt(n)
    mean = Y.mean(dim=1)
    scale = torch.sqrt(((Y - mean[:, None]) ** 2).sum(dim=2).mean(dim=1))
    settings = ExtrinsicSettings(search_temperature=temperature)
    search = WorstCaseSearch(Z, Y, mean, scale, 0, [1], {1: PairMaps(design, None, Y[1], factorise(Y[1]))}, settings,
                             solver or FixedClassifierSolver(Z, settings, "x"), ["x", "y"])
    W = torch.as_tensor(rng.standard_normal((1, 5, 2)))
    W[:, 4] = 0  # the padded row of the narrower target
    clf = Classifiers(W, torch.as_tensor(rng.standard_normal((1, 2))))
    A, c = torch.as_tensor(rng.standard_normal((Z.shape[1], 1, 2)) * 0.3), torch.zeros((1, 2), dtype=torch.float64)
    return search, clf, A, c


@pytest.mark.parametrize("temperature", [0.003, 0.1])
def test_ascent_direction_is_the_steepest_ascent_of_the_smooth_maximum(temperature) -> None:
    """Finite differences of the smooth maximum at the configured temperature (extrinsic.worst_search.
    temperature): the unit direction is the gradient, coordinate by coordinate, over its norm, and beats
    random directions."""
    import math

    from affine_homotopy.core.extrinsic.local import logits_of
    from affine_homotopy.core.extrinsic.search import Classifiers

    rng = np.random.default_rng(4)
    search, clf, A, c = _one_pair_search(temperature)
    Z = search.Z

    def smooth(candidate: Classifiers) -> float:
        diff = torch.softmax(search.logits(candidate), dim=2) - torch.softmax(logits_of(Z, A, c), dim=2)
        squared = (diff**2).sum(dim=2)
        return float((temperature * scale_ * torch.logsumexp(squared / (temperature * scale_), dim=0)).sum())

    scale_ = float(((torch.softmax(search.logits(clf), dim=2) - torch.softmax(logits_of(Z, A, c), dim=2)) ** 2)
                   .sum(dim=2).max())
    far = torch.tensor([1e9], dtype=torch.float64)

    def slope(direction: Classifiers, eps: float = 1e-6) -> float:
        forward, _ = search.step(clf, direction, torch.tensor([eps], dtype=torch.float64), far)
        backward, _ = search.step(clf, direction, torch.tensor([-eps], dtype=torch.float64), far)
        return (smooth(forward) - smooth(backward)) / (2 * eps)

    direction = search.ascent_direction(clf, A, c)
    assert float((direction.W**2).sum() + (direction.b**2).sum()) == pytest.approx(1.0)
    best = slope(direction)
    assert best > 0
    # the gradient by coordinates of (W, mean logit), as the step moves them (W's padded row stays 0)
    coordinates = [(row, k) for row in range(4) for k in range(2)] + [(None, k) for k in range(2)]
    gradient = []
    for row, k in coordinates:
        unit = Classifiers(torch.zeros((1, 5, 2), dtype=torch.float64), torch.zeros((1, 2), dtype=torch.float64))
        if row is None:
            unit.b[0, k] = 1.0
        else:
            unit.W[0, row, k] = 1.0
        gradient.append(slope(unit))
    gradient = np.array(gradient)
    found = np.concatenate([direction.W[0, :4].reshape(-1).numpy(), direction.b[0].numpy()])
    np.testing.assert_allclose(found, gradient / np.linalg.norm(gradient), rtol=1e-4, atol=1e-6)
    assert best == pytest.approx(np.linalg.norm(gradient), rel=1e-4)
    for _ in range(20):
        other = Classifiers(torch.as_tensor(rng.standard_normal((1, 5, 2))), torch.as_tensor(rng.standard_normal((1, 2))))
        other.W[:, 4] = 0
        norm = math.sqrt(float((other.W**2).sum() + (other.b**2).sum()))
        assert slope(Classifiers(other.W / norm, other.b / norm)) <= best * (1 + 1e-6)


def test_second_direction_is_that_of_the_smooth_maximums_own_minimiser() -> None:
    """The first direction is taken at the map the inner solve returned and turns with it (an interior
    point's optimal map and a simplex's differ); the second, at the smooth maximum's minimiser from that
    map, is the same from any map: the search sees one direction there (DISTINCT_DIRECTIONS)."""
    from affine_homotopy.core.extrinsic.search import DISTINCT_DIRECTIONS

    search, clf, A, c = _one_pair_search()
    rng = np.random.default_rng(7)
    maps = [(A, c)] + [(A + torch.as_tensor(rng.standard_normal(A.shape)) * 0.3, c + 0.1) for _ in range(2)]

    def distance(one, other) -> float:
        return float(torch.sqrt(((one.W - other.W) ** 2).sum() + ((one.b - other.b) ** 2).sum()))

    first = [search.ascent_direction(clf, *m) for m in maps]
    second = [search.ascent_direction(clf, *search.smooth_map(clf, *m)) for m in maps]
    assert all(distance(first[0], d) > DISTINCT_DIRECTIONS for d in first[1:])
    assert all(distance(second[0], d) < DISTINCT_DIRECTIONS / 10 for d in second[1:])


def test_take_better_accepts_by_the_rule_and_certifies_only_contenders() -> None:
    """Each head's classifiers, largest upper bound first, against the best so far: one replaces it only
    above best (1 + accept_rtol); only a classifier whose upper bound passes the threshold is certified
    (with the threshold as ``below``), one call per rank for all heads."""
    from dataclasses import replace

    from affine_homotopy.core.extrinsic.local import HeadResult
    from affine_homotopy.core.extrinsic.search import Classifiers, Evaluation, SearchPoint, WorstCaseSearch

    class Solver:
        """Certifies by a table of exact values; a solve stopped at ``below`` ends with the bound ``below``."""

        def __init__(self, exact: list[float]) -> None:
            self.exact, self.calls = exact, []

        def certify(self, heads, result, select, names, below):
            self.calls.append({h: float(below[h]) for h in select})
            upper, lower = result.upper.clone(), result.lower.clone()
            for h in select:
                passed = self.exact[h] > below[h]
                upper[h] = self.exact[h] if passed else below[h]
                lower[h] = self.exact[h] if passed else float("nan")
            return replace(result, upper=upper, lower=lower)

    # head 0: the largest bound (exact 1.2) is accepted; the next (exact 1.21) is not 1 % above it; the
    # last cannot pass. Head 1: the largest bound's exact value misses the threshold, the others cannot pass
    bounds = [1.005, 1.5, 1.3, 2.0, 0.5, float("nan")]
    exact = [1.0, 1.2, 1.21, 1.005, 0.5, float("nan")]
    solver = Solver(exact)
    settings = ExtrinsicSettings()
    f64 = {"dtype": torch.float64}
    search = WorstCaseSearch(torch.zeros((4, 2), **f64), torch.zeros((3, 4, 2), **f64), torch.zeros((3, 2), **f64),
                             torch.ones(3, **f64), 0, [1, 2], {}, settings, solver, ["x", "y", "z"])
    part = Classifiers(torch.arange(6.0, **f64)[:, None, None].expand(6, 2, 2).clone(), torch.zeros((6, 2), **f64))
    zero = torch.zeros(6, **f64)
    result = HeadResult(torch.tensor(bounds, **f64), {}, zero.long(), (), torch.zeros((2, 6, 2), **f64),
                        torch.zeros((6, 2), **f64), 0, zero, 0, zero)
    start = SearchPoint(Classifiers(torch.full((2, 2, 2), -1.0, **f64), torch.zeros((2, 2), **f64)),
                        torch.ones(2, **f64), torch.ones(2, **f64), torch.zeros((2, 2, 2), **f64),
                        torch.zeros((2, 2), **f64))
    best, moved, _ = search.take_better(start, part, Evaluation(result, torch.isfinite(result.upper), None))
    rtol = settings.search_accept_rtol
    assert solver.calls == [{1: pytest.approx(1 + rtol), 3: pytest.approx(1 + rtol)},
                            {2: pytest.approx(1.2 * (1 + rtol))}]
    assert moved.tolist() == [True, False]
    assert best.upper.tolist() == [1.2, 1.0] and best.lower[0] == 1.2
    assert torch.all(best.clf.W[0] == 1) and torch.all(best.clf.W[1] == -1)  # head 0 took classifier 1


def test_projection_onto_the_spectral_ball() -> None:
    import torch

    from affine_homotopy.core.extrinsic.prepare import project_to_ball

    rng = np.random.default_rng(5)
    W = torch.as_tensor(rng.standard_normal((3, 6, 3)))
    norms = np.linalg.norm(W.numpy(), 2, axis=(1, 2))
    radius = torch.as_tensor([norms[0] / 2, norms[1] * 2, norms[2]])
    projected, new_norms = project_to_ball(W, radius)
    np.testing.assert_allclose(np.linalg.norm(projected.numpy(), 2, axis=(1, 2)), [norms[0] / 2, norms[1], norms[2]])
    np.testing.assert_allclose(new_norms.numpy(), [norms[0] / 2, norms[1], norms[2]])
    np.testing.assert_array_equal(projected[1].numpy(), W[1].numpy())  # inside: untouched
    U, S, Vt = np.linalg.svd(W[0].numpy(), full_matrices=False)  # outside: singular values clipped
    np.testing.assert_allclose(projected[0].numpy(), U @ np.diag(np.minimum(S, norms[0] / 2)) @ Vt, atol=1e-12)


def test_worst_case_summary_on_a_hand_made_case() -> None:
    from affine_homotopy.jobs.extrinsic_tables import worst_case_summary

    d_psi = np.array([[0, 0.1, 0.0], [0.2, 0, 0.3], [0.1, 0.4, 0]])
    d_worst = np.array([[0, 0.1, 0.0], [0.3, 0, 0.3], [0.2, 0.4, 0]])
    search = np.array([[0, 0.2, 0.0], [0.3, 0, 0.6], [0.2, 0.4, 0]])
    bound_worst = np.array([[0, 1.0, 1.0], [1.0, 0, 0.5], [1.0, 1.0, 0]])
    task = (d_worst == d_psi) & ~np.eye(3, dtype=bool)  # (0,1), (0,2), (1,2), (2,1)
    row = worst_case_summary(d_psi, d_worst, search, bound_worst, task)
    assert row["n_pairs_positive_d_worst"] == 5  # (0, 2) has d_worst 0: no worst classifier
    assert row["task_probe_worst_share"] == pytest.approx(3 / 5)  # (0,1), (1,2), (2,1)
    assert row["task_probe_worst_share_after_search"] == pytest.approx(1 / 5)  # (2,1): the search found nothing
    assert row["d_worst_over_d_psi_median"] == pytest.approx(np.median([1, 1.5, 1, 2, 1]))
    assert row["d_worst_search_over_d_worst_median"] == pytest.approx(np.median([2, 1, 2, 1, 1]))
    assert row["d_worst_search_improved_pairs"] == 2
    assert row["bound_worst_violations"] == 1 and row["ordering_violations"] == 0


def test_soft_label_fit_stops_each_head_at_its_own_tolerance() -> None:
    """A head below the gradient tolerance leaves the loop; the others go on to theirs."""
    from affine_homotopy.core.extrinsic.local import errors_of, soft_label_fit

    rng = np.random.default_rng(0)
    n, r = 200, 5
    X = rng.standard_normal((n, r))
    Z = torch.tensor(np.linalg.qr(X - X.mean(axis=0))[0] * np.sqrt(n))  # Z^T Z = N I, Z^T 1 = 0 (the design)
    A_true = torch.tensor(rng.standard_normal((r, 3, 2)))
    A_true[:, 0] = 0  # head 0: uniform targets, met at the start (zero gradient)
    P = torch.softmax((Z @ A_true.reshape(r, -1)).reshape(n, 3, 2), dim=2)  # (N, heads, C)
    assert torch.all(P[:, 0] == 0.5)
    A0, c0 = torch.zeros((r, 3, 2), dtype=Z.dtype), torch.zeros((3, 2), dtype=Z.dtype)
    A, c, steps, grad = soft_label_fit(Z, P, A0, c0, max_iter=500, tol=1e-8)
    assert torch.all(grad <= 1e-8)
    assert torch.equal(A[:, 0], A0[:, 0])  # never moved
    assert float(errors_of(Z, A, c, P).max()) < 1e-5 and steps > 1
