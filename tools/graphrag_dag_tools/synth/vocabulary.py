"""Words and templates of the synthetic index: syllables for names, sentence templates for
introductions, relationships and claims, and report themes."""

from __future__ import annotations

import numpy as np


# Syllables: repeats weight the common sounds; clusters and diphthongs are rare.
ONSETS = ["b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "j",
           "k", "l", "m", "n", "r", "s", "t", "d", "br", "dr", "st", "th", "sh", "tr"]
VOWELS = ["a", "e", "i", "o", "u", "a", "e", "i", "o", "a", "e", "ai"]
CODAS = ["", "", "", "", "n", "r", "l", "s", "n", "r", "th", "k", "m", "nd", "x"]

TYPES = ["PERSON", "ORGANIZATION", "GEO", "EVENT"]
TYPE_P = [0.4, 0.15, 0.3, 0.15]
ORG_SUFFIX = ["GUILD", "COMPANY", "COUNCIL", "LEAGUE", "SOCIETY", "BANK", "ORDER", "TRADING HOUSE",
               "ACADEMY", "WORKS", "FOUNDRY", "BROTHERHOOD"]
GEO_FORMS = ["{w}", "{w}", "{w}", "PORT {w}", "{w} VALLEY", "LAKE {w}", "{w} HILLS", "MOUNT {w}"]
EVENT_SUFFIX = ["FESTIVAL", "FLOOD", "TREATY", "FAIR", "UPRISING", "EXPEDITION", "TRIAL", "FIRE",
                 "CONCORD", "HARVEST", "REGATTA", "FAMINE"]

ADJECTIVES = ["respected", "ambitious", "quiet", "influential", "ancient", "prosperous", "troubled",
               "well-known", "secretive", "modest", "celebrated", "stubborn", "generous", "cautious",
               "restless"]
INTRO = {
    "PERSON": ("{t} is a {a} {x} who lives in the {y} quarter.",
               ["merchant", "scholar", "shipwright", "magistrate", "weaver", "physician", "captain",
                "archivist", "brewer", "mapmaker", "goldsmith", "teacher", "soldier", "miller",
                "clerk", "innkeeper", "astronomer", "tax collector", "smith", "courier"],
               ["northern", "harbour", "old", "market", "river", "temple", "eastern", "mill",
                "garden", "western"]),
    "ORGANIZATION": ("{t} is a {a} {x} that trades in {y}.",
                     ["merchant guild", "trading company", "city council", "craft league",
                      "learned society", "private bank", "religious order", "shipping firm"],
                     ["salt", "timber", "wool", "copper", "grain", "spices", "glass", "books",
                      "wine", "dyes"]),
    "GEO": ("{t} is a {a} {x} known for its {y}.",
            ["river port", "mountain town", "market village", "walled city", "island", "valley",
             "mining settlement", "coastal region"],
            ["orchards", "bridges", "harbour", "quarries", "fairs", "vineyards", "libraries",
             "fisheries", "mills", "hot springs"]),
    "EVENT": ("{t} was a {a} {x} that changed the fortunes of the {y}.",
              ["gathering", "disaster", "negotiation", "public celebration", "revolt", "journey",
               "court case", "competition"],
              ["guilds", "harbour towns", "farmers", "old families", "river traders", "miners",
               "city", "northern provinces"]),
}
# Relationship sentences: the sentence is also the relationship's description.
REL_TEMPLATES = [
    "{s} works closely with {t}.",
    "{s} supplies timber and rope to {t}.",
    "{s} owes a large debt to {t}.",
    "{s} is a long-standing rival of {t}.",
    "{s} sought the advice of {t}.",
    "{s} was founded with money from {t}.",
    "{s} travelled to {t} on business.",
    "{s} is related by marriage to {t}.",
    "{s} signed a trade agreement with {t}.",
    "{s} publicly criticised {t}.",
    "{s} shares a warehouse with {t}.",
    "{s} was trained by {t}.",
    "{s} protects the interests of {t}.",
    "{s} sends letters every month to {t}.",
    "{s} competes with {t} for river cargo.",
    "{s} is remembered in the records of {t}.",
    "{s} hosted a dinner in honour of {t}.",
    "{s} bought land near {t}.",
    "{s} mediated a dispute involving {t}.",
    "{s} depends on {t} for grain.",
]
# Claims: (type, source sentence, description, needs an object).
CLAIM_TEMPLATES = [
    ("FINANCIAL TRANSACTION", "{s} paid {n} silver crowns to {o} in {y}.",
     "{s} made a payment of {n} silver crowns to {o} in {y}.", True),
    ("CONTRACT", "{s} signed a supply contract with {o} in {y}.",
     "{s} entered a supply contract with {o} in {y}.", True),
    ("DISPUTE", "{s} filed a complaint against {o} over unpaid debts in {y}.",
     "{s} brought a complaint about unpaid debts against {o} in {y}.", True),
    ("OWNERSHIP", "{s} acquired a controlling share of {o} in {y}.",
     "{s} became the controlling owner of {o} in {y}.", True),
    ("SMUGGLING", "{s} was accused of smuggling salt through {o} in {y}.",
     "{s} is accused of smuggling salt by way of {o} in {y}.", True),
    ("ALLIANCE", "{s} formed an alliance with {o} in {y}.",
     "{s} allied itself with {o} in {y}.", True),
    ("INVESTIGATION", "{s} was investigated by the harbour wardens in {y}.",
     "{s} was the subject of an investigation by the harbour wardens in {y}.", False),
    ("AWARD", "{s} received the civic medal of merit in {y}.",
     "{s} was awarded the civic medal of merit in {y}.", False),
    ("FRAUD", "{s} was suspected of falsifying the grain ledgers in {y}.",
     "{s} may have falsified the grain ledgers in {y}.", False),
    ("RELOCATION", "{s} moved to the southern district in {y}.",
     "{s} relocated to the southern district in {y}.", False),
]
STATUSES = np.array(["TRUE", "SUSPECTED", "FALSE"])
STATUS_P = [0.8, 0.15, 0.05]
STATUS_WORDS = {"TRUE": "It is confirmed that", "SUSPECTED": "It is suspected that",
                 "FALSE": "It is claimed, but disputed, that"}
FILLERS = [
    "The surviving records from this period are incomplete.",
    "Several letters from that winter were later lost in a fire.",
    "Local chroniclers describe the weather as unusually harsh.",
    "Prices at the market rose steadily during those months.",
    "Travellers often remarked on the noise of the workshops.",
    "Much of this account comes from the harbour registers.",
    "Rumours spread quickly along the river roads.",
    "The town bells rang at dawn and at dusk.",
]
THEMES = ["Trade Network", "Harbour Alliance", "Guild Circle", "River Community", "Family Network",
           "Market Coalition", "Council Faction", "Craft Federation"]




def made_up_words(rng: np.random.Generator, n: int, syllables: np.ndarray) -> list[str]:
    """`n` pronounceable upper-case words of the given syllable counts (open syllables, then a
    closed last one)."""
    onsets = np.array(ONSETS, dtype=object)
    vowels = np.array(VOWELS, dtype=object)
    codas = np.array(CODAS, dtype=object)
    word = np.full(n, "", dtype=object)
    most = int(syllables.max()) if n else 0
    for k in range(most):
        active = syllables > k
        last = syllables == k + 1
        onset = onsets[rng.integers(0, len(onsets), n)]
        if k == 0:  # some words start with a vowel
            onset = np.where(rng.random(n) < 0.15, "", onset)
        piece = onset + vowels[rng.integers(0, len(vowels), n)]
        piece = np.where(last, piece + codas[rng.integers(0, len(codas), n)], piece)
        word = np.where(active, word + piece, word)
    return [w.upper() for w in word]


def entity_titles(rng: np.random.Generator, types: np.ndarray) -> list[str]:
    """One unique title per entity, shaped by its type; duplicates are redrawn."""
    n = len(types)
    titles: list[str | None] = [None] * n
    seen: set[str] = set()
    todo = np.arange(n)
    while len(todo):
        m = len(todo)
        first = made_up_words(rng, m, np.where(rng.random(m) < 0.3, 3, 2))
        second = made_up_words(rng, m, np.where(rng.random(m) < 0.4, 3, 2))
        org = rng.integers(0, len(ORG_SUFFIX), m)
        geo = rng.integers(0, len(GEO_FORMS), m)
        event = rng.integers(0, len(EVENT_SUFFIX), m)
        redo = []
        for j, i in enumerate(todo.tolist()):
            kind = types[i]
            if kind == "PERSON":
                title = f"{first[j]} {second[j]}"
            elif kind == "ORGANIZATION":
                title = f"{first[j]} {ORG_SUFFIX[org[j]]}"
            elif kind == "GEO":
                title = GEO_FORMS[geo[j]].format(w=first[j])
            else:
                title = f"{first[j]} {EVENT_SUFFIX[event[j]]}"
            if title in seen:
                redo.append(i)
            else:
                seen.add(title)
                titles[i] = title
        todo = np.array(redo, dtype=np.int64)
    return titles  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------
# structure

