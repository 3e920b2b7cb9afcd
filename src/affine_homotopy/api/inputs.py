"""The public surface's first step: every argument of :mod:`affine_homotopy.api` (and so of the command
line) checked and coerced here, before any maths.

Representations (:func:`representation`) become finite, C-contiguous ``(N, D)`` arrays (numpy, or a
torch tensor that stays on its device), exactly rescaled by a power of two so that their largest
entry lies in ``[0.5, 1)``: the measures are homogeneous or scale invariant, so the engine never
sees an entry near float64's (or float32's) overflow or underflow, and :mod:`affine_homotopy.api`
undoes the scaling exactly (:func:`numpy.ldexp`) on the values it returns. Each representation
also records the precision it arrived in (float64 for float64, integer and bool input; float32 for
float32 and half precision), which selects the rank rule (:func:`affine_homotopy.core.linalg.rank_precision`).

Every check raises a :class:`~affine_homotopy.errors.ConfigError` (a setting) or
:class:`~affine_homotopy.errors.DataError` (an array or probe), both ValueErrors, whose ``argument``
field names the argument at fault (``value``: what was found) and whose message says what was wrong
and the fix; no numpy or torch exception escapes.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError, DataError, UpcastWarning
from ..core.linalg import DTYPES
from ..core.measures import INTRINSIC_MEASURES as MEASURES
from ..jobs.devices import select_device

HALF = (torch.float16, torch.bfloat16)


# ---------------------------------------------------------------------------------------------
# representations


@dataclass
class Representation:
    """One checked representation: ``data`` is the input times ``2**-exponent`` (exact), C-contiguous."""

    name: str
    data: np.ndarray | torch.Tensor
    exponent: int  # data = input * 2**-exponent; max |data| in [0.5, 1) (0 for an all-zero input)
    precision: torch.dtype  # the precision the data arrived in, for the rank rule: float32 or float64
    constant: bool  # every row equal (no spread at all: rank 0 whatever the rule)

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.data.shape[0]), int(self.data.shape[1]))

    def scaled_to(self, exponent: int) -> np.ndarray | torch.Tensor:
        """The input times ``2**-exponent`` (for a measure that needs one scale for several inputs)."""
        return power_of_two(self.data, self.exponent - exponent)


def representation(name: str, array: Any) -> Representation:
    """``array`` checked (a real ``(N, D)`` array, ``N >= 2``, ``D >= 1``, finite) and rescaled, or a
    ValueError naming ``name``. Integer, bool and half-precision input is upcast to float64 with an
    :class:`~affine_homotopy.errors.UpcastWarning`; a long double is converted to float64."""
    data, precision = as_representation(name, array, with_precision=True)
    exponent = scale_exponent(data)
    scaled = power_of_two(data, -exponent)
    if isinstance(scaled, torch.Tensor):
        constant = bool((scaled.amax(dim=0) == scaled.amin(dim=0)).all())
    else:
        constant = bool((scaled.max(axis=0) == scaled.min(axis=0)).all())
    return Representation(name, scaled, exponent, precision, constant)


def as_representation(name: str, array: Any, with_precision: bool = False) -> Any:
    """``array`` as a finite, C-contiguous float ``(N, D)`` array with ``N >= 2``, or a ValueError
    naming ``name`` (unscaled; :func:`representation` also rescales it).

    A torch tensor stays a tensor on its own device (detached); anything else becomes a numpy array.
    With ``with_precision``: ``(array, precision)``, the rank rule's precision of the input.
    """
    if isinstance(array, torch.Tensor):
        data, precision = _tensor_representation(name, array.detach())
    else:
        data, precision = _numpy_representation(name, array)
    return (data, precision) if with_precision else data


def _numpy_representation(name: str, array: Any) -> tuple[np.ndarray, torch.dtype]:
    if isinstance(array, np.ma.MaskedArray) and np.ma.getmaskarray(array).any():
        raise DataError(f"{name} is a masked array with {int(np.ma.getmaskarray(array).sum())} masked entries; "
                         "drop those examples from every representation (or fill them) and pass a plain array",
                         argument=name)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy's own warnings on ragged input: the error below says it
            array = np.asarray(array)
    except Exception as error:  # any object numpy cannot read (ragged lists, a failing __array__)
        raise DataError(f"{name} cannot be read as an array ({type(error).__name__}: {_first_line(error)}); "
                         "pass an (N, D) numpy array, torch tensor or nested list of numbers", argument=name) from None
    kind = array.dtype.kind
    if kind == "O":  # numbers held as Python objects (e.g. a list mixing ints and floats of numpy types)
        try:
            array = array.astype(np.float64)
        except OverflowError:
            raise DataError(f"{name} holds Python integers beyond float64's range (about 1.8e308); rescale them "
                             "before passing them", argument=name) from None
        except (TypeError, ValueError):
            raise DataError(f"{name} holds Python objects (dtype object) that are not all real numbers; pass an "
                             "(N, D) array of floats", argument=name) from None
        kind = "f"
    if kind not in "biuf":
        raise DataError(f"{name} has dtype {array.dtype}; expected real numbers, an (N, D) array of floats",
                        argument=name)
    _check_shape(name, array.shape)
    precision = torch.float64
    if kind in "biu" or array.dtype == np.float16:
        _warn_upcast(name, str(array.dtype), kind == "f")
        precision = torch.float32 if array.dtype == np.float16 else torch.float64
        array = array.astype(np.float64)
    elif array.dtype == np.float32:
        precision = torch.float32
    elif array.dtype != np.float64:  # long double: the maths runs in float64 at most
        warnings.warn(f"{name} has dtype {array.dtype}; converted to float64 (the precision of the maths)",
                      UpcastWarning, stacklevel=5)
        with np.errstate(over="ignore"):
            array = array.astype(np.float64)
    if not array.flags.c_contiguous or any(stride < 0 for stride in array.strides):
        array = np.array(array, order="C", copy=True)  # negative strides (torch refuses them), Fortran order
    finite = np.isfinite(array)
    if not finite.all():
        rows = np.nonzero(~finite.all(axis=1))[0]
        _raise_non_finite(name, array.shape, int((~finite).sum()), rows.size, int(rows[0]))
    return array, precision


def _tensor_representation(name: str, tensor: torch.Tensor) -> tuple[torch.Tensor, torch.dtype]:
    if tensor.is_complex():
        raise DataError(f"{name} has dtype {tensor.dtype}; expected real numbers, an (N, D) tensor of floats",
                        argument=name)
    if tensor.device.type not in ("cpu", "cuda"):
        raise DataError(f"{name} is a tensor on device '{tensor.device}'; pass a CPU or CUDA tensor "
                         "(tensor.cpu())", argument=name)
    if tensor.is_sparse or tensor.layout != torch.strided:
        raise DataError(f"{name} is a {tensor.layout} tensor; pass a dense one (tensor.to_dense())", argument=name)
    _check_shape(name, tuple(tensor.shape))
    precision = torch.float32 if tensor.dtype in (torch.float32, *HALF) else torch.float64
    if tensor.dtype in HALF or not tensor.is_floating_point():
        _warn_upcast(name, str(tensor.dtype).replace("torch.", ""), tensor.is_floating_point())
        tensor = tensor.to(torch.float64)
    tensor = tensor.contiguous()
    finite = torch.isfinite(tensor)
    if not bool(finite.all()):
        rows = torch.nonzero(~finite.all(dim=1)).flatten()
        _raise_non_finite(name, tuple(tensor.shape), int((~finite).sum()), int(rows.numel()), int(rows[0]))
    return tensor, precision


def _check_shape(name: str, shape: tuple[int, ...]) -> None:
    shape = tuple(int(k) for k in shape)
    if len(shape) != 2:
        if len(shape) == 1:
            hint = "for one feature per example pass x[:, None] (shape (N, 1))"
        elif len(shape) == 3:
            hint = "a workflow embedding file is (n_layers, N, D): pick one layer, e.g. x[layer]"
        else:
            hint = "rows are examples, columns dimensions"
        raise DataError(f"{name} must be a 2-D (N, D) array, got shape {shape} ({len(shape)}-D); {hint}",
                        argument=name, value=shape)
    n, dim = shape
    if n < 2:
        raise DataError(f"{name} has N = {n} example(s) (shape {shape}); these measures need N >= 2 rows",
                        argument=name, value=shape)
    if dim < 1:
        raise DataError(f"{name} has D = 0 dimensions (shape {shape}); every example needs at least one value",
                        argument=name, value=shape)


def _warn_upcast(name: str, dtype: str, half: bool) -> None:
    note = (" Half-precision rounding (about 1e-3 relative for float16, 4e-3 for bfloat16) lies above the rank"
            " rule's float32 level, so rounding noise can count as directions; pass float32 data where you have"
            " it.") if half else ""
    warnings.warn(f"{name} has dtype {dtype}; upcast to float64.{note}", UpcastWarning, stacklevel=6)


def _raise_non_finite(name: str, shape: tuple[int, ...], values: int, rows: int, first: int) -> None:
    raise DataError(
        f"{name} (shape {tuple(shape)}) holds {values} NaN/inf value(s) in {rows} row(s), first in row {first}; "
        "drop those examples from every representation (or impute them)", argument=name,
    )


def _first_line(error: BaseException) -> str:
    text = str(error)
    return text.splitlines()[0] if text else type(error).__name__


def scale_exponent(array: np.ndarray | torch.Tensor) -> int:
    """``e`` with ``max |array| * 2**-e`` in ``[0.5, 1)`` (0 for an all-zero array)."""
    largest = float(array.abs().max()) if isinstance(array, torch.Tensor) else float(np.abs(array).max())
    return math.frexp(largest)[1] if largest > 0 else 0


def power_of_two(array: Any, exponent: int) -> Any:
    """``array * 2**exponent``, exact (no rounding) unless an entry under- or overflows."""
    if exponent == 0:
        return array
    if isinstance(array, torch.Tensor):
        # steps of at most 2**±100 (a normal float32 number): each exact, and the intermediate values
        # lie between the input and the result, so no step under- or overflows where the result does not
        while exponent:
            step = max(-100, min(100, exponent))
            array = array * (2.0**step)
            exponent -= step
        return array
    return np.ldexp(array, exponent)


def check_same_examples(named: Sequence[tuple[str, Any]]) -> None:
    """A DataError naming every (name, array) shape unless all arrays have the same number of rows (its
    ``argument``: the first whose rows differ from the first array's)."""
    differing = [name for name, array in named if array.shape[0] != named[0][1].shape[0]]
    if differing:
        shapes = ", ".join(f"{name} {tuple(array.shape)}" for name, array in named)
        raise DataError(f"the representations must hold the same N examples (rows); got shapes {shapes}",
                        argument=differing[0])


def rank_rule_precision(representations: Sequence[Representation], dtype: torch.dtype) -> torch.dtype:
    """float64's rank rule when every input arrived in float64 (or an exact integer type) and the
    maths runs in float64; else float32's (the workflow's rule)."""
    if dtype == torch.float64 and all(r.precision == torch.float64 for r in representations):
        return torch.float64
    return torch.float32


# ---------------------------------------------------------------------------------------------
# settings


def real(name: str, value: Any, low: float, high: float = math.inf, *, low_open: bool = True,
         high_open: bool = True, hint: str = "") -> float:
    """``value`` as a finite float in the interval, or a ValueError naming ``name`` (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{name} must be a real number{hint}, got {value!r} ({type(value).__name__})",
                          argument=name, value=value)
    number = float(value)
    below = number <= low if low_open else number < low
    above = number >= high if high_open else number > high
    if not math.isfinite(number) or below or above:
        if low == 0 and low_open:
            where = "a positive number" + (f" below {high:g}" if math.isfinite(high) else "")
        else:
            left, right = "(" if low_open else "[", ")" if high_open else "]"
            where = f"a finite number in {left}{low:g}, {high:g}{right}"
        raise ConfigError(f"{name} must be {where}{hint}, got {value!r}", argument=name, value=value)
    return number


def integer(name: str, value: Any, low: int, hint: str = "") -> int:
    """``value`` as an int ``>= low``, or a ValueError naming ``name`` (bools and floats refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < low:
        raise ConfigError(f"{name} must be an integer >= {low}{hint}, got {value!r}", argument=name, value=value)
    return int(value)


def torch_dtype(dtype: Any) -> torch.dtype:
    """The maths' precision: ``"float64"``/``"float32"``, their numpy types or torch dtypes."""
    if isinstance(dtype, str):
        if dtype in DTYPES:
            return DTYPES[dtype]
    elif isinstance(dtype, torch.dtype):
        if dtype in DTYPES.values():
            return dtype
    else:
        try:
            name = np.dtype(dtype).name if dtype is not None else None
        except TypeError:
            name = None
        if name in DTYPES:
            return DTYPES[name]
    raise ConfigError(f"dtype must be one of {', '.join(DTYPES)} (the precision of the maths; numpy's and torch's "
                     f"float64/float32 types work too), got {dtype!r}", argument="dtype", value=dtype)


def check_solver(solver: Any) -> str | None:
    from ..core.minimax import SOLVERS

    if solver is None:
        return None
    if not isinstance(solver, str) or solver not in SOLVERS:
        raise ConfigError(f"solver must be one of {sorted(SOLVERS)} (or None for the default), got {solver!r}",
                          argument="solver", value=solver)
    return solver


def resolve_device(device: Any, arrays: Sequence[Any] = ()) -> torch.device:
    """The device the maths runs on: ``None`` follows the input (the first torch tensor's device, else
    the CPU); ``"auto"`` is CUDA when visible; anything else must name a device that exists here."""
    if device is None:
        for array in arrays:
            if isinstance(array, torch.Tensor):
                return array.device
        return torch.device("cpu")
    if isinstance(device, str) and device == "auto":
        return select_device("auto")
    if not isinstance(device, (str, torch.device)):
        raise ConfigError(f"device={device!r} is not a device; use None (follow the input), 'cpu', 'cuda', "
                         "'cuda:<index>', 'auto' or a torch.device", argument="device", value=device)
    try:
        chosen = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ConfigError(f"device={device!r} is not a device; use None (follow the input), 'cpu', 'cuda', "
                         "'cuda:<index>', 'auto' or a torch.device", argument="device", value=device) from None
    if chosen.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"device={device!r}: no CUDA device is visible to this process; use device='cpu' "
                             "(or None to follow the input)", argument="device", value=device)
        if chosen.index is not None and chosen.index >= torch.cuda.device_count():
            raise ConfigError(f"device={device!r}: this process sees {torch.cuda.device_count()} CUDA device(s), "
                             f"indices 0..{torch.cuda.device_count() - 1}", argument="device", value=device)
    elif chosen.type != "cpu":
        raise ConfigError(f"device={device!r}: only 'cpu' and CUDA devices are supported",
                          argument="device", value=device)
    return chosen


def measure_names(measures: Any) -> tuple[str, ...]:
    """``measures`` (a name or a sequence of names from :data:`MEASURES`) as a tuple, or a ValueError."""
    if isinstance(measures, str):
        chosen: tuple[Any, ...] = (measures,) if measures else ()
    elif isinstance(measures, Sequence) or isinstance(measures, (set, frozenset)):
        chosen = tuple(measures)
    else:
        raise ConfigError(f"measures must be a measure name or a sequence of names from {', '.join(MEASURES)}; "
                         f"got {measures!r}", argument="measures", value=measures)
    if not chosen:
        raise ConfigError(f"measures is empty; choose from {', '.join(MEASURES)}", argument="measures", value=measures)
    unknown = [m for m in chosen if not isinstance(m, str) or m not in MEASURES]
    if unknown:
        raise ConfigError(f"unknown measure(s) {unknown}; known measures: {', '.join(MEASURES)}",
                          argument="measures", value=measures)
    return tuple(dict.fromkeys(chosen))


def encoder_names(names: Any, count: int) -> list[str]:
    if names is None:
        return [str(k) for k in range(count)]
    if isinstance(names, str) or not isinstance(names, (Sequence, Mapping)):
        raise ConfigError(f"names must be a sequence of {count} distinct labels, one per representation; got {names!r}",
                          argument="names", value=names)
    labels = [str(n) for n in names]
    if len(labels) != count or len(set(labels)) != len(labels):
        raise ConfigError(f"names must be {count} distinct labels, one per representation; got {labels}",
                          argument="names", value=names)
    return labels


# ---------------------------------------------------------------------------------------------
# probes


def as_probe(probe: Any, target_width: int) -> tuple[np.ndarray, np.ndarray]:
    """A linear classifier of the target as ``(weight (D_target, C), bias (C,))``, logits ``y @ weight + bias``.

    The orientation is decided by the probe's type, never guessed from its shape (a square probe
    would be ambiguous):

    * ``torch.nn.Linear`` (``logits = y @ W.T + b``, ``W`` of shape (C, D)): ``weight = W.T``; no
      bias (``bias=False``) is a zero bias.
    * an object with ``coef_`` and ``intercept_`` (scikit-learn's linear classifiers, ``coef_`` of
      shape (C, D), or (1, D) for two classes): ``weight = coef_.T``.
    * ``(weight, bias)``, a mapping with those keys, or any other object with ``.weight`` and ``.bias``
      (e.g. :class:`affine_homotopy.core.probes.SoftmaxProbe`): ``weight`` is (D_target, C) as given.

    A (D_target,) or (D_target, 1) weight is a binary logistic classifier (logits ``(0, z)``).
    """
    weight, bias, transposed = _probe_parts(probe)
    if weight is None or bias is None:
        raise DataError("probe needs both a weight and a bias (a mapping with keys 'weight' and 'bias')",
                        argument="probe")
    weight, bias = _probe_array("weight", weight), np.atleast_1d(_probe_array("bias", bias))
    if transposed:
        if weight.ndim != 2 or weight.shape[1] != target_width:
            kind = "torch.nn.Linear weight" if isinstance(probe, torch.nn.Linear) else "coef_"
            raise DataError(f"probe {kind} has shape {weight.shape}; expected (C, D_target) = (C, {target_width}) "
                             "(nn.Linear(D_target, C): logits = target @ weight.T + bias)", argument="probe")
        weight = weight.T
    if weight.ndim == 1 or (weight.ndim == 2 and weight.shape[1] == 1):  # binary logistic: logits (0, z)
        if bias.size != 1:
            raise DataError(f"probe bias has shape {bias.shape}; a binary logistic probe (weight of shape "
                             f"{weight.shape}) has one bias value", argument="probe")
        weight = np.column_stack([np.zeros(weight.shape[0]), weight.reshape(weight.shape[0])])
        bias = np.concatenate([[0.0], bias.reshape(-1)])
    if weight.ndim != 2 or weight.shape[0] != target_width:
        raise DataError(f"probe weight has shape {weight.shape}; expected (D_target, C) = ({target_width}, C) with "
                         "logits target @ weight + bias (a torch.nn.Linear or a scikit-learn classifier is oriented by "
                         "its type: pass the object itself)", argument="probe")
    if weight.shape[1] < 2:
        raise DataError(f"probe weight has shape {weight.shape}: {weight.shape[1]} classes; a classifier needs "
                         "C >= 2 classes (or a (D_target,) weight for a binary logistic one)", argument="probe")
    if bias.shape != (weight.shape[1],):
        raise DataError(f"probe bias has shape {bias.shape}; expected ({weight.shape[1]},), one entry per class",
                        argument="probe")
    if not (np.isfinite(weight).all() and np.isfinite(bias).all()):
        raise DataError("probe weight or bias holds NaN/inf values; pass a finite classifier", argument="probe")
    return np.ascontiguousarray(weight), np.ascontiguousarray(bias)


def _probe_parts(probe: Any) -> tuple[Any, Any, bool]:
    if isinstance(probe, torch.nn.Linear):
        bias = probe.bias if probe.bias is not None else torch.zeros(probe.out_features)
        return probe.weight, bias, True
    if hasattr(probe, "coef_") and hasattr(probe, "intercept_"):
        return probe.coef_, probe.intercept_, True
    if isinstance(probe, Mapping):
        return probe.get("weight"), probe.get("bias"), False
    if hasattr(probe, "weight") and hasattr(probe, "bias"):
        return probe.weight, probe.bias, False
    if isinstance(probe, (tuple, list)) and len(probe) == 2:
        return probe[0], probe[1], False
    raise DataError("probe must be a torch.nn.Linear, a scikit-learn linear classifier (coef_, intercept_) or "
                     "(weight, bias): weight (D_target, C) and bias (C,), logits = target @ weight + bias; got "
                     f"{type(probe).__name__}", argument="probe")


def _probe_array(part: str, value: Any) -> np.ndarray:
    try:
        if isinstance(value, torch.Tensor):
            return value.detach().to(device="cpu", dtype=torch.float64).numpy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            array = np.asarray(value)
            if array.dtype.kind not in "biufO":
                raise TypeError(f"dtype {array.dtype}")
            return np.array(array, dtype=np.float64)
    except Exception as error:
        raise DataError(f"probe {part} cannot be read as an array of real numbers ({_first_line(error)}); pass "
                         "numbers (numpy arrays or torch tensors)", argument="probe") from None


def check_logits(weight: np.ndarray, bias: np.ndarray, target: Representation, inverse_temperature: float) -> None:
    """A DataError naming the probe unless ``inverse_temperature * (target @ weight + bias)`` is finite."""
    with np.errstate(over="ignore", invalid="ignore"):
        data = target.data.detach().cpu().numpy() if isinstance(target.data, torch.Tensor) else target.data
        scaled_weight = np.ldexp(weight, target.exponent)
        logits = inverse_temperature * (data.astype(np.float64) @ scaled_weight + bias)
    if not (np.isfinite(scaled_weight).all() and np.isfinite(logits).all()):
        raise DataError(f"inverse_temperature ({inverse_temperature:g}) x the probe's logits on the target overflow "
                        "float64; pass a classifier (or an inverse temperature) of moderate size")
