"""The library's calls of the engines (:mod:`affine_homotopy.api` is their public face): checked settings,
the rank rule's precision, the power-of-two rescaling undone exactly, progress, and the check that
every value handed back is finite (else a named error, never a NaN or a silent 0).

Rescaling. :func:`affine_homotopy.inputs.representation` multiplies input ``k`` by ``2**-e_k``. A
measure homogeneous of degree ``a`` in the source's scale and ``b`` in the target's (:data:`DEGREES`:
``d_aff`` (0, 1), ``d_aff_msd`` (0, 2), ``psi_norm`` (-1, 1), the baselines (0, 0)) is multiplied
back by ``2**(a e_i + b e_j)`` (:func:`numpy.ldexp`: exact). ``d_iso`` is homogeneous only when both
sides are scaled alike (:data:`JOINT`): when the exponents differ it is computed in a second engine
call on inputs that share one exponent.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError, DataError, NumericalError
from ..core.linalg import rank_precision
from .inputs import (Representation, check_solver, integer, rank_rule_precision, real, resolve_device,
                     torch_dtype)
from ..core.interval import Interval
from .results import DAffResult, DPsiResult, finite_or_raise

# (degree in the source's scale, degree in the target's) of each matrix the intrinsic engine returns
DEGREES: dict[str, tuple[int, int]] = {
    "d_aff": (0, 1), "d_aff_lower": (0, 1), "d_aff_ls": (0, 1), "d_aff_msd": (0, 2), "psi_norm": (-1, 1),
    "d_lin": (0, 1), "d_lin_lower": (0, 1), "d_iso": (0, 1), "d_aff_rel": (0, 0), "d_aff_rel_lower": (0, 0),
}
JOINT = ("d_iso",)  # homogeneous only under one scale for both sides
# undefined when either side has rank 0 (they divide by its variance); d_iso: onto a rank-0 target
RANK0_UNDEFINED = ("procrustes", "cca_r2", "cca_rho", "pwcca", "svcca", "cka")
INTRINSIC_LOGGER = "affine_homotopy.core.intrinsic"
# the range of each distance: rounding can leave an exact match a few ulps below 0 (1 - CKA of an image)
RANGES: dict[str, tuple[float, float]] = {"d_aff_rel": (0.0, 1.0),
                                          "procrustes": (0.0, 2.0), "cca_r2": (0.0, 1.0), "cca_rho": (0.0, 1.0),
                                          "pwcca": (0.0, 1.0), "svcca": (0.0, 1.0), "cka": (0.0, 1.0)}


@dataclass(frozen=True)
class Options:
    """The checked settings of one library call."""

    tol: float
    max_iter: int
    rank_multiplier: float
    dtype: torch.dtype
    device: torch.device | None
    solver: str | None

    def on(self, device: torch.device) -> "Options":
        return replace(self, device=device)

    def intrinsic(self, measures: Sequence[str], keep_weights: bool) -> Any:
        from ..core.intrinsic import IntrinsicSettings

        fields: dict[str, Any] = dict(tol=self.tol, max_iter=self.max_iter, rank_multiplier=self.rank_multiplier,
                                      dtype=self.dtype, device=self.device or torch.device("cpu"),
                                      measures=tuple(measures), keep_weights=keep_weights)
        if self.solver is not None:
            fields["solver"] = self.solver
        return IntrinsicSettings(**fields)


def options(tol: Any = 1e-3, max_iter: Any = 1000, rank_multiplier: Any = 5.0, dtype: Any = "float64",
            device: Any = None, solver: Any = None) -> Options:
    """Every setting checked (type and range), a ValueError naming the first bad one."""
    checked_tol = real("tol", tol, 0.0, 1.0, hint=" (the certified relative gap, such as 1e-3)")
    checked_iter = integer("max_iter", max_iter, 1, hint=" (weighted least-squares fits at most, such as 1000)")
    multiplier = real("rank_multiplier", rank_multiplier, 0.0, hint=" (n of the rank rule; the paper uses 5)")
    chosen_dtype = torch_dtype(dtype)
    chosen_solver = check_solver(solver)
    if device is not None:
        resolve_device(device)  # a device that does not exist is named before any array is read
    return Options(checked_tol, checked_iter, multiplier, chosen_dtype, None, chosen_solver)


@dataclass
class Run:
    """One library call of the intrinsic engine, its matrices in the inputs' units."""

    reps: list[Representation]
    names: list[str]
    matrices: dict[str, np.ndarray]
    result: Any  # the engine's IntrinsicResult (ranks, iterations, converged, weights)
    precision: torch.dtype  # the rank rule's


def run_intrinsic(reps: list[Representation], names: Sequence[str], measures: Sequence[str], chosen: Options,
                  pairs: Sequence[tuple[int, int]] | None = None, keep_weights: bool = False,
                  progress: Callable[[int, int, float, float | None], None] | None = None) -> Run:
    from ..core.intrinsic import pairwise_intrinsic

    names = list(names)
    pairs = list(pairs) if pairs is not None else [(i, j) for i in range(len(reps)) for j in range(len(reps)) if i != j]
    refuse_constant(reps, measures, pairs)
    precision = rank_rule_precision(reps, chosen.dtype)
    exponents = np.array([r.exponent for r in reps])
    common = len(set(exponents.tolist())) == 1
    separate = tuple(m for m in measures if common or m not in JOINT)
    joint = tuple(m for m in measures if not common and m in JOINT)
    matrices: dict[str, np.ndarray] = {}
    result = None
    with rank_precision(precision), _solver_failures():
        if separate:
            with _progress(progress, pairs):
                result = pairwise_intrinsic([r.data for r in reps], names, chosen.intrinsic(separate, keep_weights), pairs)
            matrices.update(_rescaled({m: v for m, v in result.matrices.items() if common or m not in JOINT},
                                      exponents))
        if joint:
            top = int(exponents.max())
            second = pairwise_intrinsic([r.scaled_to(top) for r in reps], names, chosen.intrinsic(joint, False), pairs)
            matrices.update(_rescaled({m: second.matrices[m] for m in joint}, np.full(len(reps), top)))
            result = result if result is not None else second
    run = Run(reps, names, matrices, result, precision)
    needed = set(measures) | {f"{m}_lower" for m in ("d_aff", "d_aff_rel", "d_lin") if m in measures}
    check_values(run, sorted(needed & set(matrices)), pairs)
    return run


@contextmanager
def _solver_failures() -> Iterator[None]:
    """A linear-algebra failure inside an engine (a singular weighted least-squares system) as a NumericalError."""
    try:
        yield
    except (torch.linalg.LinAlgError, np.linalg.LinAlgError) as error:
        raise NumericalError(f"the solver's linear algebra failed ({str(error).splitlines()[0]}); the value cannot be "
                             "computed for these inputs: please report it with the arrays' shapes") from None


def _rescaled(matrices: dict[str, np.ndarray], exponents: np.ndarray) -> dict[str, np.ndarray]:
    """The matrices in the inputs' units; a non-zero value that would underflow below float64's smallest
    normal number becomes -inf, which :func:`check_values` names (never a silent 0)."""
    out = {}
    tiny = np.finfo(np.float64).tiny
    for name, values in matrices.items():
        a, b = DEGREES.get(name, (0, 0))
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            out[name] = np.ldexp(values, a * exponents[:, None] + b * exponents[None, :])
            lost = np.isfinite(values) & (values != 0) & (np.abs(out[name]) < tiny)
        out[name] = np.where(lost, -np.inf, out[name])
        low, high = RANGES.get(name, (0.0, math.inf))
        out[name] = np.where(np.isfinite(out[name]), np.clip(out[name], low, high), out[name])
    return out


def refuse_constant(reps: Sequence[Representation], measures: Sequence[str], pairs: Sequence[tuple[int, int]]) -> None:
    """A DataError before any work when a measure is undefined for a constant input of some pair."""
    for i, j in pairs:
        for k in (i, j):
            undefined = [m for m in measures if m in RANK0_UNDEFINED]
            if reps[k].constant and undefined:
                raise DataError(f"{reps[k].name} is constant (every one of its {reps[k].shape[0]} rows is the same): "
                                f"{', '.join(undefined)} {'is' if len(undefined) == 1 else 'are'} undefined for a "
                                "representation without spread (they divide by its variance). Fix: drop it, or use "
                                "d_aff or d_lin, which are defined for constant representations.",
                                argument=reps[k].name)
        if "d_aff_rel" in measures and reps[j].constant:
            raise _no_spread(reps[j], "every one of its rows is the same")
        if "d_iso" in measures and reps[j].constant and not reps[i].constant:
            raise DataError(f"{reps[j].name} is constant (every row the same): d_iso onto a constant target is "
                            "undefined (no rotation is singled out). Fix: drop it, or use d_aff (0 onto a constant "
                            "target).", argument=reps[j].name)


def _no_spread(target: Representation, why: str) -> DataError:
    return DataError(f"{target.name} has no spread ({why}): d_aff_rel = d_aff / R divides by the radius R of "
                     "the smallest ball enclosing it, which is 0. Fix: use d_aff (0 onto a target without spread), "
                     "or drop it.", argument=target.name)


def check_values(run: Run, measures: Sequence[str], pairs: Sequence[tuple[int, int]]) -> None:
    """A DataError (rank 0 under the rank rule) or a NumericalError unless every value is finite."""
    ranks = run.result.ranks
    for name in measures:
        values = run.matrices[name]
        for i, j in pairs:
            if math.isfinite(float(values[i, j])):
                continue
            source, target = run.reps[i], run.reps[j]
            if name.startswith("d_aff_rel"):
                raise _no_spread(target, "its rank under the rank rule is 0 or its certified enclosing radius is 0")
            apart = abs(source.exponent - target.exponent)
            if name in JOINT and apart > 900:
                raise NumericalError(f"{name} of {source.name} -> {target.name} cannot be computed: it needs both at one "
                                     f"scale, and their magnitudes differ by about 2**{apart}, beyond float64's range; "
                                     "rescale them to similar magnitudes")
            low = [k for k in (i, j) if ranks[k] == 0]
            if low and (name in RANK0_UNDEFINED or (name == "d_iso" and ranks[j] == 0)):
                rep = run.reps[low[0]]
                raise DataError(f"{rep.name} has rank 0 under the rank rule (constant up to rounding: its spread is "
                                f"below the rounding level of its size): {name} is undefined for it. Fix: drop it, or "
                                "use d_aff or d_lin, which are defined for constant representations.",
                                argument=rep.name)
            a, b = DEGREES.get(name, (0, 0))
            exponent = a * source.exponent + b * target.exponent
            if exponent and values[i, j] == math.inf:
                raise NumericalError(f"{name} of {source.name} -> {target.name} lies beyond float64's range (about "
                                     f"2**{exponent} times the value of the rescaled inputs); rescale your inputs "
                                     "to a common magnitude")
            if exponent and values[i, j] == -math.inf:
                raise NumericalError(f"{name} of {source.name} -> {target.name} lies below float64's range (about "
                                     f"2**{exponent} times the value of the rescaled inputs, which is not 0); rescale "
                                     "your inputs to a common magnitude")
            finite_or_raise(f"{name} of {source.name} -> {target.name}", float(values[i, j]))


def progress_callback(progress: Any) -> Callable[[int, int, float, float | None], None] | None:
    """``progress=``: False/None (silent), True (one line per update on stderr) or a callable
    ``progress(done, total, elapsed_s, remaining_s)``."""
    if progress is None or progress is False:
        return None
    if progress is True:
        return stderr_progress
    if callable(progress):
        return progress
    raise ConfigError(f"progress must be True, False or a callable progress(done, total, elapsed_s, remaining_s), "
                     f"got {progress!r}", argument="progress", value=progress)


def stderr_progress(done: int, total: int, elapsed: float, remaining: float | None) -> None:
    import sys

    left = f", about {_duration(remaining)} left" if remaining is not None else ""
    print(f"pairwise: {done}/{total} ordered pairs done, {_duration(elapsed)} elapsed{left}", file=sys.stderr,
          flush=True)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@contextmanager
def _progress(report: Callable[[int, int, float, float | None], None] | None,
              pairs: Sequence[tuple[int, int]]) -> Iterator[None]:
    """Report progress after each source the engine finishes (it logs one INFO record per source)."""
    if report is None:
        yield
        return
    handler = _ProgressHandler(report, Counter(i for i, _ in pairs), len(pairs))
    logger = logging.getLogger(INTRINSIC_LOGGER)
    level, propagate = logger.level, logger.propagate
    if not logger.isEnabledFor(logging.INFO):  # the records are wanted here only: keep them from other handlers
        logger.setLevel(logging.INFO)
        logger.propagate = False
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
    if handler.done < handler.total:  # whatever the log said: the last report says all pairs are done
        handler.report(handler.total, handler.total, time.monotonic() - handler.started, 0.0)


class _ProgressHandler(logging.Handler):
    def __init__(self, report: Callable[[int, int, float, float | None], None], per_source: Counter,
                 total: int) -> None:
        super().__init__(logging.INFO)
        self.report, self.per_source, self.total = report, per_source, total
        self.done, self.started = 0, time.monotonic()

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if not (isinstance(record.msg, str) and record.msg.startswith("source ") and " done" in record.msg and args):
            return
        try:
            source = int(args[0]) - 1
        except (TypeError, ValueError):
            return
        self.done = min(self.total, self.done + self.per_source.get(source, 0))
        elapsed = time.monotonic() - self.started
        remaining = elapsed / self.done * (self.total - self.done) if self.done else None
        self.report(self.done, self.total, elapsed, remaining)


def pair_interval(run: Run, measure: str) -> Interval:
    """The certified interval of ``measure`` (``d_aff``, ``d_aff_rel`` or ``d_lin``) of the pair (0, 1), in the
    inputs' units."""
    upper = float(run.matrices[measure][0, 1])
    lower = min(max(float(run.matrices[f"{measure}_lower"][0, 1]), 0.0), upper)
    return replace(run.result.intervals[measure][0, 1], lower=lower, upper=upper)


def d_aff_result(run: Run, chosen: Options) -> DAffResult:
    """The DAffResult of the pair (0, 1) of a run with ``keep_weights``."""
    result, (source, target) = run.result, run.reps
    return DAffResult(pair_interval(run, "d_aff"), result.weights[0, 1].astype(np.float64), chosen.tol,
                      chosen.max_iter, int(result.ranks[0]), int(result.ranks[1]), source.data, target.data,
                      chosen.rank_multiplier, chosen.dtype, (source.exponent, target.exponent), run.precision)


def extrinsic_pair(run: Run, mapped: DAffResult, chosen: Options, lam: float, weight: np.ndarray,
                   bias: np.ndarray) -> DPsiResult:
    """d_psi of the pair (0, 1) of ``run`` through the classifier ``(weight, bias)`` of the target: one
    engine call, which also gives Lemma 5.2's bound."""
    from ..core.extrinsic import ExtrinsicSettings, extrinsic_distances
    from ..core.probes import SoftmaxProbe

    target = run.reps[1]
    arrays = [r.data.detach().cpu().numpy() if isinstance(r.data, torch.Tensor) else r.data for r in run.reps]
    # logits (y 2**-e) (W 2**e) + b = y W + b: the target's rescaling moves into the probe's weight
    probe = SoftmaxProbe(np.ldexp(weight, target.exponent), bias, 0.0, 0)
    d_aff = np.array([[0.0, float(np.ldexp(mapped.upper, -target.exponent))], [math.nan, 0.0]])
    settings = ExtrinsicSettings(inverse_temperature=lam, rank_multiplier=chosen.rank_multiplier, dtype=chosen.dtype,
                                 device=chosen.device or "cpu")
    with rank_precision(run.precision), _solver_failures():
        result = extrinsic_distances(arrays, [None, probe], ["source", "target"], {(0, 1): mapped.weights},
                                     settings=settings, pairs=[(0, 1)], d_aff=d_aff)
    found = result.interval(0, 1)
    value = finite_or_raise("d_psi(source -> target)", found.upper)
    bound = finite_or_raise("Lemma 5.2's bound", float(result.bounds.task[0, 1]))
    # value <= bound holds exactly in exact arithmetic; an excess at the level of the probabilities'
    # rounding (a d_aff at the float floor) is rounding, not a violation
    if bound < value <= bound + 64 * np.finfo(np.float64).eps * (1.0 + bound):
        value = bound
    lower = min(max(found.lower, 0.0), value) if found.certified else math.nan
    return DPsiResult(replace(found, lower=lower, upper=value), bound, mapped, str(result.diagnostics[0]["winning_start"]))

