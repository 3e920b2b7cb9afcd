"""The certified minimax solvers (:mod:`affine_homotopy.core.minimax`): ``jacobi`` (default) and ``lawson``.

Every interval a solver returns is re-certified here, independently of the package: the upper bound
is recomputed (numpy) as the largest residual of the returned map on the data, and the lower bound
by a separate weighted least squares (``numpy.linalg.lstsq`` on sqrt-weighted rows) at the returned
weights. A generic conic solver (cvxpy) then has to land inside the interval.
"""

from __future__ import annotations

import logging
import math
import runpy
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from affine_homotopy.core import minimax
from affine_homotopy.models.derived import gaussian_noise, random_affine, svd_truncate
from affine_homotopy.errors import AffineHomotopyError, NumericalError
from affine_homotopy.core.intrinsic import (IntrinsicSettings, affine_map, missed_tol_warning, pairwise_intrinsic,
                                            solver_table)
from affine_homotopy.jobs.io import write_embeddings
from affine_homotopy.core.linalg import check_finite_representations, factorise

from tests.helpers import REPO

SOLVERS = tuple(minimax.SOLVERS)
F32_EPS = float(np.finfo(np.float32).eps)


# ---------------------------------------------------------------------------------------------
# independent references (numpy / cvxpy only)


def affine_design(x: np.ndarray) -> np.ndarray:
    """``[U_r, 1/sqrt(N)]``: an orthonormal basis of the centred column space (numpy SVD) and a constant."""
    n = x.shape[0]
    centred = x - x.mean(axis=0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    rank = int((s > 1e-9 * s[0]).sum()) if s.size and s[0] > 0 else 0
    return np.hstack([u[:, :rank], np.full((n, 1), 1 / math.sqrt(n))])


def recertify(design: np.ndarray, targets: np.ndarray, result: minimax.MinimaxResult) -> tuple[np.ndarray, np.ndarray]:
    """(upper, lower) per batch entry: the returned map's largest residual, and the dual value at the
    returned lower-bound weights from a separate weighted least squares."""
    coef = result.coef.double().numpy()
    upper = np.linalg.norm(targets - design @ coef, axis=2).max(axis=1)
    lower = []
    for b, weights in enumerate(result.weights_lower.double().numpy()):
        assert (weights >= 0).all() and weights.sum() == pytest.approx(1.0, abs=1e-9)
        root = np.sqrt(weights)[:, None]
        fitted, *_ = np.linalg.lstsq(root * design, root * targets[b], rcond=None)
        lower.append(math.sqrt(float((weights * ((targets[b] - design @ fitted) ** 2).sum(axis=1)).sum())))
    return upper, np.array(lower)


def assert_certified(design: np.ndarray, targets: np.ndarray, result: minimax.MinimaxResult, scale: float) -> None:
    upper, lower = recertify(design, targets, result)
    np.testing.assert_allclose(result.upper.numpy(), upper, rtol=1e-9, atol=1e-12 * scale)
    np.testing.assert_allclose(result.lower.numpy(), np.minimum(lower, upper), rtol=1e-7, atol=1e-10 * scale)
    # the returned map is the weighted least-squares fit at the returned weights (what affine_map rebuilds)
    for b, weights in enumerate(result.weights.double().numpy()):
        root = np.sqrt(weights)[:, None]
        fitted, *_ = np.linalg.lstsq(root * design, root * targets[b], rcond=None)
        residual = np.linalg.norm(targets[b] - design @ fitted, axis=1).max()
        assert residual == pytest.approx(upper[b], rel=1e-6, abs=1e-10 * scale)


def socp_minimax(source: np.ndarray, target: np.ndarray) -> float:
    """Eq. 19 by a generic conic solver: min t s.t. ||y_n - x_n A - b||_2 <= t."""
    cp = pytest.importorskip("cvxpy")
    n, q = target.shape
    A, b, t = cp.Variable((source.shape[1], q)), cp.Variable((1, q)), cp.Variable()
    fitted = source @ A + np.ones((n, 1)) @ b
    problem = cp.Problem(cp.Minimize(t), [cp.SOC(t * np.ones(n), target - fitted, axis=1)])
    problem.solve(solver="CLARABEL")
    assert problem.status == cp.OPTIMAL, problem.status
    return max(float(problem.value), 0.0)


def pad(targets: list[np.ndarray]) -> np.ndarray:
    width = max(t.shape[1] for t in targets)
    out = np.zeros((len(targets), targets[0].shape[0], width))
    for b, t in enumerate(targets):
        out[b, :, : t.shape[1]] = t
    return out


def solve(x: np.ndarray, targets: list[np.ndarray], solver: str, tol: float, max_iter: int = 20000, **kwargs):
    design = affine_design(x)
    stacked = pad(targets)
    scale = max(float(np.linalg.norm(stacked, axis=2).max()), 1e-300)
    atol = torch.full((len(targets),), 10 * F32_EPS * scale, dtype=torch.float64)
    result = minimax.minimax_fit(torch.from_numpy(design), torch.from_numpy(stacked), atol, tol, max_iter,
                                 solver=solver, orthonormal=True, **kwargs)
    return design, stacked, result, scale


# ---------------------------------------------------------------------------------------------
# problems: (source, [targets]) -- each target's own optimum is computed by cvxpy


def heavy_tails(rng):  # Student t with 2 degrees of freedom: a few rows far out dominate the maximum
    return rng.standard_t(2, (80, 6)) + 2.0, [rng.standard_t(2, (80, 5)) - 1.0]


def n_close_to_p(rng):  # 30 rows, 26 + 1 design columns: the map nearly interpolates
    return rng.standard_normal((30, 26)), [rng.standard_normal((30, 4))]


def low_rank_source(rng):  # rank 3 inside 10 columns; the target depends nonlinearly on the latent
    latent = rng.standard_normal((60, 3))
    source = latent @ rng.standard_normal((3, 10)) + rng.standard_normal(10)
    return source, [np.tanh(2 * latent @ rng.standard_normal((3, 5))) + 0.1 * rng.standard_normal((60, 5))]


def scalar_target(rng):  # q = 1: classical Chebyshev regression
    return rng.standard_normal((60, 5)), [rng.standard_normal((60, 1)) ** 3]


def exact_fit(rng):  # the target is an affine image of the source: the optimum is 0
    source = rng.standard_normal((50, 4))
    return source, [source @ rng.standard_normal((4, 3)) + rng.standard_normal(3)]


def zero_padded_batch(rng):  # four targets of widths 2, 5, 3 (exact) and 1 (all zero) in one batch
    source = rng.standard_normal((70, 5)) + 1.0
    return source, [rng.standard_normal((70, 2)), np.abs(rng.standard_normal((70, 5))),
                    source[:, :3] @ rng.standard_normal((3, 3)), np.zeros((70, 1))]


PROBLEMS = [heavy_tails, n_close_to_p, low_rank_source, scalar_target, exact_fit, zero_padded_batch]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda f: f.__name__)
def test_recertified_interval_contains_socp_optimum(problem, solver: str) -> None:
    x, targets = problem(np.random.default_rng(11))
    tol = 1e-5
    design, stacked, result, scale = solve(x, targets, solver, tol)
    assert result.converged.all(), f"{solver} stopped at {result.iterations.tolist()} iterations"
    assert_certified(design, stacked, result, scale)
    for b, target in enumerate(targets):
        optimum = socp_minimax(x, target)
        lower, upper = float(result.lower[b]), float(result.upper[b])
        slack = 1e-6 * max(optimum, 1e-3 * scale)  # the conic solver's own accuracy
        assert lower <= optimum + slack, f"target {b}: lower bound {lower} above the optimum {optimum}"
        assert upper >= optimum - slack, f"target {b}: upper bound {upper} below the optimum {optimum}"
        assert upper - lower <= tol * upper + 10 * F32_EPS * scale + 1e-12
        assert upper == pytest.approx(optimum, rel=1e-4, abs=20 * F32_EPS * scale)


@pytest.mark.parametrize("problem", [heavy_tails, low_rank_source, zero_padded_batch], ids=lambda f: f.__name__)
def test_float32_iterations_are_recertified_in_float64(problem) -> None:
    """float32 iterations, float64 certificate: the returned interval is exact for its map and weights and
    overlaps a float64 solve's."""
    x, targets = problem(np.random.default_rng(12))
    design, stacked, mixed, scale = solve(x, targets, "jacobi", 1e-3, iterate_dtype=torch.float32)
    assert mixed.upper.dtype == torch.float64
    assert_certified(design, stacked, mixed, scale)
    _, _, exact, _ = solve(x, targets, "jacobi", 1e-8)
    assert (mixed.lower <= exact.upper * (1 + 1e-12) + 1e-12 * scale).all()
    assert (exact.lower <= mixed.upper * (1 + 1e-12) + 1e-12 * scale).all()


def test_converged_flag_is_the_stopping_test() -> None:
    x, targets = heavy_tails(np.random.default_rng(13))
    for max_iter, expected in ((2, False), (20000, True)):
        design, stacked, result, scale = solve(x, targets, "jacobi", 1e-6, max_iter=max_iter)
        atol = 10 * F32_EPS * scale
        gap = result.upper - result.lower
        assert result.converged.tolist() == (gap <= 1e-6 * result.upper + atol).tolist() == [expected]
        assert_certified(design, stacked, result, scale)  # a capped interval is still certified


# ---------------------------------------------------------------------------------------------
# the safeguard


class Unguarded(minimax.JacobiUpdate):
    """The same steps without the monotone safeguard (no point is ever rejected)."""

    def _safeguard(self, ids, w, sq_residual, k, dual):
        return w, sq_residual, k, torch.zeros_like(dual, dtype=torch.bool)


def low_rank_problem() -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(0)
    latent = rng.standard_normal((200, 2))
    source = latent @ rng.standard_normal((2, 20)) + rng.standard_normal(20)  # rank 2 in 20 columns
    target = np.tanh(2 * latent @ rng.standard_normal((2, 8))) + 0.1 * rng.standard_normal((200, 8))
    return torch.from_numpy(affine_design(source)), torch.from_numpy(target - target.mean(axis=0))[None]


def run_update(update: minimax.JacobiUpdate, design: torch.Tensor, targets: torch.Tensor, tol: float,
               max_iter: int, trace: list[float]) -> minimax.MinimaxResult:
    original = update._safeguard

    def traced(ids, w, sq_residual, k, dual):
        trace.append(float(dual[0]))
        return original(ids, w, sq_residual, k, dual)

    update._safeguard = traced
    atol = torch.zeros(1, dtype=torch.float64)
    return minimax._iterate(design, targets, atol, tol, max_iter, update, True)


def test_low_rank_source_converges_thanks_to_the_safeguard() -> None:
    """Plain Jacobi steps (no Anderson mixing) oscillate on a rank-2 source and never reach the gap;
    with the safeguard (rejections and step halving) the same steps converge, and so does the
    default solver with Anderson mixing."""
    design, targets = low_rank_problem()
    tol, max_iter = 1e-4, 1500
    options = minimax.SolverOptions(memory=0, step=0.5)
    unguarded_trace: list[float] = []
    unguarded = run_update(Unguarded(1, 200, torch.float64, "cpu", options), design, targets, tol, max_iter,
                           unguarded_trace)
    assert int(unguarded.iterations[0]) == max_iter  # never reached the gap
    late = np.array(unguarded_trace[-100:])
    assert (np.diff(late) < 0).sum() >= 25  # the dual value keeps falling back: oscillation, not slow progress

    for memory in (0, minimax.DEFAULT_MEMORY):
        guarded_trace: list[float] = []
        update = minimax.JacobiUpdate(1, 200, torch.float64, "cpu", minimax.SolverOptions(memory=memory, step=0.5))
        guarded = run_update(update, design, targets, tol, max_iter, guarded_trace)
        assert int(guarded.iterations[0]) < max_iter
        assert int(update.rejections[0]) > 0  # the safeguard did act
        assert float(guarded.upper[0] - guarded.lower[0]) <= tol * float(guarded.upper[0])
        assert_certified(design.numpy(), targets.numpy(), guarded, 1.0)
        # the best dual value (the certified lower bound) never decreases
        assert (np.diff(np.maximum.accumulate(guarded_trace)) >= 0).all()


# ---------------------------------------------------------------------------------------------
# both solvers on the demo's pairs


def demo_encoders(n: int = 400, dim: int = 48, seed: int = 0) -> dict[str, np.ndarray]:
    """The demo's encoder set (config/config.yaml: a base and its SVD truncations to 80/60/40/20 %, a random
    affine image and a noisy copy), derived with the workflow's own transforms from a small base with a
    decaying spectrum (instead of all-MiniLM-L6-v2, to keep the test fast and offline)."""
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((n, dim))
    mixing = rng.standard_normal((dim, dim)) * np.linspace(1.0, 0.05, dim)  # a decaying spectrum
    base = np.tanh(latent @ mixing / 2) + rng.standard_normal(dim)
    base = base.astype(np.float32)
    out = {"base": base}
    for fraction in (0.8, 0.6, 0.4, 0.2):
        out[f"svd{int(fraction * 100)}"] = svd_truncate(base, base[:1], fraction)[0].astype(np.float32)
    out["affine"] = random_affine(base, base[:1], seed=0, layer=6)[0].astype(np.float32)
    out["noise"] = gaussian_noise(base, base[:1], sigma=0.1, seed=0, layer=6)[0].astype(np.float32)
    return out


@pytest.mark.slow  # both solvers on the demo's seven encoders, every pair
def test_both_solvers_agree_within_their_gaps_on_the_demo_pairs() -> None:
    encoders = demo_encoders()
    names, reps = list(encoders), list(encoders.values())
    results = {}
    for solver in SOLVERS:
        settings = IntrinsicSettings(tol=1e-3, max_iter=5000, solver=solver, measures=("d_aff", "d_lin"),
                                  keep_weights=True)
        results[solver] = pairwise_intrinsic(reps, names, settings)
        assert results[solver].solver == solver
        assert results[solver].converged.all() and results[solver].lin_converged.all()
    jac, law = results["jacobi"].matrices, results["lawson"].matrices
    off = ~np.eye(len(names), dtype=bool)
    for upper, lower in (("d_aff", "d_aff_lower"), ("d_lin", "d_lin_lower")):
        floor = 1e-6 * max(jac[upper].max(), 1.0)
        assert (jac[lower][off] <= law[upper][off] * (1 + 1e-9) + floor).all()
        assert (law[lower][off] <= jac[upper][off] * (1 + 1e-9) + floor).all()
    # the jacobi solver needs far fewer weighted fits where the interval is not closed at once
    hard = off & (results["lawson"].iterations > 20)
    assert hard.sum() >= 10
    assert np.median(results["jacobi"].iterations[hard]) * 3 < np.median(results["lawson"].iterations[hard])
    # the stored (float64) weights rebuild a map whose largest residual on the original data lies
    # between d_aff (attained on the target's rank-truncated representation) and sqrt(d_aff^2 + tail^2)
    for i, j in ((0, 4), (4, 0), (5, 6), (1, 3)):
        A, b = affine_map(reps[i], reps[j], results["jacobi"].weights[i, j])
        residual = np.linalg.norm(reps[j].astype(np.float64) - (reps[i].astype(np.float64) @ A + b), axis=1).max()
        tail = factorise(reps[j]).tail_row_norm_max
        assert jac["d_aff"][i, j] * (1 - 1e-8) <= residual <= math.hypot(jac["d_aff"][i, j], tail) * (1 + 1e-8)


def test_rank_deficiency_grid_uses_the_configured_solver() -> None:
    from affine_homotopy.report.analysis import rank_deficiency

    encoders = demo_encoders(n=300, dim=24)
    reps = {"base": encoders["base"], "noise": encoders["noise"]}
    messages: list[str] = []
    grids = {solver: rank_deficiency(reps, [0.5, 1.0], IntrinsicSettings(tol=1e-3, max_iter=3000, solver=solver),
                                     log=messages.append) for solver in SOLVERS}
    for frame in grids.values():
        assert (frame["unconverged"] == 0).all()
    # the medians of two certified solves at gap 1e-3 agree to about that gap
    np.testing.assert_allclose(grids["jacobi"]["median"], grids["lawson"]["median"], rtol=2e-3, atol=1e-6)
    capped = rank_deficiency(reps, [0.5, 1.0], IntrinsicSettings(tol=1e-6, max_iter=2, solver="jacobi"),
                             log=messages.append)
    assert capped["unconverged"].sum() > 0
    assert any(m.startswith("warning:") and "stopped at max_iter = 2" in m for m in messages)
    with pytest.raises(AffineHomotopyError, match="unknown minimax solver 'newton'") as raised:
        rank_deficiency(reps, [0.5, 1.0], IntrinsicSettings(solver="newton"))
    assert raised.value.argument == "solver" and raised.value.value == "newton"


# ---------------------------------------------------------------------------------------------
# settings, tables and warnings


def test_unknown_solver_is_a_config_error_before_work() -> None:
    with pytest.raises(AffineHomotopyError, match=r"newton.*jacobi.*lawson") as raised:
        pairwise_intrinsic([np.zeros((5, 2)), np.ones((5, 2))], settings=IntrinsicSettings(solver="newton"))
    assert raised.value.argument == "solver"
    with pytest.raises(AffineHomotopyError, match="max_iter must be at least 1") as raised:
        IntrinsicSettings(max_iter=0)
    assert (raised.value.argument, raised.value.value) == ("max_iter", 0)


def test_solver_table_and_missed_tol_warning() -> None:
    rng = np.random.default_rng(14)
    reps = [rng.standard_t(3, (120, 5)), rng.standard_t(3, (120, 4)), rng.standard_normal((120, 6))]
    names = ["a", "b", "c"]
    capped = pairwise_intrinsic(reps, names, IntrinsicSettings(tol=1e-6, max_iter=2))
    frame = pd.DataFrame(solver_table(capped))
    assert len(frame) == 6 and set(frame["solver"]) == {"jacobi"}
    assert {"converged", "d_lin_converged", "d_lin_iterations", "iterations", "gap", "d_aff_lower"} <= set(frame)
    assert not frame["converged"].any() and (frame["iterations"] == 2).all()
    assert (frame["gap"] == frame["d_aff"] - frame["d_aff_lower"]).all()
    message = missed_tol_warning(capped, 1e-6, 2)
    assert message.startswith("6 of 6 d_aff pairs, 6 of 6 d_lin pairs stopped at max_iter = 2")
    done = pairwise_intrinsic(reps, names, IntrinsicSettings(tol=1e-3, max_iter=5000))
    assert pd.DataFrame(solver_table(done))["converged"].all()
    assert missed_tol_warning(done, 1e-3, 5000) is None


def test_every_pair_leaves_the_engine_as_its_certified_interval() -> None:
    """``IntrinsicResult.intervals``: one Interval per computed pair and solved measure, the same numbers as
    the matrices; stopped at max_iter where the stopping test failed, at tol where it held."""
    rng = np.random.default_rng(31)
    reps = [rng.standard_normal((80, 4)), rng.standard_t(3, (80, 3)), rng.standard_normal((80, 2))]
    for max_iter in (2, 5000):
        result = pairwise_intrinsic(reps, None, IntrinsicSettings(tol=1e-4, max_iter=max_iter), pairs=[(0, 1), (2, 1)])
        assert set(result.intervals) == {"d_aff", "d_lin", "d_aff_rel"}
        assert all(set(result.intervals[m]) == {(0, 1), (2, 1)} for m in result.intervals)
        for measure, iterations, flags in (("d_aff", result.iterations, result.converged),
                                           ("d_lin", result.lin_iterations, result.lin_converged)):
            for (i, j), interval in result.intervals[measure].items():
                assert interval.upper == result.matrices[measure][i, j]
                assert interval.lower == result.matrices[f"{measure}_lower"][i, j] and interval.certified
                assert interval.iterations == iterations[i, j] and interval.within_tol == flags[i, j]
                assert interval.stop == ("tol" if interval.within_tol else "max_iter") and interval.solver == "jacobi"
                assert interval.within_tol == (max_iter == 5000)


# ---------------------------------------------------------------------------------------------
# non-finite embeddings: a named error at the start of the job, no output


def test_check_finite_representations_names_encoder_task_layer_and_rows() -> None:
    good, bad = np.zeros((10, 3), np.float32), np.zeros((10, 3), np.float32)
    bad[[2, 7], 1] = np.nan
    bad[7, 2] = np.inf
    check_finite_representations([good, good], ["a", "b"], "sst2", "layer6")  # no error
    with pytest.raises(NumericalError, match=r"encoder 'b', task 'sst2', layer layer6: 3 non-finite values "
                                             r"\(NaN/Inf\) in 2 of 10 rows, first at row 2"):
        check_finite_representations([good, bad], ["a", "b"], "sst2", "layer6")


def fake_snakemake(tmp_path: Path, inputs, outputs: dict[str, str], params: dict, wildcards: dict, rule: str):
    class Outputs(dict):
        __getattr__ = dict.__getitem__

    return SimpleNamespace(
        input=inputs, output=Outputs(outputs), params=SimpleNamespace(**params), wildcards=SimpleNamespace(
            **wildcards, items=lambda: wildcards.items()), resources={"gpu": 0}, threads=1, rule=rule,
        log=[str(tmp_path / f"{rule}.log")])


def write_study_embeddings(tmp_path: Path, nan_rows: tuple[int, ...]) -> list[str]:
    rng = np.random.default_rng(15)
    paths = []
    for name in ("good", "broken"):
        array = rng.standard_normal((1, 40, 6)).astype(np.float32)
        if name == "broken":
            array[0, list(nan_rows), 0] = np.nan
        path = tmp_path / "embeddings" / name / "toy" / "train.npy"
        write_embeddings(path, array, {"layers": [6]})
        paths.append(str(path))
    return paths


@pytest.fixture
def restore_logging():
    """Job scripts configure the root logger (a file handler in tmp_path): undo it after the test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:], root.level = handlers, level


@pytest.mark.usefixtures("restore_logging")
@pytest.mark.parametrize("rule", ["intrinsic", "extrinsic"])
def test_job_stops_on_non_finite_embeddings_and_writes_nothing(tmp_path: Path, rule: str) -> None:
    inputs = write_study_embeddings(tmp_path, nan_rows=(3, 5, 11))
    out = tmp_path / "out"
    outputs = {name: str(out / f"{name}.csv") for name in ("d_aff", "rank", "solver", "d_psi", "d_worst", "bound",
                                                            "diagnostics")}
    outputs["weights"] = str(out / "weights.npy")
    settings = {"tol": 1e-3, "max_iter": 100, "rank_multiplier": 5, "solver": "jacobi", "lawson_power": 1,
                "anderson_memory": 5, "block_mb": 64, "dtype": "float64", "iterate_dtype": "float64", "working_set": True,
                "measures": ["d_aff"]}
    if rule == "intrinsic":
        params = {"study": {"intrinsic": settings}, "encoders": ["good", "broken"], "measures": ["d_aff"],
                  "device": "cpu"}
        job_input = inputs
    else:
        # the check comes before any setting is used: the study answers every key with an empty dict
        params = {"study": defaultdict(dict), "encoders": ["good", "broken"], "device": "cpu"}
        job_input = SimpleNamespace(embeddings=inputs, probes=[], d_aff="missing.csv", map_weights="missing.npy")
    snakemake = fake_snakemake(tmp_path, job_input, outputs, params, {"task": "toy", "layer": "layer6"}, rule)
    with pytest.raises(SystemExit) as stop:
        runpy.run_path(str(REPO / "workflow" / "scripts" / f"{rule}.py"), init_globals={"snakemake": snakemake},
                       run_name="__main__")
    assert stop.value.code == 1
    log = Path(snakemake.log[0]).read_text()
    assert "encoder 'broken', task 'toy', layer layer6: 3 non-finite values (NaN/Inf) in 3 of 40 rows" in log
    assert "Traceback" not in log
    assert not out.exists()  # nothing written, not even a folder


@pytest.mark.usefixtures("restore_logging")
def test_intrinsic_job_writes_solver_columns_and_one_warning(tmp_path: Path) -> None:
    inputs = write_study_embeddings(tmp_path, nan_rows=())
    out = tmp_path / "out"
    measures = ["d_aff", "d_aff_lower", "d_lin"]
    outputs = {name: str(out / f"{name}.csv") for name in (*measures, "rank", "solver")}
    outputs["weights"] = str(out / "weights.npy")
    settings = {"tol": 1e-9, "max_iter": 2, "rank_multiplier": 5, "solver": "jacobi", "lawson_power": 1,
                "anderson_memory": 5, "block_mb": 64, "dtype": "float64", "iterate_dtype": "float32", "working_set": True,
                "measures": ["d_aff", "d_lin"]}
    params = {"study": {"intrinsic": settings}, "encoders": ["good", "broken"], "measures": measures, "device": "cpu"}
    snakemake = fake_snakemake(tmp_path, inputs, outputs, params, {"task": "toy", "layer": "layer6"}, "intrinsic")
    runpy.run_path(str(REPO / "workflow" / "scripts" / "intrinsic.py"), init_globals={"snakemake": snakemake},
                   run_name="__main__")
    table = pd.read_csv(outputs["solver"])
    assert list(table["solver"]) == ["jacobi", "jacobi"] and not table["converged"].any()
    assert (table["iterations"] == 2).all() and (table["d_lin_iterations"] == 2).all()
    warnings = [line for line in Path(snakemake.log[0]).read_text().splitlines() if " WARNING " in line]
    assert len(warnings) == 1
    assert "2 of 2 d_aff pairs, 2 of 2 d_lin pairs stopped at max_iter = 2" in warnings[0]


def test_svd_falls_back_to_gesvd_when_torch_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's gesdd failed to converge on Q_i^T Q_j of the demo's encoder and its affine image (all
    singular values 1); the engine then retries with gesvd and still gets the baselines right."""
    from affine_homotopy.core.linalg import thin_svd

    rng = np.random.default_rng(16)
    x = rng.standard_normal((200, 12))
    image = random_affine(x, x[:1], seed=0, layer=1)[0]
    expected = pairwise_intrinsic([x, image], settings=IntrinsicSettings(measures=("cca_r2", "procrustes", "d_iso")))

    def failing(*args, **kwargs):
        raise torch.linalg.LinAlgError("linalg.svd: The algorithm failed to converge")

    monkeypatch.setattr(torch.linalg, "svd", failing)
    matrix = torch.from_numpy(rng.standard_normal((7, 5)))
    U, s, Vt = thin_svd(matrix)
    torch.testing.assert_close(U @ torch.diag(s) @ Vt, matrix)
    assert U.shape == (7, 5) and s.shape == (5,) and Vt.shape == (5, 5) and U.dtype == matrix.dtype
    fallback = pairwise_intrinsic([x, image], settings=IntrinsicSettings(measures=("cca_r2", "procrustes", "d_iso")))
    for measure in ("cca_r2", "procrustes", "d_iso"):
        np.testing.assert_allclose(fallback.matrices[measure], expected.matrices[measure], atol=1e-9)
    assert fallback.matrices["cca_r2"][0, 1] < 1e-9  # an affine image: every canonical correlation is 1


# ---------------------------------------------------------------------------------------------
# the working-set outer loop


def many_rows(rng):  # 900 rows, 8 + 1 design columns: the optimum rests on a small share of the rows
    source = rng.standard_t(3, (900, 8))
    return source, [np.tanh(source[:, :3] @ rng.standard_normal((3, 4))) + 0.2 * rng.standard_normal((900, 4)),
                    rng.standard_normal((900, 2)) ** 2, source[:, :2] @ rng.standard_normal((2, 3))]


@pytest.mark.parametrize("iterate", [None, torch.float32])
def test_working_set_interval_is_certified_on_all_rows_and_contains_the_optimum(iterate) -> None:
    """A first set of 40 of 900 rows grows over several rounds; the interval is certified on every row
    (upper: the returned map's largest residual over all rows; lower: the dual value at weights that are
    zero outside the set), and the conic optimum of the full problem lies inside it."""
    x, targets = many_rows(np.random.default_rng(21))
    design = affine_design(x)
    stacked = pad(targets)
    scale = float(np.linalg.norm(stacked, axis=2).max())
    atol = torch.full((len(targets),), 10 * F32_EPS * scale, dtype=torch.float64)
    tol = 1e-4
    result = minimax.working_set_fit(torch.from_numpy(design), torch.from_numpy(stacked), atol, tol, 20000,
                                     orthonormal=True, initial_rows=40, iterate_dtype=iterate)
    assert result.converged.all()
    assert (result.rounds[:2] > 1).all()  # the first set was not enough
    assert_certified(design, stacked, result, scale)
    for b, target in enumerate(targets[:2]):
        optimum = socp_minimax(x, target)
        slack = 1e-6 * max(optimum, 1e-3 * scale)
        assert float(result.lower[b]) <= optimum + slack <= float(result.upper[b]) + 2 * slack
        assert float(result.upper[b] - result.lower[b]) <= tol * float(result.upper[b]) + float(atol[b])
    # the same interval as solving on every row at once, within the two gaps
    plain = minimax.minimax_fit(torch.from_numpy(design), torch.from_numpy(stacked), atol, tol, 20000,
                                orthonormal=True)
    assert plain.rounds is None
    assert (result.lower <= plain.upper * (1 + 1e-12) + atol).all() and (plain.lower <= result.upper * (1 + 1e-12) + atol).all()


def test_working_set_rounds_fit_subsets_and_count_every_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each round of ``working_set_fit`` is one weighted fit on a subset of the rows and one screen; their fits
    add up to the iterations less the least-squares fit, an exact check certifies the closing map, and counting
    the calls changes nothing in the interval."""
    x, targets = many_rows(np.random.default_rng(21))
    design, stacked = torch.from_numpy(affine_design(x)), torch.from_numpy(pad(targets[:1]))
    atol = torch.full((1,), 10 * F32_EPS * float(np.linalg.norm(pad(targets[:1]), axis=2).max()), dtype=torch.float64)
    plain = minimax.working_set_fit(design, stacked, atol, 1e-3, 20000, orthonormal=True, initial_rows=40)
    fit, residuals, exact = minimax.minimax_fit, minimax._Screen.residuals, minimax._Screen.exact
    fits, rows, tols, calls = [], [], [], defaultdict(int)

    def counted_fit(design, targets, atol, tol=1e-3, *args, **kwargs):
        result = fit(design, targets, atol, tol, *args, **kwargs)
        fits.append(int(result.iterations[0]))
        tols.append(tol)
        rows.append(design.shape[0])
        return result

    def counted(method, name):
        def run(screen, coef):
            calls[name] += 1
            return method(screen, coef)
        return run

    monkeypatch.setattr(minimax, "minimax_fit", counted_fit)  # working_set_fit's rounds look the name up
    monkeypatch.setattr(minimax._Screen, "residuals", counted(residuals, "screens"))
    monkeypatch.setattr(minimax._Screen, "exact", counted(exact, "exact checks"))
    counted_run = minimax.working_set_fit(design, stacked, atol, 1e-3, 20000, orthonormal=True, initial_rows=40)
    assert torch.equal(counted_run.upper, plain.upper) and torch.equal(counted_run.lower, plain.lower)
    rounds = int(counted_run.rounds[0])
    assert rounds > 1 and len(fits) == rounds == calls["screens"] and calls["exact checks"] >= 1
    assert sum(fits) == int(counted_run.iterations[0]) - 1
    assert max(tols) > 1e-3 and min(tols) <= 1e-3  # loose rounds first, then tight ones
    assert max(rows) < 900  # the rounds ran on subsets


def test_working_set_is_used_only_where_the_first_set_is_a_small_share() -> None:
    assert minimax.uses_working_set(20_000, 385) and minimax.uses_working_set(67_349, 769)
    assert not minimax.uses_working_set(2_000, 385) and not minimax.uses_working_set(400, 49)
    assert minimax.working_set_size(20_000, 385) <= 20_000 // 10 and not minimax.uses_working_set(8_000, 385)
    x, targets = many_rows(np.random.default_rng(22))
    design, stacked, result, _ = solve(x, targets, "jacobi", 1e-3, working_set=True)  # 900 rows: below the threshold
    assert result.rounds is None


def test_working_set_respects_max_iter_and_stays_certified() -> None:
    x, targets = many_rows(np.random.default_rng(23))
    design = affine_design(x)
    stacked = pad(targets)
    scale = float(np.linalg.norm(stacked, axis=2).max())
    atol = torch.full((len(targets),), 10 * F32_EPS * scale, dtype=torch.float64)
    result = minimax.working_set_fit(torch.from_numpy(design), torch.from_numpy(stacked), atol, 1e-8, 6,
                                     orthonormal=True, initial_rows=40)
    assert (result.iterations <= 6).all() and not result.converged[:2].any()
    assert_certified(design, stacked, result, scale)


def test_working_set_certifies_a_target_at_the_float_floor_by_its_least_squares_fit() -> None:
    """A target that is an affine image of the source, rounded to float32: the least-squares fit's own
    interval (its largest residual, the dual value at uniform weights) already closes within the float
    floor, so that target takes no round and one fit; the other target of the batch still takes rounds."""
    x, targets = many_rows(np.random.default_rng(26))
    rng = np.random.default_rng(27)
    image = (x @ rng.standard_normal((8, 5)) + rng.standard_normal(5)).astype(np.float32).astype(np.float64)
    design = affine_design(x)
    stacked = pad([image, targets[0]])
    scale = float(np.linalg.norm(stacked, axis=2).max())
    atol = torch.tensor([10 * F32_EPS * np.linalg.norm(t - t.mean(axis=0), axis=1).max() for t in (image, targets[0])],
                        dtype=torch.float64)
    result = minimax.working_set_fit(torch.from_numpy(design), torch.from_numpy(stacked), atol, 1e-3, 20000,
                                     orthonormal=True, initial_rows=40)
    assert result.converged.all()
    assert int(result.rounds[0]) == 0 and int(result.iterations[0]) == 1 and float(result.upper[0]) <= float(atol[0])
    assert int(result.rounds[1]) > 1
    assert_certified(design, stacked, result, scale)


def test_working_set_below_float32_resolution_converges_in_float64() -> None:
    """A tol below WORKING_SET_FLOAT32_MIN_TOL keeps the tight rounds in float64: the gap still closes."""
    x, targets = many_rows(np.random.default_rng(24))
    design = affine_design(x)
    stacked = pad(targets[:1])
    scale = float(np.linalg.norm(stacked, axis=2).max())
    atol = torch.full((1,), 1e-12 * scale, dtype=torch.float64)
    tol = minimax.WORKING_SET_FLOAT32_MIN_TOL / 10
    result = minimax.working_set_fit(torch.from_numpy(design), torch.from_numpy(stacked), atol, tol, 20000,
                                     orthonormal=True, initial_rows=40)
    assert result.converged.all() and ((result.upper - result.lower) <= tol * result.upper + atol).all()
    assert_certified(design, stacked, result, scale)


@pytest.mark.parametrize("block_entries", [1, 7, 2**20])
def test_blocked_residual_norms_equal_the_materialised_residuals(monkeypatch, block_entries: int) -> None:
    """linalg.residual_norms against numpy's norms of the full residual matrix, single and batched, with
    blocks that split the rows unevenly (7 entries: 2 rows of 3 columns per block)."""
    from affine_homotopy.core import linalg
    monkeypatch.setattr(linalg, "RESIDUAL_BLOCK_ENTRIES", block_entries)
    rng = np.random.default_rng(25)
    design, targets, coef = rng.standard_normal((11, 4)), rng.standard_normal((2, 11, 3)), rng.standard_normal((2, 4, 3))
    expected = np.linalg.norm(targets - design @ coef, axis=2)
    batched = linalg.residual_norms(torch.from_numpy(design), torch.from_numpy(targets), torch.from_numpy(coef))
    np.testing.assert_allclose(batched.numpy(), expected, rtol=1e-13)
    single = linalg.residual_norms(torch.from_numpy(design), torch.from_numpy(targets[1]), torch.from_numpy(coef[1]))
    np.testing.assert_allclose(single.numpy(), expected[1], rtol=1e-13)
    assert linalg.residual_norms(torch.zeros(0, 4), torch.zeros(0, 3), torch.zeros(4, 3)).shape == (0,)
    squared = linalg.residual_norms(torch.from_numpy(design), torch.from_numpy(targets), torch.from_numpy(coef),
                                    squared=True)
    np.testing.assert_allclose(squared.numpy(), expected**2, rtol=1e-13)


@pytest.mark.parametrize("block_entries", [1, 7, 2**20])
def test_leverages_equal_the_hat_matrix_diagonal(monkeypatch, block_entries: int) -> None:
    """WeightedLeastSquares.leverages (the inverted factor times the rows, in blocks) against numpy's
    ``x_n (X^T W X)^-1 x_n^T`` for every row, rows without weight included, for a batch of weight
    vectors and a selection of it."""
    from affine_homotopy.core import linalg
    monkeypatch.setattr(linalg, "RESIDUAL_BLOCK_ENTRIES", block_entries)
    rng = np.random.default_rng(26)
    design = rng.standard_normal((13, 4))
    weights = rng.random((3, 13))
    weights[1, :5] = 0.0  # rows without weight still get a leverage
    fit = linalg.WeightedLeastSquares(torch.from_numpy(design), torch.from_numpy(weights))
    expected = np.stack([np.einsum("ij,jk,ik->i", design, np.linalg.inv(design.T @ (w[:, None] * design)), design)
                         for w in weights])
    np.testing.assert_allclose(fit.leverages().numpy(), expected, rtol=1e-10)
    np.testing.assert_allclose(fit.leverages(torch.tensor([False, True, False])).numpy(), expected[1:2], rtol=1e-10)
