"""What the benchmark suites share: the environment they run in, paths, printing and timing, the
setup line each suite prints beside its ratios, synthetic encoders, the paper's SGD loop, the GLUE
folder and the all-MiniLM-L6-v2 embeddings of SST-2 that several suites measure on.

Import this module before numpy and torch: its environment defaults (no hub access, passive OpenMP
threads on a small shared machine) must be set before those libraries start their thread pools.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# the scripts never download (the models they embed with are packaged or staged); idle OpenMP threads
# sleep instead of spinning, which on 2 shared cores would steal the other thread's time
for _name, _value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("OMP_WAIT_POLICY", "PASSIVE")):
    os.environ.setdefault(_name, _value)

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
from affine_homotopy.costs.measure_data import (  # noqa: E402  (one home for the measuring helpers)
    CACHE_DIR, DEFAULT_GLUE_DIR, MINILM_SPEC, SCHEMA, SEED, load_text, required_glue_file, say,
    sst2_training_set,
)


def setup_line(data: str, sizes: str, dtype: str, device: str = "cpu") -> str:
    """What a suite's ratios were measured on: data, sizes, dtype, device, thread counts and the load."""
    import torch

    return (f"data: {data}; sizes: {sizes}; dtype: {dtype}; device: {device}; torch threads "
            f"{torch.get_num_threads()} of {os.cpu_count()} CPUs; {load_text()}")


def ratio(numerator: float, denominator: float) -> str:
    """``numerator / denominator`` as ``1.23x``, or ``-`` where the denominator is not positive."""
    return f"{numerator / denominator:.2f}x" if denominator > 0 else "-"


# ---------------------------------------------------------------------------------------------
# timing


def wall_seconds(function: Callable[[], Any]) -> tuple[Any, float]:
    """``function()`` and the wall-clock seconds it took."""
    tick = time.perf_counter()
    result = function()
    return result, time.perf_counter() - tick


class Clock:
    """CPU and wall seconds of a block: ``with Clock() as clock: ...``, then ``clock.cpu``, ``clock.wall``."""

    def __enter__(self) -> Clock:
        self.cpu, self.wall = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *_: object) -> None:
        self.cpu, self.wall = time.process_time() - self.cpu, time.perf_counter() - self.wall


# ---------------------------------------------------------------------------------------------
# data: the GLUE folder and cached embeddings


def add_glue_dir(parser: argparse.ArgumentParser, holding: str) -> None:
    """The ``--glue-dir`` option: a GLUE folder in the layout of ../shared/glue (``holding``: what the
    script reads from it, for the help text)."""
    parser.add_argument("--glue-dir", type=Path, default=DEFAULT_GLUE_DIR,
                        help=f"GLUE folder holding {holding} (default: ../shared/glue beside the repository)")


def cached_array(name: str, build: Callable[[], np.ndarray]) -> tuple[np.ndarray, bool]:
    """The array saved as ``CACHE_DIR/name`` (``.npy``), built by ``build`` and saved there when absent;
    and whether it came from the cache."""
    path = CACHE_DIR / name
    if path.is_file():
        return np.load(path), True
    array = build()
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    np.save(path, array)
    return array, False


def minilm_encoder(name: str = "all-MiniLM-L6-v2"):
    """all-MiniLM-L6-v2 from its package (no download), as the workflow loads an encoder."""
    from affine_homotopy.models.encoders import load_encoder

    return load_encoder(name, MINILM_SPEC)


def sst2_sentences(path: Path, count: int, seed: int = SEED, column_name: str = "sentence") -> list[str]:
    """A seeded sample of ``count`` sentences of an SST-2 ``.tsv``, in file order (all of them when
    ``count`` is the number of rows); ``column_name="label"``: their labels, the same sample."""
    lines = path.read_text(encoding="utf-8").splitlines()
    column = lines[0].split("\t").index(column_name)
    sentences = [line.split("\t")[column] for line in lines[1:] if line.strip()]
    picked = np.sort(np.random.default_rng(seed).choice(len(sentences), size=count, replace=False))
    return [sentences[k] for k in picked]


def minilm_embeddings(path: Path, count: int, layers: Sequence[int]) -> tuple[np.ndarray, float, bool]:
    """all-MiniLM-L6-v2 (mean pooling) of the sample :func:`sst2_sentences` at ``layers``: a
    (len(layers), count, 384) float32 array, cached under CACHE_DIR; returns (array, seconds to
    embed, from the cache)."""
    sentences = sst2_sentences(path, count)
    key = hashlib.sha256(("\n".join(sentences) + repr(tuple(layers))).encode()).hexdigest()[:12]

    def embed() -> np.ndarray:
        from affine_homotopy.models.encoders import embed_texts

        return embed_texts(minilm_encoder(), sentences, None, layers=list(layers))

    (array, cached), seconds = wall_seconds(lambda: cached_array(f"sst2_minilm_n{count}_{key}.npy", embed))
    return array, 0.0 if cached else seconds, cached


# ---------------------------------------------------------------------------------------------
# synthetic encoders and the paper's SGD loop


def _decaying_low_rank(rng: np.random.Generator, latent: np.ndarray, dim: int, decay: float,
                       noise: float) -> np.ndarray:
    """``latent`` mixed into ``dim`` directions with singular values ``k**-decay``, plus noise and an offset."""
    n = latent.shape[0]
    mixing = rng.standard_normal((latent.shape[1], dim)) / np.sqrt(latent.shape[1])
    scores, _ = np.linalg.qr(latent @ mixing)
    spectrum = np.arange(1, dim + 1, dtype=np.float64) ** -decay
    directions, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    signal = np.sqrt(n) * (scores * spectrum) @ directions.T
    offset = 3.0 * rng.standard_normal(dim) * spectrum[0]  # language encoders are far from centred
    return signal + noise * spectrum[0] * rng.standard_normal((n, dim)) + offset


def synthetic_encoders(count: int, n: int, dim: int, seed: int = SEED) -> tuple[list[np.ndarray], list[str]]:
    """``count`` float32 (n, dim) encoders with decaying spectra: bases sharing part of a latent, and
    encoders derived from them (an affine image plus noise, tanh of a linear image, a half-rank
    truncation, a mixture of two bases), so that the distances between them spread out."""
    rng = np.random.default_rng(seed)
    shared = rng.standard_normal((n, dim))
    bases = max(2, count // 3)
    reps, names = [], []
    for b in range(bases):
        latent = np.hstack([shared, (0.5 + 0.5 * b) * rng.standard_normal((n, dim))])
        reps.append(_decaying_low_rank(rng, latent, dim, decay=0.6 + 0.2 * b, noise=0.02))
        names.append(f"base{b}")
    kinds = ("affine", "tanh", "truncate", "mix")
    for k in range(count - bases):
        kind, source = kinds[k % len(kinds)], reps[k % bases]
        centred = source - source.mean(0)
        scale = float(np.linalg.norm(centred, axis=1).mean() / np.sqrt(dim))
        noise = rng.standard_normal((n, dim)) * scale
        if kind == "affine":
            left, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
            right, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
            derived = source @ ((left * np.logspace(-0.5, 0.5, dim)) @ right) + rng.standard_normal(dim) + 0.05 * noise
        elif kind == "tanh":
            derived = scale * np.tanh(centred @ rng.standard_normal((dim, dim)) / (1.5 * scale * np.sqrt(dim))) + 0.02 * noise
        elif kind == "truncate":
            u, s, vt = np.linalg.svd(centred, full_matrices=False)
            derived = (u[:, :dim // 2] * s[:dim // 2]) @ vt[:dim // 2] + source.mean(0) + 0.2 * noise
        else:
            derived = 0.7 * source + 0.3 * reps[(k + 1) % bases] + 0.05 * noise
        reps.append(derived)
        names.append(f"{kind}{k}")
    return [rep.astype(np.float32) for rep in reps], names


def synthetic_labels(rep: np.ndarray, seed: int = SEED) -> np.ndarray:
    """Two-class labels that a linear probe on ``rep`` can mostly learn: the sign of a random direction."""
    rng = np.random.default_rng(seed)
    centred = rep - rep.mean(0)
    return (centred @ rng.standard_normal(rep.shape[1]) > 0).astype(np.int64)


def train_sgd(x, outputs: int, batch_loss: Callable[[Any, Any], Any], lr: float, epochs: int = 20,
              batch: int = 64, seed: int = SEED):
    """The paper's training loop (Appendix F): ``torch.nn.Linear`` by plain SGD on shuffled mini-batches,
    seeded; ``batch_loss(layer output, row index)`` is the loss of one batch."""
    import torch

    torch.manual_seed(seed)
    layer = torch.nn.Linear(x.shape[1], outputs)
    optimizer = torch.optim.SGD(layer.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        order = torch.randperm(x.shape[0], generator=generator)
        for start in range(0, x.shape[0], batch):
            index = order[start:start + batch]
            optimizer.zero_grad()
            batch_loss(layer(x[index]), index).backward()
            optimizer.step()
    return layer
