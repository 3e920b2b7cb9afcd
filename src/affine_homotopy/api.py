"""The measures as a library: distances between your own representation matrices, no workflow needed.

Every function here runs the workflow's engine (:func:`affine_homotopy.core.intrinsic.pairwise_intrinsic`,
:func:`affine_homotopy.core.extrinsic.fixed_classifier_distances`), so a value returned here is the
value the workflow writes for the same pair and settings.

Conventions
-----------
Representations
    Arrays of shape ``(N, D)``: row ``n`` is example ``n``, the same examples in the same order for
    every encoder; widths ``D`` may differ. numpy arrays, torch tensors and anything
    :func:`numpy.asarray` reads are accepted. Integer, bfloat16 and float16 input is upcast to
    float64 with an :class:`~affine_homotopy.errors.UpcastWarning`; the maths runs in ``dtype``
    (float64 by default).
Device
    ``device=None`` (the default) follows the input: torch tensors are computed on their own device
    (a CUDA tensor on its GPU), numpy arrays on the CPU. ``"cpu"``, ``"cuda"``, ``"cuda:1"``, a
    :class:`torch.device` or ``"auto"`` (CUDA when visible) choose it; a device that does not exist
    (``"cuda"`` without CUDA) is a ValueError naming it.
One pair
    A two-array function computes that one ordered pair (``source`` onto ``target``), never the
    reverse.
Direction
    ``source`` is **mapped onto** ``target``: ``d_aff(source, target)`` is small when ``source``
    carries everything ``target`` has, up to an affine map (it can be 0 when ``source`` has the
    higher rank, never in the reverse direction: Theorem 4.1). The paper's ``d_Aff(H, G)`` (Eq. 19)
    maps its second argument onto its first, so ``d_aff(source=G, target=H)`` is ``d_Aff(H, G)``.
    In every table (:func:`pairwise`, the workflow's CSVs) cell ``(i, j)`` is row ``i`` mapped onto
    column ``j``: ``d_aff(source=X_i, target=X_j)``.
Values
    Every measure is a distance (0 = identical up to the measure's class of maps), exactly as in
    the workflow's CSV of the same name; the definitions are in :mod:`affine_homotopy.core.intrinsic`.
    ``d_aff``, ``d_lin`` and ``d_iso`` are in the target's units (L2 norm of a row, not divided by
    ``D``); the baselines are unitless.
Rank rule
    Directions whose singular value is at float32 rounding level (``rank_multiplier * sigma_1 *
    eps(float32) * max(N, D)``) are not used (:mod:`affine_homotopy.core.linalg`).

Bad input (different row counts, a 1-D array, ``N < 2``, NaN or inf, an unknown measure) raises
:class:`ValueError` naming the argument, its shape or value, and the fix.
"""

from __future__ import annotations

import csv
import math
import numbers
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np
import torch

from .errors import ConvergenceWarning, UpcastWarning
from .core.linalg import DTYPES
from .jobs.devices import select_device
from .core.measures import D_AFF_FAMILY
from .core.measures import INTRINSIC_MEASURES as MEASURES  # the registry's names, re-exported

__all__ = [
    "MEASURES", "CCAResult", "DAffResult", "DPsiResult", "PairwiseTable",
    "cca", "cka", "d_aff", "d_iso", "d_lin", "d_psi", "pairwise", "procrustes", "pwcca", "svcca",
]

# ---------------------------------------------------------------------------------------------
# input checks


def as_representation(name: str, array: Any) -> np.ndarray | torch.Tensor:
    """``array`` as a finite float ``(N, D)`` array with ``N >= 2``, or a ValueError naming ``name``.

    A torch tensor stays a tensor on its own device (detached); anything else becomes a numpy array.
    Integer, bool, bfloat16 and float16 input is upcast to float64 with an UpcastWarning.
    """
    if isinstance(array, torch.Tensor):
        return _tensor_representation(name, array.detach())
    try:
        array = np.asarray(array)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} cannot be read as an array: {error}") from None
    kind = array.dtype.kind
    if kind not in "biuf":
        raise ValueError(f"{name} has dtype {array.dtype}; expected real numbers, an (N, D) array of floats")
    _check_shape(name, array.shape)
    if kind in "biu" or array.dtype == np.float16:
        _warn_upcast(name, str(array.dtype), kind == "f")
        array = array.astype(np.float64)
    finite = np.isfinite(array)
    if not finite.all():
        rows = np.nonzero(~finite.all(axis=1))[0]
        _raise_non_finite(name, array.shape, int((~finite).sum()), rows.size, int(rows[0]))
    return array


def _check_shape(name: str, shape: tuple[int, ...]) -> None:
    shape = tuple(int(k) for k in shape)
    if len(shape) != 2:
        if len(shape) == 1:
            hint = "for one feature per example pass x[:, None] (shape (N, 1))"
        elif len(shape) == 3:
            hint = "a workflow embedding file is (n_layers, N, D): pick one layer, e.g. x[layer]"
        else:
            hint = "rows are examples, columns dimensions"
        raise ValueError(f"{name} must be a 2-D (N, D) array, got shape {shape} ({len(shape)}-D); {hint}")
    n, dim = shape
    if n < 2:
        raise ValueError(f"{name} has N = {n} example(s) (shape {shape}); these measures need N >= 2 rows")
    if dim < 1:
        raise ValueError(f"{name} has D = 0 dimensions (shape {shape})")


def _warn_upcast(name: str, dtype: str, half: bool) -> None:
    note = (" Half-precision rounding (about 1e-3 relative for float16, 4e-3 for bfloat16) lies above the rank"
            " rule's float32 level, so rounding noise can count as directions; pass float32 data where you have"
            " it.") if half else ""
    warnings.warn(f"{name} has dtype {dtype}; upcast to float64.{note}", UpcastWarning, stacklevel=4)


def _raise_non_finite(name: str, shape: tuple[int, ...], values: int, rows: int, first: int) -> None:
    raise ValueError(
        f"{name} (shape {tuple(shape)}) holds {values} NaN/inf value(s) in {rows} row(s), first in row {first}; "
        "drop those examples from every representation (or impute them)"
    )


def _tensor_representation(name: str, tensor: torch.Tensor) -> torch.Tensor:
    if tensor.is_complex():
        raise ValueError(f"{name} has dtype {tensor.dtype}; expected real numbers, an (N, D) tensor of floats")
    _check_shape(name, tuple(tensor.shape))
    if tensor.dtype in (torch.float16, torch.bfloat16) or not tensor.is_floating_point():
        _warn_upcast(name, str(tensor.dtype).replace("torch.", ""), tensor.is_floating_point())
        tensor = tensor.to(torch.float64)
    finite = torch.isfinite(tensor)
    if not bool(finite.all()):
        rows = torch.nonzero(~finite.all(dim=1)).flatten()
        _raise_non_finite(name, tuple(tensor.shape), int((~finite).sum()), int(rows.numel()), int(rows[0]))
    return tensor


def _numpy(array: np.ndarray | torch.Tensor) -> np.ndarray:
    return array.detach().cpu().numpy() if isinstance(array, torch.Tensor) else array


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
    try:
        chosen = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device={device!r} is not a device; use None (follow the input), 'cpu', 'cuda', "
                         "'cuda:<index>', 'auto' or a torch.device") from None
    if chosen.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r}: no CUDA device is visible to this process; use device='cpu' "
                             "(or None to follow the input)")
        if chosen.index is not None and chosen.index >= torch.cuda.device_count():
            raise ValueError(f"device={device!r}: this process sees {torch.cuda.device_count()} CUDA device(s), "
                             f"indices 0..{torch.cuda.device_count() - 1}")
    elif chosen.type != "cpu":
        raise ValueError(f"device={device!r}: only 'cpu' and CUDA devices are supported")
    return chosen


def check_same_examples(named: Sequence[tuple[str, np.ndarray]]) -> None:
    """A ValueError naming every (name, array) shape unless all arrays have the same number of rows."""
    counts = {array.shape[0] for _, array in named}
    if len(counts) > 1:
        shapes = ", ".join(f"{name} {array.shape}" for name, array in named)
        raise ValueError(f"the representations must hold the same N examples (rows); got shapes {shapes}")


def _measure_names(measures: str | Sequence[str]) -> tuple[str, ...]:
    chosen = (measures,) if isinstance(measures, str) else tuple(measures)
    if not chosen:
        raise ValueError(f"measures is empty; choose from {', '.join(MEASURES)}")
    unknown = [m for m in chosen if m not in MEASURES]
    if unknown:
        raise ValueError(f"unknown measure(s) {unknown}; known measures: {', '.join(MEASURES)}")
    return chosen


def _settings(measures: tuple[str, ...], tol: float, max_iter: int, rank_multiplier: float, dtype: str | torch.dtype,
              device: Any, keep_weights: bool = False, solver: str | None = None) -> Any:
    from .core.intrinsic import SolverSettings

    if not (isinstance(tol, numbers.Real) and tol > 0 and math.isfinite(tol)):
        raise ValueError(f"tol must be a positive number (a relative gap such as 1e-3), got {tol!r}")
    if not (isinstance(max_iter, numbers.Integral) and max_iter >= 1):
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}")
    if not rank_multiplier > 0:
        raise ValueError(f"rank_multiplier must be > 0 (the paper uses 5), got {rank_multiplier!r}")
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        dtype = DTYPES[dtype]
    chosen_device = device if isinstance(device, torch.device) else resolve_device(device)
    options: dict[str, Any] = dict(tol=float(tol), max_iter=int(max_iter), multiplier=float(rank_multiplier),
                                   dtype=dtype, device=chosen_device, measures=measures, keep_weights=keep_weights)
    if solver is not None:  # the engine checks the name
        options["solver"] = solver
    return SolverSettings(**options)


def _engine(representations: Sequence[Any], names: Sequence[str], settings: Any,
            pairs: Sequence[tuple[int, int]] | None = None) -> Any:
    from .core.intrinsic import pairwise_intrinsic

    return pairwise_intrinsic(list(representations), list(names), settings, pairs)


def _pair(source: Any, target: Any, measures: tuple[str, ...], device: Any = None,
          **options: Any) -> tuple[Any, Any, Any]:
    """The engine on the one ordered pair source -> target (never the reverse)."""
    x, y = as_representation("source", source), as_representation("target", target)
    check_same_examples([("source", x), ("target", y)])
    settings = _settings(measures, device=resolve_device(device, [x, y]), **options)
    return _engine([x, y], ["source", "target"], settings, pairs=[(0, 1)]), x, y


# ---------------------------------------------------------------------------------------------
# d_aff


@dataclass
class DAffResult:
    """The certified affine distance of ``source`` mapped onto ``target`` (the paper's Eq. 19).

    Attributes
    ----------
    upper : float
        The reported ``d_aff``: the largest residual ``max_n ||y_n - psi(x_n)||_2`` of the best
        affine map found (:meth:`transform` applies it), so the true minimum is at most this.
        ``float(result)`` is this value; the workflow's ``d_aff.csv`` holds the same number.
    lower : float
        A certified lower bound of the minimum (``d_aff_lower.csv``).
    gap : float
        ``upper - lower`` (absolute, in the target's units); :attr:`relative_gap` is ``gap / upper``.
    converged : bool
        Whether the solver's stopping test held, ``upper - lower <= tol * upper + atol`` (``atol``
        = 10 eps(float32) times the target's largest centred row norm, the float32 rounding
        level); False when it stopped at ``max_iter`` first.
    iterations : int
        Weighted least-squares fits the solver used.
    weights : ndarray, shape (N,)
        Solver weights on the simplex; the weighted least-squares fit with these weights is the map
        attaining ``upper`` (:func:`affine_homotopy.core.intrinsic.affine_map`). The examples with the
        largest weights are the ones the map finds hardest.
    linear : ndarray, shape (D_source, D_target)
    bias : ndarray, shape (D_target,)
        The map ``x -> x @ linear + bias`` attaining ``upper`` (rebuilt from ``weights`` on first
        access). Directions of ``source`` below the rank rule get zero weight in ``linear``.
    source_rank, target_rank : int
        Numerical ranks of the centred representations (the rank rule).
    """

    upper: float
    lower: float
    converged: bool
    iterations: int
    weights: np.ndarray = field(repr=False)
    tol: float = field(repr=False)
    max_iter: int = field(repr=False)
    source_rank: int = 0
    target_rank: int = 0
    _source: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    _target: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    _multiplier: float = field(default=None, repr=False)  # type: ignore[assignment]
    _dtype: torch.dtype = field(default=None, repr=False)  # type: ignore[assignment]

    @property
    def gap(self) -> float:
        return self.upper - self.lower

    @property
    def relative_gap(self) -> float:
        return self.gap / self.upper if self.upper > 0 else 0.0

    def __float__(self) -> float:
        return self.upper

    @cached_property
    def _map(self) -> tuple[np.ndarray, np.ndarray]:
        from .core.intrinsic import affine_map

        return affine_map(self._source, self._target, self.weights, self._multiplier, self._dtype)

    @property
    def linear(self) -> np.ndarray:
        return self._map[0]

    @property
    def bias(self) -> np.ndarray:
        return self._map[1]

    def transform(self, X: Any) -> np.ndarray:
        """Apply the map attaining :attr:`upper` to representations ``X`` (M, D_source) of the source encoder.

        Returns an (M, D_target) float64 array (a single row (D_source,) gives (D_target,));
        ``transform(source)`` is within ``upper`` of ``target`` in every row.
        """
        x = np.asarray(X.detach().cpu().numpy() if isinstance(X, torch.Tensor) else X, dtype=np.float64)
        rows = x[None] if x.ndim == 1 else x
        if rows.ndim != 2 or rows.shape[1] != self.linear.shape[0]:
            raise ValueError(f"X has shape {x.shape}; the map takes rows of the source's "
                             f"D = {self.linear.shape[0]} dimensions, (M, {self.linear.shape[0]})")
        mapped = rows @ self.linear + self.bias
        return mapped[0] if x.ndim == 1 else mapped

    def __str__(self) -> str:
        state = "converged" if self.converged else f"NOT converged (max_iter = {self.max_iter})"
        return (f"d_aff(source -> target) = {self.upper:.6g}, certified interval [{self.lower:.6g}, {self.upper:.6g}], "
                f"relative gap {self.relative_gap:.2e} (tol {self.tol:g}), {state} after {self.iterations} iterations")


def _warn_unconverged(what: str, gap: float, relative_gap: float, tol: float, max_iter: int) -> None:
    warnings.warn(
        f"{what}: the certified interval did not reach tol = {tol:g} within max_iter = {max_iter}: gap {gap:.3g} "
        f"(relative {relative_gap:.3g}). The value is still an upper bound attained by a map; raise max_iter "
        "for a tighter interval.", ConvergenceWarning, stacklevel=3,
    )


def d_aff(
    source: Any, target: Any, tol: float = 1e-3, max_iter: int = 1000, *, rank_multiplier: float = 5.0,
    dtype: str = "float64", device: Any = None, solver: str | None = None,
) -> DAffResult:
    """Certified affine distance: ``min over affine psi of max_n ||target_n - psi(source_n)||_2``.

    ``source`` is mapped onto ``target``; ``d_aff(source=G, target=H)`` is the paper's
    ``d_Aff(H, G)`` (Eq. 19 maps its second argument onto its first), and the workflow's
    ``d_aff.csv`` cell ``(i, j)`` is ``d_aff(source=X_i, target=X_j)``.

    Parameters
    ----------
    source : array_like, shape (N, D_source)
        Representations of the encoder that is mapped (rows = examples).
    target : array_like, shape (N, D_target)
        Representations of the same N examples by the encoder mapped onto.
    tol : float, default 1e-3
        Stop when the certified interval's relative gap ``(upper - lower) / upper`` is at most
        ``tol`` (plus a float32-rounding floor).
    max_iter : int, default 1000
        Solver iterations (weighted least-squares fits) at most. A result that stops here first warns once
        (:class:`~affine_homotopy.errors.ConvergenceWarning`, naming the gap).
    rank_multiplier : float, default 5
        ``n`` of the rank rule (the paper's 5).
    dtype : {"float64", "float32"}
        Precision of the maths.
    device : None, "cpu", "cuda", "cuda:<index>", "auto" or torch.device, default None
        Where the maths runs; None follows the input (a tensor's own device, numpy: the CPU). A device
        that does not exist is a ValueError naming it.
    solver : str, optional
        The engine's minimax solver (``SolverSettings.solver``: a key of
        ``affine_homotopy.core.minimax.SOLVERS``); default: the engine's default.

    Returns
    -------
    DAffResult
        ``upper`` (the distance, attained by :meth:`DAffResult.transform`), ``lower``, ``gap``,
        ``converged``, ``iterations``, ``weights``, ``linear`` and ``bias``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 8))
    >>> r = d_aff(X, X @ rng.standard_normal((8, 5)) + 1.0)  # an exact affine image: distance ~0
    >>> r.upper < 1e-9
    True
    """
    result, x, y = _pair(source, target, ("d_aff",), tol=tol, max_iter=max_iter, rank_multiplier=rank_multiplier,
                         dtype=dtype, device=device, keep_weights=True, solver=solver)
    upper = float(result.matrices["d_aff"][0, 1])
    lower = float(result.matrices["d_aff_lower"][0, 1])
    iterations = int(result.iterations[0, 1])
    converged = bool(result.converged[0, 1])  # the engine's stopping test
    out = DAffResult(upper, lower, converged, iterations, result.weights[0, 1].astype(np.float64), float(tol), max_iter,
                     int(result.ranks[0]), int(result.ranks[1]), x, y, float(rank_multiplier),
                     DTYPES[dtype] if isinstance(dtype, str) else dtype)
    if not converged:
        _warn_unconverged("d_aff(source -> target)", out.gap, out.relative_gap, tol, max_iter)
    return out


# ---------------------------------------------------------------------------------------------
# the other measures of two arrays


def _single(measure: str, source: Any, target: Any, **options: Any) -> float:
    result, _, _ = _pair(source, target, (measure,), **options)
    return float(result.matrices[measure][0, 1])


_BASELINE_OPTIONS = dict(tol=1e-3, max_iter=1)  # the baselines use no iterations


def d_lin(
    source: Any, target: Any, tol: float = 1e-3, max_iter: int = 1000, *, rank_multiplier: float = 5.0,
    dtype: str = "float64", device: Any = None,
) -> float:
    """Certified linear distance: as :func:`d_aff` with a linear map (no bias), on uncentred data.

    ``min over linear A of max_n ||target_n - source_n A||_2``; ``source`` is mapped onto
    ``target`` (``d_lin.csv`` cell ``(i, j)`` = ``d_lin(X_i, X_j)``). Returns the upper bound
    (attained by a map), as ``d_lin.csv`` does; warns once, naming the gap, when the certified
    interval misses ``tol``. Shapes: ``source`` (N, D_source), ``target`` (N, D_target).
    """
    result, _, _ = _pair(source, target, ("d_lin",), tol=tol, max_iter=max_iter, rank_multiplier=rank_multiplier,
                         dtype=dtype, device=device)
    upper = float(result.matrices["d_lin"][0, 1])
    lower = float(result.matrices["d_lin_lower"][0, 1])
    if not result.lin_converged[0, 1]:
        _warn_unconverged("d_lin(source -> target)", upper - lower, (upper - lower) / upper, tol, max_iter)
    return upper


def d_iso(source: Any, target: Any, *, rank_multiplier: float = 5.0, dtype: str = "float64", device: Any = None) -> float:
    """Affine-isometry distance at the Procrustes fit: largest residual of ``x -> (x - mu_x) R + mu_y``.

    ``R`` is the (semi-)orthogonal maximiser of ``tr(R^T X_c^T Y_c)``; ``source`` (N, D_source) is
    mapped onto ``target`` (N, D_target), in the target's units. Symmetric when the widths are
    equal. Equals ``d_iso.csv`` cell ``(i, j)`` for ``(X_i, X_j)``.
    """
    return _single("d_iso", source, target, rank_multiplier=rank_multiplier, dtype=dtype, device=device,
                   **_BASELINE_OPTIONS)


def cka(source: Any, target: Any, *, rank_multiplier: float = 5.0, dtype: str = "float64", device: Any = None) -> float:
    """``1 - linear CKA`` of (N, D_source) and (N, D_target) representations (a distance in [0, 1]; symmetric).

    ``CKA = ||Y_c^T X_c||_F^2 / (||X_c^T X_c||_F ||Y_c^T Y_c||_F)`` with centred columns; as ``cka.csv``.
    """
    return _single("cka", source, target, rank_multiplier=rank_multiplier, dtype=dtype, device=device, **_BASELINE_OPTIONS)


class CCAResult(NamedTuple):
    """CCA distances over the ``min(rank_source, rank_target)`` canonical correlations ``rho_k``."""

    r2: float  # 1 - mean rho_k^2 (cca_r2.csv: 1 - R^2_CCA)
    rho: float  # 1 - mean rho_k (cca_rho.csv)


def cca(source: Any, target: Any, *, rank_multiplier: float = 5.0, dtype: str = "float64", device: Any = None) -> CCAResult:
    """CCA distances of (N, D_source) and (N, D_target) representations, both symmetric, in [0, 1].

    Returns ``CCAResult(r2=1 - mean rho_k^2, rho=1 - mean rho_k)``, the values of ``cca_r2.csv``
    and ``cca_rho.csv``; ``rho_k`` are the canonical correlations over ``min(rank_i, rank_j)``
    directions after the rank rule.
    """
    result, _, _ = _pair(source, target, ("cca_r2", "cca_rho"), rank_multiplier=rank_multiplier, dtype=dtype,
                         device=device, **_BASELINE_OPTIONS)
    return CCAResult(float(result.matrices["cca_r2"][0, 1]), float(result.matrices["cca_rho"][0, 1]))


def pwcca(source: Any, target: Any, *, rank_multiplier: float = 5.0, dtype: str = "float64", device: Any = None) -> float:
    """Projection-weighted CCA distance ``1 - sum_k alpha_k rho_k / sum_k alpha_k`` (Morcos et al. 2018).

    Asymmetric: the weights ``alpha_k`` come from the **source**'s (the mapped-from encoder's)
    canonical variates, as in ``pwcca.csv`` cell ``(i, j)`` = ``pwcca(X_i, X_j)``.
    Shapes: (N, D_source), (N, D_target).
    """
    return _single("pwcca", source, target, rank_multiplier=rank_multiplier, dtype=dtype, device=device,
                   **_BASELINE_OPTIONS)


def svcca(source: Any, target: Any, *, rank_multiplier: float = 5.0, dtype: str = "float64", device: Any = None) -> float:
    """SVCCA distance ``1 - mean rho_k`` after keeping each side's leading directions that explain 99 % of
    its variance (symmetric; as ``svcca.csv``). Shapes: (N, D_source), (N, D_target)."""
    return _single("svcca", source, target, rank_multiplier=rank_multiplier, dtype=dtype, device=device,
                   **_BASELINE_OPTIONS)


def procrustes(source: Any, target: Any, *, rank_multiplier: float = 5.0, dtype: str = "float64", device: Any = None) -> float:
    """Orthogonal Procrustes distance ``2 - 2 ||X^T Y||_*`` (Ding et al. 2021), in [0, 2], symmetric.

    Columns centred and each matrix divided by its Frobenius norm; as ``procrustes.csv``.
    Shapes: (N, D_source), (N, D_target).
    """
    return _single("procrustes", source, target, rank_multiplier=rank_multiplier, dtype=dtype, device=device,
                   **_BASELINE_OPTIONS)


# ---------------------------------------------------------------------------------------------
# all pairs


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
        from .jobs.io import atomic_open

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


def pairwise(
    representations: Sequence[Any] | Mapping[str, Any], measures: str | Sequence[str] = ("d_aff",),
    names: Sequence[str] | None = None, tol: float = 1e-3, max_iter: int = 1000, *, rank_multiplier: float = 5.0,
    dtype: str = "float64", device: Any = None, solver: str | None = None,
) -> dict[str, PairwiseTable]:
    """Every ordered pair of K encoders at once: one labelled K x K table per measure.

    Parameters
    ----------
    representations : sequence of array_like (N, D_k), or a mapping name -> array
        K >= 2 encoders' representations of the same N examples (widths may differ).
    measures : str or sequence of str, default ("d_aff",)
        Names from :data:`MEASURES` (``d_aff``, ``d_aff_lower``, ``d_aff_ls``, ``d_aff_msd``,
        ``psi_norm``, ``d_lin``, ``d_iso``, ``procrustes``, ``cca_r2``, ``cca_rho``, ``pwcca``,
        ``svcca``, ``cka``).
    names : sequence of str, optional
        Row/column labels (default: the mapping's keys, else ``"0"``, ``"1"``, ...).
    tol, max_iter, rank_multiplier, dtype, device, solver
        As for :func:`d_aff`.

    Returns
    -------
    dict of str to PairwiseTable
        ``tables[m].values[i, j]`` is measure ``m`` of encoder ``i`` (row) mapped onto encoder
        ``j`` (column), the workflow's CSV convention; the diagonal is 0 (``psi_norm``: 1).
        When some ``d_aff`` pair misses ``tol``, one ConvergenceWarning names how many and the
        largest gap.
    """
    if isinstance(representations, Mapping):
        names = list(representations) if names is None else names
        representations = list(representations.values())
    representations = list(representations)
    if len(representations) < 2:
        raise ValueError(f"representations needs at least 2 encoders, got {len(representations)}")
    names = [str(k) for k in range(len(representations))] if names is None else [str(n) for n in names]
    if len(names) != len(representations) or len(set(names)) != len(names):
        raise ValueError(f"names must be {len(representations)} distinct labels, one per representation; got {names}")
    chosen = _measure_names(measures)
    arrays = [as_representation(f"representations[{k}] ({name!r})", rep) for k, (name, rep) in enumerate(zip(names, representations))]
    check_same_examples(list(zip(names, arrays)))
    settings = _settings(chosen, tol, max_iter, rank_multiplier, dtype, resolve_device(device, arrays), solver=solver)
    result = _engine(arrays, names, settings)
    if set(D_AFF_FAMILY) & set(chosen):
        upper, lower = result.matrices["d_aff"], result.matrices["d_aff_lower"]
        missed = ~np.asarray(result.converged, dtype=bool)
        np.fill_diagonal(missed, False)
        if missed.any():
            gaps = np.where(missed, upper - lower, 0.0)
            i, j = np.unravel_index(int(gaps.argmax()), gaps.shape)
            _warn_unconverged(f"d_aff: {int(missed.sum())} of {len(names) * (len(names) - 1)} ordered pairs; "
                              f"largest gap at {names[i]} -> {names[j]}", float(gaps[i, j]),
                              float(gaps[i, j] / upper[i, j]), tol, max_iter)
    return {m: PairwiseTable(m, tuple(names), result.matrices[m].copy()) for m in chosen}


# ---------------------------------------------------------------------------------------------
# extrinsic: a user's own classifier


@dataclass
class DPsiResult:
    """``d_psi`` of ``source`` mapped onto ``target`` through the target's classifier (the paper's Eq. 20).

    Attributes
    ----------
    value : float
        ``min over affine psi of max_n ||softmax(lam * probe(target_n)) - softmax(psi(source_n))||_2``,
        in [0, sqrt(2)]: attained by an actual map, so an upper bound of the minimum. For a two-class
        probe it is certified: ``lower <= minimum <= value`` with ``value - lower <= 1e-3 * value``
        (or ``value <= 1e-6``, an exact fit).
    bound : float
        Lemma 5.2's bound ``(lam / 2) * ||W||_2 * d_aff(source -> target)``; ``value <= bound``.
    d_aff : DAffResult
        The certified affine map whose composition with the probe is one of the candidates.
    winning_start : str
        Which start map was best before refinement or the LP (``composed``, ``least_squares``,
        ``soft_label``).
    lower : float
        The certified lower bound (two classes); NaN for more classes (no certificate exists).
    """

    value: float
    bound: float
    d_aff: DAffResult
    winning_start: str
    lower: float = float("nan")

    def __float__(self) -> float:
        return self.value


def _as_probe(probe: Any, target_width: int) -> tuple[np.ndarray, np.ndarray]:
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
    transposed = False
    if isinstance(probe, torch.nn.Linear):
        weight, bias = probe.weight, probe.bias
        if bias is None:
            bias = torch.zeros(probe.out_features)
        transposed = True
    elif hasattr(probe, "coef_") and hasattr(probe, "intercept_"):
        weight, bias, transposed = probe.coef_, probe.intercept_, True
    elif isinstance(probe, Mapping):
        weight, bias = probe.get("weight"), probe.get("bias")
    elif hasattr(probe, "weight") and hasattr(probe, "bias"):
        weight, bias = probe.weight, probe.bias
    elif isinstance(probe, (tuple, list)) and len(probe) == 2:
        weight, bias = probe
    else:
        raise ValueError("probe must be a torch.nn.Linear, a scikit-learn linear classifier (coef_, intercept_) or "
                         "(weight, bias): weight (D_target, C) and bias (C,), logits = target @ weight + bias; got "
                         f"{type(probe).__name__}")
    if weight is None or bias is None:
        raise ValueError("probe needs both a weight and a bias (a mapping with keys 'weight' and 'bias')")
    weight, bias = (np.asarray(_numpy(v.detach().to(torch.float64)) if isinstance(v, torch.Tensor) else v,
                               dtype=np.float64) for v in (weight, bias))
    bias = np.atleast_1d(bias)
    if transposed:
        if weight.ndim != 2 or weight.shape[1] != target_width:
            kind = "torch.nn.Linear weight" if isinstance(probe, torch.nn.Linear) else "coef_"
            raise ValueError(f"probe {kind} has shape {weight.shape}; expected (C, D_target) = (C, {target_width}) "
                             "(nn.Linear(D_target, C): logits = target @ weight.T + bias)")
        weight = weight.T
    if weight.ndim == 1 or (weight.ndim == 2 and weight.shape[1] == 1):  # binary logistic: logits (0, z)
        weight = np.column_stack([np.zeros(weight.shape[0]), weight.reshape(weight.shape[0])])
        bias = np.concatenate([[0.0], bias.reshape(-1)[:1]])
    if weight.ndim != 2 or weight.shape[0] != target_width:
        raise ValueError(f"probe weight has shape {weight.shape}; expected (D_target, C) = ({target_width}, C) with "
                         "logits target @ weight + bias (a torch.nn.Linear or a scikit-learn classifier is oriented by "
                         "its type: pass the object itself)")
    if bias.shape != (weight.shape[1],):
        raise ValueError(f"probe bias has shape {bias.shape}; expected ({weight.shape[1]},), one entry per class")
    if not (np.isfinite(weight).all() and np.isfinite(bias).all()):
        raise ValueError("probe weight or bias holds NaN/inf values")
    return weight, bias


def d_psi(
    source: Any, target: Any, probe: Any, *, inverse_temperature: float = 1.0, tol: float = 1e-3,
    max_iter: int = 1000, rank_multiplier: float = 5.0, dtype: str = "float64", device: Any = None,
) -> DPsiResult:
    """Extrinsic distance through a fixed linear classifier of the target: how well an affine map from
    ``source`` reproduces the class probabilities that ``probe`` gives on ``target``.

    Parameters
    ----------
    source : array_like, shape (N, D_source)
        Mapped from.
    target : array_like, shape (N, D_target)
        Mapped onto; ``probe`` classifies these rows.
    probe : torch.nn.Linear, a scikit-learn linear classifier, (weight, bias), a mapping with those keys, or an object with ``.weight`` and ``.bias``
        Oriented by its type (:func:`_as_probe`): ``nn.Linear(D_target, C)`` (weight (C, D_target))
        and scikit-learn's ``coef_`` (C, D_target) as they are; ``(weight, bias)`` with ``weight``
        (D_target, C) and ``bias`` (C,). Logits ``target @ weight + bias``, probabilities
        ``softmax(inverse_temperature * logits)``. A (D_target,) or (D_target, 1) weight is a binary
        logistic classifier (logits ``(0, z)``).
    inverse_temperature : float, default 1
        ``lam`` above; the bound's Lipschitz constant is ``lam / 2``.
    tol, max_iter, rank_multiplier, dtype, device
        Of the :func:`d_aff` map that starts the search (and enters the bound).

    Returns
    -------
    DPsiResult
        ``value`` (d_psi, as ``d_psi.csv`` cell ``(i, j)`` with probe = encoder j's task probe),
        ``bound`` (Lemma 5.2), ``d_aff`` and ``winning_start``.
    """
    from .core.extrinsic import ExtrinsicSettings, fixed_classifier_distances, lemma_bound
    from .core.probes import SoftmaxProbe

    if not (isinstance(inverse_temperature, (int, float)) and inverse_temperature > 0):
        raise ValueError(f"inverse_temperature must be > 0, got {inverse_temperature!r}")
    x, y = as_representation("source", source), as_representation("target", target)
    check_same_examples([("source", x), ("target", y)])
    weight, bias = _as_probe(probe, int(y.shape[1]))
    device = resolve_device(device, [x, y]).type  # "cpu" or "cuda": None follows the input
    x, y = _numpy(x), _numpy(y)  # the extrinsic engine takes numpy arrays
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UpcastWarning)  # already said for source and target
        mapped = d_aff(x, y, tol, max_iter, rank_multiplier=rank_multiplier, dtype=dtype, device=device)
    n = x.shape[0]
    # The engine takes encoders with one probe each and an explicit list of pairs: only source ->
    # target is computed (the source's probe is a placeholder that no computed pair uses).
    probes = [SoftmaxProbe(np.zeros((x.shape[1], weight.shape[1])), np.zeros(weight.shape[1]), 0.0, 0),
              SoftmaxProbe(weight, bias, 0.0, 0)]
    map_weights = np.zeros((2, 2, n))
    map_weights[0, 1] = mapped.weights
    settings = ExtrinsicSettings(inverse_temperature=float(inverse_temperature), rank_multiplier=float(rank_multiplier),
                                 dtype=DTYPES[dtype] if isinstance(dtype, str) else dtype, device=select_device(device))
    result = fixed_classifier_distances([x, y], probes, ["source", "target"], map_weights, settings, pairs=[(0, 1)])
    row = result.diagnostics[0]
    d_aff_matrix = np.array([[0.0, mapped.upper], [0.0, 0.0]])
    bound = float(lemma_bound(probes, d_aff_matrix, float(inverse_temperature))[0, 1])
    return DPsiResult(float(result.d_psi[0, 1]), bound, mapped, str(row["winning_start"]),
                      float(result.d_psi_lower[0, 1]))
