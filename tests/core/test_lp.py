"""The dense interior-point kernel (affine_homotopy.core.lp) against scipy's HiGHS on the same Chebyshev
LPs, its batching and masks against separate solves, its bad inputs, its purification, and the
two-class certificate built on it against a known optimum."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.optimize import linprog
from scipy.special import expit

from affine_homotopy.core import lp
from affine_homotopy.core.extrinsic.binary import BinaryProblem, BinaryTarget, ChebyshevLP, certify


def instance(seed: int, n: int = 60, columns: int = 6, t: float = 0.15) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(M, hi, lo)``: ``M = [Z, 1]`` and the slab ends of a random classifier at level ``t`` (a side is
    absent where ``q -+ t`` leaves (0, 1))."""
    rng = np.random.default_rng(seed)
    M = np.hstack([rng.standard_normal((n, columns - 1)), np.ones((n, 1))])
    q = expit(2 * rng.standard_normal(n))
    target = BinaryTarget(q, 1 - q)
    return M, target.hi(t), target.lo(t)


def reference(M: np.ndarray, hi: np.ndarray, lo: np.ndarray, floor: float = lp.FLOOR) -> float:
    """The optimal s by scipy's HiGHS: min s s.t. M x - s <= hi, -M x - s <= -lo, s >= floor."""
    on_hi, on_lo = np.isfinite(hi), np.isfinite(lo)
    a_ub = np.vstack([np.hstack([M[on_hi], -np.ones((on_hi.sum(), 1))]),
                      np.hstack([-M[on_lo], -np.ones((on_lo.sum(), 1))])])
    cost = np.zeros(M.shape[1] + 1)
    cost[-1] = 1.0
    result = linprog(cost, A_ub=a_ub, b_ub=np.concatenate([hi[on_hi], -lo[on_lo]]), method="highs",
                     bounds=[(None, None)] * M.shape[1] + [(floor, None)])
    assert result.status == 0
    return float(result.fun)


def solve(M, hi, lo, rows=None, **kwargs) -> lp.ChebyshevSolution:
    as_batch = lambda a: torch.as_tensor(np.atleast_2d(a))
    return lp.solve_chebyshev(torch.as_tensor(M), as_batch(hi), as_batch(lo),
                              None if rows is None else torch.as_tensor(np.atleast_2d(rows)), **kwargs)


@pytest.mark.parametrize("seed", range(6))
def test_the_optimum_and_its_duals_match_highs(seed) -> None:
    """Optimal s to 1e-9; duals of the valid signs with M^T y = 0 (the certificate residual), the dual
    objective equal to s, and complementary slackness."""
    M, hi, lo = instance(seed)
    solution = solve(M, hi, lo)
    s = float(solution.s[0])
    assert solution.status == ["optimal"]
    assert s == pytest.approx(reference(M, hi, lo), abs=1e-9)
    y_hi, y_lo = solution.y_hi[0].numpy(), solution.y_lo[0].numpy()
    assert (y_hi <= 0).all() and (y_lo >= 0).all()
    assert np.abs(M.T @ (y_hi + y_lo)).max() <= 1e-10 * np.abs(y_hi + y_lo).sum()
    assert float(solution.residual[0]) <= 1e-10
    total = np.abs(y_hi).sum() + np.abs(y_lo).sum()
    dual = (y_hi[np.isfinite(hi)] @ hi[np.isfinite(hi)] + y_lo[np.isfinite(lo)] @ lo[np.isfinite(lo)]) / total
    assert dual == pytest.approx(s, abs=1e-8)
    u = M @ solution.x[0].numpy()
    slack_hi = np.where(np.isfinite(hi), hi - (u - s), 0.0)
    slack_lo = np.where(np.isfinite(lo), (u + s) - lo, 0.0)
    assert slack_hi.min() >= -1e-8 and slack_lo.min() >= -1e-8
    assert np.abs(y_hi * slack_hi).max() <= 1e-8 and np.abs(y_lo * slack_lo).max() <= 1e-8


def test_a_batch_equals_its_members_solved_one_by_one() -> None:
    """Three members sharing M, each with its own slab ends and rows: the batch's solutions are the
    separate solves' (to the solver's tolerance)."""
    M, _, _ = instance(0)
    rng = np.random.default_rng(7)
    members = [instance(seed)[1:] for seed in (1, 2, 3)]
    rows = rng.random((3, M.shape[0])) < 0.8
    rows[2] = True
    batch = solve(M, np.stack([h for h, _ in members]), np.stack([l for _, l in members]), rows)
    for b, (hi, lo) in enumerate(members):
        alone = solve(M, hi, lo, rows[b])
        assert batch.status[b] == alone.status[0] == "optimal"
        assert float(batch.s[b]) == pytest.approx(float(alone.s[0]), abs=1e-9)
        assert float(batch.s[b]) == pytest.approx(reference(M[rows[b]], hi[rows[b]], lo[rows[b]]), abs=1e-9)
        assert float(batch.residual[b]) <= 1e-10


def test_a_row_mask_equals_dropping_the_rows() -> None:
    """Rows off the mask carry no dual and change nothing: the same optimum as the LP without them."""
    M, hi, lo = instance(4, n=80)
    keep = np.arange(80) % 3 != 0
    masked = solve(M, hi, lo, keep)
    dropped = solve(M[keep], hi[keep], lo[keep])
    assert float(masked.s[0]) == pytest.approx(float(dropped.s[0]), abs=1e-9)
    assert not masked.y_hi[0, ~torch.as_tensor(keep)].any() and not masked.y_lo[0, ~torch.as_tensor(keep)].any()
    np.testing.assert_allclose(masked.y_hi[0, torch.as_tensor(keep)].numpy(), dropped.y_hi[0].numpy(), atol=1e-7)


def test_rows_that_do_not_bound_s_end_at_the_floor_without_nan() -> None:
    """One-sided rows (every lo absent), an empty row set: s ends at the floor, with finite duals that
    certify nothing beyond it; a NaN slab end is refused."""
    M, hi, _ = instance(5)
    one_sided = solve(M, hi, np.full_like(hi, -np.inf))
    empty = solve(M, hi, np.full_like(hi, -np.inf), np.zeros(hi.size, dtype=bool))
    for solution in (one_sided, empty):
        assert solution.status == ["optimal"]
        assert float(solution.s[0]) == pytest.approx(lp.FLOOR, abs=1e-6)
        assert torch.isfinite(solution.y_hi).all() and torch.isfinite(solution.x).all()
        assert not torch.isnan(solution.residual).any()
    assert float(one_sided.s[0]) == pytest.approx(reference(M, hi, np.full_like(hi, -np.inf)), abs=1e-6)
    with pytest.raises(ValueError, match="NaN"):
        solve(M, np.where(np.arange(hi.size) == 0, np.nan, hi), np.full_like(hi, -np.inf))


def test_the_purified_dual_is_the_steepest_optimal_dual() -> None:
    """On an LP whose optimal duals are not unique (every row twice), the purification's dual is optimal
    and dual feasible, and its rate is the largest over the optimal face (scipy's HiGHS on that LP over
    the dual variables), at least the interior point's own."""
    M, hi, lo = instance(6, n=30, columns=4)
    rng = np.random.default_rng(1)
    M, hi, lo = np.vstack([M, M]), np.concatenate([hi, hi]), np.concatenate([lo, lo])
    hi_rate = np.where(np.isfinite(hi), 1 + rng.random(hi.size), 0.0)
    lo_rate = np.where(np.isfinite(lo), -1 - rng.random(lo.size), 0.0)
    solution = solve(M, hi, lo)
    steepest = lp.steepest_optimal_dual(torch.as_tensor(M), solution, torch.as_tensor(hi)[None],
                                        torch.as_tensor(lo)[None], torch.as_tensor(hi_rate)[None],
                                        torch.as_tensor(lo_rate)[None])
    s = float(solution.s[0])

    def rate_and_value(y_hi, y_lo):
        total = np.abs(y_hi).sum() + np.abs(y_lo).sum()
        value = (y_hi[np.isfinite(hi)] @ hi[np.isfinite(hi)] + y_lo[np.isfinite(lo)] @ lo[np.isfinite(lo)]) / total
        return (y_hi @ hi_rate + y_lo @ lo_rate) / total, value

    rate, value = rate_and_value(steepest.y_hi[0].numpy(), steepest.y_lo[0].numpy())
    interior_rate, _ = rate_and_value(solution.y_hi[0].numpy(), solution.y_lo[0].numpy())
    assert float(steepest.residual[0]) <= 1e-10 and value == pytest.approx(s, abs=1e-8)
    # the face: z >= 0 on the present sides, M^T (z_lo - z_hi) = 0, sum z = 1, dual objective s
    on_hi, on_lo = np.isfinite(hi), np.isfinite(lo)
    columns = np.hstack([-M[on_hi].T, M[on_lo].T])
    a_eq = np.vstack([columns, np.ones(columns.shape[1]), np.concatenate([-hi[on_hi], lo[on_lo]])])
    best = linprog(-np.concatenate([-hi_rate[on_hi], lo_rate[on_lo]]), A_eq=a_eq,
                   b_eq=np.concatenate([np.zeros(M.shape[1]), [1.0, s]]), bounds=(0, None), method="highs")
    assert best.status == 0
    assert rate == pytest.approx(-best.fun, abs=1e-7)
    assert rate >= interior_rate - 1e-9


def test_certify_contains_a_known_optimum() -> None:
    """Every input point twice with two targets q_a, q_b, the distinct points affinely independent: the
    best map puts each pair's sigmoid at its midpoint, so t* = max |q_a - q_b| / 2 exactly."""
    rng = np.random.default_rng(3)
    points, columns = 12, 20
    Z = rng.standard_normal((points, columns - 1))
    design = np.hstack([np.vstack([Z, Z]), np.ones((2 * points, 1))])
    q = expit(rng.standard_normal(2 * points) * 2)
    t_star = float(np.abs(q[:points] - q[points:]).max() / 2)
    target = BinaryTarget(q, 1 - q)
    lp_ = ChebyshevLP(design)
    found = certify([BinaryProblem(lp_, target, [np.zeros(columns)])], 1e-6, 1e-12)[0]
    result = found.interval
    assert result.lower <= math.sqrt(2) * t_star * (1 + 1e-12) <= result.upper * (1 + 1e-12)
    assert result.upper - result.lower <= 1e-6 * result.upper
    assert lp_.fallbacks == 0 and found.cert_residual <= 1e-10


@pytest.mark.optional(reason="cuda")
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_solves_as_the_cpu() -> None:
    M, hi, lo = instance(0, n=300, columns=40)
    cpu = solve(M, hi, lo)
    cuda = lp.solve_chebyshev(torch.as_tensor(M).cuda(), torch.as_tensor(hi)[None].cuda(), torch.as_tensor(lo)[None].cuda())
    assert cuda.status == ["optimal"] and float(cuda.residual[0]) <= 1e-10
    assert float(cuda.s[0]) == pytest.approx(float(cpu.s[0]), abs=1e-9)


def test_example_blocks_solve_as_their_dense_matrix() -> None:
    """A design given as example blocks (the multi-class rows) gives the dense matrix's solution: its
    products, Gram matrix and row subsets are the same linear maps."""
    from affine_homotopy.core.lp import ExampleBlocks, solve_chebyshev

    rng = np.random.default_rng(3)
    examples = torch.as_tensor(rng.standard_normal((30, 4)))
    index = torch.as_tensor(rng.integers(0, 30, size=70))
    blocks = ExampleBlocks(examples, index, torch.as_tensor(rng.standard_normal((70, 3))))
    dense = blocks.dense()
    x, v, d = (torch.as_tensor(rng.standard_normal(shape)) for shape in ((2, 12), (2, 70), (2, 70)))
    torch.testing.assert_close(blocks.times(x), x @ dense.T)
    torch.testing.assert_close(blocks.transposed_times(v), v @ dense)
    torch.testing.assert_close(blocks.gram(d.abs()), dense.T @ (d.abs()[:, :, None] * dense))
    centre = torch.as_tensor(rng.standard_normal((2, 70)))
    hi, lo = centre + 0.5, centre - 0.5
    rows = torch.as_tensor(rng.random((2, 70)) < 0.8)
    ours, theirs = solve_chebyshev(blocks, hi, lo, rows), solve_chebyshev(dense, hi, lo, rows)
    assert ours.status == theirs.status == ["optimal", "optimal"]
    torch.testing.assert_close(ours.s, theirs.s, rtol=0, atol=1e-8)
    assert float(ours.residual.max()) <= 1e-10
