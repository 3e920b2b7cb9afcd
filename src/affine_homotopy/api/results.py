"""What the library's functions return (:mod:`affine_homotopy.api`): a certified ``d_aff`` with its map,
the CCA pair, a labelled K x K table and a ``d_psi`` with its bound; and the one warning they share."""

from __future__ import annotations

import csv
import math
import os
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np
import torch

from ..core.interval import Interval
from ..errors import ConvergenceWarning, DataError, NumericalError


def warn_unconverged(what: str, gap: float, relative_gap: float, tol: float, max_iter: int,
                     stacklevel: int = 4) -> None:
    warnings.warn(
        f"{what}: the certified interval did not reach tol = {tol:g} within max_iter = {max_iter}: gap {gap:.3g} "
        f"(relative {relative_gap:.3g}). The value is still an upper bound attained by a map; raise max_iter "
        "for a tighter interval.", ConvergenceWarning, stacklevel=stacklevel,
    )


@dataclass
class DAffResult:
    """The certified affine distance of ``source`` mapped onto ``target`` (the paper's Eq. 19).

    Attributes
    ----------
    interval : Interval
        The certified value (:class:`affine_homotopy.core.interval.Interval`, the type of every
        certified distance): the minimum lies in ``[lower, upper]``; ``stop`` is ``"tol"`` or
        ``"max_iter"``, ``within_tol`` whether the solver's stopping test held, ``upper - lower <=
        tol * upper + atol`` (``atol`` = 10 eps(float32) times the target's largest centred row
        norm, the float32 rounding level), ``solver`` and ``iterations`` (weighted least-squares fits)
        what produced it.
    upper, lower, gap, relative_gap, converged, iterations
        Read from :attr:`interval`: ``upper`` is the reported ``d_aff``, the largest residual
        ``max_n ||y_n - psi(x_n)||_2`` of the best affine map found (:meth:`transform` applies it;
        ``float(result)`` and the workflow's ``d_aff.csv`` give the same number); ``lower`` a
        certified lower bound (``d_aff_lower.csv``), ``0 <= lower <= upper``; ``converged`` is
        ``interval.within_tol``.
    weights : ndarray, shape (N,)
        Solver weights on the simplex; the weighted least-squares fit with these weights is the map
        attaining ``upper`` (:func:`affine_homotopy.core.intrinsic.affine_map`). The examples with the
        largest weights are the ones the map finds hardest.
    linear : ndarray, shape (D_source, D_target)
    bias : ndarray, shape (D_target,)
        The map ``x -> x @ linear + bias`` attaining ``upper`` (rebuilt from ``weights`` on first
        access). Directions of ``source`` below the rank rule get zero weight in ``linear``. A
        NumericalError when an entry lies beyond float64's range (source and target of wildly
        different scales): :meth:`transform` still works.
    source_rank, target_rank : int
        Numerical ranks of the centred representations (the rank rule).
    """

    interval: Interval
    weights: np.ndarray = field(repr=False)
    tol: float = field(repr=False)
    max_iter: int = field(repr=False)
    source_rank: int = 0
    target_rank: int = 0
    # the inputs as the engine saw them: times 2**-exponent (inputs.representation), and its rank rule
    _source: Any = field(default=None, repr=False)
    _target: Any = field(default=None, repr=False)
    _multiplier: float = field(default=5.0, repr=False)
    _dtype: torch.dtype = field(default=torch.float64, repr=False)
    _exponents: tuple[int, int] = field(default=(0, 0), repr=False)
    _precision: torch.dtype | None = field(default=None, repr=False)

    @property
    def upper(self) -> float:
        return self.interval.upper

    @property
    def lower(self) -> float:
        return self.interval.lower

    @property
    def converged(self) -> bool:
        return self.interval.within_tol

    @property
    def iterations(self) -> int:
        return self.interval.iterations

    @property
    def gap(self) -> float:
        return self.interval.gap

    @property
    def relative_gap(self) -> float:
        return self.interval.relative_gap

    def __float__(self) -> float:
        return self.upper

    @cached_property
    def _map(self) -> tuple[np.ndarray, np.ndarray]:
        """The map between the rescaled inputs: ``x * 2**-e_s -> (x * 2**-e_s) @ A + b`` approximates
        ``y * 2**-e_t``."""
        from ..core.intrinsic import affine_map
        from ..core.linalg import rank_precision

        source, target = (np.asarray(a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a)
                          for a in (self._source, self._target))
        with rank_precision(self._precision):
            linear, bias = affine_map(source, target, self.weights, self._multiplier, self._dtype)
        return np.asarray(linear, dtype=np.float64), np.asarray(bias, dtype=np.float64)

    def _in_units(self, part: str, values: np.ndarray, exponent: int) -> np.ndarray:
        with np.errstate(over="ignore", under="ignore"):
            out = np.ldexp(values, exponent)
        lost = (values != 0) & (np.abs(out) < np.finfo(np.float64).tiny)  # underflow: a silent 0 otherwise
        if not np.isfinite(out).all() or lost.any():
            raise NumericalError(f"the map's {part} has entries beyond float64's range (source and target scales "
                                 f"differ by about 2**{abs(exponent)}); use transform(), which applies the map "
                                 "without forming them")
        return out

    @property
    def linear(self) -> np.ndarray:
        source_exponent, target_exponent = self._exponents
        return self._in_units("linear part", self._map[0], target_exponent - source_exponent)

    @property
    def bias(self) -> np.ndarray:
        return self._in_units("bias", self._map[1], self._exponents[1])

    def transform(self, X: Any) -> np.ndarray:
        """Apply the map attaining :attr:`upper` to representations ``X`` (M, D_source) of the source encoder.

        Returns an (M, D_target) float64 array (a single row (D_source,) gives (D_target,));
        ``transform(source)`` is within ``upper`` of ``target`` in every row.
        """
        width = self._map[0].shape[0]
        x = _rows("X", X, width)
        source_exponent, target_exponent = self._exponents
        rows = np.ldexp(x[None] if x.ndim == 1 else x, -source_exponent)
        with np.errstate(over="ignore", invalid="ignore"):
            mapped = np.ldexp(rows @ self._map[0] + self._map[1], target_exponent)
        if not np.isfinite(mapped).all():
            raise NumericalError("transform(X): the mapped rows lie beyond float64's range")
        return mapped[0] if x.ndim == 1 else mapped

    def __str__(self) -> str:
        state = "converged" if self.converged else f"NOT converged (max_iter = {self.max_iter})"
        return (f"d_aff(source -> target) = {self.upper:.6g}, certified interval [{self.lower:.6g}, {self.upper:.6g}], "
                f"relative gap {self.relative_gap:.2e} (tol {self.tol:g}), {state} after {self.iterations} iterations")


def _rows(name: str, X: Any, width: int) -> np.ndarray:
    """``X`` as a finite float64 (M, width) or (width,) array, or a ValueError naming it."""
    try:
        x = np.asarray(X.detach().cpu().to(torch.float64).numpy() if isinstance(X, torch.Tensor) else X)
        if x.dtype.kind not in "biuf":
            raise TypeError(f"dtype {x.dtype}")
        x = x.astype(np.float64)
    except Exception as error:
        raise DataError(f"{name} cannot be read as an array of real numbers ({str(error).splitlines()[0]}); pass "
                         f"(M, {width}) rows of the source's representations", argument=name) from None
    if x.ndim not in (1, 2) or x.shape[-1] != width:
        raise DataError(f"{name} has shape {x.shape}; the map takes rows of the source's "
                         f"D = {width} dimensions, (M, {width})", argument=name)
    if not np.isfinite(x).all():
        raise DataError(f"{name} holds NaN/inf values; pass finite rows", argument=name)
    return x


class CCAResult(NamedTuple):
    """CCA distances over the ``min(rank_source, rank_target)`` canonical correlations ``rho_k``."""

    r2: float  # 1 - mean rho_k^2 (cca_r2.csv: 1 - R^2_CCA)
    rho: float  # 1 - mean rho_k (cca_rho.csv)


@dataclass(frozen=True)
class PairwiseTable:
    """A labelled K x K table of one measure: ``values[i, j]`` = ``names[i]`` mapped onto ``names[j]``.

    ``table["a", "b"]`` reads one cell by names; :meth:`to_csv` writes the workflow's CSV layout
    (header ``mapped_from,<names>``); :meth:`to_pandas` gives a DataFrame (needs pandas).
    """

    measure: str
    names: tuple[str, ...]
    values: np.ndarray

    def __getitem__(self, key: tuple[str, str]) -> float:
        row, column = key
        for name in key:
            if name not in self.names:
                raise KeyError(f"{name!r} is not one of {list(self.names)}")
        return float(self.values[self.names.index(row), self.names.index(column)])

    def to_csv(self, path: str | os.PathLike[str]) -> None:
        from ..jobs.io import atomic_open

        with atomic_open(path) as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(["mapped_from", *self.names])
            for name, row in zip(self.names, self.values):
                writer.writerow([name, *(f"{v:.10g}" for v in row)])

    def to_pandas(self) -> Any:
        import pandas as pd

        frame = pd.DataFrame(self.values, index=list(self.names), columns=list(self.names))
        frame.index.name = "mapped_from"
        return frame

    def __str__(self) -> str:
        width = max(10, *(len(n) for n in self.names))
        head = f"{self.measure} (row mapped onto column)".ljust(width + 2) + "".join(n.rjust(width + 2) for n in self.names)
        rows = [name.ljust(width + 2) + "".join(f"{v:{width + 2}.4g}" for v in row)
                for name, row in zip(self.names, self.values)]
        return "\n".join([head, *rows])


@dataclass
class DPsiResult:
    """``d_psi`` of ``source`` mapped onto ``target`` through the target's classifier (the paper's Eq. 20).

    Attributes
    ----------
    interval : Interval
        The value (:class:`affine_homotopy.core.interval.Interval`, the type of every certified
        distance): ``upper`` is ``min over affine psi of max_n ||softmax(lam * probe(target_n)) -
        softmax(psi(source_n))||_2``, in [0, sqrt(2)], attained by an actual map, and ``lower``
        certifies it: ``upper - lower <= 1e-3 * upper`` (or ``upper <= 1e-6``, an exact fit) for a
        two-class probe; for more classes a relaxation's bound, whose gap can be wider
        (``within_tol`` false, ``stop`` ``"relaxation"``). ``stop``, ``iterations`` (LPs) and
        ``solver`` say how it was found.
    value, lower, certified
        Read from :attr:`interval`: ``value`` is ``upper``; ``certified`` whether ``lower`` is a
        certificate (not NaN).
    bound : float
        Lemma 5.2's bound ``(lam / 2) * ||W||_2 * d_aff(source -> target)``; ``value <= bound``.
    d_aff : DAffResult
        The certified affine map whose composition with the probe is one of the candidates.
    winning_start : str
        Which start map was best before refinement or the LP (``composed``, ``least_squares``,
        ``soft_label``).
    """

    interval: Interval
    bound: float
    d_aff: DAffResult
    winning_start: str

    @property
    def value(self) -> float:
        return self.interval.upper

    @property
    def lower(self) -> float:
        return self.interval.lower

    @property
    def certified(self) -> bool:
        return self.interval.certified

    def __float__(self) -> float:
        return self.value


def finite_or_raise(what: str, value: float) -> float:
    if not math.isfinite(value):
        raise NumericalError(f"{what} came out as {value} (not a finite number): a bug, not a property of the "
                             "data; please report it with the arrays' shapes and scales")
    return float(value)
