"""Helpers the test modules share (plain functions and constants; the fixtures are in conftest.py).
A test module imports from here, tests/conftest.py and tests/tolerances.py, never from another test
module (tests/library/test_suite_rules.py checks it)."""

from __future__ import annotations

import hashlib
import io
import os
import random
import re
import string
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
SHARED_GLUE = REPO.parent / "shared" / "glue"


# ---------------------------------------------------------------------------------------------
# tiny models, built here (no download)

WORDS = (
    "the a an and but not no very really quite film movie book food service plot acting was is were "
    "good bad great awful dull boring brilliant charming said that it they he she we i of to in on "
    "for with this by at from as be have had has would will could".split()
)


def write_tiny_bert(folder: Path, seed: int, hidden: int = 32, layers: int = 2) -> Path:
    """A randomly initialised BERT (``layers`` transformer layers) with a small WordPiece vocab."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    vocab = specials + WORDS + chars + ["##" + c for c in string.ascii_lowercase + string.digits]
    (folder / "vocab.txt").write_text("\n".join(dict.fromkeys(vocab)) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
        intermediate_size=2 * hidden, max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(folder)
    return folder


def write_tiny_decoder(folder: Path, kind: str, seed: int = 0, hidden: int = 32, layers: int = 3,
                       pad_token: bool = False, padding_side: str = "right") -> Path:
    """A randomly initialised decoder-only model (``kind``: ``gpt2`` or ``llama``) with a word-level
    tokenizer built here (no download). Like the released GPT-2 and Llama tokenizers it has bos,
    eos and unk tokens and, unless ``pad_token``, no padding token."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2Model, LlamaConfig, LlamaModel, PreTrainedTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    specials = ["<unk>", "<s>", "</s>"] + (["<pad>"] if pad_token else [])
    vocab = {token: k for k, token in enumerate(dict.fromkeys(specials + WORDS))}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
        pad_token="<pad>" if pad_token else None, padding_side=padding_side,
        model_input_names=["input_ids", "attention_mask"],  # no token_type_ids: GPT-2 would embed them
    )
    tokenizer.save_pretrained(folder)
    torch.manual_seed(seed)
    ids = {"bos_token_id": vocab["<s>"], "eos_token_id": vocab["</s>"]}
    if kind == "gpt2":
        model = GPT2Model(GPT2Config(vocab_size=len(vocab), n_embd=hidden, n_layer=layers, n_head=2,
                                     n_positions=128, **ids))
    elif kind == "llama":
        model = LlamaModel(LlamaConfig(vocab_size=len(vocab), hidden_size=hidden, intermediate_size=2 * hidden,
                                       num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=1,
                                       max_position_embeddings=128, **ids))
    else:
        raise ValueError(f"unknown decoder kind {kind!r}")
    model.save_pretrained(folder)
    return folder

# ---------------------------------------------------------------------------------------------
# figures and rule files


def assert_figure_drawn(png: Path, pdf: Path | None = None, inches: tuple[float, float] | None = None,
                        dpi: float = 200) -> None:
    """A saved figure is a real picture: a PNG of a plausible pixel size (``inches`` x ``dpi`` when given,
    within what a tight bounding box trims or adds) that is not blank (many colours, ink on a good
    share of its pixels), and a one-page PDF."""
    import numpy as np
    from matplotlib import image

    pixels = image.imread(png)
    assert pixels.ndim == 3 and pixels.shape[2] in (3, 4), (png, pixels.shape)
    height, width = pixels.shape[:2]
    assert min(height, width) >= 150, f"{png}: only {width} x {height} pixels"
    if inches is not None:
        for got, want, axis in ((width, inches[0] * dpi, "width"), (height, inches[1] * dpi, "height")):
            assert 0.6 * want <= got <= 1.15 * want, f"{png}: {axis} {got} px, the figure is {want:.0f} px"
    rgb = pixels[..., :3].reshape(-1, 3)
    colours = np.unique(np.round(rgb * 255).astype(np.uint8), axis=0)
    assert len(colours) > 16, f"{png}: {len(colours)} distinct colours: blank or nearly so"
    background = np.median(rgb, axis=0)
    ink = np.abs(rgb - background).max(axis=1) > 0.1
    assert ink.mean() > 0.01 and rgb.std() > 0.02, f"{png}: ink on {ink.mean():.2%} of the pixels"
    if pdf is not None:
        data = Path(pdf).read_bytes()
        assert data.startswith(b"%PDF-") and b"%%EOF" in data[-64:], f"{pdf} is not a complete PDF"
        assert len(data) > 1000 and data.count(b"/Type /Page\n") + data.count(b"/Type /Page ") + \
            data.count(b"/Type /Page>") >= 1, pdf


def rule_blocks() -> list[tuple[str, str, str]]:
    """(rule file name, rule name, the rule's text) for every rule of workflow/rules/*.smk."""
    blocks = []
    for path in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        for block in re.split(r"(?m)^(?=(?:local)?rule \w+:)", path.read_text())[1:]:
            blocks.append((path.name, re.match(r"(?:local)?rule (\w+):", block)[1], block))
    assert len(blocks) >= 20, f"only {len(blocks)} rules found in workflow/rules/*.smk"  # the pattern must match
    return blocks

# ---------------------------------------------------------------------------------------------
# the real GLUE files (../shared/glue)


GLUE_FOLDERS = ("SST-2", "RTE", "MRPC", "CoLA")


def shared_glue_missing() -> bool:
    """Whether the real GLUE files (../shared/glue beside the clone) are absent from this machine."""
    return not all((SHARED_GLUE / folder).is_dir() for folder in GLUE_FOLDERS)

# ---------------------------------------------------------------------------------------------
# Work started early: a session fixture whose work (a study, a fresh virtual environment) starts in a
# background thread when the session starts, if a selected test needs it (tests/conftest.py: early_work).


# fixture name -> its preparation: prepare(request, environ) makes the work's folders and inputs in the main
# thread (it may request session fixtures) and returns the work, a function of no arguments whose result
# is the fixture's value; the work starts processes with ``environ``, the session's environment at its start
EARLY: dict[str, Callable[[Any, Mapping[str, str]], Callable[[], Any]]] = {}
# fixture name -> its lane: the works of a lane run one after another in the lane's own thread. "studies"
# (the default) holds the works that keep the machine's cores busy; "cluster" the cluster run, which mostly
# waits on SLURM's scheduling and status checks, so that its waiting overlaps with the studies and the tests
# (a lane of its own for the core install, CPU-bound as the studies are, made the suite slower)
EARLY_LANES: dict[str, str] = {}


def started_early(prepare: Callable[[Any, Mapping[str, str]], Callable[[], Any]] | None = None, *,
                  lane: str = "studies") -> Any:
    """A session fixture named after ``prepare``, whose work starts early (EARLY) in ``lane``'s thread and
    whose value is the work's result (the test that needs it first waits for it, as it would for a fixture
    built then). Used bare (``@started_early``) or with a lane (``@started_early(lane="cluster")``)."""
    import pytest

    if prepare is None:
        return lambda function: started_early(function, lane=lane)
    EARLY[prepare.__name__] = prepare
    EARLY_LANES[prepare.__name__] = lane

    def waits_for_the_work(early_work, request):
        return early_work.result(prepare.__name__, request)

    waits_for_the_work.__doc__ = prepare.__doc__
    return pytest.fixture(scope="session", name=prepare.__name__)(waits_for_the_work)

# ---------------------------------------------------------------------------------------------
# Snakemake: runs, plans, configs


SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "workflow" / "Snakefile")]
SNAKEMAKE_TIMEOUT = 1200  # seconds for one Snakemake call: a hung job fails the test, not the CI run
# The default config (the demo): found as config/config.yaml in the working directory, as in a clone
# or a deployment; tests that run elsewhere name it.
DEMO = REPO / "config" / "config.yaml"
PAPER = REPO / "config" / "paper.yaml"
SLURM_PROFILE = REPO / "workflow" / "profiles" / "slurm"


def paper_plan(device: str = "auto", slurm: bool = False) -> tuple[str, ...]:
    """The arguments of the paper's dry run (for the dry_run fixture) at ``device`` (the paper's config leaves
    it at auto), on 4 cores or through the SLURM profile: the tests that read the paper's plan share these."""
    where = ("--workflow-profile", str(SLURM_PROFILE)) if slurm else ("--cores", "4")
    return (*where, "--configfile", str(PAPER), "--config", f"device={device}")


# SLURM_CONF of the suite (tests/conftest.py): every SLURM command fails at once, none waits for a controller
NO_SLURM_CONTROLLER = REPO / "tests" / "workflow" / "slurm" / "no_controller.conf"


def cluster_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: os.environ) for the cluster test's SLURM commands and daemons: the machine's own
    SLURM config (SLURM_CONF as the caller of pytest set it, else SLURM's default), not the suite's
    NO_SLURM_CONTROLLER."""
    env = dict(os.environ if environ is None else environ)
    if env.get("SLURM_CONF") == str(NO_SLURM_CONTROLLER):
        del env["SLURM_CONF"]
    return env


def snakemake(*args: str, workdir: Path, check: bool = True, timeout: float = SNAKEMAKE_TIMEOUT,
              env: dict[str, str] | None = None, environ: Mapping[str, str] | None = None,
              ) -> subprocess.CompletedProcess[str]:
    """Snakemake on the workflow in ``workdir``, with the environment ``environ`` (os.environ at the call
    unless given: work started early passes the session's, which a test's monkeypatch does not touch;
    the cluster test passes cluster_env()) and ``env`` on top."""
    env = dict(os.environ if environ is None else environ, OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", **(env or {}))
    result = subprocess.run([*SNAKEMAKE, "--directory", str(workdir), *args], capture_output=True, text=True, env=env,
                            cwd=workdir, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result


def job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:")[1].split("\n\n")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def tiny_config(tiny_models: dict[str, Path], **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "run_name": "tiny",
        "encoders": {
            "tiny_a": {"source": "path", "path": str(tiny_models["tiny_a"])},
            "tiny_b": {"source": "path", "path": str(tiny_models["tiny_b"])},
            "tiny_a_svd50": {"source": "derived", "base": "tiny_a", "transform": "svd_truncate", "fraction": 0.5},
            "tiny_b_affine": {"source": "derived", "base": "tiny_b", "transform": "random_affine", "seed": 1},
        },
        "tasks": {
            "sent": {"source": "synthetic", "generator": "synthetic_sentiment", "n_train": 150, "n_dev": 60},
            "para": {"source": "synthetic", "generator": "synthetic_paraphrase", "n_train": 150, "n_dev": 60},
        },
        "layers": [1, 2],
        "embedding": {"batch_size": 32},
        "probe": {"l2_grid": [0.01, 0.1], "max_iter": 200},
        # every extrinsic measure (the default selection, spelled out), so that the end-to-end run checks
        # them all; d_worst over 3 random-label probes per encoder besides the task probe, and a search of
        # 2 aimed classifiers and 2 ascent steps per pair: the defaults (100 probes, 4 and 3) make the
        # extrinsic and probe jobs the tiny study's dearest, and no check needs more than a few of each
        "extrinsic": {"max_iter": 100, "measures": ["d_psi", "d_worst", "d_worst_search"], "n_random_classifiers": 3,
                      "worst_search": {"candidates": 2, "steps": 2}},
    }
    config.update(overrides)
    return config


GPU_CAPABLE = {"embed", "intrinsic", "extrinsic", "rank_deficiency"}
# the rules that ask for a GPU in config/paper.yaml's plan under device: auto: its extrinsic jobs keep to
# the CPU (extrinsic.device: cpu; split by source, extrinsic.sources_per_job, into extrinsic_part jobs
# and a merge job that holds the rule's name)
PAPER_GPU_RULES = GPU_CAPABLE - {"extrinsic"}


def planned_jobs(output: str) -> list[dict[str, object]]:
    """(rule, threads, resources) of every job in a dry run's output."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:\n)", output):
        head = re.match(r"(?:local)?rule (\w+):\n", block)
        if not head or head[1] == "all":
            continue
        threads = re.search(r"^\s+threads: (\d+)$", block, re.M)
        line = re.search(r"^\s+resources: (.*)$", block, re.M)
        resources = dict(item.split("=", 1) for item in line[1].split(", ")) if line else {}
        named = re.search(r"^\s+wildcards: (.*)$", block, re.M)
        wildcards = dict(item.split("=", 1) for item in named[1].split(", ")) if named else {}
        jobs.append({"rule": head[1], "threads": int(threads[1]) if threads else 1, "resources": resources,
                     "wildcards": wildcards})
    return jobs

# ---------------------------------------------------------------------------------------------
# Hugging Face caches laid out as huggingface_hub does, and a study staged from them


# variables that would send huggingface_hub to another cache than HF_HOME's, or transformers online
OTHER_HUB_VARIABLES = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_OFFLINE")


def with_hf_home(environ: Mapping[str, str], home: Path) -> dict[str, str]:
    """``environ`` with ``home`` as HF_HOME and the hub off: what the hf_home fixture sets, for work that
    starts processes outside a test (started_early)."""
    changed = {k: v for k, v in environ.items() if k not in OTHER_HUB_VARIABLES}
    changed.update(HF_HOME=str(home), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    return changed


COMMIT_A = hashlib.sha1(b"tiny model a").hexdigest()
COMMIT_B = hashlib.sha1(b"tiny model b").hexdigest()
COMMIT_GLUE = hashlib.sha1(b"tiny glue").hexdigest()
MB0, MB1 = "google/multiberts-seed_0", "google/multiberts-seed_1"


def put_in_hub_cache(
    cache: Path, repo_id: str, files: dict[str, bytes], commit: str, repo_type: str = "model",
    refs: tuple[str, ...] = ("main",),
) -> Path:
    """Lay ``files`` out as huggingface_hub does; returns the snapshot folder."""
    repo = cache / f"{repo_type}s--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    for name, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    snapshot.mkdir(parents=True, exist_ok=True)
    for ref in refs:
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return snapshot


def model_files(folder: Path, drop: tuple[str, ...] = ()) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.name not in drop}


def glue_tables(seed: int) -> dict[str, dict[str, pd.DataFrame]]:
    """Tiny GLUE tables with the hub's column names: rte (pairs), sst2 (single), mnli (3 classes,
    matched and mismatched dev sets); test splits carry label -1 as on the hub."""
    import pandas as pd

    rng = random.Random(seed)

    def sentence() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))

    def table(columns: tuple[str, ...], n: int, n_classes: int, test: bool = False) -> pd.DataFrame:
        data = {c: [sentence() for _ in range(n)] for c in columns}
        labels = [-1] * n if test else [k % n_classes for k in range(n)]
        return pd.DataFrame({**data, "label": labels, "idx": list(range(n))}).astype({"label": "int64"})

    pair, nli = ("sentence1", "sentence2"), ("premise", "hypothesis")
    return {
        "rte": {"train": table(pair, 40, 2), "validation": table(pair, 16, 2), "test": table(pair, 8, 2, True)},
        "sst2": {"train": table(("sentence",), 24, 2), "validation": table(("sentence",), 10, 2)},
        "mnli": {"train": table(nli, 30, 3), "validation_matched": table(nli, 9, 3),
                 "validation_mismatched": table(nli, 12, 3)},
    }


def put_glue_in_cache(cache: Path, tables: dict[str, dict[str, pd.DataFrame]], commit: str = COMMIT_GLUE) -> Path:
    files: dict[str, bytes] = {}
    configs = []
    for task, splits in tables.items():
        configs.append(f"- config_name: {task}\n  data_files:")
        for split, frame in splits.items():
            buffer = io.BytesIO()
            frame.to_parquet(buffer, index=False)
            files[f"{task}/{split}-00000-of-00001.parquet"] = buffer.getvalue()
            configs.append(f"  - split: {split}\n    path: {task}/{split}-*")
    files["README.md"] = ("---\nconfigs:\n" + "\n".join(configs) + "\n---\n# GLUE (tiny)\n").encode()
    return put_in_hub_cache(cache, "nyu-mll/glue", files, commit, repo_type="dataset")


def cached_study_config(tiny_models, run_name: str = "cached") -> dict:
    return {
        "run_name": run_name,
        "encoders": {
            "mb0": {"source": "hf", "model": MB0},
            "mb1": {"source": "hf", "model": MB1, "revision": COMMIT_B},
            "mb0_svd50": {"source": "derived", "base": "mb0", "transform": "svd_truncate", "fraction": 0.5},
        },
        "tasks": {"rte": {"source": "glue", "n_train": 40}},
        "layers": [2],
        "embedding": {"batch_size": 16},
        "probe": {"l2_grid": [0.1], "max_iter": 100},
        "extrinsic": {"max_iter": 50, "n_random_classifiers": 2},
    }
