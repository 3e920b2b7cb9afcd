"""The measures as a library: distances between your own representation matrices, no workflow needed.

Every function here runs the workflow's engine (:func:`affine_homotopy.core.intrinsic.pairwise_intrinsic`,
:func:`affine_homotopy.core.extrinsic.extrinsic_distances`), so a value returned here is the
value the workflow writes for the same pair and settings (float32 data, as the workflow stores them).

Conventions
-----------
Representations
    Arrays of shape ``(N, D)``: row ``n`` is example ``n``, the same examples in the same order for
    every encoder; widths ``D`` may differ. numpy arrays (any strides), torch tensors and anything
    :func:`numpy.asarray` reads are accepted. Integer, bool, bfloat16 and float16 input is upcast to
    float64 with an :class:`~affine_homotopy.errors.UpcastWarning`; the maths runs in ``dtype``
    (float64 by default; ``"float32"``, ``np.float32`` and ``torch.float32`` choose float32).
Device
    ``device=None`` (the default) follows the input: torch tensors are computed on their own device
    (a CUDA tensor on its GPU), numpy arrays on the CPU. ``"cpu"``, ``"cuda"``, ``"cuda:1"``, a
    :class:`torch.device` or ``"auto"`` (CUDA when visible) choose it; a device that does not exist
    (``"cuda"`` without CUDA) is a ValueError naming it.
Direction
    ``source`` is **mapped onto** ``target``: ``d_aff(source, target)`` is small when ``source``
    carries everything ``target`` has, up to an affine map (it can be 0 when ``source`` has the
    higher rank, never in the reverse direction: Theorem 4.1). The paper's ``d_Aff(H, G)`` (Eq. 19)
    maps its second argument onto its first, so ``d_aff(source=G, target=H)`` is ``d_Aff(H, G)``.
    In every table (:func:`pairwise`, the workflow's CSVs) cell ``(i, j)`` is row ``i`` mapped onto
    column ``j``. A two-array function computes that one ordered pair, never the reverse.
Values
    Every measure is a distance (0 = identical up to the measure's class of maps), exactly as in
    the workflow's CSV of the same name; the definitions are in :mod:`affine_homotopy.core.intrinsic`.
    ``d_aff``, ``d_lin`` and ``d_iso`` are in the target's units (L2 norm of a row, not divided by
    ``D``); ``d_aff_rel`` (``d_aff`` over the radius of the target's smallest enclosing ball) and the
    baselines are unitless. Every value returned is finite.
Rank rule
    Directions at the rounding level of the precision the data arrived in are not used
    (:mod:`affine_homotopy.core.linalg`): float32's rule (``rank_multiplier * eps(float32) *
    max(sigma_1 max(N, D), r_max)``, the workflow's) when any input is float32 or half precision or
    the maths runs in float32; float64's (``rank_multiplier * eps(float64) * max(sigma_1 max(N, D),
    sqrt(N) r_max)``) when every input is float64 or integer. ``r_max`` is the largest uncentred row norm.
Scale
    Each input is multiplied by a power of two (exactly) so that its largest entry lies in [0.5, 1)
    before any maths, and the values are scaled back exactly: inputs from about 1e-300 to 1e300
    give the values of unit-scale data. A value beyond float64's range (``psi_norm`` of a 1e-200
    source onto a 1e200 target) is a NumericalError.
Constant representations
    ``d_aff`` of a constant source is the radius of the target's smallest enclosing ball (every row
    maps to one point); onto a constant target it is 0; ``psi_norm`` of a constant source is 0;
    ``d_lin`` is defined for any input; ``d_iso`` of a constant source is the target's largest
    centred row norm. ``d_aff_rel`` onto a target without spread (constant, or rank 0 under the rank
    rule) is undefined: a DataError naming the target. CKA, CCA, PWCCA, SVCCA and Procrustes of a
    constant representation, and ``d_iso`` onto a constant target, are undefined: a DataError naming
    the argument, before any
    work (an input that is constant only up to rounding is found by the rank rule: rank 0, the same
    DataError after the factorisation).

Bad input raises a ValueError: :class:`~affine_homotopy.errors.ConfigError` for a setting of the
wrong type or out of range or an unknown measure, :class:`~affine_homotopy.errors.DataError` for an
array or probe (different row counts, a 1-D array, ``N < 2``, NaN or inf). Its ``argument`` field
names the argument (``value``: what was found) and its message the shape or value and the fix; a
value that cannot be computed raises :class:`~affine_homotopy.errors.NumericalError`. No numpy or
torch exception escapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..core.measures import D_AFF_FAMILY
from ..errors import ConfigError
from ..core.measures import INTRINSIC_MEASURES as MEASURES  # the registry's names, re-exported
from ..core.interval import Interval
from .engine_calls import (Options, d_aff_result, extrinsic_pair, options, pair_interval, progress_callback,
                           run_intrinsic)
from .inputs import (as_probe, as_representation, check_logits, check_same_examples, encoder_names, measure_names,
                     real, representation, resolve_device)
from .results import CCAResult, DAffResult, DPsiResult, PairwiseTable, warn_unconverged

__all__ = [
    "MEASURES", "CCAResult", "DAffResult", "DPsiResult", "Interval", "PairwiseTable",
    "cca", "cka", "d_aff", "d_aff_rel", "d_iso", "d_lin", "d_psi", "distances", "pairwise", "procrustes", "pwcca",
    "svcca",
    "as_representation", "check_same_examples", "resolve_device",
]

_BASELINE = dict(tol=1e-3, max_iter=1)  # the baselines use no iterations


def _pair(source: Any, target: Any, measures: tuple[str, ...], *, keep_weights: bool = False,
          **settings: Any) -> tuple[Any, Options]:
    """The engine on the one ordered pair source -> target (never the reverse), in the inputs' units."""
    chosen = options(**settings)  # settings first: cheap, and named before any array is read
    x, y = representation("source", source), representation("target", target)
    check_same_examples([("source", x.data), ("target", y.data)])
    chosen = chosen.on(resolve_device(settings.get("device"), [x.data, y.data]))
    return run_intrinsic([x, y], ["source", "target"], measures, chosen, pairs=[(0, 1)],
                         keep_weights=keep_weights), chosen


def d_aff(
    source: Any, target: Any, tol: float = 1e-3, max_iter: int = 1000, *, rank_multiplier: float = 5.0,
    dtype: Any = "float64", device: Any = None, solver: str | None = None,
) -> DAffResult:
    """Certified affine distance: ``min over affine psi of max_n ||target_n - psi(source_n)||_2``.

    ``source`` is mapped onto ``target``; ``d_aff(source=G, target=H)`` is the paper's
    ``d_Aff(H, G)`` (Eq. 19 maps its second argument onto its first), and the workflow's
    ``d_aff.csv`` cell ``(i, j)`` is ``d_aff(source=X_i, target=X_j)``. Invariant under invertible
    affine maps of ``source`` and offsets of ``target``; homogeneous of degree 1 in ``target``.

    Parameters
    ----------
    source : array_like, shape (N, D_source)
        Representations of the encoder that is mapped (rows = examples).
    target : array_like, shape (N, D_target)
        Representations of the same N examples by the encoder mapped onto.
    tol : float in (0, 1), default 1e-3
        Stop when the certified interval's relative gap ``(upper - lower) / upper`` is at most
        ``tol`` (plus a float32-rounding floor).
    max_iter : int >= 1, default 1000
        Solver iterations (weighted least-squares fits) at most. A result that stops here first warns once
        (:class:`~affine_homotopy.errors.ConvergenceWarning`, naming the gap).
    rank_multiplier : float > 0, default 5
        ``n`` of the rank rule (the paper's 5; module docstring).
    dtype : "float64" or "float32" (or their numpy/torch types)
        Precision of the maths.
    device : None, "cpu", "cuda", "cuda:<index>", "auto" or torch.device, default None
        Where the maths runs; None follows the input (a tensor's own device, numpy: the CPU).
    solver : str, optional
        The engine's minimax solver (a key of ``affine_homotopy.core.minimax.SOLVERS``).

    Returns
    -------
    DAffResult
        ``interval`` (the certified :class:`Interval`), and read from it ``upper`` (the distance,
        attained by :meth:`DAffResult.transform`), ``lower``, ``gap``, ``converged``, ``iterations``;
        ``weights``, ``linear`` and ``bias``. A constant source gives the radius of the target's
        smallest enclosing ball.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 8))
    >>> r = d_aff(X, X @ rng.standard_normal((8, 5)) + 1.0)  # an exact affine image: distance ~0
    >>> r.upper < 1e-9
    True
    """
    run, chosen = _pair(source, target, ("d_aff",), keep_weights=True, tol=tol, max_iter=max_iter,
                        rank_multiplier=rank_multiplier, dtype=dtype, device=device, solver=solver)
    out = d_aff_result(run, chosen)
    _warn_if_wide("d_aff", out.interval, chosen)
    return out


def d_aff_rel(
    source: Any, target: Any, tol: float = 1e-3, max_iter: int = 1000, *, rank_multiplier: float = 5.0,
    dtype: Any = "float64", device: Any = None, solver: str | None = None,
) -> Interval:
    """Scale-free affine distance ``d_aff(source, target) / R``, ``R = min_c max_n ||target_n - c||_2`` the
    radius of the smallest ball enclosing ``target`` (on the rank-ruled target ``d_aff`` uses).

    In [0, 1]: 0 is an exact affine map, 1 no better than mapping everything to one point (a constant
    map is affine). Invariant under invertible affine maps of ``source`` and under similarity
    transforms (scaling, rotation, offset) of ``target``; bit-identical under scaling ``target`` by a
    power of two. Settings as for :func:`d_aff`; ``R`` is certified to ``tol / 100``. Returns the
    certified :class:`Interval` ``[lower(d_aff) / upper(R), min(1, upper(d_aff) / lower(R))]``, as
    ``d_aff_rel.csv`` cell ``(i, j)`` = ``d_aff_rel(X_i, X_j)``; warns once when it misses ``tol``.
    A target without spread (constant, or rank 0 under the rank rule) is a DataError naming it.
    """
    run, chosen = _pair(source, target, ("d_aff_rel",), tol=tol, max_iter=max_iter, rank_multiplier=rank_multiplier,
                        dtype=dtype, device=device, solver=solver)
    interval = pair_interval(run, "d_aff_rel")
    _warn_if_wide("d_aff_rel", interval, chosen)
    return interval


def _warn_if_wide(measure: str, interval: Interval, chosen: Options) -> None:
    if not interval.within_tol:
        warn_unconverged(f"{measure}(source -> target)", interval.gap, interval.relative_gap, chosen.tol,
                         chosen.max_iter, stacklevel=5)


def _single(measure: str, source: Any, target: Any, **settings: Any) -> float:
    run, _ = _pair(source, target, (measure,), **settings)
    return float(run.matrices[measure][0, 1])


def distances(
    source: Any, target: Any, measures: str | Sequence[str] = ("d_aff",), tol: float = 1e-3, max_iter: int = 1000, *,
    rank_multiplier: float = 5.0, dtype: Any = "float64", device: Any = None, solver: str | None = None,
) -> dict[str, float | Interval | DAffResult]:
    """Several measures of the one ordered pair ``source`` mapped onto ``target``, in one engine call.

    ``measures``: names from :data:`MEASURES` (as for :func:`pairwise`); returns ``{measure: value}``,
    each value the one the measure's own function gives: the certified ones as their own types,
    ``d_aff`` a :class:`DAffResult`, ``d_aff_rel`` and ``d_lin`` an :class:`Interval` (``float()`` of each is the
    distance, ``pairwise``'s cell ``(0, 1)``), the others floats. Settings as for :func:`d_aff`; a
    missed ``tol`` of ``d_aff``, ``d_aff_rel`` or ``d_lin`` warns once each.
    """
    picked = measure_names(measures)
    run, chosen = _pair(source, target, picked, keep_weights="d_aff" in picked, tol=tol, max_iter=max_iter,
                        rank_multiplier=rank_multiplier, dtype=dtype, device=device, solver=solver)
    values: dict[str, float | Interval | DAffResult] = {m: float(run.matrices[m][0, 1]) for m in picked}
    if "d_aff" in picked:
        values["d_aff"] = d_aff_result(run, chosen)
    for name in ("d_aff_rel", "d_lin"):
        if name in picked:
            values[name] = pair_interval(run, name)
    for name in ("d_aff", "d_aff_rel", "d_lin"):
        if name in run.result.intervals:
            _warn_if_wide(name, pair_interval(run, name), chosen)
    return values


def d_lin(
    source: Any, target: Any, tol: float = 1e-3, max_iter: int = 1000, *, rank_multiplier: float = 5.0,
    dtype: Any = "float64", device: Any = None,
) -> Interval:
    """Certified linear distance: as :func:`d_aff` with a linear map (no bias), on uncentred data.

    ``min over linear A of max_n ||target_n - source_n A||_2``; ``source`` is mapped onto
    ``target``. Returns the certified :class:`Interval`: its ``upper`` (``float()`` of it) is
    attained by a map, as ``d_lin.csv`` cell ``(i, j)`` = ``d_lin(X_i, X_j)``, its ``lower`` is
    ``d_lin_lower.csv``'s; warns once, naming the gap, when the interval misses ``tol``. Invariant under invertible linear maps of ``source`` (not offsets);
    homogeneous of degree 1 in ``target``. Shapes: ``source`` (N, D_source), ``target`` (N, D_target).
    """
    run, chosen = _pair(source, target, ("d_lin",), tol=tol, max_iter=max_iter, rank_multiplier=rank_multiplier,
                        dtype=dtype, device=device)
    interval = pair_interval(run, "d_lin")
    _warn_if_wide("d_lin", interval, chosen)
    return interval


def d_iso(source: Any, target: Any, *, rank_multiplier: float = 5.0, dtype: Any = "float64",
          device: Any = None) -> float:
    """Affine-isometry distance at the Procrustes fit: largest residual of ``x -> (x - mu_x) R + mu_y``.

    ``R`` is the (semi-)orthogonal maximiser of ``tr(R^T X_c^T Y_c)``; ``source`` (N, D_source) is
    mapped onto ``target`` (N, D_target), in the target's units. Symmetric when the widths are
    equal; invariant under offsets and orthogonal maps of either side; homogeneous of degree 1 when
    both are scaled alike. Equals ``d_iso.csv`` cell ``(i, j)`` for ``(X_i, X_j)``. A constant source
    gives the target's largest centred row norm; a constant target is a DataError.
    """
    return _single("d_iso", source, target, rank_multiplier=rank_multiplier, dtype=dtype, device=device, **_BASELINE)


def cka(source: Any, target: Any, *, rank_multiplier: float = 5.0, dtype: Any = "float64",
        device: Any = None) -> float:
    """``1 - linear CKA`` of (N, D_source) and (N, D_target) representations (a distance in [0, 1]; symmetric).

    ``CKA = ||Y_c^T X_c||_F^2 / (||X_c^T X_c||_F ||Y_c^T Y_c||_F)`` with centred columns; as ``cka.csv``.
    Invariant under offsets, scaling and orthogonal maps of either side; a constant side is a DataError.
    """
    return _single("cka", source, target, rank_multiplier=rank_multiplier, dtype=dtype, device=device, **_BASELINE)


def cca(source: Any, target: Any, *, rank_multiplier: float = 5.0, dtype: Any = "float64",
        device: Any = None) -> CCAResult:
    """CCA distances of (N, D_source) and (N, D_target) representations, both symmetric, in [0, 1].

    Returns ``CCAResult(r2=1 - mean rho_k^2, rho=1 - mean rho_k)``, the values of ``cca_r2.csv``
    and ``cca_rho.csv``; ``rho_k`` are the canonical correlations over ``min(rank_i, rank_j)``
    directions after the rank rule. Invariant under invertible affine maps of either side; a constant
    side is a DataError.
    """
    run, _ = _pair(source, target, ("cca_r2", "cca_rho"), rank_multiplier=rank_multiplier, dtype=dtype,
                   device=device, **_BASELINE)
    return CCAResult(float(run.matrices["cca_r2"][0, 1]), float(run.matrices["cca_rho"][0, 1]))


def pwcca(source: Any, target: Any, *, rank_multiplier: float = 5.0, dtype: Any = "float64",
          device: Any = None) -> float:
    """Projection-weighted CCA distance ``1 - sum_k alpha_k rho_k / sum_k alpha_k`` (Morcos et al. 2018).

    Asymmetric: the weights ``alpha_k`` come from the **source**'s (the mapped-from encoder's)
    canonical variates, as in ``pwcca.csv`` cell ``(i, j)`` = ``pwcca(X_i, X_j)``. Invariant under
    offsets and scaling of either side; a constant side is a DataError.
    Shapes: (N, D_source), (N, D_target).
    """
    return _single("pwcca", source, target, rank_multiplier=rank_multiplier, dtype=dtype, device=device, **_BASELINE)


def svcca(source: Any, target: Any, *, rank_multiplier: float = 5.0, dtype: Any = "float64",
          device: Any = None) -> float:
    """SVCCA distance ``1 - mean rho_k`` after keeping each side's leading directions that explain 99 % of
    its variance (symmetric; as ``svcca.csv``). Invariant under offsets and scaling of either side; a
    constant side is a DataError. Shapes: (N, D_source), (N, D_target)."""
    return _single("svcca", source, target, rank_multiplier=rank_multiplier, dtype=dtype, device=device, **_BASELINE)


def procrustes(source: Any, target: Any, *, rank_multiplier: float = 5.0, dtype: Any = "float64",
               device: Any = None) -> float:
    """Orthogonal Procrustes distance ``2 - 2 ||X^T Y||_*`` (Ding et al. 2021), in [0, 2], symmetric.

    Columns centred and each matrix divided by its Frobenius norm; as ``procrustes.csv``. Invariant
    under offsets, scaling and orthogonal maps of either side; a constant side is a DataError.
    Shapes: (N, D_source), (N, D_target).
    """
    return _single("procrustes", source, target, rank_multiplier=rank_multiplier, dtype=dtype, device=device,
                   **_BASELINE)


def pairwise(
    representations: Sequence[Any] | Mapping[str, Any], measures: str | Sequence[str] = ("d_aff",),
    names: Sequence[str] | None = None, tol: float = 1e-3, max_iter: int = 1000, *, rank_multiplier: float = 5.0,
    dtype: Any = "float64", device: Any = None, solver: str | None = None, progress: Any = False,
) -> dict[str, PairwiseTable]:
    """Every ordered pair of K encoders at once: one labelled K x K table per measure.

    Parameters
    ----------
    representations : sequence of array_like (N, D_k), or a mapping name -> array
        K >= 2 encoders' representations of the same N examples (widths may differ).
    measures : str or sequence of str, default ("d_aff",)
        Names from :data:`MEASURES` (``d_aff``, ``d_aff_lower``, ``d_aff_ls``, ``d_aff_msd``,
        ``psi_norm``, ``d_aff_rel``, ``d_lin``, ``d_iso``, ``procrustes``, ``cca_r2``, ``cca_rho``, ``pwcca``,
        ``svcca``, ``cka``).
    names : sequence of str, optional
        Row/column labels (default: the mapping's keys, else ``"0"``, ``"1"``, ...).
    tol, max_iter, rank_multiplier, dtype, device, solver
        As for :func:`d_aff`.
    progress : bool or callable, default False
        True prints one line to stderr after each source encoder (ordered pairs done, time elapsed
        and left); a callable is called as ``progress(done, total, elapsed_s, remaining_s)``.

    Returns
    -------
    dict of str to PairwiseTable
        ``tables[m].values[i, j]`` is measure ``m`` of encoder ``i`` (row) mapped onto encoder
        ``j`` (column), the workflow's CSV convention; the diagonal is 0 (``psi_norm``: 1).
        When some ``d_aff`` pair misses ``tol``, one ConvergenceWarning names how many and the
        largest gap.
    """
    chosen = options(tol=tol, max_iter=max_iter, rank_multiplier=rank_multiplier, dtype=dtype, device=device,
                     solver=solver)
    report = progress_callback(progress)
    picked = measure_names(measures)
    arrays, labels = _encoders(representations, names)
    reps = [representation(f"representations[{k}] ({name!r})", rep) for k, (name, rep) in enumerate(zip(labels, arrays))]
    check_same_examples([(r.name, r.data) for r in reps])
    chosen = chosen.on(resolve_device(device, [r.data for r in reps]))
    run = run_intrinsic(reps, labels, picked, chosen, progress=report)
    solved = (("d_aff", run.result.converged) if set(D_AFF_FAMILY) & set(picked) else None,
              ("d_lin", run.result.lin_converged) if "d_lin" in picked else None)
    for name, flags in filter(None, solved):  # a missed tol warns once per measure, naming the widest gap
        upper, lower = run.matrices[name], run.matrices[f"{name}_lower"]
        missed = ~np.asarray(flags, dtype=bool)
        np.fill_diagonal(missed, False)
        if missed.any():
            gaps = np.where(missed, upper - lower, 0.0)
            i, j = np.unravel_index(int(gaps.argmax()), gaps.shape)
            warn_unconverged(f"{name}: {int(missed.sum())} of {len(labels) * (len(labels) - 1)} ordered pairs; "
                             f"largest gap at {labels[i]} -> {labels[j]}", float(gaps[i, j]),
                             float(gaps[i, j] / upper[i, j]) if upper[i, j] > 0 else 0.0, chosen.tol, chosen.max_iter)
    return {m: PairwiseTable(m, tuple(labels), run.matrices[m].copy()) for m in picked}


def _encoders(representations: Any, names: Any) -> tuple[list[Any], list[str]]:
    if isinstance(representations, (np.ndarray, torch.Tensor)):
        raise ConfigError(f"representations must be a sequence (or a mapping name -> array) of K >= 2 arrays; got one "
                         f"array of shape {tuple(representations.shape)}: pass [X, Y, ...]", argument="representations")
    if isinstance(representations, Mapping):
        names = list(representations) if names is None else names
        arrays = list(representations.values())
    elif isinstance(representations, (str, bytes)) or not hasattr(representations, "__iter__"):
        raise ConfigError(f"representations must be a sequence (or a mapping name -> array) of K >= 2 arrays; got "
                         f"{type(representations).__name__}", argument="representations")
    else:
        arrays = list(representations)
    if len(arrays) < 2:
        raise ConfigError(f"representations needs at least 2 encoders, got {len(arrays)}", argument="representations")
    return arrays, encoder_names(names, len(arrays))


def d_psi(
    source: Any, target: Any, probe: Any, *, inverse_temperature: float = 1.0, tol: float = 1e-3,
    max_iter: int = 1000, rank_multiplier: float = 5.0, dtype: Any = "float64", device: Any = None,
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
        Oriented by its type (:func:`affine_homotopy.inputs.as_probe`): ``nn.Linear(D_target, C)``
        (weight (C, D_target)) and scikit-learn's ``coef_`` (C, D_target) as they are; ``(weight,
        bias)`` with ``weight`` (D_target, C) and ``bias`` (C,). Logits ``target @ weight + bias``,
        probabilities ``softmax(inverse_temperature * logits)``. A (D_target,) or (D_target, 1)
        weight is a binary logistic classifier (logits ``(0, z)``).
    inverse_temperature : float > 0, default 1
        ``lam`` above; the bound's Lipschitz constant is ``lam / 2``.
    tol, max_iter, rank_multiplier, dtype, device
        Of the :func:`d_aff` map that starts the search (and enters the bound).

    Returns
    -------
    DPsiResult
        ``value`` (d_psi, as ``d_psi.csv`` cell ``(i, j)`` with probe = encoder j's task probe),
        ``bound`` (Lemma 5.2), ``d_aff``, ``winning_start``, ``lower`` and ``certified``. Invariant
        under invertible affine maps of ``source``.
    """
    lam = real("inverse_temperature", inverse_temperature, 0.0, hint=" (lam > 0: probabilities softmax(lam * logits))")
    chosen = options(tol=tol, max_iter=max_iter, rank_multiplier=rank_multiplier, dtype=dtype, device=device)
    x, y = representation("source", source), representation("target", target)
    check_same_examples([("source", x.data), ("target", y.data)])
    weight, bias = as_probe(probe, y.shape[1])
    check_logits(weight, bias, y, lam)
    chosen = chosen.on(resolve_device(device, [x.data, y.data]))
    run = run_intrinsic([x, y], ["source", "target"], ("d_aff",), chosen, pairs=[(0, 1)], keep_weights=True)
    mapped = d_aff_result(run, chosen)
    _warn_if_wide("d_aff", mapped.interval, chosen)
    return extrinsic_pair(run, mapped, chosen, lam, weight, bias)
