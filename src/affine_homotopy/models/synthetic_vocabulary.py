"""Vocabularies of the synthetic tasks (:mod:`affine_homotopy.models.synthetic` holds the logic).

Word lists only: the sentiment task's review domains, polar adjectives and verbs, and the
paraphrase task's verb groups, agents, objects, times, places, reasons and adverbs. Every inner
tuple of a ``Forms`` lists interchangeable surface forms of one meaning. Changing a list changes the
generated data (and its fingerprint), so edit with care.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Domain:
    items: tuple[str, ...]  # noun phrases with a determiner: "the film"
    aspects: tuple[str, ...]  # singular mass/count nouns: "plot"
    contexts: tuple[str, ...]  # sentiment-free scene setting
    bare: str  # generic noun for "a ___": "film"


DOMAINS: tuple[Domain, ...] = (
    Domain(
        items=("the film", "this movie", "the sequel", "the documentary", "the new thriller",
               "the remake", "this comedy", "the director's latest feature"),
        aspects=("plot", "acting", "soundtrack", "dialogue", "pacing", "cinematography",
                 "ending", "script", "cast", "editing", "lead performance", "humor"),
        contexts=("we saw it at a late screening", "I watched it with my brother on a Sunday",
                  "it opened in theaters last Friday", "I streamed it on a long flight",
                  "my book club picked it for movie night"),
        bare="film",
    ),
    Domain(
        items=("the restaurant", "this bistro", "the new cafe", "the diner", "the taco stand",
               "the steakhouse", "this noodle bar", "the bakery on Main Street"),
        aspects=("food", "service", "menu", "dessert", "atmosphere", "staff", "pasta",
                 "coffee", "wine list", "seafood", "bread", "decor"),
        contexts=("we went there for my mother's birthday", "we stopped by after a concert",
                  "a coworker suggested it for lunch", "we booked a table on a rainy Tuesday",
                  "it replaced the old pizza place downtown"),
        bare="meal",
    ),
    Domain(
        items=("the novel", "this memoir", "the book", "the short story collection",
               "the biography", "this cookbook", "the debut novel", "the graphic novel"),
        aspects=("writing", "prose", "plot", "ending", "translation", "narrator",
                 "characters", "structure", "final chapter", "illustrations"),
        contexts=("I read it over a long weekend", "a librarian recommended it to me",
                  "I picked it up at an airport shop", "our reading group chose it in May",
                  "it came out in paperback this spring"),
        bare="read",
    ),
    Domain(
        items=("the laptop", "this blender", "the headphones", "the phone", "the vacuum",
               "this coffee maker", "the smartwatch", "the office chair"),
        aspects=("battery", "design", "build quality", "screen", "price", "sound",
                 "customer support", "setup", "keyboard", "packaging", "manual", "warranty"),
        contexts=("I ordered it during a holiday sale", "my old one broke last month",
                  "I have used it every day since March", "a friend gave it to me as a gift",
                  "it arrived two days after I ordered it"),
        bare="purchase",
    ),
    Domain(
        items=("the hotel", "the resort", "the cruise", "the walking tour", "our flight",
               "the guesthouse", "the ski lodge", "the train journey"),
        aspects=("room", "view", "breakfast", "location", "pool", "guide", "staff",
                 "beds", "check-in", "itinerary", "shuttle", "bathroom"),
        contexts=("we stayed there for three nights in June", "we booked it for our anniversary",
                  "I traveled there for a conference", "we arrived late in the evening",
                  "our travel agent arranged everything"),
        bare="trip",
    ),
    Domain(
        items=("the album", "this record", "the band's new single", "the concert",
               "the live recording", "the musical", "the opera", "the jazz set"),
        aspects=("vocals", "production", "lyrics", "melody", "drumming", "orchestra",
                 "sound mix", "setlist", "chorus", "encore"),
        contexts=("I listened to it on my commute", "we caught the show on its opening night",
                  "it was released without much promotion", "my sister played it in the car",
                  "I heard it twice in one week"),
        bare="record",
    ),
    Domain(
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

POS_ADJ: tuple[str, ...] = (
    "great", "excellent", "wonderful", "brilliant", "superb", "delightful", "charming",
    "fantastic", "memorable", "stunning", "gorgeous", "moving", "clever", "witty", "fresh",
    "solid", "impressive", "enjoyable", "pleasant", "satisfying", "flawless", "outstanding",
    "terrific", "lovely", "engaging", "gripping", "elegant", "reliable", "sturdy", "generous",
    "friendly", "attentive", "cozy", "spotless", "smooth", "tasty", "polished", "thoughtful",
    "heartfelt", "inventive", "vibrant", "refreshing", "compelling", "remarkable", "splendid",
    "marvelous", "decent", "warm", "sharp", "inspired",
)
NEG_ADJ: tuple[str, ...] = (
    "terrible", "awful", "dull", "boring", "bland", "mediocre", "disappointing", "clumsy",
    "tedious", "sloppy", "forgettable", "horrible", "dreadful", "lifeless", "weak", "flimsy",
    "rude", "sluggish", "greasy", "stale", "overpriced", "cramped", "noisy", "dirty",
    "confusing", "pretentious", "shallow", "predictable", "lazy", "unbearable", "awkward",
    "painful", "dreary", "cheap", "unreliable", "frustrating", "messy", "soggy", "grim",
    "hollow", "tiresome", "uninspired", "bloated", "lousy", "subpar", "annoying", "grating",
    "poor", "flat", "careless",
)
# Intensity adverbs carry no polarity; they add variety and length only.
INTENSIFIERS: tuple[str, ...] = (
    "", "", "", "really", "truly", "absolutely", "incredibly", "remarkably", "surprisingly",
    "genuinely", "utterly", "rather", "fairly", "quite", "pretty", "somewhat", "consistently",
    "thoroughly", "downright", "simply", "honestly",
)
BE: tuple[str, ...] = ("was", "was", "is", "felt", "seemed", "turned out to be")
POS_VERB: tuple[str, ...] = ("loved", "adored", "enjoyed", "admired", "cherished", "savored")
NEG_VERB: tuple[str, ...] = ("hated", "loathed", "regretted", "disliked", "resented", "endured")
POS_FEEL: tuple[str, ...] = ("cheerful", "inspired", "grateful", "delighted", "energized", "content")
NEG_FEEL: tuple[str, ...] = ("bored", "annoyed", "cheated", "exhausted", "irritated", "empty")
AUDIENCE: tuple[str, ...] = (
    "anyone", "my friends", "families", "first-time visitors", "my coworkers",
    "picky eaters", "casual fans", "serious enthusiasts", "students", "my parents",
)
CLOSERS_POS: tuple[str, ...] = (
    "Worth every penny.", "I will be back.", "Highly recommended.", "Count me in for the next one.",
)
CLOSERS_NEG: tuple[str, ...] = (
    "Save your money.", "Never again.", "Avoid it.", "What a waste of an evening.",
)


PLURAL_ASPECTS = frozenset({
    "vocals", "lyrics", "characters", "illustrations", "beds", "controls", "graphics", "staff",
})


# Every inner tuple lists interchangeable surface forms of one meaning; choosing
# different forms for text_a and text_b is what makes a paraphrase non-verbatim.
Forms = tuple[str, ...]


@dataclass(frozen=True)
class VerbGroup:
    forms: tuple[tuple[str, str, str], ...]  # synonyms as (base, past, participle)
    agent_pools: tuple[str, ...]
    object_pool: str
    antonym: str | None = None  # key of the group with the opposite meaning


VERBS: dict[str, VerbGroup] = {
    "buy": VerbGroup((("buy", "bought", "bought"), ("purchase", "purchased", "purchased"),
                       ("acquire", "acquired", "acquired")), ("org", "person"), "goods", "sell"),
    "sell": VerbGroup((("sell", "sold", "sold"), ("offload", "offloaded", "offloaded")),
                       ("org", "person"), "goods", "buy"),
    "approve": VerbGroup((("approve", "approved", "approved"), ("endorse", "endorsed", "endorsed"),
                           ("pass", "passed", "passed")), ("org",), "proposals", "reject"),
    "reject": VerbGroup((("reject", "rejected", "rejected"), ("turn down", "turned down", "turned down"),
                          ("vote down", "voted down", "voted down")), ("org",), "proposals", "approve"),
    "build": VerbGroup((("build", "built", "built"), ("construct", "constructed", "constructed"),
                         ("put up", "put up", "put up")), ("org",), "structures", "demolish"),
    "demolish": VerbGroup((("demolish", "demolished", "demolished"), ("tear down", "tore down", "torn down"),
                            ("knock down", "knocked down", "knocked down")), ("org",), "structures", "build"),
    "hire": VerbGroup((("hire", "hired", "hired"), ("recruit", "recruited", "recruited"),
                        ("take on", "took on", "taken on")), ("org",), "workers", "fire"),
    "fire": VerbGroup((("fire", "fired", "fired"), ("dismiss", "dismissed", "dismissed"),
                        ("lay off", "laid off", "laid off")), ("org",), "workers", "hire"),
    "open": VerbGroup((("open", "opened", "opened"), ("launch", "launched", "launched")),
                       ("org",), "outlets", "close"),
    "close": VerbGroup((("close", "closed", "closed"), ("shut down", "shut down", "shut down"),
                         ("shut", "shut", "shut")), ("org",), "outlets", "open"),
    "raise": VerbGroup((("raise", "raised", "raised"), ("increase", "increased", "increased"),
                         ("hike", "hiked", "hiked")), ("org",), "rates", "cut"),
    "cut": VerbGroup((("cut", "cut", "cut"), ("reduce", "reduced", "reduced"),
                       ("lower", "lowered", "lowered"), ("slash", "slashed", "slashed")), ("org",), "rates", "raise"),
    "win": VerbGroup((("win", "won", "won"), ("secure", "secured", "secured"),
                       ("clinch", "clinched", "clinched")), ("org", "person"), "prizes", "lose"),
    "lose": VerbGroup((("lose", "lost", "lost"), ("forfeit", "forfeited", "forfeited")),
                       ("org", "person"), "prizes", "win"),
    "accept": VerbGroup((("accept", "accepted", "accepted"), ("take up", "took up", "taken up"),
                          ("agree to", "agreed to", "agreed to")), ("org", "person"), "offers", "decline"),
    "decline": VerbGroup((("decline", "declined", "declined"), ("refuse", "refused", "refused"),
                           ("turn down", "turned down", "turned down")), ("org", "person"), "offers", "accept"),
    # Person-on-person verbs are the ones where swapping roles changes the meaning.
    "praise": VerbGroup((("praise", "praised", "praised"), ("commend", "commended", "commended"),
                          ("applaud", "applauded", "applauded")), ("person",), "person", "criticize"),
    "criticize": VerbGroup((("criticize", "criticized", "criticized"), ("condemn", "condemned", "condemned"),
                             ("fault", "faulted", "faulted")), ("person",), "person", "praise"),
    "thank": VerbGroup((("thank", "thanked", "thanked"), ("credit", "credited", "credited")),
                        ("person",), "person", "blame"),
    "blame": VerbGroup((("blame", "blamed", "blamed"),), ("person",), "person", "thank"),
    "support": VerbGroup((("support", "supported", "supported"), ("back", "backed", "backed")),
                          ("person",), "person", "oppose"),
    "oppose": VerbGroup((("oppose", "opposed", "opposed"), ("challenge", "challenged", "challenged")),
                         ("person",), "person", "support"),
    "defeat": VerbGroup((("defeat", "defeated", "defeated"), ("beat", "beat", "beaten")),
                         ("person",), "person"),
    "interview": VerbGroup((("interview", "interviewed", "interviewed"), ("question", "questioned", "questioned")),
                            ("person",), "person"),
    "hug": VerbGroup((("hug", "hugged", "hugged"), ("embrace", "embraced", "embraced")),
                      ("person",), "person"),
}
VERB_KEYS: tuple[str, ...] = tuple(VERBS)

ORGS: tuple[Forms, ...] = (
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
FIRST: tuple[str, ...] = (
    "Maria", "James", "Aisha", "Chen", "Olga", "Pedro", "Fatima", "Liam", "Yuki", "Kwame",
    "Sofia", "Daniel", "Priya", "Omar", "Elena", "Marcus", "Ingrid", "Tariq", "Hannah", "Diego",
    "Nadia", "Victor", "Grace", "Mateo", "Leila", "Samuel", "Anya", "Rahul", "Claire", "Tomas",
)
LAST: tuple[str, ...] = (
    "Lopez", "Okafor", "Nakamura", "Schmidt", "Patel", "Novak", "Haddad", "Murphy", "Silva",
    "Kowalski", "Andersen", "Mensah", "Romero", "Ivanova", "Dubois", "Kim", "Brennan", "Costa",
    "Yilmaz", "Fischer", "Moreau", "Osei", "Larsen", "Bianchi", "Reyes", "Sato", "Walsh",
    "Ahmed", "Petrov", "Grant",
)
ROLES: tuple[str, ...] = (
    "the mayor", "the senator", "the coach", "the chief executive", "the striker", "the judge",
    "the governor", "the director", "the union leader", "the minister", "the professor",
    "the candidate", "the goalkeeper", "the prosecutor", "the head nurse",
)

OBJECTS: dict[str, tuple[tuple[Forms, bool], ...]] = {
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

TIMES: tuple[Forms, ...] = (
    ("on Monday",), ("on Tuesday",), ("on Wednesday",), ("on Thursday",), ("on Friday",),
    ("in March",), ("in April",), ("in June",), ("in September",), ("in November",),
    ("last week", "a week ago"), ("last month", "a month ago"), ("yesterday",),
    ("earlier this year", "earlier in the year"), ("late last year", "toward the end of last year"),
    ("over the weekend", "during the weekend"), ("last spring",), ("this morning",),
)
PLACES: tuple[str, ...] = (
    "Denver", "Lyon", "Osaka", "Lagos", "Toronto", "Krakow", "Seville", "Melbourne", "Nairobi",
    "Porto", "Glasgow", "Austin", "Hamburg", "Lima", "Manila", "Tallinn", "Bologna", "Dublin",
    "Cape Town", "Montreal", "Leeds", "Valencia", "Pune", "Ghent", "Cork", "Phoenix",
)
REASONS: tuple[Forms, ...] = (
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
ADVERBS: tuple[tuple[Forms, Forms], ...] = (
    (("quickly", "swiftly", "rapidly"), ("slowly", "gradually")),
    (("quietly", "discreetly"), ("publicly", "openly")),
    (("reluctantly", "grudgingly"), ("eagerly", "enthusiastically")),
    (("temporarily",), ("permanently",)),
    (("unexpectedly", "surprisingly"), ("predictably",)),
)
SOURCES: tuple[tuple[str, str], ...] = (
    ("officials", "said"), ("a spokesperson", "said"), ("local media", "reported"),
    ("a statement", "said"), ("the newspaper", "reported"), ("witnesses", "said"),
    ("two people familiar with the matter", "said"), ("news reports", "said"),
)
ONES = ("", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
         "eighteen", "nineteen")
TENS = ("", "", "twenty", "thirty", "forty", "fifty")
