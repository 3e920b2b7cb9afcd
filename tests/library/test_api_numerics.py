"""The library on inputs that are valid but extreme (issue #27's classes), each case a correct value or a
named error: offsets (the rank rule follows the precision the data arrived in), scales far from 1
(an exact power-of-two rescaling), constant representations (a documented value or a DataError), and
valid input that once raised raw numpy/torch errors (negative strides, numpy/torch dtypes); and every
setting checked for type and range with a message naming it.

The float32 rank rule, the workflow's, is checked to be what it was bit for bit.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import affine_homotopy as ah
from affine_homotopy.core.linalg import FLOAT32_EPS, factorise, numerical_rank, rank_precision
from affine_homotopy.errors import AffineHomotopyError, DataError, NumericalError

RNG = np.random.default_rng(0)
N = 60
X = RNG.standard_normal((N, 8))
Y = np.tanh(X @ RNG.standard_normal((8, 5))) + 0.1 * RNG.standard_normal((N, 5))
PROBE = (RNG.standard_normal((5, 2)), np.zeros(2))
BASE = ah.d_aff(X, Y)
CKA = ah.cka(X, Y)


def same_interval(result, reference, rel: float = 1e-6) -> None:
    assert result.lower <= reference.upper * (1 + rel) and reference.lower <= result.upper * (1 + rel), (
        (result.lower, result.upper), (reference.lower, reference.upper))


# ---------------------------------------------------------------------------------------------
# offsets in float64: the rank rule at the data's precision


def test_offsets_keep_every_direction_in_float64() -> None:
    shifted = ah.d_aff(X, Y + 1e7)
    assert shifted.target_rank == 5 and shifted.converged
    same_interval(shifted, BASE)
    assert ah.d_aff(X + 1e8, X).upper <= 1e-6  # an offset copy maps onto the original exactly
    outlier = X.copy()
    outlier[0, 0] = 1e7
    assert ah.d_aff(outlier, Y).source_rank == 8
    assert ah.cka(X + 1e7, Y) == pytest.approx(CKA, abs=1e-7)
    same_interval(ah.d_aff(X + 1e12, Y), BASE, rel=1e-4)
    assert ah.d_iso(X + 1e7, X + 1e7) <= 1e-6


def test_the_float32_rule_is_unchanged() -> None:
    """float32 data (the workflow's) are ruled as before: n eps(float32) max(sigma_1 max(N, D), r_max)."""
    s = torch.tensor([10.0, 1e-3, 1e-5, 1e-7], dtype=torch.float64)
    for precision in (None, torch.float32):
        with rank_precision(precision):
            for scale in (0.0, 1.0, 1e4, 1e6):
                threshold = max(5 * 10.0 * FLOAT32_EPS * 100, 5 * FLOAT32_EPS * scale)
                assert numerical_rank(s, 100, 4, 5.0, scale) == int((s > threshold).sum())
    with rank_precision(torch.float64):  # float64's: the precision and sqrt(N) times the uncentred scale
        assert numerical_rank(s, 100, 4, 5.0, 1e6) == 4
        assert numerical_rank(s, 100, 4, 5.0, 1e12) == 1  # floor 5 eps(float64) 10 1e12 = 0.011
    assert factorise(X.astype(np.float32) + 1e7).rank <= 1  # float32 data at 1e7: the spread is rounding
    assert ah.d_aff(X.astype(np.float32), Y.astype(np.float32) + np.float32(1e3)).target_rank == 5


def test_mixed_precision_uses_the_float32_rule() -> None:
    assert ah.d_aff(X.astype(np.float32), Y + 1e7).target_rank < 5  # float32's floor on the float64 target
    assert ah.d_aff(X, Y + 1e7, dtype="float32").target_rank < 5  # float32 maths: float32's rule
    assert ah.d_aff(X, Y + 1e7).target_rank == 5


# ---------------------------------------------------------------------------------------------
# scale: rescaled by powers of two before the work, exactly undone after


@pytest.mark.parametrize("exponent", [-1000, -600, 600, 1000])
def test_power_of_two_scales_give_exactly_scaled_values(exponent: int) -> None:
    factor = 2.0 ** exponent if abs(exponent) < 1000 else None
    x, y = np.ldexp(X, exponent), np.ldexp(Y, exponent)
    # the engine sees the very same arrays, so the values are the same bit for bit (both computed here:
    # a thread count that changed since import could change the summation order)
    base, result = ah.d_aff(X, Y), ah.d_aff(x, y)
    assert result.upper == np.ldexp(base.upper, exponent) and result.lower == np.ldexp(base.lower, exponent)
    assert ah.cka(x, y) == ah.cka(X, Y)
    assert ah.d_iso(x, y) == np.ldexp(ah.d_iso(X, Y), exponent)
    if factor is not None:
        np.testing.assert_allclose(result.transform(x), base.transform(X) * factor, rtol=1e-12)


def test_scales_far_from_one() -> None:
    for scale in (1e200, 1e-200, 1e-300, 1e300):
        result = ah.d_aff(X * scale, Y * scale)
        same_interval(result, BASE.interval.scaled(scale), rel=1e-9)
        assert ah.cka(X * scale, Y * scale) == pytest.approx(CKA, abs=1e-12)
        same_interval(ah.d_lin(X * scale, Y * scale), ah.d_lin(X, Y).scaled(scale), rel=1e-6)
    assert ah.cka(X * 1e77, Y * 1e77) == pytest.approx(CKA, abs=1e-12)
    assert ah.cka((X * 1e10).astype(np.float32), Y.astype(np.float32)) == pytest.approx(CKA, abs=1e-5)
    assert ah.cka(X * 1e10, Y, dtype="float32") == pytest.approx(CKA, abs=1e-5)
    in_float32 = ah.d_aff(X * 1e20, Y * 1e20, dtype="float32")
    assert in_float32.upper == pytest.approx(BASE.upper * 1e20, rel=1e-5)
    assert ah.d_psi(X * 1e200, Y, PROBE).value == pytest.approx(ah.d_psi(X, Y, PROBE).value, rel=1e-4, abs=1e-9)
    tables = ah.pairwise([X * 1e250, Y * 1e-250], ["d_aff", "cka"])
    assert tables["d_aff"].values[0, 1] == pytest.approx(BASE.upper * 1e-250, rel=1e-6)
    assert tables["cka"].values[0, 1] == pytest.approx(CKA, abs=1e-12)
    assert np.isfinite(ah.pairwise([X * 1e150, Y * 1e-150], "d_iso")["d_iso"].values).all()
    with pytest.raises(NumericalError, match=r"d_iso .* needs both at one scale"):  # 1e500 apart: no common scale
        ah.pairwise([X * 1e250, Y * 1e-250], "d_iso")


def test_a_value_beyond_float64_is_a_numerical_error() -> None:
    with pytest.raises(NumericalError, match=r"psi_norm of representations\[0\].*beyond float64's range"):
        ah.pairwise([X * 1e-200, Y * 1e200], "psi_norm")
    result = ah.d_aff(X * 1e-200, Y * 1e200)  # d_aff itself is representable
    assert result.upper == pytest.approx(BASE.upper * 1e200, rel=1e-9)
    with pytest.raises(NumericalError, match=r"linear part has entries beyond float64's range.*transform"):
        result.linear
    np.testing.assert_allclose(result.transform(X * 1e-200) / 1e200, BASE.transform(X), rtol=1e-6, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# constant representations: a documented value or a DataError


ZEROS = np.zeros((N, 6))


@pytest.mark.parametrize("function", [ah.cka, ah.procrustes, ah.pwcca, ah.svcca, ah.cca])
@pytest.mark.parametrize("constant", [ZEROS, ZEROS + 3.0, np.ones((N, 1)) * 1e300])
def test_baselines_of_a_constant_representation_are_data_errors(function, constant) -> None:
    for source, target, name in ((constant, Y, "source"), (Y, constant, "target")):
        with pytest.raises(DataError, match=rf"^{name} is constant \(every one of its {N} rows is the same\)"):
            function(source, target)


def test_constant_representations_with_documented_values() -> None:
    line = np.linspace(-2.0, 4.0, N)[:, None]
    radius = ah.d_aff(ZEROS, line)  # the radius of the target's smallest enclosing ball
    assert radius.upper == pytest.approx(3.0, rel=2e-3) and radius.lower <= 3.0 <= radius.upper * (1 + 1e-12)
    assert ah.d_aff(Y, ZEROS + 5.0).upper == 0.0  # onto a constant target
    assert ah.distances(ZEROS, Y, "psi_norm")["psi_norm"] == 0.0  # the map is constant
    assert ah.d_iso(ZEROS, Y) == pytest.approx(float(np.linalg.norm(Y - Y.mean(0), axis=1).max()), rel=1e-9)
    assert math.isfinite(ah.d_lin(ZEROS, Y).upper) and math.isfinite(ah.d_psi(ZEROS, Y, PROBE).value)
    with pytest.raises(DataError, match=r"target is constant.*d_iso onto a constant target is undefined"):
        ah.d_iso(Y, ZEROS)
    with pytest.raises(DataError, match=r"representations\[1\] \('b'\) is constant.*cka"):
        ah.pairwise({"a": X, "b": ZEROS, "c": Y}, ["d_aff", "cka"])
    assert np.isfinite(ah.pairwise({"a": X, "b": ZEROS}, ["d_aff", "d_lin"])["d_aff"].values).all()


def test_constant_up_to_rounding_is_rank_0_and_a_data_error() -> None:
    jitter = 1.0 + RNG.integers(0, 3, size=(N, 4)) * np.finfo(np.float64).eps  # ulps apart: rank 0
    assert ah.d_aff(jitter, Y).source_rank == 0
    with pytest.raises(DataError, match=r"source has rank 0 under the rank rule.*cka is undefined"):
        ah.cka(jitter, Y)


# ---------------------------------------------------------------------------------------------
# valid input once refused with raw errors


def _every_function():
    return {
        "d_aff": lambda a, b, **kw: ah.d_aff(a, b, **kw).upper, "d_lin": lambda a, b, **kw: ah.d_lin(a, b, **kw).upper, "d_iso": ah.d_iso,
        "cka": ah.cka, "cca": lambda a, b, **kw: ah.cca(a, b, **kw).r2, "pwcca": ah.pwcca, "svcca": ah.svcca,
        "procrustes": ah.procrustes,
        "distances": lambda a, b, **kw: ah.distances(a, b, "d_aff", **kw)["d_aff"].upper,
        "pairwise": lambda a, b, **kw: ah.pairwise([a, b], **kw)["d_aff"].values[0, 1],
        "d_psi": lambda a, b, **kw: ah.d_psi(a, b, (np.ones((5, 2)), np.zeros(2)), **kw).value,  # b: (N, 5)
    }


@pytest.mark.parametrize("name", sorted(_every_function()))
def test_negative_strides_and_dtypes_are_accepted(name: str) -> None:
    function = _every_function()[name]
    expected = function(X, Y)
    reversed_rows = function(np.flip(X, 0), Y[::-1])  # the same examples, in reverse order
    assert reversed_rows == pytest.approx(expected, rel=1e-5, abs=1e-9)
    assert function(np.flip(X, 1), Y[:, ::-1]) == pytest.approx(expected, rel=1e-5, abs=1e-9)  # columns permuted
    for dtype in (np.float64, np.dtype("float64"), torch.float64, "float64"):
        assert function(X, Y, dtype=dtype) == pytest.approx(expected, rel=1e-12, abs=1e-12)
    for dtype in (np.float32, torch.float32, "float32"):
        assert function(X, Y, dtype=dtype) == pytest.approx(expected, rel=1e-3, abs=1e-5)


BAD_SETTINGS = [
    ("dtype", torch.float16), ("dtype", np.float16), ("dtype", "half"), ("dtype", 3),
    ("rank_multiplier", "5"), ("rank_multiplier", math.inf), ("rank_multiplier", math.nan),
    ("rank_multiplier", True), ("rank_multiplier", -1), ("device", 3.5), ("device", ["cpu"]), ("device", "tpu"),
]
ITERATIVE = [("tol", "1e-3"), ("tol", math.inf), ("tol", 1.0), ("tol", 0), ("max_iter", True), ("max_iter", 1e3),
             ("max_iter", "10"), ("max_iter", 0)]


@pytest.mark.parametrize("name", sorted(_every_function()))
def test_every_setting_is_checked_with_a_message_naming_it(name: str) -> None:
    function = _every_function()[name]
    cases = BAD_SETTINGS + (ITERATIVE if name in ("d_aff", "d_lin", "distances", "pairwise", "d_psi") else [])
    for argument, value in cases:
        with pytest.raises(ValueError) as caught:
            function(X, Y, **{argument: value})
        assert re.search(rf"\b{argument}\b", str(caught.value)), (argument, value, str(caught.value))
        assert isinstance(caught.value, AffineHomotopyError) or type(caught.value) is ValueError


@pytest.mark.parametrize("value", [math.inf, math.nan, True, "1", 0, -2.0, None])
def test_inverse_temperature_is_checked(value) -> None:
    with pytest.raises(ValueError, match=r"^inverse_temperature must be"):
        ah.d_psi(X, Y, PROBE, inverse_temperature=value)


def test_bad_arguments_never_leak_raw_errors() -> None:
    bad_arrays = ["abc", None, np.array([[1, "a"]] * N, dtype=object), Y.astype(complex), [[1.0, 2.0], [3.0]] * 30,
                  np.zeros((N, 0)), np.ma.masked_array(Y, mask=np.eye(N, 5, dtype=bool)),
                  torch.zeros(N, 5).to_sparse(), {"a": 1}]
    for bad in bad_arrays:
        for function in _every_function().values():
            with pytest.raises(ValueError, match=r"^(target|representations\[1\] \('1'\)) "):
                function(X, bad)
    for probe in [(np.array([["a", "b"]] * 5), np.zeros(2)), (np.ones((5, 0)), np.zeros(0)), object(),
                  (np.ones((5, 2)), np.zeros(3)), {"weight": np.ones((5, 2))}]:
        with pytest.raises(ValueError, match=r"probe"):
            ah.d_psi(X, Y, probe)
    for representations in (X, "ab", 3, [X]):
        with pytest.raises(ValueError, match=r"representations"):
            ah.pairwise(representations)
    for measures in (None, [3], [], 5):
        with pytest.raises(ValueError, match=r"measure"):
            ah.pairwise([X, Y], measures)
    for progress in ("yes", 3):
        with pytest.raises(ValueError, match=r"^progress must be"):
            ah.pairwise([X, Y], progress=progress)
    for rows in ("abc", np.full((3, 8), np.nan), np.ones((3, 2))):
        with pytest.raises(ValueError, match=r"^X "):
            BASE.transform(rows)


def test_long_double_and_integer_input() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ah.d_aff(X, Y.astype(np.longdouble)).upper == pytest.approx(BASE.upper, rel=1e-12)
        big = ah.d_aff(X, np.rint(Y * 2**40).astype(np.int64))
    assert big.upper == pytest.approx(BASE.upper * 2**40, rel=1e-6)


def test_pairwise_reports_progress() -> None:
    calls = []
    ah.pairwise([X, Y, X[:, :3]], progress=lambda done, total, elapsed, left: calls.append((done, total, left)))
    assert calls and calls[-1][:2] == (6, 6) and all(total == 6 for _, total, _ in calls)
    assert [done for done, _, _ in calls] == sorted(done for done, _, _ in calls)


# ---------------------------------------------------------------------------------------------
# values that underflow, the bound at the float floor, inputs numpy or torch cannot convert, stdout


@pytest.mark.parametrize("call", [
    lambda: ah.distances(X * 1e200, Y * 1e-200, ["psi_norm"]),  # 2**-1329 times a value of order 1
    lambda: ah.distances(X, Y * 1e-250, ["d_aff_msd"]),  # degree 2 in the target's scale
    lambda: ah.d_aff(X * 1e200, Y * 1e-200).linear,  # the map's entries, not only the values
], ids=["psi_norm", "d_aff_msd", "linear"])
def test_a_value_below_float64s_range_is_a_named_error_not_a_zero(call) -> None:
    with pytest.raises(NumericalError, match="float64's range"):
        call()


def test_d_psi_stays_within_its_bound_when_d_aff_is_at_the_float_floor() -> None:
    constant_target = np.ones((N, 5))  # d_aff = 0 exactly, so the bound is 0
    for target in (constant_target, X @ RNG.standard_normal((8, 5)) + 1.0):
        result = ah.d_psi(X, target, PROBE)
        assert 0.0 <= result.value <= result.bound, (result.value, result.bound)


def test_inputs_numpy_or_torch_cannot_convert_are_named() -> None:
    huge = np.array([[10**400] * 8] * N, dtype=object)
    with pytest.raises(ValueError, match=r"^source holds Python integers beyond float64's range"):
        ah.d_aff(huge, Y)
    with pytest.raises(ValueError, match=r"^source is a tensor on device 'meta'"):
        ah.d_aff(torch.empty((N, 8), device="meta"), Y)


def test_the_library_writes_nothing_on_stdout() -> None:
    # HiGHS writes its banner from C when the process builds its first solver object, before any option
    # is set: so in a fresh interpreter
    code = ("import numpy as np, affine_homotopy as ah; rng = np.random.default_rng(0); "
            "X, Y = rng.standard_normal((40, 6)), rng.standard_normal((40, 4)); "
            "ah.d_psi(X, Y, (rng.standard_normal((4, 2)), np.zeros(2))); ah.d_aff(X, Y)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == "", result.stdout
