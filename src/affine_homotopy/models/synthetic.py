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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np
import pandas as pd

from ..study.tasks import SYNTHETIC_PAIR_GENERATORS
from . import synthetic_vocabulary as vocab

T = TypeVar("T")
Rng = np.random.Generator

__all__ = [
    "PAIR_TASKS",
    "SYNTHETIC_TASKS",
    "make_paraphrase_task",
    "make_sentiment_task",
]


# ---------------------------------------------------------------------------
# shared helpers
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# sentiment task
# ---------------------------------------------------------------------------


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
    o = 1 - y  # the opposite polarity, used by the misleading half of a frame
    frame = int(rng.choice(len(_FRAME_WEIGHTS), p=_FRAME_WEIGHTS))
    if frame == 0:
        s = _cap(_clause(rng, dom, y)) + "."
    elif frame == 1:
        s = f"{_cap(item)} {_be(rng, item)} {_intense(rng, _adj(rng, y))}."
    elif frame == 2:  # negation flips the adjective's polarity
        s = f"{_cap(item)} {_was(item)} not {_adj(rng, o)} at all."
    elif frame == 3:
        neg = _pick(rng, ("not", "never", "hardly", "far from"))
        s = f"The {a1} {_was(a1)} {neg} {_adj(rng, o)}, and the {a2} {_was(a2)} {neg} {_adj(rng, o)} either."
    elif frame == 4:  # the main clause after "but" decides
        s = f"{_cap(_clause(rng, dom, o, a1))}, but {_clause(rng, dom, y, a2)}."
    elif frame == 5:
        s = f"Although {_clause(rng, dom, o, a1)}, {_clause(rng, dom, y, a2)}."
    elif frame == 6:
        s = f"Despite the {_adj(rng, o)} {a1}, {item} {_be(rng, item)} {_intense(rng, _adj(rng, y))}."
    elif frame == 7:
        verb = _pick(rng, vocab.POS_VERB if y else vocab.NEG_VERB)
        s = f"I {_pick(rng, ('', 'really ', 'honestly ', 'completely '))}{verb} {item}."
    elif frame == 8:
        rec = _pick(rng, ("would definitely recommend", "can happily recommend") if y
                    else ("would never recommend", "cannot recommend"))
        s = f"I {rec} {item} to {_pick(rng, vocab.AUDIENCE)}."
    elif frame == 9:
        s = f"I expected {item} to be {_adj(rng, o)}, but it turned out to be {_adj(rng, y)}."
    elif frame == 10:  # confirmed expectation: the same adjective decides
        s = f"Everyone told me {item} would be {_adj(rng, y)}, and they were right."
    elif frame == 11:
        comp = "better" if y else "worse"
        ref = _pick(rng, ("the original", "I expected", "anything else this year", "its rivals"))
        s = f"{_cap(item)} is {_pick(rng, ('far', 'much', 'a lot', 'slightly'))} {comp} than {ref}."
    elif frame == 12:
        s = f"There was nothing {_adj(rng, o)} about the {a1}."
    elif frame == 13:  # praising only a minor part damns the whole, and vice versa
        if y:
            s = f"The only {_adj(rng, 0)} thing about {item} was the {a1}, and it hardly mattered."
        else:
            s = f"The only {_adj(rng, 1)} thing about {item} was the {a1}."
    elif frame == 14:
        feel = _pick(rng, vocab.POS_FEEL if y else vocab.NEG_FEEL)
        s = f"By the end, {item} left me feeling {feel}."
    elif frame == 15:
        if y:
            s = f"What could have been a {_adj(rng, 0)} {dom.bare} turned out to be {_article(_adj(rng, 1))} one."
        else:
            s = f"{_cap(item)} could have been {_adj(rng, 1)}, but the {a1} {_was(a1)} {_adj(rng, 0)}."
    elif frame == 16:
        s = f"{_cap(_pick(rng, dom.contexts))}, and {_clause(rng, dom, y)}."
    elif frame == 17:
        lead = _pick(rng, ("After all the hype", "To be fair", "Frankly", "In the end"))
        s = f"{lead}, {item} {_be(rng, item)} {_intense(rng, _adj(rng, y))}."
    elif frame == 18:
        s = f"Could the {a1} have been any more {_adj(rng, y)}?"
    elif frame == 19:  # agreement across two clauses, then a summary
        s = (f"The {a1} {_was(a1)} {_adj(rng, y)} and the {a2} {_was(a2)} {_adj(rng, y)}; "
             f"{_pick(rng, ('overall', 'all in all', 'in short'))}, {_article(_adj(rng, y))} {dom.bare}.")
    elif frame == 20:
        s = f"Not one part of the {a1} felt {_adj(rng, o)}."
    else:
        s = f"{_cap(_clause(rng, dom, y, a1))}. {_pick(rng, vocab.CLOSERS_POS if y else vocab.CLOSERS_NEG)}"
    # A neutral scene-setting clause lengthens some reviews without adding polarity.
    if frame not in (16, 17) and _coin(rng, 0.3):
        s = f"{_cap(_pick(rng, dom.contexts))}. {s}"
    return " ".join(s.split())  # collapse doubled spaces left by empty adverbs


def _sentiment_example(rng: Rng, y: int) -> tuple[str, str | None]:
    return _sentiment_sentence(rng, y), None


def make_sentiment_task(
    seed: int, n_train: int = 2000, n_dev: int = 500, label_noise: float = 0.05
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (train, dev) DataFrames for the SST-2-like single-sentence task."""
    _validate(n_train, n_dev, label_noise)
    rng = np.random.default_rng(seed)
    return _build_splits(rng, _sentiment_example, n_train, n_dev, label_noise)


# ---------------------------------------------------------------------------
# paraphrase task
# ---------------------------------------------------------------------------

def _number_words(n: int) -> str:
    if n < 20:
        return vocab.ONES[n]
    tens, ones = divmod(n, 10)
    return vocab.TENS[tens] + (f"-{vocab.ONES[ones]}" if ones else "")


@dataclass(frozen=True)
class _Person:
    first: str
    last: str
    role: str

    @property
    def forms(self) -> vocab.Forms:
        # Full name, surname only, and an appositive with the role all name the same person.
        return (f"{self.first} {self.last}", self.last, f"{self.role}, {self.first} {self.last},")


@dataclass(frozen=True)
class _Event:
    verb: str
    agent: vocab.Forms
    agent_is_person: bool
    obj: vocab.Forms
    obj_plural: bool
    n: int | None
    negated: bool
    time: vocab.Forms | None
    place: str | None
    adverb: int | None  # index into vocab.ADVERBS
    adverb_flipped: bool
    reason: vocab.Forms | None
    source: tuple[str, str] | None


def _sample_person(rng: Rng, exclude_last: str | None = None) -> _Person:
    while True:
        p = _Person(_pick(rng, vocab.FIRST), _pick(rng, vocab.LAST), _pick(rng, vocab.ROLES))
        if p.last != exclude_last:
            return p


def _last_name(forms: vocab.Forms) -> str:
    return forms[1]


def _sample_agent(rng: Rng, verb: str) -> tuple[vocab.Forms, bool]:
    if _pick(rng, vocab.VERBS[verb].agent_pools) == "person":
        return _sample_person(rng).forms, True
    return _pick(rng, vocab.ORGS), False


def _sample_object(rng: Rng, verb: str, agent: vocab.Forms, agent_is_person: bool) -> tuple[vocab.Forms, bool]:
    pool = vocab.VERBS[verb].object_pool
    if pool == "person":
        return _sample_person(rng, _last_name(agent) if agent_is_person else None).forms, False
    return _pick(rng, vocab.OBJECTS[pool])


def _sample_event(rng: Rng) -> _Event:
    verb = _pick(rng, vocab.VERB_KEYS)
    agent, agent_is_person = _sample_agent(rng, verb)
    obj, plural = _sample_object(rng, verb, agent, agent_is_person)
    counted = "{n}" in obj[0]
    return _Event(
        verb=verb, agent=agent, agent_is_person=agent_is_person, obj=obj, obj_plural=plural,
        n=int(rng.integers(2, 60)) if counted else None,
        # Some originals are negated, so "not" alone does not give away a label-0 pair.
        negated=_coin(rng, 0.15),
        time=_pick(rng, vocab.TIMES) if _coin(rng, 0.6) else None,
        place=_pick(rng, vocab.PLACES) if _coin(rng, 0.45) else None,
        adverb=int(rng.integers(len(vocab.ADVERBS))) if _coin(rng, 0.3) else None,
        adverb_flipped=_coin(rng, 0.5),
        reason=_pick(rng, vocab.REASONS) if _coin(rng, 0.3) else None,
        source=_pick(rng, vocab.SOURCES) if _coin(rng, 0.35) else None,
    )


def _change_meaning(rng: Rng, ev: _Event) -> _Event:
    """Change exactly one meaning-bearing slot of ``ev``."""
    # Changes that sentence encoders barely register (role swaps, times, numbers)
    # are kept but drawn less often; they are what keeps the task below 100 %.
    options: dict[str, float] = {"agent": 2.0, "object": 2.0, "negation": 2.0}
    if ev.n is not None:
        options["number"] = 0.7
    if vocab.VERBS[ev.verb].antonym is not None:
        options["antonym"] = 3.0
    if ev.agent_is_person and vocab.VERBS[ev.verb].object_pool == "person":
        options["roles"] = 1.0  # zero change in word overlap
    if ev.time is not None:
        options["time"] = 0.5
    if ev.place is not None:
        options["place"] = 0.5
    if ev.adverb is not None:
        options["adverb"] = 0.5
    names = list(options)
    weights = np.array([options[k] for k in names])
    kind = names[int(rng.choice(len(names), p=weights / weights.sum()))]
    if kind == "agent":
        while True:
            agent, is_person = _sample_agent(rng, ev.verb)
            clash = is_person and ev.agent_is_person and _last_name(agent) == _last_name(ev.agent)
            clash = clash or (is_person and vocab.VERBS[ev.verb].object_pool == "person"
                              and _last_name(agent) == _last_name(ev.obj))
            if agent != ev.agent and not clash:
                return replace(ev, agent=agent, agent_is_person=is_person)
    if kind == "object":
        while True:
            obj, plural = _sample_object(rng, ev.verb, ev.agent, ev.agent_is_person)
            if obj != ev.obj and not (vocab.VERBS[ev.verb].object_pool == "person"
                                      and _last_name(obj) == _last_name(ev.obj)):
                n = ev.n if ev.n is not None else int(rng.integers(2, 60))
                return replace(ev, obj=obj, obj_plural=plural, n=n if "{n}" in obj[0] else None)
    if kind == "number":
        assert ev.n is not None
        # Small shifts as well as large ones, so the size of the change is no cue.
        shifted = [ev.n + d for d in (-10, -3, -2, -1, 1, 2, 3, 10, 20) if 2 <= ev.n + d < 60]
        return replace(ev, n=_pick(rng, shifted))
    if kind == "negation":
        return replace(ev, negated=not ev.negated)
    if kind == "antonym":
        return replace(ev, verb=str(vocab.VERBS[ev.verb].antonym))
    if kind == "roles":
        return replace(ev, agent=ev.obj, obj=ev.agent)
    if kind == "time":
        while True:
            t = _pick(rng, vocab.TIMES)
            if t != ev.time:
                return replace(ev, time=t)
    if kind == "place":
        while True:
            p = _pick(rng, vocab.PLACES)
            if p != ev.place:
                return replace(ev, place=p)
    return replace(ev, adverb_flipped=not ev.adverb_flipped)


@dataclass(frozen=True)
class _Style:
    """Surface choices of one rendering.

    Form indices are taken modulo the number of available forms, so a style
    stays valid after the event's meaning (and hence its form lists) changes.
    """

    verb_form: int
    agent_form: int
    obj_form: int
    time_form: int
    reason_form: int
    adverb_form: int
    digits: bool
    adverb_early: bool
    source_style: str  # "prefix" | "that" | "suffix"
    perfect: bool
    frame: str
    front: str | None  # which modifier, if any, opens the sentence
    swap_tail: bool
    reason_comma: bool


_STYLE_GROUPS: dict[str, tuple[str, ...]] = {
    "synonym_verb": ("verb_form",),
    "synonym_nouns": ("agent_form", "obj_form", "time_form", "reason_form"),
    "number_format": ("digits",),
    "voice": ("frame",),
    "clause_order": ("front", "swap_tail", "reason_comma"),
    "attribution": ("source_style", "perfect"),
    "adverb": ("adverb_form", "adverb_early"),
}
_FRAMES: tuple[str, ...] = (
    "active", "active", "passive", "passive", "agent_cleft", "object_cleft", "pseudo_cleft",
)


def _draw_style(rng: Rng) -> _Style:
    return _Style(
        verb_form=int(rng.integers(1_000)), agent_form=int(rng.integers(1_000)),
        obj_form=int(rng.integers(1_000)), time_form=int(rng.integers(1_000)),
        reason_form=int(rng.integers(1_000)), adverb_form=int(rng.integers(1_000)),
        digits=_coin(rng, 0.5), adverb_early=_coin(rng, 0.5),
        source_style=_pick(rng, ("prefix", "that", "suffix")), perfect=_coin(rng, 0.5),
        frame=_pick(rng, _FRAMES),
        front=_pick(rng, (None, None, "place", "time", "reason")),
        swap_tail=_coin(rng, 0.5), reason_comma=_coin(rng, 0.5),
    )


def _restyle(rng: Rng, style: _Style) -> _Style:
    """Redraw one to three groups of surface choices (synonyms, voice, order, ...)."""
    fresh = _draw_style(rng)
    groups = list(_STYLE_GROUPS)
    n_groups = int(rng.choice([1, 2, 3], p=[0.45, 0.4, 0.15]))
    keys = [k for g in rng.choice(len(groups), size=n_groups, replace=False)
            for k in _STYLE_GROUPS[groups[int(g)]]]
    return replace(style, **{k: getattr(fresh, k) for k in keys})


def _form(options: Sequence[str], index: int) -> str:
    return options[index % len(options)]


def _realize(ev: _Event, style: _Style) -> str:
    """Deterministically render an event with the given surface choices."""
    verb_forms = vocab.VERBS[ev.verb].forms
    base, past, participle = verb_forms[style.verb_form % len(verb_forms)]
    agent = _form(ev.agent, style.agent_form)
    # An appositive ("the mayor, X Y,") reads well only as a sentence subject.
    agent_bare = _form(ev.agent[:2], style.agent_form) if ev.agent_is_person else agent
    obj_forms = ev.obj[:2] if vocab.VERBS[ev.verb].object_pool == "person" else ev.obj
    obj = _form(obj_forms, style.obj_form)
    if ev.n is not None:
        obj = obj.replace("{n}", str(ev.n) if style.digits else _number_words(ev.n))
    adverb = None
    if ev.adverb is not None:
        adverb = _form(vocab.ADVERBS[ev.adverb][int(ev.adverb_flipped)], style.adverb_form)
    adverb_early = adverb is not None and style.adverb_early
    pre = f"{adverb} " if adverb_early else ""
    neg = "not " if ev.negated else ""

    source_style = style.source_style if ev.source else None
    perfect = source_style == "that" and style.perfect  # reported speech may backshift
    if perfect:
        active_vp = f"had {neg}{pre}{participle}"
        passive_vp = f"had {neg}been {pre}{participle}"
    else:
        active_vp = f"did not {pre}{base}" if ev.negated else f"{pre}{past}"
        passive_vp = f"{'were' if ev.obj_plural else 'was'} {neg}{pre}{participle}"

    frame = style.frame
    if (ev.negated or perfect) and frame in ("object_cleft", "pseudo_cleft"):
        # Clefts of negated clauses carry presuppositions, so fall back to plain voice.
        frame = "active" if frame == "object_cleft" else "passive"
    who = "who" if ev.agent_is_person else "that"
    if frame == "active":
        core = f"{agent} {active_vp} {obj}"
    elif frame == "passive":
        core = f"{obj} {passive_vp} by {agent_bare}"
    elif frame == "agent_cleft":
        core = f"it was {agent_bare} {who} {active_vp} {obj}"
    elif frame == "object_cleft":
        core = f"it was {obj} that {agent_bare} {active_vp}"
    else:
        core = f"what {agent_bare} {active_vp} was {obj}"
    if adverb is not None and not adverb_early:
        core += f" {adverb}"

    mods: list[tuple[str, str]] = []
    if ev.place is not None:
        mods.append(("place", f"in {ev.place}"))
    if ev.time is not None:
        mods.append(("time", _form(ev.time, style.time_form)))
    if ev.reason is not None:
        mods.append(("reason", _form(ev.reason, style.reason_form)))
    front = None
    kinds = [k for k, _ in mods]
    if style.front in kinds and source_style != "that":
        front = mods.pop(kinds.index(style.front))[1]
    if len(mods) > 1 and style.swap_tail:
        mods[0], mods[1] = mods[1], mods[0]
    tail = ""
    for kind, text in mods:
        tail += f", {text}" if kind == "reason" and style.reason_comma else f" {text}"

    body = (f"{front}, " if front else "") + core + tail
    if ev.source is not None:
        src, said = ev.source
        if source_style == "prefix":
            body = f"according to {src}, {body}"
        elif source_style == "that":
            body = f"{src} {said} that {body}"
        else:
            body = f"{body}, {src} {said}"
    body = " ".join(body.replace(",,", ",").replace(", ,", ",").split())
    return _cap(body) + "."


def _paraphrase_example(rng: Rng, y: int) -> tuple[str, str | None]:
    ev = _sample_event(rng)
    style = _draw_style(rng)
    a = _realize(ev, style)
    target = ev if y == 1 else _change_meaning(rng, ev)
    # Attribution is sometimes dropped in either class, as in news paraphrase corpora.
    if target.source is not None and _coin(rng, 0.25):
        target = replace(target, source=None)
    # Both classes get the same amount of rewording, so the only systematic
    # difference between them is the meaning change itself.
    for _ in range(10):
        b = _realize(target, _restyle(rng, style))
        if b != a:
            return a, b
    return a, a  # rejected by the caller, which then draws a fresh event


def make_paraphrase_task(
    seed: int, n_train: int = 2000, n_dev: int = 500, label_noise: float = 0.05
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (train, dev) DataFrames for the MRPC-like sentence-pair task."""
    _validate(n_train, n_dev, label_noise)
    # Offset the stream so the same seed does not correlate the two tasks' draws.
    rng = np.random.default_rng([seed, 1])
    return _build_splits(rng, _paraphrase_example, n_train, n_dev, label_noise)


SYNTHETIC_TASKS: dict[str, Callable[..., tuple[pd.DataFrame, pd.DataFrame]]] = {
    "synthetic_sentiment": make_sentiment_task,
    "synthetic_paraphrase": make_paraphrase_task,
}
PAIR_TASKS: frozenset[str] = SYNTHETIC_PAIR_GENERATORS
assert PAIR_TASKS <= set(SYNTHETIC_TASKS)
