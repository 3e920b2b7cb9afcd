"""Shared linear algebra, one home for each piece: devices, dtypes, the numerical-rank rule, the
factorisation of a representation matrix, weighted least squares and memory-bounded blocks.

Every measure that needs an encoder's column space (intrinsic, extrinsic, the library API) takes it
from :func:`factorise`, and every weighted least-squares fit (the minimax solvers, the map rebuilt
by :func:`affine_homotopy.core.intrinsic.affine_map`, the extrinsic stage's composed start) runs through
:class:`WeightedLeastSquares`. Lemma 5.2's guarantee (``d_psi <= bound``) rests on the extrinsic
stage rebuilding exactly the intrinsic stage's map, which is why both share these two routines.

The rank rule (the paper's "rank to precision eps"): a singular value ``s`` of the centred
representation matrix counts when ``s > n * sigma_1 * eps(float32) * max(N, D)``, with ``n`` the
``rank_multiplier`` (paper: 5). ``eps(float32)`` because representations are stored in
float32, whatever precision the maths runs in: directions below that level are rounding noise.
An absolute floor ``n * eps(float32) * r_max`` (``r_max`` the largest uncentred row norm) catches
the noise that centring leaves of an (almost) constant representation. This float32 rule is the
default and the only rule the workflow uses.

Data that arrived in float64 (the library API on float64 or integer input with float64 maths; it
says so with :func:`rank_precision`) are ruled at their own precision: ``s`` counts when
``s > n * eps(float64) * max(sigma_1 * max(N, D), sqrt(N) * r_max)``. The floor is the rounding
of storing and centring the data, at most ``eps * ||X||_F <= eps * sqrt(N) * r_max`` in spectral
norm, so it scales with the uncentred size; at float64's precision an offset of up to about 1e12
times the spread still leaves every direction of the spread above it.
"""

from __future__ import annotations

import contextvars
import logging
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import torch

from ..errors import DataError, NumericalError

log = logging.getLogger(__name__)

FLOAT32_EPS = float(np.finfo(np.float32).eps)
DTYPES = {"float64": torch.float64, "float32": torch.float32}
FLOAT64_EPS = float(np.finfo(np.float64).eps)
# The precision the data arrived in, for the rank rule: None (the default) is float32's rule.
_RANK_PRECISION: contextvars.ContextVar[torch.dtype | None] = contextvars.ContextVar("rank_precision", default=None)


@contextmanager
def rank_precision(dtype: torch.dtype | None) -> Iterator[None]:
    """Rule ranks (:func:`numerical_rank`, so :func:`factorise`) inside this block at the precision
    of data that arrived in ``dtype``: ``torch.float64`` for float64's rule, ``None`` or
    ``torch.float32`` for float32's (the default; module docstring)."""
    token = _RANK_PRECISION.set(dtype)
    try:
        yield
    finally:
        _RANK_PRECISION.reset(token)


def float32_floor(row_norm_max: float) -> float:
    """Residuals below ``10 eps(float32)`` times a target's largest centred row norm are float32
    rounding (the minimax solvers' absolute stopping tolerance)."""
    return 10 * FLOAT32_EPS * float(row_norm_max)


def rank_threshold(sigma_max: float, n_rows: int, n_cols: int, rank_multiplier: float = 5.0) -> float:
    return rank_multiplier * sigma_max * FLOAT32_EPS * max(n_rows, n_cols)


def rank_cutoff(sigma_max: float, n_rows: int, n_cols: int, rank_multiplier: float = 5.0,
                data_scale: float = 0.0) -> float:
    """The rank rule's threshold for a centred (n_rows, n_cols) matrix whose largest singular value
    is ``sigma_max``: a direction whose singular value is at or below it is rounding noise.

    ``data_scale`` (the largest row norm of the *uncentred* data) adds an absolute floor
    ``rank_multiplier * eps(float32) * data_scale``: when centring leaves only rounding noise (all rows
    equal), sigma_1 itself is noise and the relative rule alone would count it as a direction.
    Inside :func:`rank_precision` (``torch.float64``) both parts use eps(float64), the floor
    ``rank_multiplier * eps(float64) * sqrt(n_rows) * data_scale`` (module docstring).
    """
    if _RANK_PRECISION.get() == torch.float64:
        floor = math.sqrt(n_rows) * data_scale
        return rank_multiplier * FLOAT64_EPS * max(sigma_max * max(n_rows, n_cols), floor)
    # float32's rule (the workflow's, bit for bit)
    return max(rank_threshold(sigma_max, n_rows, n_cols, rank_multiplier), rank_multiplier * FLOAT32_EPS * data_scale)


def numerical_rank(
    singular_values: np.ndarray | torch.Tensor, n_rows: int, n_cols: int, rank_multiplier: float = 5.0,
    data_scale: float = 0.0,
) -> int:
    """Singular values above the rank rule's threshold (:func:`rank_cutoff`)."""
    s = torch.as_tensor(singular_values)
    if s.numel() == 0 or float(s.max()) == 0.0:
        return 0
    threshold = rank_cutoff(float(s.max()), n_rows, n_cols, rank_multiplier, data_scale)
    return int((s > threshold).sum())


def consecutive_blocks(items: list[int], sizes: list[int], budget: int) -> list[list[int]]:
    """Consecutive items whose sizes sum to at most ``budget`` (an oversized item gets a block alone)."""
    blocks: list[list[int]] = []
    current: list[int] = []
    used = 0
    for item, size in zip(items, sizes):
        if current and used + size > budget:
            blocks.append(current)
            current, used = [], 0
        current.append(item)
        used += size
    if current:
        blocks.append(current)
    return blocks


def check_finite_representations(
    arrays: Sequence[np.ndarray], encoders: Sequence[str], task: str, layer: int | str, split: str | None = None,
    fix: str = "re-run the embed (or derive) job of that encoder and check its model weights and max_length",
) -> None:
    """Raise :class:`NumericalError` before any work when a representation holds NaN or Inf.

    ``arrays[k]`` (N, D) belongs to ``encoders[k]``. The message names every bad encoder with the
    task, layer (and split) and the number of rows (examples) holding a non-finite value.
    """
    problems = []
    for array, encoder in zip(arrays, encoders, strict=True):
        finite = np.isfinite(array)
        if finite.all():
            continue
        bad_rows = np.flatnonzero(~finite.reshape(finite.shape[0], -1).all(axis=1))
        where = f"encoder '{encoder}', task '{task}'" + (f", split {split}" if split else "") + f", layer {layer}"
        problems.append(f"{where}: {int((~finite).sum())} non-finite values (NaN/Inf) in {len(bad_rows)} of "
                        f"{finite.shape[0]} rows, first at row {bad_rows[0]}")
    if problems:
        raise NumericalError("; ".join(problems) + f". Fix: {fix}; no output was written.")


def rms(X: np.ndarray) -> float:
    """Root mean square of the centred entries of X."""
    centred = X - X.mean(axis=0, keepdims=True)
    return float(math.sqrt(float(np.mean(centred.astype(np.float64) ** 2))))


def thin_svd(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``U, s, Vt`` of a 2-D matrix (thin). torch's CPU SVD (LAPACK gesdd) can fail to converge on
    matrices whose singular values are all (nearly) equal -- ``Q_i^T Q_j`` of an encoder and its exact
    affine image is one -- so a failure is retried with the slower, more robust gesvd (scipy)."""
    try:
        return torch.linalg.svd(matrix, full_matrices=False)
    except torch.linalg.LinAlgError:
        import scipy.linalg

        parts = scipy.linalg.svd(matrix.detach().cpu().numpy(), full_matrices=False, lapack_driver="gesvd")
        U, s, Vt = (torch.from_numpy(np.ascontiguousarray(part)).to(matrix) for part in parts)
        return U, s, Vt


# ---------------------------------------------------------------------------------------------
# the factorisation of one encoder's representations


@dataclass
class Factors:
    """One encoder, factorised once: centred ``X - mean = Q diag(s) Vt`` under the rank rule, and
    optionally the uncentred ``X = Q_raw diag(s_raw) ...`` (for the linear, bias-free measures)."""

    Q: torch.Tensor  # (N, r) orthonormal basis of the centred column space
    s: torch.Tensor  # (r,) singular values, descending
    Vt: torch.Tensor  # (r, D)
    mean: torch.Tensor  # (D,) column means
    Q_raw: torch.Tensor  # (N, r_raw) basis of the uncentred column space; (N, 0) unless asked for
    s_raw: torch.Tensor
    dim: int
    row_norm_max: float  # largest centred row norm: the scale of the solvers' float32 floor
    raw_row_norm_max: float
    tail_row_norm_max: float = 0.0  # largest row norm of what the rank rule discarded (X - mean - Q diag(s) Vt)

    def truncated(self) -> torch.Tensor:
        """``mean + Q diag(s) Vt`` (N, D): the encoder as the measures see it (the rank rule's directions
        dropped). Every row is within ``tail_row_norm_max`` of the data."""
        return (self.Q * self.s) @ self.Vt + self.mean

    def without_basis(self) -> "Factors":
        """A copy without the (N, r) bases, to keep many encoders' factors at little memory;
        :meth:`with_basis` restores the centred basis from the data without a second SVD."""
        empty = self.Q.new_zeros((self.Q.shape[0], 0))
        return replace(self, Q=empty, Q_raw=empty, s_raw=self.s_raw.new_zeros(0))

    def with_basis(self, X: torch.Tensor) -> "Factors":
        """The centred basis ``Q = (X - mean) Vt^T diag(1/s)`` of the data ``X`` these factors came from."""
        X = X.to(dtype=self.Vt.dtype, device=self.Vt.device)
        return replace(self, Q=((X - self.mean) @ self.Vt.T) / self.s)

    @property
    def rank(self) -> int:
        return int(self.s.numel())

    def affine_design(self) -> torch.Tensor:
        """``[Q, 1/sqrt(N)]`` (N, r + 1): orthonormal columns spanning every affine image of the encoder."""
        n = self.Q.shape[0]
        return torch.cat([self.Q, self.Q.new_full((n, 1), 1.0 / math.sqrt(n))], dim=1)


def factorise(
    X: np.ndarray | torch.Tensor, rank_multiplier: float = 5.0, dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu", uncentred: bool = False,
) -> Factors:
    """Thin SVD of the centred ``X`` (N, D), truncated by the rank rule (module docstring).

    ``uncentred`` also factorises ``X`` itself (for ``d_lin``). The SVD is computed directly (not
    from the D x D Gram matrix, which would square the condition number); on the sizes of this
    study it costs about as much as forming that Gram matrix.
    """
    if not isinstance(X, torch.Tensor):
        X = np.asarray(X)
        if not X.flags.writeable:  # e.g. a slice of memory-mapped embeddings: torch warns on read-only arrays
            X = X.astype(np.float64 if dtype == torch.float64 else X.dtype)
        X = torch.from_numpy(X)
    X = X.to(device=device, dtype=dtype)
    if X.ndim != 2:
        raise DataError(f"representations must be a 2-D (N, D) array, got shape {tuple(X.shape)}",
                        argument="representations", value=tuple(X.shape))
    n, dim = X.shape
    mean = X.mean(dim=0)
    centred = X - mean
    U, s, Vt = thin_svd(centred)
    raw_row_norm_max = float(torch.linalg.vector_norm(X, dim=1).max())
    r = numerical_rank(s, n, dim, rank_multiplier, raw_row_norm_max)
    if uncentred:
        U_raw, s_raw, _ = thin_svd(X)
        r_raw = numerical_rank(s_raw, n, dim, rank_multiplier, raw_row_norm_max)
        U_raw, s_raw = U_raw[:, :r_raw].contiguous(), s_raw[:r_raw].clone()
    else:
        U_raw, s_raw = X.new_zeros((n, 0)), X.new_zeros(0)
    tail = float(torch.linalg.vector_norm(U[:, r:] * s[r:], dim=1).max()) if r < s.numel() else 0.0
    return Factors(
        U[:, :r].contiguous(), s[:r].clone(), Vt[:r].clone(), mean, U_raw, s_raw, dim,
        float(torch.linalg.vector_norm(centred, dim=1).max()), raw_row_norm_max, tail,
    )


# ---------------------------------------------------------------------------------------------
# weighted least squares


def _ridge(dtype: torch.dtype) -> float:
    # relative to the Gram matrix's mean diagonal: keeps the Cholesky alive when the weight sits on
    # fewer rows than columns, far below anything that changes a fit
    return 1e-13 if dtype == torch.float64 else 1e-6


class WeightedLeastSquares:
    """``min_C sum_n w_bn ||y_bn - x_n C_b||^2`` for a batch of weight vectors on one shared design.

    ``design`` (N, p) must have full column rank on the weighted rows; ``weights`` (B, N) or (N,)
    are non-negative. ``rows`` (indices) restricts the Gram matrix to the rows that carry weight
    (rows outside it must have weight 0). The normal equations ``M_b = X^T W_b X`` are factorised
    (Cholesky, with a tiny relative ridge) once, so any number of right-hand sides can be solved.
    """

    def __init__(self, design: torch.Tensor, weights: torch.Tensor, rows: torch.Tensor | None = None) -> None:
        self.single = weights.ndim == 1
        weights = weights[None] if self.single else weights
        self.design, self.rows = design, rows
        sub_design = design if rows is None else design[rows]
        sub_weights = weights if rows is None else weights[:, rows]
        self.weighted = sub_design.unsqueeze(0) * sub_weights.unsqueeze(2)  # (B, m, p)
        gram = self.weighted.transpose(1, 2) @ sub_design  # (B, p, p)
        eye = torch.eye(design.shape[1], dtype=design.dtype, device=design.device)
        scale = gram.diagonal(dim1=1, dim2=2).mean(dim=1)[:, None, None]
        ridge = _ridge(design.dtype)
        factor, info = torch.linalg.cholesky_ex(gram + ridge * scale * eye)
        if bool((info > 0).any()):
            factor = torch.linalg.cholesky(gram + 1e4 * ridge * scale * eye)
        self.factor = factor

    def solve(self, targets: torch.Tensor) -> torch.Tensor:
        """Coefficients (B, p, q) for targets (B, N, q), or (p, q) for (N, q) with a single weight vector."""
        single = targets.ndim == 2
        targets = targets[None] if single else targets
        sub_targets = targets if self.rows is None else targets[:, self.rows]
        coef = torch.cholesky_solve(self.weighted.transpose(1, 2) @ sub_targets, self.factor)
        return coef[0] if single and self.single else coef

    def leverages(self, select: torch.Tensor | None = None) -> torch.Tensor:
        """``k_n = x_n M^-1 x_n^T`` for every row of the design (B, N).

        ``select`` (a boolean mask or indices over the batch) computes them for those entries only.
        ``k_n = ||L^-1 x_n||^2`` with ``M = L L^T``: the triangular factor is inverted once (p^3 / 3)
        and the rows are multiplied by it in blocks (:func:`row_norms_of_product`): a matrix product,
        cheaper than a triangular solve with N right-hand sides. The leverages only scale the jacobi
        solver's steps, never a bound.
        """
        factor = self.factor if select is None else self.factor[select]
        eye = torch.eye(factor.shape[-1], dtype=factor.dtype, device=factor.device)
        inverse_t = torch.linalg.solve_triangular(factor, eye.expand_as(factor), upper=False).transpose(1, 2)
        return torch.stack([row_norms_of_product(self.design, inverse_t[b].contiguous(), squared=True)
                            for b in range(factor.shape[0])])


# rows per block of residual_norms: about 2**20 residual entries, a few MB that stay in cache
RESIDUAL_BLOCK_ENTRIES = 2**20


def residual_norms(design: torch.Tensor, targets: torch.Tensor, coef: torch.Tensor, squared: bool = False
                   ) -> torch.Tensor:
    """``||targets[n] - design[n] @ coef||_2`` for every row: (N,) for targets (N, q) and coef (p, q),
    (B, N) for (B, N, q) and (B, p, q); ``squared``: the squared norms.

    The same numbers as ``vector_norm(targets - design @ coef, dim=-1)``, computed in blocks of rows
    into one reused buffer: the (N, q) residual matrix is never materialised, so a pass over many rows
    touches a few MB instead of allocating (and page-faulting) twice N q entries.
    """
    single = targets.ndim == 2
    targets, coef = (targets[None], coef[None]) if single else (targets, coef)
    out = torch.empty(targets.shape[:2], dtype=targets.dtype, device=targets.device)
    for b in range(targets.shape[0]):
        _blocked_row_norms(design, coef[b], out[b], squared, subtract_from=targets[b])
    return out[0] if single else out


def row_norms_of_product(design: torch.Tensor, matrix: torch.Tensor, squared: bool = False) -> torch.Tensor:
    """``||design[n] @ matrix||_2`` for every row (N,), in blocks of rows as :func:`residual_norms`."""
    out = torch.empty(design.shape[0], dtype=design.dtype, device=design.device)
    _blocked_row_norms(design, matrix, out, squared)
    return out


def _blocked_row_norms(design: torch.Tensor, matrix: torch.Tensor, out: torch.Tensor, squared: bool,
                       subtract_from: torch.Tensor | None = None) -> None:
    """Row norms of ``design @ matrix`` (or of ``subtract_from - design @ matrix``) into ``out``, in blocks of
    about ``RESIDUAL_BLOCK_ENTRIES`` entries through one reused buffer."""
    n, width = design.shape[0], matrix.shape[1]
    if n == 0:
        return
    block = max(1, min(n, RESIDUAL_BLOCK_ENTRIES // max(width, 1)))
    buffer = torch.empty((block, width), dtype=design.dtype, device=design.device)
    for start in range(0, n, block):
        stop = min(n, start + block)
        rows = buffer[: stop - start]
        if subtract_from is None:
            torch.mm(design[start:stop], matrix, out=rows)
        else:
            torch.addmm(subtract_from[start:stop], design[start:stop], matrix, beta=1, alpha=-1, out=rows)
        torch.linalg.vector_norm(rows, dim=1, out=out[start:stop])
        if squared:
            out[start:stop].square_()


def weighted_fit(
    design: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor, rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted least squares of each target (B, N, q) on the design; (coef (B, p, q), residual norms (B, N)).

    Every row gets a residual, including those left out by ``rows``.
    """
    coef = WeightedLeastSquares(design, weights, rows).solve(targets)
    return coef, residual_norms(design, targets, coef)
