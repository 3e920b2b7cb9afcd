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
