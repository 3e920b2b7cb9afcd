"""The public API (affine_homotopy.api): each function equals the workflow engine's value for the same
pair, follows the tables' direction (row mapped onto column), and rejects bad input by name.

The engine values come from :func:`affine_homotopy.core.intrinsic.pairwise_intrinsic` and
:func:`affine_homotopy.core.extrinsic.extrinsic_distances` on all encoders at once (as the workflow calls
them); the API computes one pair at a time.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import affine_homotopy as ah
from affine_homotopy.errors import ConvergenceWarning, UpcastWarning
from affine_homotopy.core.extrinsic import extrinsic_distances
from affine_homotopy.core.intrinsic import IntrinsicSettings, pairwise_intrinsic
from affine_homotopy.core.probes import SoftmaxProbe

N = 120
TOL = 1e-6
MAX_ITER = 5000


@pytest.fixture(scope="module")
def encoders() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((N, 10))
    y = np.tanh(x @ rng.standard_normal((10, 6))) + 0.05 * rng.standard_normal((N, 6))
    low = x[:, :3] @ rng.standard_normal((3, 8)) + 0.01 * rng.standard_normal((N, 8))  # nearly rank 3
    return {"x": x, "y": y, "low": low}


@pytest.fixture(scope="module")
def engine(encoders):
    return pairwise_intrinsic(list(encoders.values()), list(encoders),
                              IntrinsicSettings(tol=TOL, max_iter=MAX_ITER, keep_weights=True))


def ordered_pairs(names):
    return [(i, j) for i in range(len(names)) for j in range(len(names)) if i != j]


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-8, abs_tol=1e-12)


def test_every_two_array_function_equals_the_engine_entry(encoders, engine) -> None:
    names, reps = list(encoders), list(encoders.values())
    two_array = {"d_iso": ah.d_iso, "cka": ah.cka, "pwcca": ah.pwcca, "svcca": ah.svcca, "procrustes": ah.procrustes}
    for i, j in ordered_pairs(names):
        result = ah.d_aff(reps[i], reps[j], tol=TOL, max_iter=MAX_ITER)
        assert close(result.upper, engine.matrices["d_aff"][i, j]), (names[i], names[j])
        assert close(result.lower, engine.matrices["d_aff_lower"][i, j])
        assert result.iterations == engine.iterations[i, j]
        lin = ah.d_lin(reps[i], reps[j], tol=TOL, max_iter=MAX_ITER)
        assert close(lin.upper, engine.matrices["d_lin"][i, j]) and close(lin.lower, engine.matrices["d_lin_lower"][i, j])
        assert lin.iterations == engine.lin_iterations[i, j] and lin.within_tol == engine.lin_converged[i, j]
        rel = ah.d_aff_rel(reps[i], reps[j], tol=TOL, max_iter=MAX_ITER)
        assert close(rel.upper, engine.matrices["d_aff_rel"][i, j])
        assert close(rel.lower, engine.matrices["d_aff_rel_lower"][i, j])
        for measure, function in two_array.items():
            assert close(function(reps[i], reps[j]), engine.matrices[measure][i, j]), (measure, names[i], names[j])
        r2, rho = ah.cca(reps[i], reps[j])
        assert close(r2, engine.matrices["cca_r2"][i, j]) and close(rho, engine.matrices["cca_rho"][i, j])


def test_pairwise_tables_are_the_engine_matrices_with_labels(encoders, engine, tmp_path) -> None:
    tables = ah.pairwise(encoders, measures=ah.MEASURES, tol=TOL, max_iter=MAX_ITER)
    assert set(tables) == set(ah.MEASURES)
    for measure, table in tables.items():
        assert table.names == tuple(encoders) and table.measure == measure
        np.testing.assert_allclose(table.values, engine.matrices[measure], rtol=1e-8, atol=1e-12, err_msg=measure)
    assert tables["d_aff"]["x", "low"] == tables["d_aff"].values[0, 2]
    path = tmp_path / "d_aff.csv"
    tables["d_aff"].to_csv(path)
    lines = path.read_text().splitlines()
    assert lines[0] == "mapped_from,x,y,low" and lines[3].startswith("low,")
    written = np.array([[float(v) for v in line.split(",")[1:]] for line in lines[1:]])
    np.testing.assert_allclose(written, tables["d_aff"].values, rtol=1e-9)


def test_direction_source_is_mapped_onto_target(encoders) -> None:
    # Theorem 4.1: an encoder maps exactly onto its own affine image of lower rank, never the reverse
    x = encoders["x"]
    image = x[:, :3] @ np.random.default_rng(1).standard_normal((3, 5)) + 2.0
    onto_image = ah.d_aff(x, image)
    from_image = ah.d_aff(image, x)
    scale = np.linalg.norm(x - x.mean(axis=0), axis=1).max()
    assert onto_image.upper <= 1e-9 * scale
    assert from_image.lower > 0.1 * scale
    table = ah.pairwise([x, image], names=["x", "image"])["d_aff"]
    assert table["x", "image"] == pytest.approx(onto_image.upper, abs=1e-12)
    assert table["image", "x"] == pytest.approx(from_image.upper, rel=1e-9)


def test_d_aff_result_is_a_certified_interval_and_its_map_attains_it(encoders) -> None:
    x, y = encoders["x"], encoders["y"]
    result = ah.d_aff(x, y, tol=1e-4)
    assert result.converged and result.lower <= result.upper and result.gap == result.upper - result.lower
    assert result.relative_gap <= 1e-4 + 1e-12
    assert float(result) == result.upper
    assert result.weights.shape == (N,) and result.weights.min() >= 0
    assert result.weights.sum() == pytest.approx(1.0, abs=1e-6)
    assert result.linear.shape == (10, 6) and result.bias.shape == (6,)
    residual = np.linalg.norm(result.transform(x) - y, axis=1)
    assert residual.max() == pytest.approx(result.upper, rel=1e-6)
    np.testing.assert_allclose(result.transform(x[0]), result.transform(x)[0])
    np.testing.assert_allclose(result.transform(torch.as_tensor(x)), result.transform(x))
    # invariance: an invertible affine change of the source's coordinates changes nothing
    rng = np.random.default_rng(3)
    moved = ah.d_aff(x @ rng.standard_normal((10, 10)) - 4.0, y, tol=1e-4)
    assert moved.lower <= result.upper * (1 + 1e-9) and result.lower <= moved.upper * (1 + 1e-9)


def test_the_solver_choice_reaches_the_engine(encoders) -> None:
    from affine_homotopy.core.minimax import SOLVERS

    x, y = encoders["x"], encoders["y"]
    for solver in SOLVERS:
        engine = pairwise_intrinsic([x, y], settings=IntrinsicSettings(tol=1e-4, measures=("d_aff",), solver=solver))
        result = ah.d_aff(x, y, tol=1e-4, solver=solver)
        assert close(result.upper, engine.matrices["d_aff"][0, 1]) and result.iterations == engine.iterations[0, 1]
    with pytest.raises(ValueError, match="no_such_solver"):
        ah.d_aff(x, y, solver="no_such_solver")


def test_a_missed_tol_warns_once_and_names_the_gap(encoders) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ah.d_aff(encoders["x"], encoders["y"], tol=1e-9, max_iter=2)
    convergence = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(convergence) == 1 and not result.converged
    assert f"gap {result.gap:.3g}" in str(convergence[0].message)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ah.pairwise(encoders, tol=1e-9, max_iter=2)
    convergence = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(convergence) == 1 and "6 of 6 ordered pairs" in str(convergence[0].message)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert ah.d_aff(encoders["x"], encoders["y"], tol=1e-3).converged
    assert not [w for w in caught if issubclass(w.category, ConvergenceWarning)]


def test_d_psi_equals_the_engine_and_respects_lemma_5_2(encoders, engine) -> None:
    x, y = encoders["x"], encoders["y"]
    rng = np.random.default_rng(5)
    weight, bias = rng.standard_normal((6, 3)), rng.standard_normal(3)
    result = ah.d_psi(x, y, (weight, bias), tol=TOL, max_iter=MAX_ITER)
    # the workflow's call: every encoder with its probe, the intrinsic stage's map weights
    source_probe = SoftmaxProbe(rng.standard_normal((10, 3)), np.zeros(3), 0.0, 0)
    weights = pairwise_intrinsic([x, y], settings=IntrinsicSettings(tol=TOL, max_iter=MAX_ITER, keep_weights=True,
                                                                 measures=("d_aff",))).weights
    workflow = extrinsic_distances([x, y], [source_probe, SoftmaxProbe(weight, bias, 0.0, 0)], map_weights=weights)
    assert close(result.value, workflow.values.d_psi[0, 1])
    assert close(result.d_aff.upper, engine.matrices["d_aff"][0, 1])
    assert result.bound == pytest.approx(0.5 * np.linalg.norm(weight, 2) * result.d_aff.upper, rel=1e-12)
    assert 0 <= result.value <= min(result.bound + 1e-12, math.sqrt(2))
    # an affine image of the target is mapped onto exactly: d_psi = 0 through any probe
    image = y @ rng.standard_normal((6, 6)) + 1.0
    assert ah.d_psi(image, y, (weight, bias)).value < 1e-6
    # a binary logistic classifier (D,) is the two-class softmax with logits (0, z)
    w1, b1 = rng.standard_normal(6), 0.3
    binary = ah.d_psi(x, y, (w1, b1))
    two_class = ah.d_psi(x, y, (np.column_stack([np.zeros(6), w1]), np.array([0.0, b1])))
    assert binary.value == pytest.approx(two_class.value, rel=1e-9)


# ---------------------------------------------------------------------------------------------
# bad input


def two_array_functions():
    return [ah.d_aff, ah.d_lin, ah.d_iso, ah.cka, ah.cca, ah.pwcca, ah.svcca, ah.procrustes,
            lambda a, b: ah.pairwise([a, b]), lambda a, b: ah.d_psi(a, b, (np.ones((b.shape[1], 2)), np.zeros(2)))
            if np.ndim(b) == 2 else ah.d_psi(a, b, (np.ones(3), 0.0))]


@pytest.mark.parametrize("function", two_array_functions())
def test_bad_arrays_are_named_with_their_shape(function) -> None:
    rng = np.random.default_rng(0)
    good = rng.standard_normal((20, 3))
    with pytest.raises(ValueError, match=r"same N examples.*\(20, 3\).*\(19, 3\)"):
        function(good, good[:19])
    with pytest.raises(ValueError, match=r"2-D \(N, D\) array, got shape \(20,\)"):
        function(good, good[:, 0])
    with pytest.raises(ValueError, match=r"N = 1 example.*N >= 2"):
        function(good[:1], good[:1])
    for bad_value in (np.nan, np.inf):
        broken = good.copy()
        broken[4, 1] = bad_value
        with pytest.raises(ValueError, match=r"shape \(20, 3\)\) holds 1 NaN/inf value.*row 4"):
            function(broken, good)


def test_integer_and_float16_input_is_upcast_with_a_note() -> None:
    rng = np.random.default_rng(1)
    x = rng.integers(-5, 5, size=(40, 4))
    y = rng.standard_normal((40, 3))
    with pytest.warns(UpcastWarning, match=r"source has dtype int64; upcast to float64"):
        value = ah.cka(x, y)
    assert value == ah.cka(x.astype(float), y)
    with pytest.warns(UpcastWarning, match=r"target has dtype float16.*rank rule"):
        ah.procrustes(y, y.astype(np.float16))


def test_unknown_measures_and_bad_settings_are_named() -> None:
    x = np.random.default_rng(2).standard_normal((20, 3))
    with pytest.raises(ValueError, match=r"unknown measure\(s\) \['d_affine'\]; known measures: d_aff, "):
        ah.pairwise([x, x], measures=["d_affine"])
    with pytest.raises(ValueError, match=r"tol must be a positive number.*-1"):
        ah.d_aff(x, x, tol=-1)
    with pytest.raises(ValueError, match=r"names must be 2 distinct labels"):
        ah.pairwise([x, x], names=["a", "a"])
    with pytest.raises(ValueError, match=r"needs at least 2 encoders, got 1"):
        ah.pairwise([x])
    with pytest.raises(ValueError, match=r"probe weight has shape \(2, 3\); expected \(D_target, C\) = \(3, C\)"):
        ah.d_psi(x, x, (np.ones((2, 3)), np.zeros(3)))


def test_importing_the_package_stays_light() -> None:
    import subprocess
    import sys

    code = ("import sys, affine_homotopy as ah; assert 'torch' not in sys.modules; ah.d_aff; "
            "heavy = [m for m in ('pandas', 'transformers', 'snakemake', 'matplotlib') if m in sys.modules]; "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# ---------------------------------------------------------------------------------------------
# one pair, torch input, devices and probes


def test_a_single_pair_solves_only_that_pair(encoders, monkeypatch) -> None:
    """d_aff(X, Y) runs the solver on X -> Y only (never Y -> X), and equals the all-pairs engine's cell."""
    from affine_homotopy.core import minimax

    calls = []
    original = minimax.minimax_fit

    def counting(design, targets, *args, **kwargs):
        calls.append((tuple(design.shape), tuple(targets.shape)))
        return original(design, targets, *args, **kwargs)

    monkeypatch.setattr("affine_homotopy.core.intrinsic.minimax_fit", counting)
    x, y = encoders["x"], encoders["y"]
    result = ah.d_aff(x, y, TOL, MAX_ITER)
    assert len(calls) == 1 and calls[0][1][0] == 1  # one solve of one target
    assert calls[0][0][1] == np.linalg.matrix_rank(x - x.mean(axis=0)) + 1  # the design is x's
    full = pairwise_intrinsic([x, y], ["x", "y"], IntrinsicSettings(tol=TOL, max_iter=MAX_ITER))
    assert close(result.upper, full.matrices["d_aff"][0, 1])


def test_explicit_pairs_match_all_pairs_and_leave_the_rest_empty(encoders, engine) -> None:
    reps, names = list(encoders.values()), list(encoders)
    settings = IntrinsicSettings(tol=TOL, max_iter=MAX_ITER)
    some = pairwise_intrinsic(reps, names, settings, pairs=[(2, 0), (0, 1)])
    for measure, matrix in some.matrices.items():
        for i, j in ((2, 0), (0, 1)):
            assert close(matrix[i, j], engine.matrices[measure][i, j]), measure
        assert np.isnan(matrix[1, 0]) and np.isnan(matrix[1, 2]) and np.isnan(matrix[0, 2])
    with pytest.raises(ValueError, match=r"pairs \[\(1, 1\)\]"):
        pairwise_intrinsic(reps, names, settings, pairs=[(1, 1)])


def test_torch_tensors_give_the_numpy_values_and_half_precision_is_upcast(encoders) -> None:
    x, y = encoders["x"], encoders["y"]
    assert close(float(ah.d_aff(torch.from_numpy(x), torch.from_numpy(y), TOL, MAX_ITER)),
                 float(ah.d_aff(x, y, TOL, MAX_ITER)))
    assert close(ah.cka(torch.from_numpy(x), y), ah.cka(x, y))
    for half in (torch.bfloat16, torch.float16):
        xh = torch.from_numpy(x).to(half)
        with pytest.warns(UpcastWarning, match=rf"source has dtype {str(half)[6:]}; upcast to float64"):
            value = ah.procrustes(xh, y)
        # the upcast value is the value of the rounded data in float64
        assert close(value, ah.procrustes(xh.to(torch.float64).numpy(), y))
    with pytest.raises(ValueError, match=r"source \(shape \(120, 10\)\) holds 1 NaN/inf value\(s\) in 1 row\(s\), first in row 3"):
        bad = torch.from_numpy(x.copy())
        bad[3, 2] = float("nan")
        ah.d_aff(bad, y)


def test_the_default_device_follows_the_input_and_a_missing_device_is_named(encoders) -> None:
    from affine_homotopy.api import resolve_device

    x = encoders["x"]
    assert resolve_device(None, [x]) == torch.device("cpu")
    assert resolve_device(None, [x, torch.from_numpy(x)]) == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match=r"device='tpu0' is not a device"):
        ah.d_aff(x, x, device="tpu0")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"device='cuda': no CUDA device is visible"):
            ah.d_aff(x, x, device="cuda")
        with pytest.raises(ValueError, match=r"device='cuda:1'"):
            ah.cka(x, x, device="cuda:1")


@pytest.mark.optional(reason="cuda")
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_are_computed_on_their_device(encoders) -> None:
    x, y = encoders["x"], encoders["y"]
    on_gpu = ah.d_aff(torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda(), 1e-3, MAX_ITER)
    on_cpu = ah.d_aff(x, y, 1e-3, MAX_ITER)
    assert on_gpu.lower <= on_cpu.upper * (1 + 1e-9) and on_cpu.lower <= on_gpu.upper * (1 + 1e-9)


def test_probes_are_oriented_by_their_type(encoders) -> None:
    """nn.Linear(D, C) has weight (C, D), a (weight, bias) pair weight (D, C): the same classifier in either
    form gives the same d_psi, also when it is square (C = D), where the shape cannot tell."""
    from affine_homotopy.api.inputs import as_probe

    rng = np.random.default_rng(3)
    x, y = encoders["x"], encoders["y"]
    torch.manual_seed(0)
    for classes in (3, y.shape[1]):  # the second one is square
        linear = torch.nn.Linear(y.shape[1], classes).double()
        weight, bias = as_probe(linear, y.shape[1])
        np.testing.assert_array_equal(weight, linear.weight.detach().numpy().T)
        # the logits the module computes
        np.testing.assert_allclose(y @ weight + bias, linear(torch.from_numpy(y)).detach().numpy(), rtol=1e-12)
        as_module = ah.d_psi(x, y, linear, tol=1e-3)
        as_pair = ah.d_psi(x, y, (linear.weight.detach().numpy().T, linear.bias.detach().numpy()), tol=1e-3)
        assert close(as_module.value, as_pair.value)
    no_bias = torch.nn.Linear(y.shape[1], 2, bias=False)
    np.testing.assert_array_equal(as_probe(no_bias, y.shape[1])[1], np.zeros(2))

    class Sklearnish:  # scikit-learn's convention: coef_ (C, D), intercept_ (C,)
        coef_ = rng.standard_normal((3, y.shape[1]))
        intercept_ = rng.standard_normal(3)

    weight, bias = as_probe(Sklearnish(), y.shape[1])
    np.testing.assert_array_equal(weight, Sklearnish.coef_.T)
    with pytest.raises(ValueError, match=r"torch.nn.Linear weight has shape \(2, 4\); expected \(C, D_target\) = \(C, 6\)"):
        as_probe(torch.nn.Linear(4, 2), y.shape[1])
    with pytest.raises(ValueError, match=r"probe must be a torch.nn.Linear.*got str"):
        as_probe("probe", y.shape[1])


def test_symmetric_measures_of_the_registry_are_symmetric(encoders) -> None:
    """The registry's `symmetric` flag is an invariance of the values: symmetric measures give the same
    value both ways on every pair, the others differ on some pair of these encoders."""
    from affine_homotopy.core.measures import MEASURES as RECORDS

    tables = ah.pairwise(encoders, [m for m in ah.MEASURES if m not in ("d_lin",)], tol=1e-3)
    for name, table in tables.items():
        values = table.values
        symmetric = np.allclose(values, values.T, rtol=1e-7, atol=1e-10)
        assert symmetric == RECORDS[name].symmetric, name
