"""Shared fixtures: the repository root and tiny randomly initialised BERT models (no download)."""

from __future__ import annotations

import os
import string
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # torch + numpy on small machines
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never touch the network
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
SHARED_GLUE = REPO.parent / "shared" / "glue"

_WORDS = (
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
    vocab = specials + _WORDS + chars + ["##" + c for c in string.ascii_lowercase + string.digits]
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


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny_models")
    return {
        "tiny_a": write_tiny_bert(root / "tiny_a", seed=0, hidden=32),
        "tiny_b": write_tiny_bert(root / "tiny_b", seed=1, hidden=48),
    }


@pytest.fixture(scope="session")
def schema_path() -> Path:
    return SCHEMA


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
    vocab = {token: k for k, token in enumerate(dict.fromkeys(specials + _WORDS))}
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
    import re

    blocks = []
    for path in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        for block in re.split(r"(?m)^(?=(?:local)?rule \w+:)", path.read_text())[1:]:
            blocks.append((path.name, re.match(r"(?:local)?rule (\w+):", block)[1], block))
    assert len(blocks) >= 20, f"only {len(blocks)} rules found in workflow/rules/*.smk"  # the pattern must match
    return blocks


# ---------------------------------------------------------------------------------------------
# A suite that cannot pass by accident (pyproject.toml: --strict-markers, --strict-config,
# xfail_strict, a pytest-timeout default per test).
#
# No silent skips. Every skip prints its reason (addopts -ra), and a skip (or an xfail: a test that
# is expected to fail checks nothing) FAILS the run unless the test is marked
# @pytest.mark.optional(reason=KEY) with KEY from OPTIONAL_REASONS, and what KEY names is really
# missing on this machine. A module-level skip fails collection. AFFINE_HOMOTOPY_ALLOW_SKIPS=1 turns
# the failures back into skips for a local run (for example as a non-root user, where the SLURM test
# cannot start its cluster); it is refused when CI is set.
ALLOW_SKIPS = os.environ.get("AFFINE_HOMOTOPY_ALLOW_SKIPS") == "1"
GLUE_FOLDERS = ("SST-2", "RTE", "MRPC", "CoLA")


def shared_glue_missing() -> bool:
    """Whether the real GLUE files (../shared/glue beside the clone) are absent from this machine."""
    return not all((SHARED_GLUE / folder).is_dir() for folder in GLUE_FOLDERS)


# The only things a machine may legitimately lack: key -> (what it is, is it missing here?)
def cuda_missing() -> bool:
    """Whether this machine has no CUDA device (most of the project's machines, and CI, have none)."""
    import torch

    return not torch.cuda.is_available()


OPTIONAL_REASONS = {
    "shared_glue": (f"the real GLUE files ({', '.join(GLUE_FOLDERS)}) in ../shared/glue beside the clone",
                    shared_glue_missing),
    "cuda": ("a CUDA device", cuda_missing),
}
# Markers that make a test slow by themselves: `pytest -m "not slow"` is the fast inner loop.
IMPLY_SLOW = ("workflow", "install")


def pytest_configure(config: pytest.Config) -> None:
    if ALLOW_SKIPS and os.environ.get("CI"):
        raise pytest.UsageError("AFFINE_HOMOTOPY_ALLOW_SKIPS=1 is refused when CI is set: CI runs every test.")
    if not config.pluginmanager.hasplugin("timeout"):
        raise pytest.UsageError("pytest-timeout is not installed (pip install -e '.[test]' -c constraints.txt): "
                                "without it a hung test hangs the run.")


def _optional_key(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("optional")
    if marker is None:
        return None
    return marker.kwargs.get("reason", marker.args[0] if marker.args else None)


@pytest.hookimpl(tryfirst=True)  # before -m deselects, so that "not slow" sees the implied marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    bad = []
    for item in items:
        if any(item.get_closest_marker(name) for name in IMPLY_SLOW) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("optional") is not None and _optional_key(item) not in OPTIONAL_REASONS:
            bad.append(f"{item.nodeid}: {_optional_key(item)!r}")
    if bad:
        raise pytest.UsageError("@pytest.mark.optional(reason=...) takes one of "
                                f"{sorted(OPTIONAL_REASONS)} (tests/conftest.py: OPTIONAL_REASONS); got\n  "
                                + "\n  ".join(bad))


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def _tolerated(item: pytest.Item) -> bool:
    """A skip that is allowed: an optional test whose named resource is really missing here."""
    key = _optional_key(item)
    return key in OPTIONAL_REASONS and OPTIONAL_REASONS[key][1]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or ALLOW_SKIPS or _tolerated(item):
        return
    if hasattr(report, "wasxfail"):
        reason = f"XFAIL ({report.wasxfail or 'no reason'}), but an expected failure checks nothing"
    else:
        reason = f"SKIPPED, but this test must run: {_skip_reason(report)}"
    key = _optional_key(item)
    if key in OPTIONAL_REASONS:
        reason += f" (it is optional only where {OPTIONAL_REASONS[key][0]} are missing, and they are here)"
    report.outcome = "failed"
    report.longrepr = (f"{reason}\n(Install what it needs, or mark it @pytest.mark.optional(reason=KEY) with KEY "
                       f"from {sorted(OPTIONAL_REASONS)} if a machine may legitimately lack it; see README.)")
    if hasattr(report, "wasxfail"):
        del report.wasxfail


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not ALLOW_SKIPS:
        report.outcome = "failed"
        report.longrepr = f"{collector.nodeid} was skipped as a whole: {_skip_reason(report)}"
