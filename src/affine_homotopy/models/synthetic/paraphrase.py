"""The ``synthetic_paraphrase`` generator (sentence pair, MRPC-like); see :mod:`affine_homotopy.models.synthetic`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from .. import synthetic_vocabulary as vocab
from .base import Rng, _build_splits, _cap, _coin, _pick, _validate


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
    source_style = style.source_style if ev.source else None
    front, tail = _modifiers(ev, style, source_style)
    body = (f"{front}, " if front else "") + _clause(ev, style, source_style) + tail
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


def _clause(ev: _Event, style: _Style, source_style: str | None) -> str:
    """The event's main clause (agent, verb phrase, object and adverb) in the style's frame."""
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
    core = {
        "active": f"{agent} {active_vp} {obj}",
        "passive": f"{obj} {passive_vp} by {agent_bare}",
        "agent_cleft": f"it was {agent_bare} {who} {active_vp} {obj}",
        "object_cleft": f"it was {obj} that {agent_bare} {active_vp}",
    }.get(frame, f"what {agent_bare} {active_vp} was {obj}")
    return core + (f" {adverb}" if adverb is not None and not adverb_early else "")


def _modifiers(ev: _Event, style: _Style, source_style: str | None) -> tuple[str | None, str]:
    """The fronted modifier (or None) and the clause's tail of place, time and reason."""
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
    return front, tail


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
