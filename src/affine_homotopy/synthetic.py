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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np
import pandas as pd

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


@dataclass(frozen=True)
class _Domain:
    items: tuple[str, ...]  # noun phrases with a determiner: "the film"
    aspects: tuple[str, ...]  # singular mass/count nouns: "plot"
    contexts: tuple[str, ...]  # sentiment-free scene setting
    bare: str  # generic noun for "a ___": "film"


_DOMAINS: tuple[_Domain, ...] = (
    _Domain(
        items=("the film", "this movie", "the sequel", "the documentary", "the new thriller",
               "the remake", "this comedy", "the director's latest feature"),
        aspects=("plot", "acting", "soundtrack", "dialogue", "pacing", "cinematography",
                 "ending", "script", "cast", "editing", "lead performance", "humor"),
        contexts=("we saw it at a late screening", "I watched it with my brother on a Sunday",
                  "it opened in theaters last Friday", "I streamed it on a long flight",
                  "my book club picked it for movie night"),
        bare="film",
    ),
    _Domain(
        items=("the restaurant", "this bistro", "the new cafe", "the diner", "the taco stand",
               "the steakhouse", "this noodle bar", "the bakery on Main Street"),
        aspects=("food", "service", "menu", "dessert", "atmosphere", "staff", "pasta",
                 "coffee", "wine list", "seafood", "bread", "decor"),
        contexts=("we went there for my mother's birthday", "we stopped by after a concert",
                  "a coworker suggested it for lunch", "we booked a table on a rainy Tuesday",
                  "it replaced the old pizza place downtown"),
        bare="meal",
    ),
    _Domain(
        items=("the novel", "this memoir", "the book", "the short story collection",
               "the biography", "this cookbook", "the debut novel", "the graphic novel"),
        aspects=("writing", "prose", "plot", "ending", "translation", "narrator",
                 "characters", "structure", "final chapter", "illustrations"),
        contexts=("I read it over a long weekend", "a librarian recommended it to me",
                  "I picked it up at an airport shop", "our reading group chose it in May",
                  "it came out in paperback this spring"),
        bare="read",
    ),
    _Domain(
        items=("the laptop", "this blender", "the headphones", "the phone", "the vacuum",
               "this coffee maker", "the smartwatch", "the office chair"),
        aspects=("battery", "design", "build quality", "screen", "price", "sound",
                 "customer support", "setup", "keyboard", "packaging", "manual", "warranty"),
        contexts=("I ordered it during a holiday sale", "my old one broke last month",
                  "I have used it every day since March", "a friend gave it to me as a gift",
                  "it arrived two days after I ordered it"),
        bare="purchase",
    ),
    _Domain(
        items=("the hotel", "the resort", "the cruise", "the walking tour", "our flight",
               "the guesthouse", "the ski lodge", "the train journey"),
        aspects=("room", "view", "breakfast", "location", "pool", "guide", "staff",
                 "beds", "check-in", "itinerary", "shuttle", "bathroom"),
        contexts=("we stayed there for three nights in June", "we booked it for our anniversary",
                  "I traveled there for a conference", "we arrived late in the evening",
                  "our travel agent arranged everything"),
        bare="trip",
    ),
    _Domain(
        items=("the album", "this record", "the band's new single", "the concert",
               "the live recording", "the musical", "the opera", "the jazz set"),
        aspects=("vocals", "production", "lyrics", "melody", "drumming", "orchestra",
                 "sound mix", "setlist", "chorus", "encore"),
        contexts=("I listened to it on my commute", "we caught the show on its opening night",
                  "it was released without much promotion", "my sister played it in the car",
                  "I heard it twice in one week"),
        bare="record",
    ),
    _Domain(
        items=("the game", "this puzzle app", "the board game", "the new shooter",
               "the strategy game", "this mobile game", "the expansion pack", "the racing game"),
        aspects=("gameplay", "story", "controls", "graphics", "level design", "multiplayer",
                 "tutorial", "difficulty curve", "art style", "music"),
        contexts=("I played it with friends over the holidays", "it went on sale last week",
                  "my kids asked for it for months", "I finished it in about twenty hours",
                  "I tried it after reading the reviews"),
        bare="game",
    ),
)

_POS_ADJ: tuple[str, ...] = (
    "great", "excellent", "wonderful", "brilliant", "superb", "delightful", "charming",
    "fantastic", "memorable", "stunning", "gorgeous", "moving", "clever", "witty", "fresh",
    "solid", "impressive", "enjoyable", "pleasant", "satisfying", "flawless", "outstanding",
    "terrific", "lovely", "engaging", "gripping", "elegant", "reliable", "sturdy", "generous",
    "friendly", "attentive", "cozy", "spotless", "smooth", "tasty", "polished", "thoughtful",
    "heartfelt", "inventive", "vibrant", "refreshing", "compelling", "remarkable", "splendid",
    "marvelous", "decent", "warm", "sharp", "inspired",
)
_NEG_ADJ: tuple[str, ...] = (
    "terrible", "awful", "dull", "boring", "bland", "mediocre", "disappointing", "clumsy",
    "tedious", "sloppy", "forgettable", "horrible", "dreadful", "lifeless", "weak", "flimsy",
    "rude", "sluggish", "greasy", "stale", "overpriced", "cramped", "noisy", "dirty",
    "confusing", "pretentious", "shallow", "predictable", "lazy", "unbearable", "awkward",
    "painful", "dreary", "cheap", "unreliable", "frustrating", "messy", "soggy", "grim",
    "hollow", "tiresome", "uninspired", "bloated", "lousy", "subpar", "annoying", "grating",
    "poor", "flat", "careless",
)
# Intensity adverbs carry no polarity; they add variety and length only.
_INTENSIFIERS: tuple[str, ...] = (
    "", "", "", "really", "truly", "absolutely", "incredibly", "remarkably", "surprisingly",
    "genuinely", "utterly", "rather", "fairly", "quite", "pretty", "somewhat", "consistently",
    "thoroughly", "downright", "simply", "honestly",
)
_BE: tuple[str, ...] = ("was", "was", "is", "felt", "seemed", "turned out to be")
_POS_VERB: tuple[str, ...] = ("loved", "adored", "enjoyed", "admired", "cherished", "savored")
_NEG_VERB: tuple[str, ...] = ("hated", "loathed", "regretted", "disliked", "resented", "endured")
_POS_FEEL: tuple[str, ...] = ("cheerful", "inspired", "grateful", "delighted", "energized", "content")
_NEG_FEEL: tuple[str, ...] = ("bored", "annoyed", "cheated", "exhausted", "irritated", "empty")
_AUDIENCE: tuple[str, ...] = (
    "anyone", "my friends", "families", "first-time visitors", "my coworkers",
    "picky eaters", "casual fans", "serious enthusiasts", "students", "my parents",
)
_CLOSERS_POS: tuple[str, ...] = (
    "Worth every penny.", "I will be back.", "Highly recommended.", "Count me in for the next one.",
)
_CLOSERS_NEG: tuple[str, ...] = (
    "Save your money.", "Never again.", "Avoid it.", "What a waste of an evening.",
)


def _adj(rng: Rng, polarity: int) -> str:
    return _pick(rng, _POS_ADJ if polarity else _NEG_ADJ)


def _intense(rng: Rng, adjective: str) -> str:
    adverb = _pick(rng, _INTENSIFIERS)
    return f"{adverb} {adjective}" if adverb else adjective


_PLURAL_ASPECTS = frozenset({
    "vocals", "lyrics", "characters", "illustrations", "beds", "controls", "graphics", "staff",
})


def _be_plural(subject: str) -> bool:
    return subject.split()[-1] in _PLURAL_ASPECTS or subject.endswith("headphones")


def _be(rng: Rng, subject: str) -> str:
    verb = _pick(rng, _BE)
    if _be_plural(subject):
        verb = {"was": "were", "is": "are"}.get(verb, verb)
    return verb


def _was(subject: str) -> str:
    return "were" if _be_plural(subject) else "was"


def _clause(rng: Rng, dom: _Domain, polarity: int, aspect: str | None = None) -> str:
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
    dom = _pick(rng, _DOMAINS)
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
        verb = _pick(rng, _POS_VERB if y else _NEG_VERB)
        s = f"I {_pick(rng, ('', 'really ', 'honestly ', 'completely '))}{verb} {item}."
    elif frame == 8:
        rec = _pick(rng, ("would definitely recommend", "can happily recommend") if y
                    else ("would never recommend", "cannot recommend"))
        s = f"I {rec} {item} to {_pick(rng, _AUDIENCE)}."
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
        feel = _pick(rng, _POS_FEEL if y else _NEG_FEEL)
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
        s = f"{_cap(_clause(rng, dom, y, a1))}. {_pick(rng, _CLOSERS_POS if y else _CLOSERS_NEG)}"
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

# Every inner tuple lists interchangeable surface forms of one meaning; choosing
# different forms for text_a and text_b is what makes a paraphrase non-verbatim.
Forms = tuple[str, ...]


@dataclass(frozen=True)
class _VerbGroup:
    forms: tuple[tuple[str, str, str], ...]  # synonyms as (base, past, participle)
    agent_pools: tuple[str, ...]
    object_pool: str
    antonym: str | None = None  # key of the group with the opposite meaning


_VERBS: dict[str, _VerbGroup] = {
    "buy": _VerbGroup((("buy", "bought", "bought"), ("purchase", "purchased", "purchased"),
                       ("acquire", "acquired", "acquired")), ("org", "person"), "goods", "sell"),
    "sell": _VerbGroup((("sell", "sold", "sold"), ("offload", "offloaded", "offloaded")),
                       ("org", "person"), "goods", "buy"),
    "approve": _VerbGroup((("approve", "approved", "approved"), ("endorse", "endorsed", "endorsed"),
                           ("pass", "passed", "passed")), ("org",), "proposals", "reject"),
    "reject": _VerbGroup((("reject", "rejected", "rejected"), ("turn down", "turned down", "turned down"),
                          ("vote down", "voted down", "voted down")), ("org",), "proposals", "approve"),
    "build": _VerbGroup((("build", "built", "built"), ("construct", "constructed", "constructed"),
                         ("put up", "put up", "put up")), ("org",), "structures", "demolish"),
    "demolish": _VerbGroup((("demolish", "demolished", "demolished"), ("tear down", "tore down", "torn down"),
                            ("knock down", "knocked down", "knocked down")), ("org",), "structures", "build"),
    "hire": _VerbGroup((("hire", "hired", "hired"), ("recruit", "recruited", "recruited"),
                        ("take on", "took on", "taken on")), ("org",), "workers", "fire"),
    "fire": _VerbGroup((("fire", "fired", "fired"), ("dismiss", "dismissed", "dismissed"),
                        ("lay off", "laid off", "laid off")), ("org",), "workers", "hire"),
    "open": _VerbGroup((("open", "opened", "opened"), ("launch", "launched", "launched")),
                       ("org",), "outlets", "close"),
    "close": _VerbGroup((("close", "closed", "closed"), ("shut down", "shut down", "shut down"),
                         ("shut", "shut", "shut")), ("org",), "outlets", "open"),
    "raise": _VerbGroup((("raise", "raised", "raised"), ("increase", "increased", "increased"),
                         ("hike", "hiked", "hiked")), ("org",), "rates", "cut"),
    "cut": _VerbGroup((("cut", "cut", "cut"), ("reduce", "reduced", "reduced"),
                       ("lower", "lowered", "lowered"), ("slash", "slashed", "slashed")), ("org",), "rates", "raise"),
    "win": _VerbGroup((("win", "won", "won"), ("secure", "secured", "secured"),
                       ("clinch", "clinched", "clinched")), ("org", "person"), "prizes", "lose"),
    "lose": _VerbGroup((("lose", "lost", "lost"), ("forfeit", "forfeited", "forfeited")),
                       ("org", "person"), "prizes", "win"),
    "accept": _VerbGroup((("accept", "accepted", "accepted"), ("take up", "took up", "taken up"),
                          ("agree to", "agreed to", "agreed to")), ("org", "person"), "offers", "decline"),
    "decline": _VerbGroup((("decline", "declined", "declined"), ("refuse", "refused", "refused"),
                           ("turn down", "turned down", "turned down")), ("org", "person"), "offers", "accept"),
    # Person-on-person verbs are the ones where swapping roles changes the meaning.
    "praise": _VerbGroup((("praise", "praised", "praised"), ("commend", "commended", "commended"),
                          ("applaud", "applauded", "applauded")), ("person",), "person", "criticize"),
    "criticize": _VerbGroup((("criticize", "criticized", "criticized"), ("condemn", "condemned", "condemned"),
                             ("fault", "faulted", "faulted")), ("person",), "person", "praise"),
    "thank": _VerbGroup((("thank", "thanked", "thanked"), ("credit", "credited", "credited")),
                        ("person",), "person", "blame"),
    "blame": _VerbGroup((("blame", "blamed", "blamed"),), ("person",), "person", "thank"),
    "support": _VerbGroup((("support", "supported", "supported"), ("back", "backed", "backed")),
                          ("person",), "person", "oppose"),
    "oppose": _VerbGroup((("oppose", "opposed", "opposed"), ("challenge", "challenged", "challenged")),
                         ("person",), "person", "support"),
    "defeat": _VerbGroup((("defeat", "defeated", "defeated"), ("beat", "beat", "beaten")),
                         ("person",), "person"),
    "interview": _VerbGroup((("interview", "interviewed", "interviewed"), ("question", "questioned", "questioned")),
                            ("person",), "person"),
    "hug": _VerbGroup((("hug", "hugged", "hugged"), ("embrace", "embraced", "embraced")),
                      ("person",), "person"),
}
_VERB_KEYS: tuple[str, ...] = tuple(_VERBS)

_ORGS: tuple[Forms, ...] = (
    ("the city council", "the council"), ("the company", "the firm"),
    ("the health ministry", "the ministry of health"), ("the school board", "the board of education"),
    ("the airline", "the carrier"), ("the state government", "state officials"),
    ("the bank", "the lender"), ("the retailer", "the retail chain"),
    ("the automaker", "the car maker"), ("the startup", "the young company"),
    ("the museum", "the museum's trustees"), ("the railway operator", "the rail operator"),
    ("the football club", "the club"), ("the publisher", "the publishing house"),
    ("the port authority",), ("the university", "university leaders"),
    ("the charity", "the nonprofit"), ("the hospital group", "the hospital operator"),
    ("the regional parliament", "regional lawmakers"), ("the mining company", "the miner"),
    ("the software giant",), ("the supermarket chain", "the grocer"),
)
_FIRST: tuple[str, ...] = (
    "Maria", "James", "Aisha", "Chen", "Olga", "Pedro", "Fatima", "Liam", "Yuki", "Kwame",
    "Sofia", "Daniel", "Priya", "Omar", "Elena", "Marcus", "Ingrid", "Tariq", "Hannah", "Diego",
    "Nadia", "Victor", "Grace", "Mateo", "Leila", "Samuel", "Anya", "Rahul", "Claire", "Tomas",
)
_LAST: tuple[str, ...] = (
    "Lopez", "Okafor", "Nakamura", "Schmidt", "Patel", "Novak", "Haddad", "Murphy", "Silva",
    "Kowalski", "Andersen", "Mensah", "Romero", "Ivanova", "Dubois", "Kim", "Brennan", "Costa",
    "Yilmaz", "Fischer", "Moreau", "Osei", "Larsen", "Bianchi", "Reyes", "Sato", "Walsh",
    "Ahmed", "Petrov", "Grant",
)
_ROLES: tuple[str, ...] = (
    "the mayor", "the senator", "the coach", "the chief executive", "the striker", "the judge",
    "the governor", "the director", "the union leader", "the minister", "the professor",
    "the candidate", "the goalkeeper", "the prosecutor", "the head nurse",
)

_OBJECTS: dict[str, tuple[tuple[Forms, bool], ...]] = {
    # (surface forms, is_plural); "{n}" marks a count that can be varied or spelled out.
    "goods": (
        (("{n} used cars", "{n} second-hand cars"), True), (("{n} delivery vans",), True),
        (("{n} laptops", "{n} notebook computers"), True), (("the old warehouse",), False),
        (("a stake in the startup", "a share in the startup"), False),
        (("{n} apartments", "{n} flats"), True), (("the downtown hotel",), False),
        (("{n} paintings", "{n} artworks"), True), (("{n} electric buses",), True),
        (("the former post office building", "the old post office building"), False),
        (("{n} tons of steel", "{n} tonnes of steel"), True), (("{n} hectares of farmland",), True),
    ),
    "proposals": (
        (("the budget", "the spending plan"), False), (("the merger", "the proposed merger"), False),
        (("the new zoning plan", "the rezoning proposal"), False),
        (("the plan to extend the metro line", "the proposal to extend the metro line"), False),
        (("the tax cut", "the tax reduction"), False),
        (("the contract with the supplier", "the supplier contract"), False),
        (("the request for more funding", "the funding request"), False),
        (("the revised curriculum", "the new curriculum"), False), (("the safety report",), False),
        (("the union's demands", "the demands of the union"), True),
        (("{n} building permits",), True), (("the ban on plastic bags", "the plastic bag ban"), False),
    ),
    "structures": (
        (("{n} houses", "{n} homes"), True), (("a bridge over the river",), False),
        (("the stadium", "the sports stadium"), False), (("{n} schools",), True),
        (("a parking garage", "a car park"), False), (("the old pier",), False),
        (("{n} apartment blocks", "{n} residential towers"), True),
        (("a hospital wing", "a new wing of the hospital"), False), (("{n} wind turbines",), True),
        (("the footbridge near the station",), False), (("{n} public toilets",), True),
    ),
    "workers": (
        (("{n} engineers",), True), (("{n} nurses",), True), (("{n} teachers",), True),
        (("{n} software developers", "{n} programmers"), True), (("{n} security guards",), True),
        (("{n} cleaners",), True), (("{n} sales staff", "{n} salespeople"), True),
        (("{n} translators",), True), (("{n} paramedics",), True), (("{n} pilots",), True),
        (("{n} lab technicians", "{n} laboratory technicians"), True),
    ),
    "outlets": (
        (("{n} branches", "{n} local branches"), True), (("{n} stores", "{n} shops"), True),
        (("{n} clinics",), True), (("an office in the city center", "a downtown office"), False),
        (("the factory", "the plant"), False), (("{n} restaurants",), True),
        (("the visitor center",), False), (("{n} bus routes",), True), (("the night market",), False),
        (("{n} libraries",), True), (("{n} call centers",), True),
    ),
    "rates": (
        (("ticket prices", "the price of tickets"), True), (("parking fees", "fees for parking"), True),
        (("tuition", "tuition fees"), False), (("the minimum wage",), False),
        (("property taxes",), True), (("salaries", "wages"), True),
        (("its sales forecast", "its forecast for sales"), False), (("interest rates",), True),
        (("water bills",), True), (("research spending", "spending on research"), False),
        (("pension payments",), True),
    ),
    "prizes": (
        (("the contract", "the deal"), False), (("{n} awards", "{n} prizes"), True),
        (("the tender",), False), (("the championship", "the title"), False),
        (("{n} matches", "{n} games"), True), (("the lawsuit", "the court case"), False),
        (("the bid to host the games",), False), (("the election",), False),
        (("{n} seats",), True), (("the appeal",), False),
    ),
    "offers": (
        (("the job offer",), False), (("the invitation", "the invite"), False),
        (("the settlement", "the proposed settlement"), False),
        (("the takeover bid", "the acquisition offer"), False), (("the honorary award",), False),
        (("the donation", "the gift"), False), (("the compromise",), False),
        (("the pay rise", "the salary increase"), False), (("the nomination",), False),
    ),
}

_TIMES: tuple[Forms, ...] = (
    ("on Monday",), ("on Tuesday",), ("on Wednesday",), ("on Thursday",), ("on Friday",),
    ("in March",), ("in April",), ("in June",), ("in September",), ("in November",),
    ("last week", "a week ago"), ("last month", "a month ago"), ("yesterday",),
    ("earlier this year", "earlier in the year"), ("late last year", "toward the end of last year"),
    ("over the weekend", "during the weekend"), ("last spring",), ("this morning",),
)
_PLACES: tuple[str, ...] = (
    "Denver", "Lyon", "Osaka", "Lagos", "Toronto", "Krakow", "Seville", "Melbourne", "Nairobi",
    "Porto", "Glasgow", "Austin", "Hamburg", "Lima", "Manila", "Tallinn", "Bologna", "Dublin",
    "Cape Town", "Montreal", "Leeds", "Valencia", "Pune", "Ghent", "Cork", "Phoenix",
)
_REASONS: tuple[Forms, ...] = (
    ("after months of debate", "following months of debate"),
    ("despite strong opposition", "in spite of strong opposition"),
    ("amid growing pressure", "under growing pressure"),
    ("without giving a reason", "without offering any explanation"),
    ("in a surprise move", "in an unexpected move"),
    ("ahead of the holiday season", "before the holiday season"),
    ("after a long review", "following a lengthy review"),
    ("for the second time this year", "for a second time this year"),
    ("as part of a broader plan", "as part of a wider plan"),
)
# Each adverb set has an opposite set, so swapping them is a meaning change.
_ADVERBS: tuple[tuple[Forms, Forms], ...] = (
    (("quickly", "swiftly", "rapidly"), ("slowly", "gradually")),
    (("quietly", "discreetly"), ("publicly", "openly")),
    (("reluctantly", "grudgingly"), ("eagerly", "enthusiastically")),
    (("temporarily",), ("permanently",)),
    (("unexpectedly", "surprisingly"), ("predictably",)),
)
_SOURCES: tuple[tuple[str, str], ...] = (
    ("officials", "said"), ("a spokesperson", "said"), ("local media", "reported"),
    ("a statement", "said"), ("the newspaper", "reported"), ("witnesses", "said"),
    ("two people familiar with the matter", "said"), ("news reports", "said"),
)
_ONES = ("", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
         "eighteen", "nineteen")
_TENS = ("", "", "twenty", "thirty", "forty", "fifty")


def _number_words(n: int) -> str:
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")


@dataclass(frozen=True)
class _Person:
    first: str
    last: str
    role: str

    @property
    def forms(self) -> Forms:
        # Full name, surname only, and an appositive with the role all name the same person.
        return (f"{self.first} {self.last}", self.last, f"{self.role}, {self.first} {self.last},")


@dataclass(frozen=True)
class _Event:
    verb: str
    agent: Forms
    agent_is_person: bool
    obj: Forms
    obj_plural: bool
    n: int | None
    negated: bool
    time: Forms | None
    place: str | None
    adverb: int | None  # index into _ADVERBS
    adverb_flipped: bool
    reason: Forms | None
    source: tuple[str, str] | None


def _sample_person(rng: Rng, exclude_last: str | None = None) -> _Person:
    while True:
        p = _Person(_pick(rng, _FIRST), _pick(rng, _LAST), _pick(rng, _ROLES))
        if p.last != exclude_last:
            return p


def _last_name(forms: Forms) -> str:
    return forms[1]


def _sample_agent(rng: Rng, verb: str) -> tuple[Forms, bool]:
    if _pick(rng, _VERBS[verb].agent_pools) == "person":
        return _sample_person(rng).forms, True
    return _pick(rng, _ORGS), False


def _sample_object(rng: Rng, verb: str, agent: Forms, agent_is_person: bool) -> tuple[Forms, bool]:
    pool = _VERBS[verb].object_pool
    if pool == "person":
        return _sample_person(rng, _last_name(agent) if agent_is_person else None).forms, False
    return _pick(rng, _OBJECTS[pool])


def _sample_event(rng: Rng) -> _Event:
    verb = _pick(rng, _VERB_KEYS)
    agent, agent_is_person = _sample_agent(rng, verb)
    obj, plural = _sample_object(rng, verb, agent, agent_is_person)
    counted = "{n}" in obj[0]
    return _Event(
        verb=verb, agent=agent, agent_is_person=agent_is_person, obj=obj, obj_plural=plural,
        n=int(rng.integers(2, 60)) if counted else None,
        # Some originals are negated, so "not" alone does not give away a label-0 pair.
        negated=_coin(rng, 0.15),
        time=_pick(rng, _TIMES) if _coin(rng, 0.6) else None,
        place=_pick(rng, _PLACES) if _coin(rng, 0.45) else None,
        adverb=int(rng.integers(len(_ADVERBS))) if _coin(rng, 0.3) else None,
        adverb_flipped=_coin(rng, 0.5),
        reason=_pick(rng, _REASONS) if _coin(rng, 0.3) else None,
        source=_pick(rng, _SOURCES) if _coin(rng, 0.35) else None,
    )


def _change_meaning(rng: Rng, ev: _Event) -> _Event:
    """Change exactly one meaning-bearing slot of ``ev``."""
    # Changes that sentence encoders barely register (role swaps, times, numbers)
    # are kept but drawn less often; they are what keeps the task below 100 %.
    options: dict[str, float] = {"agent": 2.0, "object": 2.0, "negation": 2.0}
    if ev.n is not None:
        options["number"] = 0.7
    if _VERBS[ev.verb].antonym is not None:
        options["antonym"] = 3.0
    if ev.agent_is_person and _VERBS[ev.verb].object_pool == "person":
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
            clash = clash or (is_person and _VERBS[ev.verb].object_pool == "person"
                              and _last_name(agent) == _last_name(ev.obj))
            if agent != ev.agent and not clash:
                return replace(ev, agent=agent, agent_is_person=is_person)
    if kind == "object":
        while True:
            obj, plural = _sample_object(rng, ev.verb, ev.agent, ev.agent_is_person)
            if obj != ev.obj and not (_VERBS[ev.verb].object_pool == "person"
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
        return replace(ev, verb=str(_VERBS[ev.verb].antonym))
    if kind == "roles":
        return replace(ev, agent=ev.obj, obj=ev.agent)
    if kind == "time":
        while True:
            t = _pick(rng, _TIMES)
            if t != ev.time:
                return replace(ev, time=t)
    if kind == "place":
        while True:
            p = _pick(rng, _PLACES)
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
    verb_forms = _VERBS[ev.verb].forms
    base, past, participle = verb_forms[style.verb_form % len(verb_forms)]
    agent = _form(ev.agent, style.agent_form)
    # An appositive ("the mayor, X Y,") reads well only as a sentence subject.
    agent_bare = _form(ev.agent[:2], style.agent_form) if ev.agent_is_person else agent
    obj_forms = ev.obj[:2] if _VERBS[ev.verb].object_pool == "person" else ev.obj
    obj = _form(obj_forms, style.obj_form)
    if ev.n is not None:
        obj = obj.replace("{n}", str(ev.n) if style.digits else _number_words(ev.n))
    adverb = None
    if ev.adverb is not None:
        adverb = _form(_ADVERBS[ev.adverb][int(ev.adverb_flipped)], style.adverb_form)
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
PAIR_TASKS: set[str] = {"synthetic_paraphrase"}
