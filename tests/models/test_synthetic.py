"""Tests for the seeded synthetic stand-ins of SST-2 and MRPC."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from affine_homotopy.models.synthetic import (
    PAIR_TASKS,
    SYNTHETIC_TASKS,
    make_paraphrase_task,
    make_sentiment_task,
)

TASKS = sorted(SYNTHETIC_TASKS)
Splits = tuple[pd.DataFrame, pd.DataFrame]


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9'-]+", text.lower())


@pytest.fixture(scope="module")
def default_splits() -> dict[str, Splits]:
    # Generated once: every test below reads the default-sized seed-0 data.
    return {name: SYNTHETIC_TASKS[name](0) for name in TASKS}


def _texts(df: pd.DataFrame, pair: bool) -> list[str]:
    return list(df["text_a"]) + (list(df["text_b"]) if pair else [])


def test_registry() -> None:
    assert SYNTHETIC_TASKS == {
        "synthetic_sentiment": make_sentiment_task,
        "synthetic_paraphrase": make_paraphrase_task,
    }
    assert PAIR_TASKS == {"synthetic_paraphrase"}


@pytest.mark.parametrize("name", TASKS)
def test_deterministic_per_seed(name: str, default_splits: dict[str, Splits]) -> None:
    make = SYNTHETIC_TASKS[name]
    train, dev = make(0)
    pd.testing.assert_frame_equal(train, default_splits[name][0])
    pd.testing.assert_frame_equal(dev, default_splits[name][1])
    other_train, _ = make(1)
    assert list(other_train["text_a"]) != list(train["text_a"])


@pytest.mark.parametrize("name", TASKS)
def test_sizes_columns_and_dtypes(name: str, default_splits: dict[str, Splits]) -> None:
    pair = name in PAIR_TASKS
    train, dev = default_splits[name]
    assert (len(train), len(dev)) == (2000, 500)
    small_train, small_dev = SYNTHETIC_TASKS[name](3, n_train=7, n_dev=1)
    assert (len(small_train), len(small_dev)) == (7, 1)
    for df in (train, dev, small_train, small_dev):
        assert list(df.columns) == ["text_a", "text_b", "label"]
        assert df["label"].dtype == np.int64
        assert set(df["label"].unique()) <= {0, 1}
        assert all(isinstance(t, str) and t.strip() for t in df["text_a"])
        assert df["text_b"].dtype == object
        if pair:
            assert all(isinstance(t, str) and t.strip() for t in df["text_b"])
        else:
            assert all(t is None for t in df["text_b"])


@pytest.mark.parametrize("name", TASKS)
def test_labels_balanced(name: str, default_splits: dict[str, Splits]) -> None:
    for df in default_splits[name]:
        assert 0.4 <= df["label"].mean() <= 0.6


@pytest.mark.parametrize("name", TASKS)
def test_no_duplicate_text_within_or_across_splits(name: str, default_splits: dict[str, Splits]) -> None:
    pair = name in PAIR_TASKS
    train, dev = default_splits[name]
    train_texts, dev_texts = _texts(train, pair), _texts(dev, pair)
    assert len(set(train_texts)) == len(train_texts)
    assert len(set(dev_texts)) == len(dev_texts)
    assert not set(train_texts) & set(dev_texts)


@pytest.mark.parametrize("name", TASKS)
def test_lexical_variety(name: str, default_splits: dict[str, Splits]) -> None:
    train, _ = default_splits[name]
    texts = _texts(train, name in PAIR_TASKS)
    tokens = [_tokens(t) for t in texts]
    assert len({w for toks in tokens for w in toks}) >= 300
    assert len({" ".join(toks[:3]) for toks in tokens}) >= 30
    lengths = np.array([len(toks) for toks in tokens])
    assert lengths.min() >= 3 and lengths.max() <= 40
    assert lengths.min() <= 6 and lengths.max() >= 20  # short and long sentences both occur


@pytest.mark.parametrize("name", TASKS)
@pytest.mark.parametrize("noise", [0.1, 0.3])
def test_label_noise_fraction(name: str, noise: float) -> None:
    # Noise is applied after the text is drawn, so the same seed gives the same
    # text and the label disagreement is exactly the flipped fraction.
    make: Callable[..., Splits] = SYNTHETIC_TASKS[name]
    clean = make(5, n_train=400, n_dev=100, label_noise=0.0)
    noisy = make(5, n_train=400, n_dev=100, label_noise=noise)
    for c, n in zip(clean, noisy):
        assert list(c["text_a"]) == list(n["text_a"])
        flipped = (c["label"] != n["label"]).mean()
        assert abs(flipped - noise) < 0.02


@pytest.mark.parametrize("name", TASKS)
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_train": 0}, "n_train"),
        ({"n_dev": 0}, "n_dev"),
        ({"n_train": -5}, "n_train"),
        ({"label_noise": -0.01}, "label_noise"),
        ({"label_noise": 0.5}, "label_noise"),
        ({"label_noise": float("nan")}, "label_noise"),
    ],
)
def test_bad_arguments_raise(name: str, kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SYNTHETIC_TASKS[name](0, **kwargs)


def _bag_of_words(df: pd.DataFrame, vocab: dict[str, int], pair: bool) -> np.ndarray:
    """Word counts; for pairs, counts of words only in a and of words only in b."""
    size = len(vocab)
    x = np.zeros((len(df), (2 * size if pair else size) + 1))
    x[:, -1] = 1.0  # bias
    for row, (a, b) in enumerate(zip(df["text_a"], df["text_b"])):
        toks_a = _tokens(a)
        if pair:
            set_a, set_b = set(toks_a), set(_tokens(b))
            cols = [vocab[w] for w in set_a - set_b if w in vocab]
            cols += [size + vocab[w] for w in set_b - set_a if w in vocab]
        else:
            cols = [vocab[w] for w in toks_a if w in vocab]
        np.add.at(x[row], cols, 1.0)
    return x


@pytest.mark.parametrize("name", TASKS)
def test_learnable_but_not_trivial(name: str, default_splits: dict[str, Splits]) -> None:
    pair = name in PAIR_TASKS
    train, dev = default_splits[name]
    counts = Counter(w for t in _texts(train, pair) for w in _tokens(t))
    # Rare words add features (and lstsq time) without adding evidence; pair
    # features are twice as many, so they get a stricter cut.
    min_count = 20 if pair else 5
    vocab = {w: i for i, w in enumerate(sorted(w for w, c in counts.items() if c >= min_count))}
    x_train, x_dev = _bag_of_words(train, vocab, pair), _bag_of_words(dev, vocab, pair)
    y_train, y_dev = train["label"].to_numpy(), dev["label"].to_numpy()

    # No single word's presence (or absence) gives away the label.
    present = x_train[:, :-1] > 0
    agree = (present == y_train[:, None].astype(bool)).mean(axis=0)
    assert np.maximum(agree, 1 - agree).max() < 0.95

    # ...yet a plain least-squares bag-of-words classifier beats chance clearly.
    w, *_ = np.linalg.lstsq(x_train, 2.0 * y_train - 1.0, rcond=None)
    accuracy = ((x_dev @ w > 0).astype(int) == y_dev).mean()
    assert accuracy > 0.65
