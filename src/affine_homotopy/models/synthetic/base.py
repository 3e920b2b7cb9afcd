"""What both synthetic generators share: seeded draws, text helpers and the split builder."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import pandas as pd

T = TypeVar("T")
Rng = np.random.Generator


def _pick(rng: Rng, items: Sequence[T]) -> T:
    return items[int(rng.integers(len(items)))]


def _coin(rng: Rng, p: float) -> bool:
    return bool(rng.random() < p)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _article(noun_phrase: str) -> str:
    return ("an " if noun_phrase[:1].lower() in "aeiou" else "a ") + noun_phrase


def _validate(n_train: int, n_dev: int, label_noise: float) -> None:
    for name, value in (("n_train", n_train), ("n_dev", n_dev)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if isinstance(label_noise, bool) or not isinstance(label_noise, (int, float, np.floating)):
        raise TypeError(f"label_noise must be a float, got {type(label_noise).__name__}")
    # NaN fails both comparisons, so it is rejected here too.
    if not (0.0 <= float(label_noise) < 0.5):
        raise ValueError(f"label_noise must be in [0, 0.5), got {label_noise}")


def _build_splits(
    rng: Rng,
    make_example: Callable[[Rng, int], tuple[str, str | None]],
    n_train: int,
    n_dev: int,
    label_noise: float,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Draw unique examples for both splits, then flip a fixed fraction of labels."""
    n_total = n_train + n_dev
    # Exact balance before noise; the order is shuffled so splits stay balanced too.
    labels = rng.permutation(np.arange(n_total) % 2)
    seen: set[str] = set()
    rows: list[tuple[str, str | None, int]] = []
    max_attempts = 50 * n_total + 1000
    attempts = 0
    for y in labels:
        while True:
            attempts += 1
            if attempts > max_attempts:
                raise RuntimeError("could not generate enough unique examples")
            a, b = make_example(rng, int(y))
            # Reject any sentence seen before, so train and dev never share text.
            if a in seen or (b is not None and (b in seen or b == a)):
                continue
            seen.add(a)
            if b is not None:
                seen.add(b)
            rows.append((a, b, int(y)))
            break

    frames = []
    for part in (rows[:n_train], rows[n_train:]):
        label = np.array([r[2] for r in part], dtype=np.int64)
        n_flip = int(round(label_noise * len(part)))
        flip = rng.choice(len(part), size=n_flip, replace=False)
        label[flip] = 1 - label[flip]
        frames.append(
            pd.DataFrame(
                {
                    "text_a": pd.Series([r[0] for r in part], dtype=object),
                    "text_b": pd.Series([r[1] for r in part], dtype=object),
                    "label": label,
                }
            )
        )
    return frames[0], frames[1]
