"""Certified extrinsic distances: every interval contains an independent optimum, d_worst is the
largest fixed-classifier distance, the values are stable under input rounding, thread counts and the
iterations' precision, and the multi-class local search neither stalls silently nor moves."""

from __future__ import annotations

import logging
import math
import zlib
from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy.optimize import linprog
from scipy.special import expit

from affine_homotopy.errors import NumericalError
from affine_homotopy.core.extrinsic import ExtrinsicSettings, extrinsic_distances
from affine_homotopy.core.probes import ProbeSet, SoftmaxProbe

FLOAT32_EPS = float(np.finfo(np.float32).eps)


# ---------------------------------------------------------------------------------------------
# an independent reference: bisection on the level with a full Chebyshev LP (scipy, interior point)


def affine_family(X: np.ndarray) -> np.ndarray:
    """[basis, 1] of the affine maps of X under the rank rule (numpy's SVD, the paper's threshold)."""
    centred = X - X.mean(axis=0)
    U, s, _ = np.linalg.svd(centred, full_matrices=False)
    threshold = 5 * s[0] * FLOAT32_EPS * max(X.shape) if s.size else 0.0
    rank = int((s > max(threshold, 5 * FLOAT32_EPS * np.linalg.norm(X, axis=1).max())).sum())
    return np.hstack([U[:, :rank] * math.sqrt(len(X)), np.ones((len(X), 1))])


def violation(design: np.ndarray, q: np.ndarray, t: float) -> float:
    """min over maps of the largest slab violation in logit units at level t (<= 0: feasible)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        hi = np.where(1 - q - t > 0, np.log(q + t) - np.log(1 - q - t), np.inf)
        lo = np.where(q - t > 0, np.log(q - t) - np.log(1 - q + t), -np.inf)
    rows, rhs = [], []
    for side, bound in ((1.0, hi), (-1.0, -lo)):
        keep = np.isfinite(bound)
        rows.append(np.hstack([side * design[keep], -np.ones((keep.sum(), 1))]))
        rhs.append(bound[keep])
    cost = np.zeros(design.shape[1] + 1)
    cost[-1] = 1.0
    bounds = [(None, None)] * design.shape[1] + [(-1.0, None)]
    result = linprog(cost, A_ub=np.vstack(rows), b_ub=np.concatenate(rhs), bounds=bounds, method="highs-ipm")
    if result.status != 0:  # interior point struggled: the simplex as a second opinion
        result = linprog(cost, A_ub=np.vstack(rows), b_ub=np.concatenate(rhs), bounds=bounds, method="highs-ds")
    assert result.status == 0, result.message
    return float(result.fun)


def reference_distance(X: np.ndarray, q: np.ndarray, steps: int = 40) -> tuple[float, float]:
    """``sqrt(2) [t_lo, t_hi]`` bracketing the optimum by bisection on the level."""
    design = affine_family(X)
    lo, hi = 0.0, float(np.abs(0.5 - q).max() + 0.5)
    for _ in range(steps):
        middle = 0.5 * (lo + hi)
        if violation(design, q, middle) <= 1e-10:
            hi = middle
        else:
            lo = middle
    return math.sqrt(2) * lo, math.sqrt(2) * hi


def class_one(Y: np.ndarray, probe: SoftmaxProbe, lam: float = 1.0) -> np.ndarray:
    logits = lam * (Y @ probe.weight + probe.bias)
    return expit(logits[:, 0] - logits[:, 1])


def probe(rng, width: int, scale: float = 1.0, n_classes: int = 2) -> SoftmaxProbe:
    return SoftmaxProbe(scale * rng.standard_normal((width, n_classes)), 0.1 * rng.standard_normal(n_classes), 0.0, 0)


def case(name: str):
    # a seed fixed by the name (str hashes change with every interpreter: PYTHONHASHSEED)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if name == "random":
        X = rng.standard_normal((400, 12))
        Y = np.tanh(X @ rng.standard_normal((12, 6)) / 2) + 0.1 * rng.standard_normal((400, 6))
        return X, Y, probe(rng, 6, 2.0)
    if name == "near_0_and_1":  # a sharp classifier: most probabilities within 1e-8 of 0 or 1
        X = rng.standard_normal((300, 8))
        Y = X @ rng.standard_normal((8, 5)) + 0.3 * rng.standard_normal((300, 5))
        return X, Y, probe(rng, 5, 12.0)
    if name == "rank_deficient":  # the source spans 3 of its 10 dimensions
        X = rng.standard_normal((300, 3)) @ rng.standard_normal((3, 10))
        Y = np.tanh(X[:, :4]) + 0.2 * rng.standard_normal((300, 4))
        return X, Y, probe(rng, 4, 2.0)
    if name == "n_close_to_p":  # 40 examples, 36 dimensions
        X = rng.standard_normal((40, 36))
        Y = rng.standard_normal((40, 5))
        return X, Y, probe(rng, 5, 1.0)
    if name == "one_dimensional":
        X = rng.standard_normal((200, 1))
        Y = np.hstack([np.sin(2 * X), X**2])
        return X, Y, probe(rng, 2, 1.5)
    if name == "two_dimensional":
        X = rng.standard_normal((200, 2))
        Y = np.hstack([np.tanh(X), X[:, :1] * X[:, 1:]])
        return X, Y, probe(rng, 3, 1.5)
    raise KeyError(name)


CASES = ["random", "near_0_and_1", "rank_deficient", "n_close_to_p", "one_dimensional", "two_dimensional"]


@pytest.mark.parametrize("name", CASES)
def test_interval_contains_the_independent_optimum(name) -> None:
    X, Y, target_probe = case(name)
    settings = ExtrinsicSettings()
    result = extrinsic_distances([X, Y], [probe(np.random.default_rng(0), X.shape[1]), target_probe],
                                        settings=settings, pairs=[(0, 1)])
    lower, upper = result.lower.d_psi[0, 1], result.values.d_psi[0, 1]
    ref_lo, ref_hi = reference_distance(X, class_one(Y, target_probe))
    assert result.interval(0, 1).certified
    assert lower <= ref_hi * (1 + 1e-7) + 1e-9, (lower, ref_lo, ref_hi)
    assert upper >= ref_lo * (1 - 1e-7) - 1e-9, (upper, ref_lo, ref_hi)
    assert upper - lower <= settings.tol * upper + 1e-12
    assert np.isnan(result.values.d_psi[1, 0])  # only the requested pair was computed


@pytest.mark.parametrize("name", CASES)
def test_a_dominated_stop_decides_as_the_full_solve(name) -> None:
    """The search rejects a step whose value is at most its threshold: stopping the LPs once the upper
    bound falls there must decide every threshold as the full solve's interval does (thresholds
    around the independent optimum; without the smooth start, so that the LPs do the work)."""
    from affine_homotopy.core.extrinsic.binary import BinaryProblem, BinaryTarget, ChebyshevLP, certify

    X, Y, target_probe = case(name)
    design = affine_family(X)
    q = class_one(Y, target_probe)
    target = BinaryTarget(q, 1 - q)
    logit = np.log(np.clip(q, 1e-12, None)) - np.log(np.clip(1 - q, 1e-12, None))
    start = np.linalg.lstsq(design, logit, rcond=None)[0]  # the least-squares logit map
    full = certify([BinaryProblem(ChebyshevLP(design), target, [start])], 1e-3, 1e-6, smooth=False)[0].interval
    ref_lo, ref_hi = reference_distance(X, q)
    for factor in (0.5, 0.999, 1.002, 1.05, 1.2, 2.0):
        threshold = factor * ref_lo
        stopped = certify([BinaryProblem(ChebyshevLP(design), target, [start], threshold)], 1e-3, 1e-6,
                          smooth=False)[0].interval
        assert (stopped.upper > threshold) == (full.upper > threshold), (threshold, stopped, full)
        assert stopped.upper >= ref_lo * (1 - 1e-7)  # still an upper bound of the optimum
        if stopped.stop == "dominated":
            assert stopped.upper <= threshold and stopped.iterations <= full.iterations
        else:  # not dominated: the same LPs, the same interval
            assert (stopped.lower, stopped.upper, stopped.iterations) == (full.lower, full.upper, full.iterations)


@pytest.mark.parametrize("name", CASES)
def test_deciding_at_the_threshold_agrees_with_the_full_solve(name) -> None:
    """The search's LPs (levels held at the acceptance threshold until it is settled)
    decide every threshold outside the full solve's interval as that interval does, and every
    interval they return, stopped or closed, is a valid bound of the independent optimum."""
    from affine_homotopy.core.extrinsic.binary import BinaryProblem, BinaryTarget, ChebyshevLP, certify

    X, Y, target_probe = case(name)
    design = affine_family(X)
    q = class_one(Y, target_probe)
    target = BinaryTarget(q, 1 - q)
    logit = np.log(np.clip(q, 1e-12, None)) - np.log(np.clip(1 - q, 1e-12, None))
    start = np.linalg.lstsq(design, logit, rcond=None)[0]
    full = certify([BinaryProblem(ChebyshevLP(design), target, [start])], 1e-3, 1e-6, smooth=False)[0].interval
    ref_lo, ref_hi = reference_distance(X, q)
    for factor in (0.5, 0.9, 0.999, 1.002, 1.1, 2.0):
        threshold = factor * ref_lo
        decided = certify([BinaryProblem(ChebyshevLP(design), target, [start], threshold)], 1e-3, 1e-6,
                          smooth=False, decide=True)[0].interval
        assert decided.upper >= ref_lo * (1 - 1e-7) - 1e-12, (threshold, decided)
        if decided.stop == "dominated":
            assert decided.upper <= threshold
        else:  # above the threshold: closed to tol around the optimum, as the full solve
            assert decided.stop in ("tol", "floor"), decided
            assert decided.lower <= ref_hi * (1 + 1e-7) + 1e-12
            assert decided.upper - decided.lower <= 1e-3 * decided.upper + 1e-12
        if not full.lower <= threshold <= full.upper:
            assert (decided.upper > threshold) == (full.upper > threshold), (threshold, decided, full)


def _batch_run(monkeypatch, design, targets, starts, thresholds, members: int, decide: bool):
    """Every target's certificate in one :func:`certify` call, ``members`` LPs to a kernel call; the
    certificates and the batch sizes of the kernel's calls."""
    from affine_homotopy.core import lp as lp_kernel
    from affine_homotopy.core.extrinsic import binary

    sizes, solve = [], lp_kernel.solve_chebyshev
    monkeypatch.setattr(binary, "members_per_call", lambda device: members)
    monkeypatch.setattr(lp_kernel, "solve_chebyshev", lambda *a, **k: sizes.append(a[1].shape[0]) or solve(*a, **k))
    problems = [binary.BinaryProblem(binary.ChebyshevLP(design), binary.BinaryTarget(q, 1 - q), [w], below)
                for q, w, below in zip(targets, starts, thresholds)]
    found = binary.certify(problems, 1e-3, 1e-6, smooth=False, decide=decide)
    monkeypatch.undo()
    return found, sizes


@pytest.mark.parametrize("decide", [False, True])
def test_batched_classifiers_certify_as_one_at_a_time(monkeypatch, decide) -> None:
    """The classifiers of one source certified in lock step, each round's LPs one kernel call on the
    shared design, against the same classifiers one LP a call: an exact target stays exact, a head
    whose upper bound falls below its threshold is dominated in both, a head whose threshold lies
    below its value closes to tol, and every interval overlaps its one-at-a-time interval within tol
    (task probes, and a random target nothing affine fits)."""
    from affine_homotopy.core.extrinsic.binary import Design

    X, Y, _ = case("random")
    design = Design.of(affine_family(X))
    rng = np.random.default_rng(4)
    exact = expit(design.array @ rng.standard_normal(design.array.shape[1]))
    hard = rng.uniform(0.02, 0.98, len(X))
    targets = [exact, hard] + [class_one(Y, probe(rng, Y.shape[1], 2.0)) for _ in range(3)]
    starts = [np.linalg.lstsq(design.array, np.log(q) - np.log(1 - q), rcond=None)[0] for q in targets]
    free = [-math.inf] * len(targets)
    full, _ = _batch_run(monkeypatch, design, targets, starts, free, 1, False)
    # head 2 cannot matter above its start's value (at least 1.2 times its value): it is dominated before
    # any LP; head 3's threshold lies below its value
    start_upper = math.sqrt(2) * np.abs(expit(design.array @ starts[2]) - targets[2]).max()
    thresholds = free[:2] + [max(1.2 * full[2].interval.upper, 1.01 * start_upper), 0.8 * full[3].interval.lower,
                             -math.inf]
    single, single_sizes = _batch_run(monkeypatch, design, targets, starts, thresholds, 1, decide)
    batched, batched_sizes = _batch_run(monkeypatch, design, targets, starts, thresholds, len(targets), decide)
    assert max(single_sizes) == 1 and max(batched_sizes) > 1
    for h, (one, many) in enumerate(zip(single, batched)):
        a, b = one.interval, many.interval
        assert a.stop == b.stop, (h, a, b)
        assert b.lower <= a.upper * (1 + 1e-3) + 1e-6 and a.lower <= b.upper * (1 + 1e-3) + 1e-6, (h, a, b)
        assert many.cert_residual <= 1e-10
    assert batched[0].interval.stop == "floor" and batched[0].interval.upper <= 1e-6
    assert batched[2].interval.stop == "dominated" and batched[2].interval.upper <= thresholds[2]
    for h in (1, 3, 4):
        b = batched[h].interval
        assert b.stop == "tol" and b.upper - b.lower <= 1e-3 * b.upper, (h, b)


def test_brute_force_grid_on_a_one_dimensional_source() -> None:
    """For x in R^1 every map is u = a x + b: a fine grid's best value is at least the optimum."""
    X, Y, target_probe = case("one_dimensional")
    q = class_one(Y, target_probe)
    x = (X[:, 0] - X[:, 0].mean()) / X[:, 0].std()
    a, b = np.meshgrid(np.linspace(-6, 6, 601), np.linspace(-6, 6, 601))
    best = np.inf
    for row in range(a.shape[0]):  # errors of every (a, b) on the row of the grid
        u = a[row][:, None] * x[None, :] + b[row][:, None]
        best = min(best, float(np.abs(expit(u) - q).max(axis=1).min()))
    settings = ExtrinsicSettings()
    result = extrinsic_distances([X, Y], [probe(np.random.default_rng(0), 1), target_probe], pairs=[(0, 1)],
                                 settings=settings)
    grid = math.sqrt(2) * best
    assert result.lower.d_psi[0, 1] <= grid * (1 + 1e-9)
    # the value is within tol of the optimum, which is at most the grid's best
    assert result.values.d_psi[0, 1] <= grid / (1 - settings.tol) * (1 + 1e-9)


@pytest.mark.parametrize("scale", [1e-6, 1e-2, 1.0])
def test_the_smoothed_maximum_is_scipys_logsumexp_and_its_gradient_the_finite_difference(scale) -> None:
    """The start's objective against scipy.special.logsumexp (its value) and central differences (its
    gradient), down to a scale where the exponentials of unshifted terms would overflow; it bounds the
    largest squared error from above by at most scale log N."""
    from scipy.special import logsumexp

    from affine_homotopy.core.extrinsic.binary import smooth_max_objective

    rng = np.random.default_rng(3)
    A = np.hstack([rng.standard_normal((400, 5)), np.ones((400, 1))])
    q, w = rng.uniform(0.02, 0.98, 400), 0.3 * rng.standard_normal(6)
    value, gradient, largest = smooth_max_objective(w, A, q, scale)
    squared = (expit(A @ w) - q) ** 2
    assert largest == pytest.approx(np.sqrt(squared.max()), rel=1e-12)
    assert value == pytest.approx(scale * logsumexp(squared / scale), rel=1e-12)
    assert squared.max() <= value <= squared.max() + scale * math.log(400) * (1 + 1e-12)
    step = 1e-6
    numeric = [(smooth_max_objective(w + step * e, A, q, scale)[0] - smooth_max_objective(w - step * e, A, q, scale)[0])
               / (2 * step) for e in np.eye(6)]
    np.testing.assert_allclose(gradient, numeric, rtol=1e-5, atol=1e-9 * max(1.0, np.abs(gradient).max()))


def test_the_smooth_start_stops_at_the_first_map_within_enough() -> None:
    """With ``enough`` between the start's largest error and the minimiser's, the start returns a map at
    most ``enough`` (to the objective's rounding) that the full run would have refined further."""
    from affine_homotopy.core.extrinsic.binary import BinaryTarget, smooth_max_start

    rng = np.random.default_rng(5)
    A = np.hstack([rng.standard_normal((500, 8)), np.ones((500, 1))])
    q = expit(A @ rng.standard_normal(9) + 0.5 * rng.standard_normal(500))
    target = BinaryTarget(q, 1 - q)
    w0 = np.zeros(9)
    start_error = target.errors(A @ w0).max()
    full_error = target.errors(A @ smooth_max_start(A, target, w0)).max()
    enough = full_error + 0.5 * (start_error - full_error)
    stopped_error = target.errors(A @ smooth_max_start(A, target, w0, enough=enough)).max()
    assert stopped_error <= enough * (1 + 1e-9)
    assert stopped_error > full_error * (1 + 1e-3)


def test_exact_fit_stops_at_the_absolute_floor() -> None:
    """A target that is an affine image of the source: d = 0 up to rounding, closed by atol."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((300, 6))
    Y = X @ rng.standard_normal((6, 6)) + 1.0
    settings = ExtrinsicSettings()
    result = extrinsic_distances([X, Y], [probe(rng, 6), probe(rng, 6, 3.0)], settings=settings)
    assert result.values.d_psi[0, 1] <= settings.atol and result.values.d_psi[1, 0] <= settings.atol
    assert 0 <= result.lower.d_psi[0, 1] <= result.values.d_psi[0, 1]


def three_encoders(seed: int, n: int, width: int, n_random: int):
    """A source, a nonlinear image of it and a noisy half of it, each with a task probe and
    ``n_random`` random classifiers (two classes)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, width)) * np.linspace(2.0, 0.5, width)
    reps = [X, np.tanh(X @ rng.standard_normal((width, width - width // 5)) / 2),
            X[:, : width // 2] + 0.1 * rng.standard_normal((n, width // 2))]
    probes = [probe(rng, r.shape[1], 2.0) for r in reps]
    randoms = [ProbeSet(rng.standard_normal((n_random, r.shape[1], 2)), 0.1 * rng.standard_normal((n_random, 2)),
                        0.0, 0) for r in reps]
    return reps, probes, randoms


@pytest.fixture(scope="module")
def small_study():
    return three_encoders(11, 300, 10, 4)


@pytest.mark.slow
def test_d_worst_is_the_largest_fixed_classifier_distance(small_study) -> None:
    """Recomputed independently (LP bisection) for every classifier of every pair."""
    reps, probes, randoms = small_study
    settings = ExtrinsicSettings(search_steps=0, search_candidates=0)
    result = extrinsic_distances(reps, probes, None, None, randoms, settings)
    for i in range(3):
        for j in range(3):
            if i == j:
                continue
            classifiers = [probes[j]] + [SoftmaxProbe(w, b, 0.0, 0) for w, b in zip(randoms[j].weight, randoms[j].bias)]
            brackets = [reference_distance(reps[i], class_one(reps[j], clf), steps=30) for clf in classifiers]
            largest_lo, largest_hi = max(lo for lo, _ in brackets), max(hi for _, hi in brackets)
            assert result.lower.d_worst[i, j] <= largest_hi * (1 + 1e-7) + 1e-9
            assert result.values.d_worst[i, j] >= largest_lo * (1 - 1e-7) - 1e-9
            gap = result.values.d_worst[i, j] - result.lower.d_worst[i, j]
            assert gap <= settings.tol * result.values.d_worst[i, j] + 1e-12
            assert result.values.d_psi[i, j] >= brackets[0][0] * (1 - 1e-7) - 1e-9  # the task probe alone


def test_the_default_search_is_certified_and_at_least_d_worst(small_study) -> None:
    """At the default budget every searched value is at least d_worst, and where the search found a
    larger one, its interval closes to tol and brackets the independent optimum of its classifier."""
    reps, probes, randoms = small_study
    settings = ExtrinsicSettings()
    result = extrinsic_distances(reps, probes, None, None, randoms, settings)
    values, lower = result.values, result.lower
    improved = 0
    for (i, j), found in result.worst_case.searched.items():
        assert values.d_worst_search[i, j] >= values.d_worst[i, j]
        if found.value <= values.d_worst[i, j]:
            continue
        improved += 1
        ref_lo, ref_hi = reference_distance(reps[i], class_one(reps[j], SoftmaxProbe(found.W, found.b, 0.0, 0)),
                                            steps=30)
        assert lower.d_worst_search[i, j] <= ref_hi * (1 + 1e-7) + 1e-9
        assert values.d_worst_search[i, j] >= ref_lo * (1 - 1e-7) - 1e-9
        assert values.d_worst_search[i, j] - lower.d_worst_search[i, j] <= settings.tol * values.d_worst_search[i, j]
    assert improved  # on this study the default budget finds larger worst cases than d_worst's classifiers


@pytest.mark.optional(reason="cuda")
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_engine_on_cuda_certifies_as_on_the_cpu(small_study) -> None:
    """The LPs on the source's device (every head of a call in one kernel call there): d_psi and d_worst
    intervals overlap the CPU's within tol, the searched value within the search's 1 %."""
    reps, probes, randoms = small_study
    settings = ExtrinsicSettings(search_steps=1, search_candidates=2)
    cpu = extrinsic_distances(reps, probes, None, None, randoms, settings)
    cuda = extrinsic_distances(reps, probes, None, None, randoms, replace(settings, device="cuda"))
    assert cuda.certified
    off = ~np.eye(3, dtype=bool)
    for measure in ("d_psi", "d_worst"):
        (a, a_lower), (b, b_lower) = ((getattr(r.values, measure)[off], getattr(r.lower, measure)[off])
                                      for r in (cpu, cuda))
        assert np.all(b_lower <= a * (1 + settings.tol) + settings.atol), measure
        assert np.all(a_lower <= b * (1 + settings.tol) + settings.atol), measure
    assert _relative(cpu.values.d_worst_search, cuda.values.d_worst_search, settings.atol).max(initial=0) <= 1e-2


def _relative(a: np.ndarray, b: np.ndarray, floor: float) -> np.ndarray:
    off = ~np.eye(len(a), dtype=bool) & (np.abs(a) > floor)
    return np.abs(a[off] - b[off]) / np.abs(a[off])


@pytest.fixture(scope="module")
def stability_runs(small_study):
    """The same job with the default search settings: as it is, after a float32-ulp jitter of every
    embedding, with two torch threads, and with float32 iterations."""
    reps, probes, randoms = small_study
    settings = ExtrinsicSettings()
    rng = np.random.default_rng(0)
    base = extrinsic_distances(reps, probes, None, None, randoms, settings)
    jittered = [(r * (1 + 1e-7 * rng.standard_normal(r.shape))).astype(np.float32).astype(np.float64) for r in reps]
    jitter = extrinsic_distances(jittered, probes, None, None, randoms, settings)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        two_threads = extrinsic_distances(reps, probes, None, None, randoms, settings)
    finally:
        torch.set_num_threads(threads)
    single = extrinsic_distances(reps, probes, None, None, randoms, replace(settings, dtype=torch.float32))
    return settings, base, {"jitter": jitter, "threads": two_threads, "float32": single}


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["jitter", "threads", "float32"])
def test_certified_values_are_stable(stability_runs, variant) -> None:
    settings, base, others = stability_runs
    other = others[variant]
    for measure in ("d_psi", "d_worst"):
        a, b = getattr(base.values, measure), getattr(other.values, measure)
        # both intervals contain the optimum and close to tol: the values differ by at most ~tol
        assert _relative(a, b, settings.atol).max(initial=0) <= 2 * settings.tol, measure
    # the searched value: the same path up to 1 % (steps accepted only for 1 % gains)
    assert _relative(base.values.d_worst_search, other.values.d_worst_search, settings.atol).max(initial=0) <= 1e-2


@pytest.mark.slow
def test_ordering_recomputed_from_the_matrices(stability_runs) -> None:
    """d_psi <= d_worst <= d_worst_search, and each lower bound below its value, cell by cell."""
    _, base, _ = stability_runs
    off = ~np.eye(3, dtype=bool)
    values = base.values
    assert np.all(values.d_psi[off] <= values.d_worst[off])
    assert np.all(values.d_worst[off] <= values.d_worst_search[off])
    for measure in ("d_psi", "d_worst", "d_worst_search"):
        assert np.all(getattr(base.lower, measure)[off] <= getattr(base.values, measure)[off])


# ---------------------------------------------------------------------------------------------
# more than two classes: the local search, restarted when it stalls


@pytest.fixture(scope="module")
def three_classes():
    rng = np.random.default_rng(5)
    n = 300
    X = rng.standard_normal((n, 8))
    reps = [X, np.tanh(X @ rng.standard_normal((8, 6)))]
    probes = [probe(rng, r.shape[1], 1.5, 3) for r in reps]
    return reps, probes


def test_multi_class_values_carry_certified_intervals_and_the_log_names_wide_ones(three_classes, caplog) -> None:
    reps, probes = three_classes
    with caplog.at_level(logging.INFO, logger="affine_homotopy.core.extrinsic"):
        result = extrinsic_distances(reps, probes)
    assert result.n_classes == 3
    warnings = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    for i, j in ((0, 1), (1, 0)):
        interval = result.interval(i, j)
        assert interval.certified and 0 <= interval.lower <= interval.upper == result.values.d_psi[i, j]
        wide = interval.relative_gap > ExtrinsicSettings().tol
        assert wide == (f"{result.names[i]} -> {result.names[j]}: d_psi" in warnings)


def test_a_stalled_refinement_is_restarted_and_counted(three_classes, monkeypatch, caplog) -> None:
    """The first refinement of every head makes no progress (as L-BFGS's line search can fail on one
    rounding of the inputs): the heads are refined again from their other starts."""
    import affine_homotopy.core.extrinsic.local as local

    reps, probes = three_classes
    reference = extrinsic_distances(reps, probes)
    original = local.refine
    calls = {"n": 0}

    def first_call_stalls(Z, P, A, c, settings, first_step=1.0):
        calls["n"] += 1
        if calls["n"] == 1:
            values = local.errors_of(Z, A, c, P).max(dim=0).values
            return values, 0, torch.zeros_like(values), A, c
        return original(Z, P, A, c, settings, first_step)

    monkeypatch.setattr(local, "refine", first_call_stalls)
    with caplog.at_level(logging.INFO, logger="affine_homotopy.core.extrinsic"):
        result = extrinsic_distances(reps, probes)
    first = result.diagnostics[0]  # the first source's refinement was the one made to stall
    assert first["mapped_from"] == "0" and first["refine_stalled"] and first["refine_restart_improved"]
    assert not result.diagnostics[1]["refine_stalled"]
    assert any("made no progress" in r.getMessage() for r in caplog.records)
    # the restart improved on the stalled start, to within a few per cent of the unstalled run
    assert first["d_psi"] < first[first["winning_start"]] * (1 - 1e-3)
    assert result.values.d_psi[0, 1] <= reference.values.d_psi[0, 1] * 1.05


def test_multi_class_values_are_stable_under_jitter(three_classes) -> None:
    reps, probes = three_classes
    rng = np.random.default_rng(1)
    base = extrinsic_distances(reps, probes)
    jittered = [(r * (1 + 1e-7 * rng.standard_normal(r.shape))).astype(np.float32).astype(np.float64) for r in reps]
    other = extrinsic_distances(jittered, probes)
    assert _relative(base.values.d_psi, other.values.d_psi, 1e-6).max(initial=0) <= 1e-2


def _unfinished_kernel(monkeypatch) -> None:
    """Every interior-point solve stops after one iteration (status "iteration_limit")."""
    from affine_homotopy.core import lp

    solve = lp.solve_chebyshev
    monkeypatch.setattr(lp, "solve_chebyshev", lambda *args, **kwargs: solve(*args, **{**kwargs, "max_iterations": 1}))


def test_a_failed_lp_is_a_numerical_error_naming_the_pair_and_classifier(monkeypatch) -> None:
    """Neither the kernel nor HiGHS finishes: an error naming the LP, never a value."""
    import scipy.optimize

    from types import SimpleNamespace

    _unfinished_kernel(monkeypatch)
    monkeypatch.setattr(scipy.optimize, "linprog", lambda *args, **kwargs: SimpleNamespace(status=4, message="stub"))
    X, Y, target_probe = case("random")
    with pytest.raises(NumericalError, match=r"0 -> 1, classifier task.*HiGHS status"):
        extrinsic_distances([X, Y], [probe(np.random.default_rng(0), X.shape[1]), target_probe], pairs=[(0, 1)])


def test_an_unfinished_kernel_falls_back_to_highs_and_counts_it(monkeypatch) -> None:
    """An LP the kernel cannot finish is solved by HiGHS's dual simplex, once per LP: the interval still
    contains the independent optimum."""
    from affine_homotopy.core.extrinsic.binary import BinaryProblem, BinaryTarget, ChebyshevLP, certify

    _unfinished_kernel(monkeypatch)
    X, Y, target_probe = case("random")
    design = affine_family(X)
    q = class_one(Y, target_probe)
    lp = ChebyshevLP(design)
    start = np.linalg.lstsq(design, np.log(q) - np.log(1 - q), rcond=None)[0]
    found = certify([BinaryProblem(lp, BinaryTarget(q, 1 - q), [start])], 1e-3, 1e-6, smooth=False)[0]
    result = found.interval
    ref_lo, ref_hi = reference_distance(X, q)
    assert lp.fallbacks == lp.lps > 0
    assert result.lower <= ref_hi * (1 + 1e-7) + 1e-9 and result.upper >= ref_lo * (1 - 1e-7) - 1e-9
    assert result.upper - result.lower <= 1e-3 * result.upper + 1e-12
    assert found.cert_residual <= 1e-10


def test_inverse_temperature_enters_the_targets_and_the_bound() -> None:
    """lam = 2.5: the certified interval contains the optimum for softmax(lam * logits), and Lemma 5.2's
    bound is (lam / 2) ||W||_2 d_aff, computed here with numpy's spectral norm."""
    from affine_homotopy.core.extrinsic import lemma_bound

    lam = 2.5
    X, Y, target_probe = case("random")
    settings = ExtrinsicSettings(inverse_temperature=lam)
    result = extrinsic_distances([X, Y], [probe(np.random.default_rng(0), X.shape[1]), target_probe],
                                        settings=settings, pairs=[(0, 1)])
    ref_lo, ref_hi = reference_distance(X, class_one(Y, target_probe, lam))
    assert result.lower.d_psi[0, 1] <= ref_hi * (1 + 1e-7) + 1e-9
    assert result.values.d_psi[0, 1] >= ref_lo * (1 - 1e-7) - 1e-9
    plain = extrinsic_distances([X, Y], [probe(np.random.default_rng(0), X.shape[1]), target_probe],
                                       pairs=[(0, 1)])
    # lam matters
    assert abs(plain.values.d_psi[0, 1] - result.values.d_psi[0, 1]) > 10 * settings.tol * result.values.d_psi[0, 1]
    d_aff = np.array([[0.0, 0.3], [0.7, 0.0]])
    probes = [probe(np.random.default_rng(1), 4), probe(np.random.default_rng(2), 6)]
    expected = lam / 2 * d_aff * np.array([np.linalg.norm(p.weight, 2) for p in probes])[None, :]
    np.testing.assert_allclose(lemma_bound(probes, d_aff, lam), expected, rtol=1e-12)


def test_splitting_random_classifiers_into_blocks_changes_nothing(small_study) -> None:
    """block_mb small enough for one target per block against one block for all: the same values."""
    reps, probes, _ = small_study
    rng = np.random.default_rng(12)
    randoms = [ProbeSet(rng.standard_normal((12, r.shape[1], 2)), 0.1 * rng.standard_normal((12, 2)), 0.0, 0)
               for r in reps]
    settings = ExtrinsicSettings(search_steps=0, search_candidates=0)
    one_block = extrinsic_distances(reps, probes, None, None, randoms, settings)
    split = extrinsic_distances(reps, probes, None, None, randoms, replace(settings, block_mb=1))
    per_head = 8 * 2 * (10 * reps[0].shape[0] + settings.working_set * 4)  # bytes, as the engine counts
    assert 2**20 // per_head < 12 * 2  # block_mb = 1 holds fewer heads than one source's random classifiers
    np.testing.assert_array_equal(split.values.d_psi, one_block.values.d_psi)
    for kind in ("values", "lower"):
        np.testing.assert_allclose(getattr(split, kind).d_worst, getattr(one_block, kind).d_worst,
                                   rtol=2 * settings.tol, atol=settings.atol)


@pytest.fixture(scope="module")
def selection_runs():
    """One small random problem (three encoders, two classes, 3 random classifiers each, d_aff and its
    maps), run with each extrinsic selection: the full one first."""
    from affine_homotopy.core.intrinsic import IntrinsicSettings, pairwise_intrinsic

    reps, probes, randoms = three_encoders(21, 160, 6, 3)
    intrinsic = pairwise_intrinsic(reps, settings=IntrinsicSettings(keep_weights=True, measures=("d_aff",)))
    settings = ExtrinsicSettings(search_steps=2, search_candidates=2)
    runs = {}
    for measures in (("d_psi", "d_worst", "d_worst_search"), ("d_psi", "d_worst"), ("d_psi",)):
        runs[measures] = extrinsic_distances(reps, probes, ["a", "b", "c"], intrinsic.weights, randoms,
                                             replace(settings, measures=measures), intrinsic.matrices["d_aff"])
    return runs, intrinsic.matrices["d_aff"]


@pytest.mark.parametrize("measures", [("d_psi", "d_worst"), ("d_psi",)], ids="+".join)
def test_an_unselected_measure_is_not_computed_and_changes_nothing_else(selection_runs, measures) -> None:
    """A selection computes its measures only (the rest None, their diagnostics columns absent), and the
    ones it computes equal those of the full selection; the matrices are what the workflow's rule
    declares for that selection (measures.extrinsic_outputs)."""
    import pandas as pd

    from affine_homotopy.jobs.extrinsic_tables import diagnostics_frame, summary_row
    from affine_homotopy.core.measures import extrinsic_outputs

    runs, d_aff = selection_runs
    full, part = runs[("d_psi", "d_worst", "d_worst_search")], runs[measures]
    np.testing.assert_array_equal(part.values.d_psi, full.values.d_psi)
    np.testing.assert_array_equal(part.lower.d_psi, full.lower.d_psi)
    np.testing.assert_array_equal(part.bounds.task, full.bounds.task)
    assert part.values.d_worst_search is None and part.lower.d_worst_search is None
    if "d_worst" in measures:
        np.testing.assert_array_equal(part.values.d_worst, full.values.d_worst)
        # bound_worst's largest norm also covers the searched classifiers, which stay in the ball of the
        # random ones (radius null): equal up to the projection's rounding
        np.testing.assert_allclose(part.bounds.worst, full.bounds.worst, rtol=1e-12)
    else:
        assert part.values.d_worst is None and part.lower.d_worst is None and part.bounds.worst is None
    assert sorted(part.matrices()) == sorted(extrinsic_outputs(measures))
    assert sorted(full.matrices()) == sorted(extrinsic_outputs(("d_psi", "d_worst", "d_worst_search")))
    part.check_bounds()
    # the diagnostics carry the selected measures' columns only; the summary works without the others
    names = part.names
    frame = diagnostics_frame(part, d_aff)
    columns = set(frame.columns)
    assert "d_psi_gap" in columns and ("d_worst_gap" in columns) == ("d_worst" in measures)
    assert "search_radius" not in columns and not any(c.startswith("d_worst_search") for c in columns)
    matrices = {name: pd.DataFrame(m, index=names, columns=names) for name, m in part.matrices().items()
                if not name.endswith("_lower")}
    row = summary_row("task", "layer1", matrices, frame, pd.DataFrame({"converged": [True]}),
                      pd.DataFrame({"accuracy": [0.9, 0.8, 0.7]}), 1e-3)
    assert row["violations"] == 0 and not any(key.startswith("d_worst_search") for key in row)
    if "d_worst" in measures:
        assert row["ordering_violations"] == row["bound_worst_violations"] == 0
        assert "task_probe_worst_share" in row and "task_probe_worst_share_after_search" not in row
    else:
        assert not any(key.startswith(("d_worst", "bound_worst", "task_probe_worst")) for key in row)


def test_every_pair_reports_its_certificates_residual_and_fallbacks(selection_runs) -> None:
    """Per pair, the largest certificate residual over every measure's certificates is within the
    limit a certificate is built on, and positive where the pair's d_psi rests on LP duals; the
    summary carries the largest and the fallbacks' total."""
    import pandas as pd

    from affine_homotopy.core.extrinsic.binary import CERT_RESIDUAL_LIMIT
    from affine_homotopy.jobs.extrinsic_tables import diagnostics_frame, summary_row

    runs, d_aff = selection_runs
    full = runs[("d_psi", "d_worst", "d_worst_search")]
    frame = diagnostics_frame(full, d_aff)
    residual = frame["cert_residual_max"].to_numpy(dtype=float)
    assert np.all((residual >= 0) & (residual <= CERT_RESIDUAL_LIMIT))
    on_duals = (frame["d_psi_lps"] > 0) & (frame["d_psi_lower"] > 0)
    assert on_duals.any() and np.all(residual[on_duals.to_numpy()] > 0)
    assert (frame["highs_fallbacks"] == 0).all()
    names = full.names
    matrices = {name: pd.DataFrame(m, index=names, columns=names) for name, m in full.matrices().items()
                if not name.endswith("_lower")}
    row = summary_row("task", "layer1", matrices, frame, pd.DataFrame({"converged": [True]}),
                      pd.DataFrame({"accuracy": [0.9, 0.8, 0.7]}), 1e-3)
    assert row["cert_residual_max"] == residual.max() and row["highs_fallbacks"] == 0


def test_settings_refuse_a_search_without_d_worst() -> None:
    """Settings built in code follow the config's rule: the search starts from d_worst's classifiers."""
    from affine_homotopy.errors import ConfigError

    with pytest.raises(ConfigError, match="d_worst_search without d_worst"):
        ExtrinsicSettings(measures=("d_psi", "d_worst_search"))
    with pytest.raises(ConfigError, match="unknown measure"):
        ExtrinsicSettings(measures=("d_psi", "d_lin"))


def test_the_log_and_the_summary_name_every_interval_wider_than_tol_widest_first() -> None:
    import pandas as pd

    from affine_homotopy.core.extrinsic.engine import wider_than_tol
    from affine_homotopy.jobs.extrinsic_tables import _gap_stats

    frame = pd.DataFrame({"mapped_from": ["a", "b", "c"], "mapped_to": ["b", "c", "a"],
                          "d_psi_gap": [0.05, 1e-4, 0.2]})
    stats = _gap_stats(frame, "d_psi_gap", 1e-3)
    assert stats["d_psi_gap_above_tol"] == 2
    assert stats["d_psi_gap_above_tol_pairs"] == "c -> a 20.00%; a -> b 5.00%"
    assert wider_than_tol(frame.to_dict("records"), 1e-3) == ["c -> a: d_psi 20.00%", "a -> b: d_psi 5.00%"]
    assert wider_than_tol(frame.to_dict("records"), 1e-3, shown=1) == ["c -> a: d_psi 20.00%", "and 1 more"]
