"""Bad input to the library API (affine_homotopy.api) that tests/library/test_api.py leaves out: the dtype,
device, max_iter and rank checks; a probe with the wrong bias shape, NaN or the wrong type; an empty
measure list; DAffResult.transform with the wrong width; PairwiseTable with an unknown name.

The README's contract: a ValueError that names the argument (a KeyError naming the label for a table
lookup), raised before any maths; a ConfigError or DataError whose ``argument`` field names it. Messages are matched on the argument's name and the value found,
not on their wording.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import affine_homotopy as ah
from affine_homotopy.errors import ConfigError, DataError

X = np.random.default_rng(0).standard_normal((20, 3))
Y = np.tanh(X @ np.random.default_rng(1).standard_normal((3, 2)))
PROBE = (np.ones((2, 2)), np.zeros(2))  # a classifier of Y: weight (D_target, C), bias (C,)


def _named(*words: str) -> str:
    """A pattern that finds every word, in order, anywhere in the message."""
    return "(?s)" + ".*".join(re.escape(w) for w in words)


SETTINGS = [
    ("dtype", "float16", "dtype"),
    ("dtype", "double", "dtype"),
    ("device", "tpu", "device"),
    ("device", "gpu", "device"),
    ("max_iter", 0, "max_iter"),
    ("max_iter", -3, "max_iter"),
    ("max_iter", 2.5, "max_iter"),
    ("rank_multiplier", 0.0, "rank_multiplier"),
    ("rank_multiplier", -5.0, "rank_multiplier"),
]


@pytest.mark.parametrize("argument,value,name", SETTINGS, ids=[f"{a}={v}" for a, v, _ in SETTINGS])
@pytest.mark.parametrize("function", ["d_aff", "pairwise", "d_lin"])
def test_bad_settings_are_named(function: str, argument: str, value, name: str) -> None:
    call = {
        "d_aff": lambda **kw: ah.d_aff(X, Y, **kw),
        "d_lin": lambda **kw: ah.d_lin(X, Y, **kw),
        "pairwise": lambda **kw: ah.pairwise([X, Y], **kw),
    }[function]
    with pytest.raises(ConfigError, match=_named(name, repr(value))) as raised:
        call(**{argument: value})
    assert raised.value.argument == argument and raised.value.value == value  # the fields callers read


@pytest.mark.parametrize("source,target,argument", [(X[:, 0], Y, "source"), (X, Y[:5], "target"), (X, np.zeros((20, 2)), "target")])
def test_bad_arrays_name_their_argument_in_a_field(source, target, argument: str) -> None:
    with pytest.raises(DataError) as raised:
        ah.distances(source, target, ["d_aff", "cka"])
    assert raised.value.argument == argument, raised.value


@pytest.mark.parametrize("argument,value", [("rank_multiplier", 0.0), ("dtype", "float16"), ("device", "tpu")])
@pytest.mark.parametrize("function", [ah.cka, ah.procrustes, ah.cca, ah.pwcca, ah.svcca, ah.d_iso])
def test_baselines_check_their_settings_too(function, argument: str, value) -> None:
    with pytest.raises(ValueError, match=_named(argument, repr(value))):
        function(X, Y, **{argument: value})


def test_cuda_without_a_visible_gpu_is_named(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=_named("device", "cuda")):
        ah.d_aff(X, Y, device="cuda")


PROBES = [
    ((np.ones((2, 2)), np.zeros(3)), ("bias", "(3,)", "(2,)")),  # one bias entry per class
    ((np.ones((2, 2)), np.zeros((2, 1))), ("bias", "(2, 1)")),
    ((np.ones((2, 2)), np.array([0.0, np.nan])), ("NaN",)),
    ((np.array([[1.0, np.inf], [0.0, 1.0]]), np.zeros(2)), ("NaN/inf",)),
    ("weights.npz", ("probe",)),
    (42, ("probe",)),
    ((np.ones((2, 2)),), ("probe",)),  # a tuple of one
    ({"weight": np.ones((2, 2))}, ("bias",)),  # a mapping without the bias
]


@pytest.mark.parametrize("probe,words", PROBES, ids=["bias-3", "bias-2x1", "nan-bias", "inf-weight", "str", "int",
                                                     "one-tuple", "no-bias-key"])
def test_a_bad_probe_is_named(probe, words) -> None:
    with pytest.raises(ValueError, match=_named(*words)):
        ah.d_psi(X, Y, probe)


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), "1"])
def test_a_bad_inverse_temperature_is_named(value) -> None:
    with pytest.raises(ValueError, match=_named("inverse_temperature")):
        ah.d_psi(X, Y, PROBE, inverse_temperature=value)


@pytest.mark.parametrize("measures", [[], (), ""], ids=["list", "tuple", "str"])
def test_an_empty_measure_list_is_named(measures) -> None:
    with pytest.raises(ValueError, match=_named("measure")):
        ah.pairwise([X, Y], measures=measures)


def test_transform_with_the_wrong_width_is_named() -> None:
    result = ah.d_aff(X, Y)
    np.testing.assert_allclose(result.transform(X), X @ result.linear + result.bias)  # the right width works
    for bad in (np.ones((4, 2)), np.ones(5), np.ones((2, 3, 3)), torch.ones(4, 4, dtype=torch.float64)):
        with pytest.raises(ValueError, match=_named("X", str(tuple(bad.shape)), "3")):
            result.transform(bad)


def test_a_table_lookup_with_an_unknown_name_is_named() -> None:
    table = ah.pairwise({"a": X, "b": Y})["d_aff"]
    assert table["a", "b"] == table.values[0, 1]
    for key in (("a", "c"), ("zz", "b")):
        missing = next(name for name in key if name not in ("a", "b"))
        with pytest.raises(KeyError, match=_named(repr(missing), "'a'", "'b'")):
            table[key]


def test_error_fields_survive_pickling() -> None:
    """An error raised in a worker process keeps its fields, not only its message."""
    import pickle

    with pytest.raises(ConfigError) as raised:
        ah.d_aff(X, Y, tol=2.0)
    again = pickle.loads(pickle.dumps(raised.value))
    assert type(again) is ConfigError and str(again) == str(raised.value)
    assert (again.argument, again.value, again.key) == ("tol", 2.0, None)
