"""Seeded synthetic stand-ins for two GLUE tasks, for offline demos and tests.

Two binary tasks are generated from nothing but ``np.random.default_rng(seed)``:

``synthetic_sentiment`` (single sentence, SST-2-like)
    The label (1 = positive, 0 = negative) is drawn first, balanced, and a
    review sentence is then built to express it. A review is about an item from
    one of several domains (films, restaurants, books, products, hotels and
    travel, albums, games) and is rendered through one of ~20 rhetorical frames.
    Some frames state the polarity directly ("The acting was truly superb.");
    many need composition: negation flips an adjective ("The plot was not
    dull." is positive), contrast makes the main clause decide ("Although the
    service was friendly, the food was bland." is negative), expectations are
    overturned ("I expected a dull film, but it was gripping."), "the only
    good thing was ..." is negative, and so on. Polar words therefore occur in
    both classes, which keeps the task learnable but not trivial.

``synthetic_paraphrase`` (sentence pair, MRPC-like)
    An *event* is sampled: agent, verb group, object, optional number, time,
    place, manner adverb, reason and attribution. ``text_a`` renders it with one
    of many syntactic frames (active, passive, agent or object cleft,
    pseudo-cleft, reported speech, fronted or trailing modifiers). For label 1
    ``text_b`` renders the *same* event with independently drawn surface
    choices: verb and noun synonyms, voice, clause order, digits versus number
    words, attribution wording. For label 0 exactly one meaning-bearing slot is
    changed first (another agent or object, another number, time or place,
    negation, an antonym verb or adverb, or swapped agent/patient roles) and
    ``text_b`` is then re-rendered the same way, so both classes have similar
    word overlap and a role swap has none at all.

In both tasks a ``label_noise`` fraction of labels in each split is flipped
(exactly ``round(label_noise * n)`` rows, seeded) so that neither task is
perfectly separable. Examples are deduplicated across train and dev: no
sentence appears twice anywhere in the two splits.

DataFrames have columns ``text_a`` (str), ``text_b`` (str, or None for the
single-sentence task, in an object column) and ``label`` (int64, 0/1).

The word lists live in :mod:`affine_homotopy.models.synthetic_vocabulary`; this module holds the logic.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from ...study.tasks import SYNTHETIC_PAIR_GENERATORS
from .paraphrase import make_paraphrase_task
from .sentiment import make_sentiment_task

__all__ = [
    "PAIR_TASKS",
    "SYNTHETIC_TASKS",
    "make_paraphrase_task",
    "make_sentiment_task",
]

SYNTHETIC_TASKS: dict[str, Callable[..., tuple[pd.DataFrame, pd.DataFrame]]] = {
    "synthetic_sentiment": make_sentiment_task,
    "synthetic_paraphrase": make_paraphrase_task,
}
PAIR_TASKS: frozenset[str] = SYNTHETIC_PAIR_GENERATORS
assert PAIR_TASKS <= set(SYNTHETIC_TASKS)
