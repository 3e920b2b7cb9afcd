"""The ``synthetic_sentiment`` generator (single sentence, SST-2-like); see :mod:`affine_homotopy.models.synthetic`."""

from __future__ import annotations


import numpy as np
import pandas as pd

from .. import synthetic_vocabulary as vocab
from .base import Rng, _article, _build_splits, _cap, _coin, _pick, _validate


def _adj(rng: Rng, polarity: int) -> str:
    return _pick(rng, vocab.POS_ADJ if polarity else vocab.NEG_ADJ)


def _intense(rng: Rng, adjective: str) -> str:
    adverb = _pick(rng, vocab.INTENSIFIERS)
    return f"{adverb} {adjective}" if adverb else adjective


def _be_plural(subject: str) -> bool:
    return subject.split()[-1] in vocab.PLURAL_ASPECTS or subject.endswith("headphones")


def _be(rng: Rng, subject: str) -> str:
    verb = _pick(rng, vocab.BE)
    if _be_plural(subject):
        verb = {"was": "were", "is": "are"}.get(verb, verb)
    return verb


def _was(subject: str) -> str:
    return "were" if _be_plural(subject) else "was"


def _clause(rng: Rng, dom: vocab.Domain, polarity: int, aspect: str | None = None) -> str:
    """A plain evaluative clause whose polarity equals ``polarity``."""
    aspect = aspect or _pick(rng, dom.aspects)
    return f"the {aspect} {_be(rng, aspect)} {_intense(rng, _adj(rng, polarity))}"


# Frames whose polar words agree with the label are drawn more often than the
# compositional ones (negation, contrast, overturned expectations); the mix sets
# the difficulty: bag-of-words and frozen-encoder probes both land well below 100 %.
_DIRECT_FRAMES = frozenset({0, 1, 7, 8, 10, 11, 14, 16, 17, 18, 19, 21})
_COMPOSITIONAL_WEIGHT = 1.0
_DIRECT_WEIGHT = 4.0
_FRAME_WEIGHTS = np.array(
    [_DIRECT_WEIGHT if f in _DIRECT_FRAMES else _COMPOSITIONAL_WEIGHT for f in range(22)]
)
_FRAME_WEIGHTS = _FRAME_WEIGHTS / _FRAME_WEIGHTS.sum()


def _sentiment_sentence(rng: Rng, y: int) -> str:
    """Render one review whose overall polarity is ``y`` through a random frame."""
    dom = _pick(rng, vocab.DOMAINS)
    item = _pick(rng, dom.items)
    a1, a2 = (str(x) for x in rng.choice(dom.aspects, size=2, replace=False))
    frame = int(rng.choice(len(_FRAME_WEIGHTS), p=_FRAME_WEIGHTS))
    frames = _early_frame if frame <= 10 else _late_frame
    s = frames(rng, dom, item, a1, a2, y, frame)
    # A neutral scene-setting clause lengthens some reviews without adding polarity.
    if frame not in (16, 17) and _coin(rng, 0.3):
        s = f"{_cap(_pick(rng, dom.contexts))}. {s}"
    return " ".join(s.split())  # collapse doubled spaces left by empty adverbs


def _early_frame(rng: Rng, dom: vocab.Domain, item: str, a1: str, a2: str, y: int, frame: int) -> str:
    """Frames 0-10 of :func:`_sentiment_sentence` (the rng draws in the order they render)."""
    o = 1 - y  # the opposite polarity, used by the misleading half of a frame
    if frame == 0:
        return _cap(_clause(rng, dom, y)) + "."
    elif frame == 1:
        return f"{_cap(item)} {_be(rng, item)} {_intense(rng, _adj(rng, y))}."
    elif frame == 2:  # negation flips the adjective's polarity
        return f"{_cap(item)} {_was(item)} not {_adj(rng, o)} at all."
    elif frame == 3:
        neg = _pick(rng, ("not", "never", "hardly", "far from"))
        return f"The {a1} {_was(a1)} {neg} {_adj(rng, o)}, and the {a2} {_was(a2)} {neg} {_adj(rng, o)} either."
    elif frame == 4:  # the main clause after "but" decides
        return f"{_cap(_clause(rng, dom, o, a1))}, but {_clause(rng, dom, y, a2)}."
    elif frame == 5:
        return f"Although {_clause(rng, dom, o, a1)}, {_clause(rng, dom, y, a2)}."
    elif frame == 6:
        return f"Despite the {_adj(rng, o)} {a1}, {item} {_be(rng, item)} {_intense(rng, _adj(rng, y))}."
    elif frame == 7:
        verb = _pick(rng, vocab.POS_VERB if y else vocab.NEG_VERB)
        return f"I {_pick(rng, ('', 'really ', 'honestly ', 'completely '))}{verb} {item}."
    elif frame == 8:
        rec = _pick(rng, ("would definitely recommend", "can happily recommend") if y
                    else ("would never recommend", "cannot recommend"))
        return f"I {rec} {item} to {_pick(rng, vocab.AUDIENCE)}."
    elif frame == 9:
        return f"I expected {item} to be {_adj(rng, o)}, but it turned out to be {_adj(rng, y)}."
    elif frame == 10:  # confirmed expectation: the same adjective decides
        return f"Everyone told me {item} would be {_adj(rng, y)}, and they were right."


def _late_frame(rng: Rng, dom: vocab.Domain, item: str, a1: str, a2: str, y: int, frame: int) -> str:
    """Frames 11-21 of :func:`_sentiment_sentence` (the rng draws in the order they render)."""
    o = 1 - y  # the opposite polarity, used by the misleading half of a frame
    if frame == 11:
        comp = "better" if y else "worse"
        ref = _pick(rng, ("the original", "I expected", "anything else this year", "its rivals"))
        return f"{_cap(item)} is {_pick(rng, ('far', 'much', 'a lot', 'slightly'))} {comp} than {ref}."
    elif frame == 12:
        return f"There was nothing {_adj(rng, o)} about the {a1}."
    elif frame == 13:  # praising only a minor part damns the whole, and vice versa
        if y:
            return f"The only {_adj(rng, 0)} thing about {item} was the {a1}, and it hardly mattered."
        else:
            return f"The only {_adj(rng, 1)} thing about {item} was the {a1}."
    elif frame == 14:
        feel = _pick(rng, vocab.POS_FEEL if y else vocab.NEG_FEEL)
        return f"By the end, {item} left me feeling {feel}."
    elif frame == 15:
        if y:
            return f"What could have been a {_adj(rng, 0)} {dom.bare} turned out to be {_article(_adj(rng, 1))} one."
        else:
            return f"{_cap(item)} could have been {_adj(rng, 1)}, but the {a1} {_was(a1)} {_adj(rng, 0)}."
    elif frame == 16:
        return f"{_cap(_pick(rng, dom.contexts))}, and {_clause(rng, dom, y)}."
    elif frame == 17:
        lead = _pick(rng, ("After all the hype", "To be fair", "Frankly", "In the end"))
        return f"{lead}, {item} {_be(rng, item)} {_intense(rng, _adj(rng, y))}."
    elif frame == 18:
        return f"Could the {a1} have been any more {_adj(rng, y)}?"
    elif frame == 19:  # agreement across two clauses, then a summary
        return (f"The {a1} {_was(a1)} {_adj(rng, y)} and the {a2} {_was(a2)} {_adj(rng, y)}; "
             f"{_pick(rng, ('overall', 'all in all', 'in short'))}, {_article(_adj(rng, y))} {dom.bare}.")
    elif frame == 20:
        return f"Not one part of the {a1} felt {_adj(rng, o)}."
    else:
        return f"{_cap(_clause(rng, dom, y, a1))}. {_pick(rng, vocab.CLOSERS_POS if y else vocab.CLOSERS_NEG)}"


def _sentiment_example(rng: Rng, y: int) -> tuple[str, str | None]:
    return _sentiment_sentence(rng, y), None


def make_sentiment_task(
    seed: int, n_train: int = 2000, n_dev: int = 500, label_noise: float = 0.05
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (train, dev) DataFrames for the SST-2-like single-sentence task."""
    _validate(n_train, n_dev, label_noise)
    rng = np.random.default_rng(seed)
    return _build_splits(rng, _sentiment_example, n_train, n_dev, label_noise)
