"""Intrinsic (representation-level) distances between encoders.

Orientation convention, used by every matrix this project writes: entry ``(i, j)`` is encoder ``i``
(row, *mapped from*) affinely mapped onto encoder ``j`` (column, *mapped to*). In the paper's
notation (Eq. 19, ``d_Aff(H, G)`` maps ``G`` onto ``H``) entry ``(i, j)`` is ``d_Aff(H_j, H_i)``.
A small entry means "``i`` carries everything ``j`` has, up to an affine map". Theory (Thm 4.1):
mapping a higher-rank encoder onto a lower-rank one can be exact, the reverse cannot.

Estimator (this version): the least-squares affine map, scored by its largest row residual:

    d_ls(i -> j) = max_n || (Y_j - 1 mu_j^T)[n] - P_i (Y_j - 1 mu_j^T)[n] ||_2

where ``P_i = U_i U_i^T`` projects onto the centred column space of ``X_i`` restricted to the
directions that pass the rank rule (:mod:`affine_homotopy.linalg`). It is the paper's way of fitting
(mean squared error, maximum evaluated) solved exactly instead of by SGD. It is an upper bound of
Eq. 19's minimax value. Units: L2 norm in the target's representation space (not divided by D).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch

from .linalg import CentredBasis, centred_basis, column_blocks

log = logging.getLogger(__name__)


def max_residual_ls_block(basis: CentredBasis, targets_centred: Sequence[torch.Tensor]) -> list[float]:
    """Largest row L2 residual of the LS affine map from ``basis``'s encoder onto each target."""
    stacked = torch.cat(list(targets_centred), dim=1)
    coefficients = basis.U.T @ stacked  # one large matmul for the whole block of targets
    residual = stacked - basis.U @ coefficients
    out: list[float] = []
    start = 0
    for target in targets_centred:
        width = target.shape[1]
        block = residual[:, start : start + width]
        out.append(float(torch.linalg.vector_norm(block, dim=1).max()))
        start += width
    return out


def pairwise_affine_ls(
    representations: Sequence[np.ndarray],
    names: Sequence[str] | None = None,
    multiplier: float = 5.0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
    block_mb: int = 256,
) -> tuple[np.ndarray, np.ndarray]:
    """All ordered pairs of ``d_ls`` (see module docstring) and each encoder's numerical rank.

    Each encoder's matrix is factorised once; for each source all targets are processed in column
    blocks of at most ``block_mb`` MiB, each block one pair of matrix products.
    Returns ``(distances K x K with a zero diagonal, ranks (K,))``.
    """
    count = len(representations)
    names = list(names) if names is not None else [str(k) for k in range(count)]
    n_rows = {rep.shape[0] for rep in representations}
    if len(n_rows) != 1:
        raise ValueError(f"all encoders need the same examples (rows), got row counts {sorted(n_rows)}")
    n = n_rows.pop()
    centred = []
    for rep in representations:
        tensor = torch.as_tensor(np.asarray(rep)).to(device=device, dtype=dtype)
        centred.append(tensor - tensor.mean(dim=0))
    bases = [centred_basis(rep, multiplier, dtype, device) for rep in representations]
    ranks = np.array([basis.rank for basis in bases])
    itemsize = torch.tensor([], dtype=dtype).element_size()
    blocks = column_blocks([c.shape[1] for c in centred], n, itemsize, block_mb)
    distances = np.zeros((count, count))
    for i, basis in enumerate(bases):
        for block in blocks:
            values = max_residual_ls_block(basis, [centred[j] for j in block])
            distances[i, block] = values
        log.info("d_aff (least squares): source %d/%d '%s' (rank %d) mapped onto %d targets",
                 i + 1, count, names[i], basis.rank, count)
    np.fill_diagonal(distances, 0.0)
    return distances, ranks
