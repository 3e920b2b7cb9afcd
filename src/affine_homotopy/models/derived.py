"""Derived encoders: deterministic transforms of another encoder's representations.

Each transform is fitted on the base encoder's *fit split* (``train``), layer by layer, and the same
map is applied to the eval split (``dev``), so a derived encoder is a fixed function of its base.

* ``svd_truncate`` (``fraction``): keep the top ``round(fraction * r)`` right-singular directions of
  the centred fit-split matrix, ``r`` its numerical rank (the rank rule in
  :mod:`affine_homotopy.core.linalg`, from its :func:`~affine_homotopy.core.linalg.factorise`):
  ``x -> mu + (x - mu) V_k V_k^T``. The dimension stays ``D``; the
  rank drops to ``k``. This is the paper's Figure 3 truncation.
* ``random_affine`` (``seed``, ``condition_number``): ``x -> x A + b`` with ``A = Q_1 diag(s) Q_2``
  (Haar-random orthogonal ``Q``, singular values log-uniform in ``[1, condition_number]``, rescaled
  to geometric mean 1) and ``b`` a random shift of the data's RMS size. Invertible: a positive
  control that must come out at distance ~0 in both directions.
* ``gaussian_noise`` (``sigma``, ``seed``): ``x -> x + sigma * rms * z``, ``z`` standard normal,
  ``rms`` the root mean square of the centred fit-split entries; independent noise per split.

Seeds: each layer (hidden-state index) draws from ``SeedSequence([seed, layer])`` so the result does
not depend on which other layers are configured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core.linalg import Factors, factorise, rms

SPLIT_STREAM = {"train": 0, "dev": 1}


def _rng(seed: int, layer: int, *extra: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, layer, *extra]))


def _haar_orthogonal(rng: np.random.Generator, dim: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((dim, dim)))
    return q * np.sign(np.diag(r))


def svd_truncate(
    train: np.ndarray, dev: np.ndarray, fraction: float, rank_multiplier: float = 5.0, factors: Factors | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Project both splits onto the top ``round(fraction * rank)`` directions of the centred fit split.

    The directions and the rank come from :func:`affine_homotopy.core.linalg.factorise`, the
    factorisation every measure uses, so "rank" here is the rank the measures see. ``factors``:
    ``factorise(train, rank_multiplier)`` when the caller already has it (several fractions of one matrix).
    """
    factors = factors if factors is not None else factorise(train, rank_multiplier)
    keep = max(1, int(round(fraction * factors.rank)))
    basis = factors.Vt[:keep].T.numpy()
    mean = factors.mean.numpy()
    project = lambda m: mean + (m.astype(np.float64) - mean) @ basis @ basis.T  # noqa: E731
    return project(train), project(dev), min(keep, factors.rank)


def random_affine(train: np.ndarray, dev: np.ndarray, seed: int, layer: int, condition_number: float = 4.0) -> tuple[np.ndarray, np.ndarray]:
    rng = _rng(seed, layer)
    dim = train.shape[1]
    singular = np.exp(rng.uniform(0.0, np.log(condition_number), size=dim))
    singular[0], singular[-1] = 1.0, condition_number  # attain the stated condition number
    singular /= np.exp(np.mean(np.log(singular)))
    matrix = _haar_orthogonal(rng, dim) @ np.diag(singular) @ _haar_orthogonal(rng, dim)
    shift = rng.standard_normal(dim) * rms(train)
    apply = lambda m: m.astype(np.float64) @ matrix + shift  # noqa: E731
    return apply(train), apply(dev)


def gaussian_noise(train: np.ndarray, dev: np.ndarray, sigma: float, seed: int, layer: int) -> tuple[np.ndarray, np.ndarray]:
    scale = sigma * rms(train)
    noisy = []
    for split, data in (("train", train), ("dev", dev)):
        rng = _rng(seed, layer, SPLIT_STREAM[split])
        noisy.append(data.astype(np.float64) + scale * rng.standard_normal(data.shape))
    return noisy[0], noisy[1]


def derive(
    spec: Mapping[str, Any], train: np.ndarray, dev: np.ndarray, layers: Sequence[int], rank_multiplier: float = 5.0
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Apply a derived encoder's transform to every layer of its base's (n_layers, N, D) arrays."""
    if train.shape[0] != len(layers) or dev.shape[0] != len(layers):
        raise ValueError("base arrays must hold one slice per configured layer")
    out_train = np.empty(train.shape, dtype=np.float32)
    out_dev = np.empty(dev.shape, dtype=np.float32)
    details: dict[str, Any] = {"transform": spec["transform"]}
    kept: list[int] = []
    for slot, layer in enumerate(layers):
        if spec["transform"] == "svd_truncate":
            a, b, keep = svd_truncate(train[slot], dev[slot], spec["fraction"], rank_multiplier)
            kept.append(keep)
        elif spec["transform"] == "random_affine":
            a, b = random_affine(train[slot], dev[slot], spec["seed"], layer, spec.get("condition_number", 4.0))
        elif spec["transform"] == "gaussian_noise":
            a, b = gaussian_noise(train[slot], dev[slot], spec["sigma"], spec["seed"], layer)
        else:
            raise ValueError(f"unknown transform {spec['transform']!r}")
        out_train[slot], out_dev[slot] = a, b
    if kept:
        details["kept_rank_per_layer"] = kept
    return out_train, out_dev, details
