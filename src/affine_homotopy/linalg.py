"""Shared linear algebra: devices, dtypes, the numerical-rank rule and memory-bounded blocks.

The rank rule (the paper's "rank to precision eps"): a singular value ``s`` of the centred
representation matrix counts when ``s > n * sigma_1 * eps(float32) * max(N, D)``, with ``n`` the
``rank_tolerance_multiplier`` (paper: 5). ``eps(float32)`` because representations are stored in
float32, whatever precision the maths runs in: directions below that level are rounding noise.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import torch

log = logging.getLogger(__name__)

FLOAT32_EPS = float(np.finfo(np.float32).eps)
DTYPES = {"float64": torch.float64, "float32": torch.float32}


def select_device(preference: str = "auto", gpus_granted: int | None = None) -> torch.device:
    """CUDA when asked for (``cuda``) or when ``auto`` and the job holds a GPU that is visible.

    ``gpus_granted`` is the job's ``gpu`` resource; ``None`` means "not run by Snakemake" and lets
    ``auto`` use any visible GPU.
    """
    if preference == "cpu":
        return torch.device("cpu")
    available = torch.cuda.is_available()
    if preference == "cuda":
        if not available:
            raise RuntimeError("device: cuda was configured, but no CUDA device is visible to this job")
        return torch.device("cuda")
    granted = gpus_granted is None or gpus_granted > 0
    return torch.device("cuda" if available and granted else "cpu")


def rank_threshold(sigma_max: float, n_rows: int, n_cols: int, multiplier: float = 5.0) -> float:
    return multiplier * sigma_max * FLOAT32_EPS * max(n_rows, n_cols)


def numerical_rank(
    singular_values: np.ndarray | torch.Tensor, n_rows: int, n_cols: int, multiplier: float = 5.0,
    data_scale: float = 0.0,
) -> int:
    """Singular values above the rank rule's threshold.

    ``data_scale`` (the largest row norm of the *uncentred* data) adds an absolute floor
    ``multiplier * eps(float32) * data_scale``: when centring leaves only rounding noise (all rows
    equal), sigma_1 itself is noise and the relative rule alone would count it as a direction.
    """
    s = torch.as_tensor(singular_values)
    if s.numel() == 0 or float(s.max()) == 0.0:
        return 0
    threshold = max(rank_threshold(float(s.max()), n_rows, n_cols, multiplier), multiplier * FLOAT32_EPS * data_scale)
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


def rms(X: np.ndarray) -> float:
    """Root mean square of the centred entries of X."""
    centred = X - X.mean(axis=0, keepdims=True)
    return float(math.sqrt(float(np.mean(centred.astype(np.float64) ** 2))))
