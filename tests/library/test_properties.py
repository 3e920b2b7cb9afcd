"""Property-based tests (hypothesis) of every public function of the library: for each drawn input the
result is either a finite value that satisfies the measure's invariants, or one of the project's named
errors (DataError for a constant input of a measure that is undefined there).

Invariants: affine (or linear, orthogonal) maps of the source and offsets of either side up to 1e12
times the spread (float64); scaling by 1e-250 .. 1e250 where the measure is homogeneous or
invariant; column permutations, negative strides, transposed (Fortran-order) copies and the accepted
dtypes (float32, integers, torch tensors); symmetry where documented; an exact image gives 0; value
<= bound and lower <= upper.

Profiles (tests/conftest.py): the default runs a few derandomised examples per test (the fast loop);
HYPOTHESIS_PROFILE=slow runs 200 fresh ones per test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, note
from hypothesis import strategies as st

import affine_homotopy as ah
from affine_homotopy.errors import AffineHomotopyError, DataError, NumericalError

EPS = float(np.finfo(np.float64).eps)
pytestmark = pytest.mark.filterwarnings("ignore::affine_homotopy.errors.ConvergenceWarning",
                                        "ignore::affine_homotopy.errors.UpcastWarning")
BASELINES = {"cka": ah.cka, "procrustes": ah.procrustes, "pwcca": ah.pwcca, "svcca": ah.svcca}
SYMMETRIC = ("cka", "procrustes", "svcca")


# ---------------------------------------------------------------------------------------------
# inputs


@st.composite
def pairs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, str]:
    """Two representations of the same examples: well conditioned, an affine image, low rank, integer
    valued, with repeated rows, or with a constant side."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dx, dy = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    n = draw(st.integers(max(dx, dy) + 3, 14))
    kind = draw(st.sampled_from(["gaussian", "image", "low_rank", "integer", "repeated", "constant"]))
    x = rng.standard_normal((n, dx))
    y = np.tanh(x @ rng.standard_normal((dx, dy))) + 0.3 * rng.standard_normal((n, dy))
    if kind == "image":
        y = x @ rng.standard_normal((dx, dy)) + rng.standard_normal(dy)
    elif kind == "low_rank":
        y = x[:, :1] @ rng.standard_normal((1, dy)) + rng.standard_normal(dy)
    elif kind == "integer":
        x, y = (rng.integers(-3, 4, size=a.shape).astype(np.float64) for a in (x, y))
    elif kind == "repeated":
        rows = rng.integers(0, max(2, n // 2), size=n)
        x, y = x[rows], y[rows]
    elif kind == "constant":
        constant = rng.standard_normal(dy) * 3
        y = np.broadcast_to(constant, (n, dy)).copy()
        if draw(st.booleans()):
            x, y = y, x
    note(f"kind {kind}, N = {n}, D = ({dx}, {dy})")
    return x, y, kind


def spread(a: np.ndarray) -> float:
    """The largest centred row norm (computed without overflow at any scale)."""
    top = float(np.abs(a).max())
    if top == 0:
        return 0.0
    unit = a / top
    return top * float(np.linalg.norm(unit - unit.mean(axis=0), axis=1).max())


def powers(low: int, high: int) -> st.SearchStrategy[float]:
    return st.integers(low, high).map(lambda k: 10.0**k)


def invertible(rng: np.random.Generator, d: int) -> np.ndarray:
    """A well-conditioned invertible matrix (singular values in [0.5, 2])."""
    q1, _ = np.linalg.qr(rng.standard_normal((d, d)))
    q2, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return q1 @ np.diag(rng.uniform(0.5, 2.0, d)) @ q2


def orthogonal(rng: np.random.Generator, d: int) -> np.ndarray:
    return np.linalg.qr(rng.standard_normal((d, d)))[0]


def outcome(function, *args, **kwargs):
    """The value, or the named error: a DataError (a constant input where the measure is undefined) or a
    NumericalError (a value the engine cannot compute); these inputs are valid arrays and settings."""
    try:
        return function(*args, **kwargs)
    except (DataError, NumericalError) as error:
        assert str(error), "a named error needs a message"
        return error


def is_error(result) -> bool:
    return isinstance(result, AffineHomotopyError)


def same_outcome(a, b, close) -> None:
    """Both the same named error, or both values that ``close`` accepts."""
    assert is_error(a) == is_error(b), (a, b)
    if not is_error(a):
        close(a, b)


def overlap(a, b, slack: float) -> None:
    """Two certified d_aff intervals of the same minimum overlap (within ``slack``)."""
    assert a.lower <= b.upper + slack and b.lower <= a.upper + slack, (a.lower, a.upper, b.lower, b.upper, slack)


def checked_d_aff(result, target: np.ndarray):
    assert math.isfinite(result.upper) and math.isfinite(result.lower)
    assert 0 <= result.lower <= result.upper
    # value <= bound: the constant map onto the target's mean is a candidate (upper within tol of the minimum)
    assert result.lower <= spread(target) * (1 + 1e-9) and result.upper <= spread(target) * (1 + 2e-3) + 1e-300
    return result


# ---------------------------------------------------------------------------------------------
# d_aff, d_lin, d_iso


@given(pairs(), powers(-250, 250), powers(-3, 12), st.integers(0, 2**32 - 1))
def test_d_aff(data, scale, offset, seed) -> None:
    x, y, kind = data
    rng = np.random.default_rng(seed)
    base = checked_d_aff(ah.d_aff(x, y), y)
    unit = max(spread(y), 1e-300)
    slack = 2e-3 * base.upper + 1e-7 * unit
    # an invertible affine map of the source, and offsets of either side up to 1e12 times the spread
    moved = x @ invertible(rng, x.shape[1]) + offset * max(spread(x), 1.0) * rng.standard_normal(x.shape[1])
    overlap(checked_d_aff(ah.d_aff(moved, y), y), base, slack + 64 * EPS * offset * unit * x.shape[1])
    shifted = y + offset * unit * rng.standard_normal(y.shape[1])
    overlap(checked_d_aff(ah.d_aff(x, shifted), shifted), base, slack + 64 * EPS * offset * unit * y.shape[1])
    # homogeneous of degree 1 in the target, invariant in the source's scale
    scaled = ah.d_aff(x * scale, y * scale)
    assert math.isfinite(scaled.upper) and 0 <= scaled.lower <= scaled.upper
    assert scaled.lower <= base.upper * scale * (1 + 1e-6) + slack * scale
    assert base.lower * scale <= scaled.upper * (1 + 1e-6) + slack * scale
    overlap(ah.d_aff(x / scale, y), base, slack)
    # views: column permutations, negative strides (rows reversed together), Fortran order, torch
    perm_x, perm_y = rng.permutation(x.shape[1]), rng.permutation(y.shape[1])
    for source, target in ((x[:, perm_x], y[:, perm_y]), (x[::-1], y[::-1]), (np.flip(x, 1), np.asfortranarray(y)),
                           (torch.from_numpy(x), torch.from_numpy(y.copy()).T.contiguous().T)):
        overlap(ah.d_aff(source, target), base, slack)
    # float32 data: the same to float32 rounding
    overlap(ah.d_aff(x.astype(np.float32), y.astype(np.float32)), base, slack + 1e-4 * unit)
    # an exact image gives 0, and a result's map attains its value
    image = x @ rng.standard_normal((x.shape[1], 3)) + rng.standard_normal(3)
    assert ah.d_aff(x, image).upper <= 1e-7 * max(spread(image), 1e-300)
    residual = np.linalg.norm(base.transform(x) - y, axis=1).max()
    assert residual <= base.upper * (1 + 1e-5) + 1e-9 * unit + 1e-12 * float(np.abs(y).max())


@given(pairs(), st.integers(-60, 60), powers(-3, 3), st.integers(0, 2**32 - 1))
def test_d_aff_rel(data, exponent, scale, seed) -> None:
    x, y, kind = data
    rng = np.random.default_rng(seed)
    base = outcome(ah.d_aff_rel, x, y)
    if is_error(base):  # a target without spread: named, never a division by zero
        assert isinstance(base, DataError) and base.argument == "target" and spread(y) <= 1e-12 * max(
            float(np.abs(y).max()), 1e-300), (base, kind)
        return
    assert base.certified and 0 <= base.lower <= base.upper <= 1, base
    # powers of two are exact: the same interval, bit for bit
    assert ah.d_aff_rel(x, np.ldexp(y, exponent)) == base
    # other scales, rotations and offsets of the target, invertible affine maps of the source: the same minimum
    slack = 2e-3 * base.upper + 1e-7
    rotated = y * scale @ orthogonal(rng, y.shape[1]) + scale * spread(y) * rng.standard_normal(y.shape[1])
    overlap(ah.d_aff_rel(x, rotated), base, slack)
    moved = x @ invertible(rng, x.shape[1]) + rng.standard_normal(x.shape[1])
    overlap(ah.d_aff_rel(moved, y), base, slack)
    # a constant source is no better than a constant: 1 lies in its interval
    assert ah.d_aff_rel(np.ones_like(x), y).contains(1.0, slack=1e-9)


def d_lin_upper(x, y) -> float:
    """d_lin's reported value, after checking its interval: certified, ``0 <= lower <= upper``."""
    interval = ah.d_lin(x, y)
    assert interval.certified and 0 <= interval.lower <= interval.upper, interval
    return interval.upper


@given(pairs(), powers(-250, 250), st.integers(0, 2**32 - 1))
def test_d_lin(data, scale, seed) -> None:
    x, y, kind = data
    rng = np.random.default_rng(seed)
    base = outcome(d_lin_upper, x, y)
    if is_error(base):
        # known: the linear solver's weighted system is singular when the weight falls on a zero row
        # of the source (integer data); a named error, never on generic data
        assert isinstance(base, NumericalError) and kind in ("integer", "repeated", "constant"), base
        return
    unit = max(float(np.linalg.norm(y, axis=1).max()), 1e-300)
    assert math.isfinite(base) and 0 <= base <= unit * (1 + 2e-3)  # the zero map is a candidate (to tol)
    assert ah.d_aff(x, y).lower <= base * (1 + 1e-6) + 1e-9 * unit  # linear maps are affine maps
    slack = 3e-3 * base + 1e-7 * unit
    close = lambda a, b, s=slack: math.isfinite(a) and a == pytest.approx(b, abs=s)  # noqa: E731
    same_outcome(outcome(d_lin_upper, x @ invertible(rng, x.shape[1]), y), base, close)
    same_outcome(outcome(d_lin_upper, x * scale, y * scale), base * scale,
                 lambda a, b: math.isfinite(a) and a == pytest.approx(b, abs=slack * scale))
    same_outcome(outcome(d_lin_upper, np.flip(x, 1), y[:, ::-1]), base, close)
    assert d_lin_upper(x, x @ rng.standard_normal((x.shape[1], 2))) <= 1e-7 * max(unit, 1.0)


@given(pairs(), powers(-250, 250), powers(-3, 12), st.integers(0, 2**32 - 1))
def test_d_iso(data, scale, offset, seed) -> None:
    x, y, kind = data
    rng = np.random.default_rng(seed)
    base = outcome(ah.d_iso, x, y)
    unit = max(spread(y), spread(x), 1e-300)
    slack = 1e-6 * unit + 64 * EPS * offset * unit
    close = lambda a, b, s=slack: math.isfinite(a) and a == pytest.approx(b, abs=s)  # noqa: E731
    if not is_error(base):
        assert math.isfinite(base) and base >= 0
        assert ah.d_aff(x, y).lower <= base * (1 + 1e-9) + 1e-9 * unit  # one affine map among all
    moved = x @ orthogonal(rng, x.shape[1]) + offset * unit * rng.standard_normal(x.shape[1])
    same_outcome(outcome(ah.d_iso, moved, y + offset * unit), base, close)
    same_outcome(outcome(ah.d_iso, x * scale, y * scale), base * scale if not is_error(base) else base,
                 lambda a, b: math.isfinite(a) and a == pytest.approx(b, rel=1e-6, abs=slack * scale))
    same_outcome(outcome(ah.d_iso, x[::-1, ::-1], np.asfortranarray(y)), base, close)
    if x.shape[1] == y.shape[1] and kind != "constant":  # symmetric when the widths are equal
        same_outcome(outcome(ah.d_iso, y, x), base, lambda a, b: a == pytest.approx(b, rel=1e-6, abs=1e-9 * unit))
    assert ah.d_iso(x, x @ orthogonal(rng, x.shape[1]) + 5.0) <= 1e-7 * max(spread(x), 1e-300)


# ---------------------------------------------------------------------------------------------
# the baselines


@pytest.mark.parametrize("name", sorted(BASELINES))
@given(data=pairs(), scale=powers(-250, 250), offset=powers(-3, 12), seed=st.integers(0, 2**32 - 1))
def test_baselines(name, data, scale, offset, seed) -> None:
    x, y, kind = data
    function = BASELINES[name]
    rng = np.random.default_rng(seed)
    base = outcome(function, x, y)
    if kind == "constant":
        assert is_error(base), f"{name} of a constant representation must be a DataError, got {base}"
    else:
        assert math.isfinite(base) and 0 <= base <= (2 if name == "procrustes" else 1) + 1e-12
    tolerance = 1e-6 + 64 * EPS * offset * 100
    close = lambda a, b: math.isfinite(a) and a == pytest.approx(b, abs=tolerance)  # noqa: E731
    # offsets and scaling of either side, orthogonal maps (column permutations for pwcca: its weights
    # follow the source's coordinates), negative strides, Fortran order, torch tensors
    rotate = (np.eye(x.shape[1])[rng.permutation(x.shape[1])] if name == "pwcca" else orthogonal(rng, x.shape[1]))
    same_outcome(outcome(function, x @ rotate + offset * rng.standard_normal(x.shape[1]), y * scale), base, close)
    same_outcome(outcome(function, x / scale, y[:, ::-1] + offset), base, close)
    same_outcome(outcome(function, np.asfortranarray(x[::-1]), torch.from_numpy(y[::-1].copy())), base, close)
    same_outcome(outcome(function, x.astype(np.float32), y.astype(np.float32)), base,
                 lambda a, b: math.isfinite(a) and a == pytest.approx(b, abs=1e-3))
    if name in SYMMETRIC:
        same_outcome(outcome(function, y, x), base, lambda a, b: a == pytest.approx(b, abs=1e-9))
    if kind != "constant":  # an exact image (orthogonal map, scale and offset) gives 0
        image = 3.0 * x @ orthogonal(rng, x.shape[1]) + 7.0
        assert outcome(function, x, image) <= 1e-7


@given(pairs(), powers(-250, 250), st.integers(0, 2**32 - 1))
def test_cca(data, scale, seed) -> None:
    x, y, kind = data
    rng = np.random.default_rng(seed)
    base = outcome(ah.cca, x, y)
    if kind == "constant":
        assert is_error(base)
        return
    assert all(math.isfinite(v) and -1e-12 <= v <= 1 + 1e-12 for v in base)
    close = lambda a, b: all(math.isfinite(u) and u == pytest.approx(v, abs=1e-6) for u, v in zip(a, b))  # noqa: E731
    same_outcome(outcome(ah.cca, x @ invertible(rng, x.shape[1]) + 1e6, y * scale), base, close)
    same_outcome(outcome(ah.cca, y, x[::-1, ::-1][::-1]), base, close)  # symmetric
    image = x @ invertible(rng, x.shape[1]) - 2.0
    assert max(ah.cca(x, image)) <= 1e-7


# ---------------------------------------------------------------------------------------------
# several measures at once


@given(pairs(), st.integers(0, 2**32 - 1), st.sampled_from([1, 2**-300, 2.0**300, 1e-200, 1e200]))
def test_pairwise_and_distances(data, seed, scale) -> None:
    x, y, kind = data
    rng = np.random.default_rng(seed)
    z = x @ rng.standard_normal((x.shape[1], 2)) + 1.0  # an affine image of x
    measures = ("d_aff", "d_aff_lower", "d_aff_ls", "psi_norm", "d_iso", "cka", "cca_r2", "procrustes")
    reps = {"x": x * scale, "y": y * scale, "z": z * scale}
    tables = outcome(ah.pairwise, reps, measures if kind != "constant" else measures[:4])
    assert not is_error(tables)
    for name, table in tables.items():
        values = table.values
        assert np.isfinite(values).all(), name
        assert np.diag(values).tolist() == ([1.0] * 3 if name == "psi_norm" else [0.0] * 3)
        if name in SYMMETRIC:
            np.testing.assert_allclose(values, values.T, atol=1e-9)
    upper, lower = tables["d_aff"].values, tables["d_aff_lower"].values
    assert (lower <= upper).all() and (upper <= tables["d_aff_ls"].values * (1 + 1e-9)).all()
    assert upper[0, 2] <= 1e-7 * spread(z * scale)  # x maps exactly onto its affine image z
    single = ah.distances(x * scale, y * scale, measures[:4])
    one = ah.d_aff(x * scale, y * scale)
    assert single["d_aff"].upper == pytest.approx(upper[0, 1], rel=1e-9) == pytest.approx(one.upper, rel=1e-9)
    assert single["psi_norm"] == pytest.approx(tables["psi_norm"].values[0, 1], rel=1e-6)


# ---------------------------------------------------------------------------------------------
# d_psi


@given(pairs(), st.integers(2, 3), powers(-100, 100), st.integers(0, 2**32 - 1))
def test_d_psi(data, classes, scale, seed) -> None:
    x, y, kind = data
    rng = np.random.default_rng(seed)
    weight, bias = rng.standard_normal((y.shape[1], classes)), rng.standard_normal(classes)
    base = ah.d_psi(x, y, (weight, bias))
    assert all(math.isfinite(v) for v in (base.value, base.bound))
    assert base.certified  # every number of classes
    assert 0 <= base.lower <= base.value <= min(base.bound + 1e-9, math.sqrt(2) + 1e-12)
    # invariant under affine maps of the source; the target's scale moves into the probe's weight
    moved = ah.d_psi(x @ invertible(rng, x.shape[1]) * scale + 3.0 * scale, y / scale, (weight * scale, bias))
    assert moved.certified and 0 <= moved.lower <= moved.value <= min(moved.bound + 1e-9, math.sqrt(2) + 1e-12)
    # certified intervals of the same minimum overlap
    assert moved.lower <= base.value * (1 + 2e-3) + 2e-6 and base.lower <= moved.value * (1 + 2e-3) + 2e-6
    assert moved.bound == pytest.approx(base.bound, rel=3e-3, abs=1e-9)  # its d_aff: within tol of one minimum
    # an affine image of the target maps onto it exactly, through any probe
    if kind != "constant" or np.ptp(y, axis=0).max() > 0:
        image = y @ invertible(rng, y.shape[1]) + 1.0
        assert ah.d_psi(image, y, (weight, bias)).value <= 1e-5
