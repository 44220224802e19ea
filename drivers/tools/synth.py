"""A synthetic index in Microsoft GraphRAG v3 parquet format, for benchmarks at any scale.

`write_synthetic_index(out, entities=N, seed=S)` writes the seven v3 tables (entities,
relationships, communities, community_reports, covariates, text_units, documents) with the file
names, column names and column types of a real GraphRAG 3.x output, so both our importer and
GraphRAG itself can read them. The data is invented but shaped like real output:

- entity titles are unique, upper-case, pronounceable names built from syllables
  ("KARVEN TOLIS", "ORVADELL VALLEY", "MIRAN GUILD");
- about 3 relationships per entity with a power-law degree distribution: every entity links to
  a local hub of its community, further endpoints are drawn Zipf-weighted (global hubs) or from
  the same community (local structure); float weights in [1, 10], skewed low;
- a 3-4 level community hierarchy (level 0 coarsest) made by recursively splitting contiguous
  ranges of a hidden entity order, so members of a parent are exactly the union of its children
  and most relationships stay inside communities; about 1 community per 7 entities;
- one report per community (title, summary, findings, full_content as GraphRAG writes it, rank);
- about 1 claim per entity (subject/object hold entity titles, as in GraphRAG) whose
  `source_text` is an exact sentence of its text unit;
- about 2 text units per entity: sentences generated from templates that mention their
  entities (an introduction per entity, one sentence per relationship, one per claim), grouped
  so that neighbouring entities share units; each document's text is its units' texts joined
  by a blank line, so every unit can be located in its document.

Everything comes from one `numpy.random.Generator(seed)` and no clock, so the same seed gives
the same table contents (and, with the same pyarrow, byte-identical files). The bulk work is
numpy-vectorised and tables are built from columns: 100,000 entities take seconds.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from graphrag_dag.dataflows.common.errors import BadInput

TABLES = (
    "entities",
    "relationships",
    "communities",
    "community_reports",
    "covariates",
    "text_units",
    "documents",
)
MARKER = "synth.json"  # identifies a folder this generator wrote (so it may be overwritten)
GENERATOR = "graphrag-dag synth"

# Shape parameters.
EDGES_PER_ENTITY = 3.0
UNITS_PER_ENTITY = 2.0
CLAIMS_PER_ENTITY = 1.0
UNITS_PER_DOCUMENT = 50
LEAF_SIZE = 8  # typical size of a deepest-level community
BRANCHING = 4  # typical number of children of a split community
ZIPF_EXPONENT = 0.8  # endpoint popularity ~ rank ** -exponent
PERIOD = "2025-01-01"  # fixed (not today's date) so output is reproducible
CREATION_DATE = "2025-01-01 00:00:00 +0000"

# --------------------------------------------------------------------------------------------
# vocabulary

# Syllables: repeats weight the common sounds; clusters and diphthongs are rare.
_ONSETS = ["b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "j",
           "k", "l", "m", "n", "r", "s", "t", "d", "br", "dr", "st", "th", "sh", "tr"]
_VOWELS = ["a", "e", "i", "o", "u", "a", "e", "i", "o", "a", "e", "ai"]
_CODAS = ["", "", "", "", "n", "r", "l", "s", "n", "r", "th", "k", "m", "nd", "x"]

_TYPES = ["PERSON", "ORGANIZATION", "GEO", "EVENT"]
_TYPE_P = [0.4, 0.15, 0.3, 0.15]
_ORG_SUFFIX = ["GUILD", "COMPANY", "COUNCIL", "LEAGUE", "SOCIETY", "BANK", "ORDER", "TRADING HOUSE",
               "ACADEMY", "WORKS", "FOUNDRY", "BROTHERHOOD"]
_GEO_FORMS = ["{w}", "{w}", "{w}", "PORT {w}", "{w} VALLEY", "LAKE {w}", "{w} HILLS", "MOUNT {w}"]
_EVENT_SUFFIX = ["FESTIVAL", "FLOOD", "TREATY", "FAIR", "UPRISING", "EXPEDITION", "TRIAL", "FIRE",
                 "CONCORD", "HARVEST", "REGATTA", "FAMINE"]

_ADJECTIVES = ["respected", "ambitious", "quiet", "influential", "ancient", "prosperous", "troubled",
               "well-known", "secretive", "modest", "celebrated", "stubborn", "generous", "cautious",
               "restless"]
_INTRO = {
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
_REL_TEMPLATES = [
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
_CLAIM_TEMPLATES = [
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
_STATUSES = np.array(["TRUE", "SUSPECTED", "FALSE"])
_STATUS_P = [0.8, 0.15, 0.05]
_STATUS_WORDS = {"TRUE": "It is confirmed that", "SUSPECTED": "It is suspected that",
                 "FALSE": "It is claimed, but disputed, that"}
_FILLERS = [
    "The surviving records from this period are incomplete.",
    "Several letters from that winter were later lost in a fire.",
    "Local chroniclers describe the weather as unusually harsh.",
    "Prices at the market rose steadily during those months.",
    "Travellers often remarked on the noise of the workshops.",
    "Much of this account comes from the harbour registers.",
    "Rumours spread quickly along the river roads.",
    "The town bells rang at dawn and at dusk.",
]
_THEMES = ["Trade Network", "Harbour Alliance", "Guild Circle", "River Community", "Family Network",
           "Market Coalition", "Council Faction", "Craft Federation"]


# --------------------------------------------------------------------------------------------
# helpers


def _string_array(data: bytes, width: int, n: int) -> pa.Array:
    """`n` fixed-width ASCII strings packed in `data`, as a pyarrow string array (no Python loop)."""
    offsets = np.arange(n + 1, dtype=np.int32) * width
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data))


def _uuids(rng: np.random.Generator, n: int, dashes: bool = True) -> pa.Array:
    """`n` random version-4 UUID strings (dashed like GraphRAG's entity ids, or 32 hex digits)."""
    raw = np.frombuffer(rng.bytes(16 * n), dtype=np.uint8).reshape(n, 16).copy()
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
    hexdigits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    digits = np.empty((n, 32), dtype=np.uint8)
    digits[:, 0::2] = hexdigits[raw >> 4]
    digits[:, 1::2] = hexdigits[raw & 0x0F]
    if not dashes:
        return _string_array(digits.tobytes(), 32, n)
    out = np.full((n, 36), ord("-"), dtype=np.uint8)
    out[:, 0:8], out[:, 9:13], out[:, 14:18] = digits[:, 0:8], digits[:, 8:12], digits[:, 12:16]
    out[:, 19:23], out[:, 24:36] = digits[:, 16:20], digits[:, 20:32]
    return _string_array(out.tobytes(), 36, n)


def _random_sizes(rng: np.random.Generator, total: int, parts: int, minimum: int = 1) -> np.ndarray:
    """`parts` sizes >= `minimum` summing to `total`, from uniform cut points (Dirichlet(1) shares)."""
    extra = total - parts * minimum
    if parts <= 1:
        return np.array([total], dtype=np.int64)
    cuts = np.sort(rng.integers(0, extra + 1, parts - 1))
    return np.diff(np.concatenate(([0], cuts, [extra]))).astype(np.int64) + minimum


def _ranges(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, flat indices) of the concatenated ranges [starts[i], ends[i])."""
    lengths = (ends - starts).astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1] - starts, lengths)
    return offsets, flat


def _grouped(keys: np.ndarray, values: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, values) of `values` grouped by integer `keys` in 0..groups-1, stable within a group."""
    order = np.argsort(keys, kind="stable")
    offsets = np.zeros(groups + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=groups), out=offsets[1:])
    return offsets, values[order]


class _Lists:
    """A list<string> column kept as numbers: row i holds strings[indices[offsets[i]:offsets[i+1]]].

    Only a slice of rows is ever turned into Arrow strings, so big list columns (text unit ids
    per community) never exist in memory all at once.
    """

    def __init__(self, offsets: np.ndarray, strings: pa.Array, indices: np.ndarray) -> None:
        self.offsets, self.strings, self.indices = offsets, strings, indices

    def __call__(self, lo: int, hi: int) -> pa.Array:
        a, b = int(self.offsets[lo]), int(self.offsets[hi])
        values = self.strings.take(pa.array(self.indices[a:b], type=pa.int64()))
        return pa.ListArray.from_arrays(pa.array((self.offsets[lo : hi + 1] - a).astype(np.int32)), values)


def _column(value: object, lo: int, hi: int) -> pa.Array:
    """Rows lo..hi of a column given as an Arrow array, numpy array, list of str/None or callable."""
    if isinstance(value, (pa.Array, pa.ChunkedArray)):
        return value.slice(lo, hi - lo)
    if isinstance(value, np.ndarray):
        return pa.array(value[lo:hi])
    if isinstance(value, list):
        return pa.array(value[lo:hi], type=pa.string())
    return value(lo, hi)  # type: ignore[operator]


def _unique_pairs(a: np.ndarray, b: np.ndarray, b_count: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (a, b) pairs, sorted by a then b."""
    keys = np.unique(a.astype(np.int64) * b_count + b.astype(np.int64))
    return keys // b_count, keys % b_count


def _words(rng: np.random.Generator, n: int, syllables: np.ndarray) -> list[str]:
    """`n` pronounceable upper-case words of the given syllable counts (open syllables, then a
    closed last one)."""
    onsets = np.array(_ONSETS, dtype=object)
    vowels = np.array(_VOWELS, dtype=object)
    codas = np.array(_CODAS, dtype=object)
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


def _titles(rng: np.random.Generator, types: np.ndarray) -> list[str]:
    """One unique title per entity, shaped by its type; duplicates are redrawn."""
    n = len(types)
    titles: list[str | None] = [None] * n
    seen: set[str] = set()
    todo = np.arange(n)
    while len(todo):
        m = len(todo)
        first = _words(rng, m, np.where(rng.random(m) < 0.3, 3, 2))
        second = _words(rng, m, np.where(rng.random(m) < 0.4, 3, 2))
        org = rng.integers(0, len(_ORG_SUFFIX), m)
        geo = rng.integers(0, len(_GEO_FORMS), m)
        event = rng.integers(0, len(_EVENT_SUFFIX), m)
        redo = []
        for j, i in enumerate(todo.tolist()):
            kind = types[i]
            if kind == "PERSON":
                title = f"{first[j]} {second[j]}"
            elif kind == "ORGANIZATION":
                title = f"{first[j]} {_ORG_SUFFIX[org[j]]}"
            elif kind == "GEO":
                title = _GEO_FORMS[geo[j]].format(w=first[j])
            else:
                title = f"{first[j]} {_EVENT_SUFFIX[event[j]]}"
            if title in seen:
                redo.append(i)
            else:
                seen.add(title)
                titles[i] = title
        todo = np.array(redo, dtype=np.int64)
    return titles  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------
# structure


class _Hierarchy:
    """Communities over entity *positions* 0..n-1: each is a contiguous range [start, end)."""

    def __init__(self, rng: np.random.Generator, n: int) -> None:
        self.levels = 3 if n < 1500 else 4
        # Level 0 holds `roots` communities; each level down splits communities ~`branching` ways
        # until ~LEAF_SIZE entities remain (smaller leaves and binary splits for tiny indexes).
        deepest = self.levels - 1
        roots = max(1, min(max(2, round(n / (LEAF_SIZE * BRANCHING**deepest))), n // 2))
        branching = max(2.0, (n / (LEAF_SIZE * roots)) ** (1 / deepest))
        target = [n / (roots * branching**lv) for lv in range(self.levels)]
        level: list[int] = []
        start: list[int] = []
        end: list[int] = []
        parent: list[int] = []
        children: list[list[int]] = []

        def add(lv: int, s: int, e: int, up: int) -> None:
            level.append(lv)
            start.append(s)
            end.append(e)
            parent.append(up)
            children.append([])
            if up >= 0:
                children[up].append(len(level) - 1)

        s = 0
        for size in _random_sizes(rng, n, roots, minimum=min(2, n)).tolist():
            add(0, s, s + size, -1)
            s += size
        frontier = list(range(len(level)))
        for lv in range(1, self.levels):
            nxt: list[int] = []
            for c in frontier:
                size = end[c] - start[c]
                k = min(round(size / target[lv]), size // 4)
                if k < 2:
                    continue  # a small community is not split further (as in Leiden output)
                s = start[c]
                for child_size in _random_sizes(rng, size, k, minimum=2).tolist():
                    add(lv, s, s + child_size, c)
                    nxt.append(len(level) - 1)
                    s += child_size
            frontier = nxt
        self.level = np.array(level, dtype=np.int64)
        self.start = np.array(start, dtype=np.int64)
        self.end = np.array(end, dtype=np.int64)
        self.parent = np.array(parent, dtype=np.int64)
        self.children = children
        self.count = len(level)
        # community of each position at each level (-1 below a position's deepest community)
        self.at_level = np.full((self.levels, n), -1, dtype=np.int64)
        for c in range(self.count):
            self.at_level[level[c], start[c] : end[c]] = c
        self.leaf = self.at_level[0].copy()
        for lv in range(1, self.levels):
            deeper = self.at_level[lv] >= 0
            self.leaf[deeper] = self.at_level[lv][deeper]
        up = self.parent[self.leaf]
        self.group = np.where(up >= 0, up, self.leaf)  # the community one level above the leaf


def _pick_in(rng: np.random.Generator, start: np.ndarray, size: np.ndarray) -> np.ndarray:
    """A position inside each range, skewed towards the range's start (its local hubs)."""
    u = rng.random(len(start))
    return start + np.minimum((size * u * u).astype(np.int64), size - 1)


def _edges(rng: np.random.Generator, n: int, h: _Hierarchy) -> tuple[np.ndarray, np.ndarray]:
    """Distinct undirected (source, target) position pairs, about EDGES_PER_ENTITY * n of them."""
    if n < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    wanted = min(round(EDGES_PER_ENTITY * n), max(1, n * (n - 1) // 4))
    popularity = (rng.permutation(n) + 1.0) ** -ZIPF_EXPONENT
    cdf = np.cumsum(popularity)
    cdf /= cdf[-1]

    def zipf(m: int) -> np.ndarray:
        return np.minimum(np.searchsorted(cdf, rng.random(m), side="right"), n - 1)

    leaf_start, leaf_size = h.start[h.leaf], h.end[h.leaf] - h.start[h.leaf]
    group_start, group_size = h.start[h.group], h.end[h.group] - h.start[h.group]
    # Every entity links to a hub of its own leaf community, so none is isolated.
    everyone = np.arange(n, dtype=np.int64)
    hub = _pick_in(rng, leaf_start, leaf_size)
    own = hub == everyone  # a hub links to the next member of its community instead of itself
    hub[own] = leaf_start[own] + (everyone[own] - leaf_start[own] + 1) % leaf_size[own]
    sources = [everyone]
    targets = [hub]
    kept = np.zeros(0, dtype=np.int64)
    for _ in range(20):
        m = max(wanted, 64)
        src = zipf(m)
        mode = rng.random(m)
        local = _pick_in(rng, leaf_start[src], leaf_size[src])
        regional = _pick_in(rng, group_start[src], group_size[src])
        tgt = np.where(mode < 0.3, local, np.where(mode < 0.6, regional, zipf(m)))
        sources.append(src)
        targets.append(tgt)
        s, t = np.concatenate(sources), np.concatenate(targets)
        ok = np.flatnonzero(s != t)
        key = np.minimum(s[ok], t[ok]) * n + np.maximum(s[ok], t[ok])
        _, first = np.unique(key, return_index=True)
        kept = ok[np.sort(first)]
        if len(kept) >= wanted:
            break
    kept = kept[:wanted]
    return np.concatenate(sources)[kept], np.concatenate(targets)[kept]


# --------------------------------------------------------------------------------------------
# the writer


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise BadInput(f"--out {out} is a non-empty folder not written by synth; choose an empty or new folder")


def write_synthetic_index(
    out: Path | str,
    entities: int,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, int]:
    """Write a synthetic GraphRAG v3 index of `entities` entities to the folder `out`.

    Returns the row count of each table (keyed by table name, e.g. "entities"). `out` may be new,
    empty or an earlier synth output (overwritten); anything else is `BadInput`, as is a
    non-positive entity count.
    """
    if isinstance(entities, bool) or not isinstance(entities, (int, np.integer)) or entities <= 0:
        raise BadInput(f"entities must be a positive integer, not {entities!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise BadInput(f"seed must be an integer >= 0, not {seed!r}")
    n = int(entities)
    out = Path(out).expanduser()
    _check_out(out)
    say = progress or (lambda _msg: None)
    rng = np.random.default_rng(seed)

    # ---- entities (rows) and their hidden order (positions): entity at position p is row perm[p]
    types = np.array(_TYPES)[rng.choice(len(_TYPES), n, p=_TYPE_P)]
    titles = _titles(rng, types)
    entity_ids = _uuids(rng, n)
    perm = rng.permutation(n)
    title_by_pos = [titles[r] for r in perm.tolist()]
    type_by_pos = types[perm]
    ids_by_pos = entity_ids.take(pa.array(perm))

    h = _Hierarchy(rng, n)
    src, tgt = _edges(rng, n, h)
    m = len(src)
    degree_pos = np.bincount(src, minlength=n) + np.bincount(tgt, minlength=n)
    weight = np.round(1.0 + 9.0 * rng.beta(1.2, 4.0, m), 1)
    say(f"synth: {n} entities, {m} relationships, {h.count} communities on {h.levels} levels")

    # ---- claims: subjects partly uniform, partly popular; objects from the subject's community
    c_count = round(CLAIMS_PER_ENTITY * n)
    uniform = rng.integers(0, n, c_count)
    popular = src[rng.integers(0, m, c_count)] if m else uniform
    subj = np.where(rng.random(c_count) < 0.6, uniform, popular)
    claim_kind = rng.integers(0, len(_CLAIM_TEMPLATES), c_count)
    needs_object = np.array([t[3] for t in _CLAIM_TEMPLATES])[claim_kind]
    obj = _pick_in(rng, h.start[h.group[subj]], (h.end - h.start)[h.group[subj]])
    obj = np.where(needs_object & (obj != subj), obj, -1)
    claim_kind = np.where(needs_object & (obj < 0), 6 + claim_kind % 4, claim_kind)  # objectless kinds
    claim_year = rng.integers(1700, 1900, c_count)
    claim_amount = rng.integers(5, 5000, c_count)
    claim_status = _STATUSES[rng.choice(3, c_count, p=_STATUS_P)]
    claim_month = rng.integers(1, 13, c_count)
    claim_dated = rng.random(c_count) < 0.9

    # ---- sentences: an intro per entity, one per relationship, one per claim, in position order
    kind = np.concatenate([np.zeros(n, np.int64), np.ones(m, np.int64), np.full(c_count, 2, np.int64)])
    item = np.concatenate([np.arange(n), np.arange(m), np.arange(c_count)])
    anchor = np.concatenate([np.arange(n), src, subj])
    order = np.lexsort((item, kind, anchor))
    kind, item = kind[order], item[order]
    s_count = len(order)
    u_count = max(1, min(round(UNITS_PER_ENTITY * n), s_count))
    unit_sizes = _random_sizes(rng, s_count, u_count, minimum=1)
    sentence_unit = np.repeat(np.arange(u_count), unit_sizes)
    filler = np.where(rng.random(u_count) < 0.3, rng.integers(0, len(_FILLERS), u_count), -1)

    adjective = rng.integers(0, len(_ADJECTIVES), n)
    intro_x = rng.integers(0, 1 << 30, n)
    intro_y = rng.integers(0, 1 << 30, n)
    intro_year = rng.integers(1600, 1890, n)
    intro: list[str] = []
    for p, (t, a, x, y, yr) in enumerate(zip(type_by_pos.tolist(), adjective.tolist(), intro_x.tolist(),
                                             intro_y.tolist(), intro_year.tolist(), strict=True)):
        template, xs, ys = _INTRO[t]
        if t == "ORGANIZATION" and yr % 2:
            template = "{t} is a {a} {x} founded in " + str(yr) + "."
        intro.append(template.format(t=title_by_pos[p], a=_ADJECTIVES[a], x=xs[x % len(xs)], y=ys[y % len(ys)]))
    rel_template = rng.integers(0, len(_REL_TEMPLATES), m)
    rel_text = [_REL_TEMPLATES[k].format(s=title_by_pos[s], t=title_by_pos[t])
                for k, s, t in zip(rel_template.tolist(), src.tolist(), tgt.tolist(), strict=True)]
    claim_source: list[str] = []
    claim_desc: list[str] = []
    for k, s, o, y, a, st in zip(claim_kind.tolist(), subj.tolist(), obj.tolist(), claim_year.tolist(),
                                 claim_amount.tolist(), claim_status.tolist(), strict=True):
        _, sentence, description, _ = _CLAIM_TEMPLATES[k]
        values = {"s": title_by_pos[s], "o": title_by_pos[o] if o >= 0 else "", "y": y, "n": a}
        claim_source.append(sentence.format(**values))
        claim_desc.append(f"{_STATUS_WORDS[st]} {description.format(**values)}")
    by_kind = (intro, rel_text, claim_source)
    sentences = [by_kind[k][i] for k, i in zip(kind.tolist(), item.tolist(), strict=True)]

    unit_bounds = np.concatenate(([0], np.cumsum(unit_sizes))).tolist()
    unit_text: list[str] = []
    for u in range(u_count):
        parts = sentences[unit_bounds[u] : unit_bounds[u + 1]]
        if filler[u] >= 0:
            parts = [*parts, _FILLERS[filler[u]]]
        unit_text.append(" ".join(parts))
    del sentences, by_kind
    unit_ids = pa.array([hashlib.sha512(f"{u}\x00{t}".encode()).hexdigest() for u, t in enumerate(unit_text)])
    d_count = max(1, round(u_count / UNITS_PER_DOCUMENT))
    doc_sizes = _random_sizes(rng, u_count, d_count, minimum=1)
    rel_ids = _uuids(rng, m)
    claim_ids = _uuids(rng, c_count)
    community_ids = _uuids(rng, h.count)

    # ---- write each table as soon as it is built (memory stays bounded by the largest table);
    # the marker goes first: from then on the folder is ours to overwrite.
    counts: dict[str, int] = {}
    out.mkdir(parents=True, exist_ok=True)
    marker = {"generator": GENERATOR, "entities": n, "seed": seed}
    (out / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")

    def emit(name: str, rows: int, columns: dict[str, object], batch: int) -> None:
        """Write `rows` rows in row groups of `batch` rows, building each group's columns only then."""
        writer = None
        try:
            for lo in range(0, max(rows, 1), batch):
                hi = min(lo + batch, rows)
                table = pa.table({key: _column(value, lo, hi) for key, value in columns.items()})
                if writer is None:
                    writer = pq.ParquetWriter(out / f"{name}.parquet", table.schema, compression="snappy")
                writer.write_table(table)
        finally:
            if writer is not None:
                writer.close()
        counts[name] = rows
        say(f"synth: wrote {name}.parquet ({rows} rows)")

    # ---- documents.parquet: each document's text is its units' texts joined by a blank line
    doc_bounds = np.concatenate(([0], np.cumsum(doc_sizes))).astype(np.int64)
    unit_doc = np.repeat(np.arange(d_count, dtype=np.int64), doc_sizes)
    bounds = doc_bounds.tolist()
    doc_hashes = []
    for d in range(d_count):  # sha512 of the text, as GraphRAG, without building the text
        digest = hashlib.sha512()
        for u in range(bounds[d], bounds[d + 1]):
            digest.update(unit_text[u].encode() if u == bounds[d] else b"\n\n" + unit_text[u].encode())
        doc_hashes.append(digest.hexdigest())
    doc_ids = pa.array(doc_hashes, type=pa.string())
    del doc_hashes

    def doc_text(lo: int, hi: int) -> pa.Array:
        return pa.array(["\n\n".join(unit_text[bounds[d] : bounds[d + 1]]) for d in range(lo, hi)], type=pa.string())

    emit("documents", d_count, {
        "id": doc_ids,
        "human_readable_id": np.arange(d_count, dtype=np.int64),
        "title": [f"synthetic-{d:05d}.txt" for d in range(d_count)],
        "text": doc_text,
        "text_unit_ids": _Lists(doc_bounds, unit_ids, np.arange(u_count, dtype=np.int64)),
        "creation_date": [CREATION_DATE] * d_count,
        "raw_data": lambda lo, hi: pa.nulls(hi - lo),
    }, batch=250)

    # where each relationship / claim / entity is mentioned
    rel_unit = np.empty(m, dtype=np.int64)
    rel_unit[item[kind == 1]] = sentence_unit[kind == 1]
    claim_unit = np.empty(c_count, dtype=np.int64)
    claim_unit[item[kind == 2]] = sentence_unit[kind == 2]
    intro_unit = np.empty(n, dtype=np.int64)
    intro_unit[item[kind == 0]] = sentence_unit[kind == 0]
    del kind, item, sentence_unit
    has_obj = obj >= 0
    mention_pos = np.concatenate([np.arange(n), src, tgt, subj, obj[has_obj]])
    mention_unit = np.concatenate([intro_unit, rel_unit, rel_unit, claim_unit, claim_unit[has_obj]])
    mention_row = perm[mention_pos]

    # ---- text_units.parquet
    ue_unit, ue_row = _unique_pairs(mention_unit, mention_row, n)
    ue_offsets = np.zeros(u_count + 1, dtype=np.int64)
    np.cumsum(np.bincount(ue_unit, minlength=u_count), out=ue_offsets[1:])
    del ue_unit
    ur_offsets, ur_values = _grouped(rel_unit, np.arange(m, dtype=np.int64), u_count)
    uc_offsets, uc_values = _grouped(claim_unit, np.arange(c_count, dtype=np.int64), u_count)
    emit("text_units", u_count, {
        "id": unit_ids,
        "human_readable_id": np.arange(u_count, dtype=np.int64),
        "text": unit_text,
        "n_tokens": np.array([len(t) // 4 for t in unit_text], dtype=np.int64),
        "document_id": lambda lo, hi: doc_ids.take(pa.array(unit_doc[lo:hi], type=pa.int64())),
        "entity_ids": _Lists(ue_offsets, entity_ids, ue_row),
        "relationship_ids": _Lists(ur_offsets, rel_ids, ur_values),
        "covariate_ids": _Lists(uc_offsets, claim_ids, uc_values),
    }, batch=20_000)
    unit_text.clear()
    del ue_row, ur_values, uc_values

    # ---- entities.parquet
    e_row, e_unit = _unique_pairs(mention_row, mention_unit, u_count)
    e_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(e_row, minlength=n), out=e_offsets[1:])
    del e_row
    degree_row = np.empty(n, dtype=np.int64)
    degree_row[perm] = degree_pos
    intro_row = [""] * n
    for p, r in enumerate(perm.tolist()):
        intro_row[r] = intro[p]
    emit("entities", n, {
        "id": entity_ids,
        "human_readable_id": np.arange(n, dtype=np.int64),
        "title": titles,
        "type": types.tolist(),
        "description": [f"{text} It appears in {c} relationships in the records." if c else text
                        for text, c in zip(intro_row, degree_row.tolist(), strict=True)],
        "text_unit_ids": _Lists(e_offsets, unit_ids, e_unit),
        "frequency": np.diff(e_offsets),
        "degree": degree_row,
    }, batch=20_000)
    del intro_row, e_unit
    titles_by_pos_arr = pa.array(title_by_pos, type=pa.string())

    def title_of(positions: np.ndarray) -> Callable[[int, int], pa.Array]:
        return lambda lo, hi: titles_by_pos_arr.take(pa.array(positions[lo:hi], type=pa.int64()))

    # ---- relationships.parquet
    emit("relationships", m, {
        "id": rel_ids,
        "human_readable_id": np.arange(m, dtype=np.int64),
        "source": title_of(src),
        "target": title_of(tgt),
        "description": rel_text,
        "weight": weight.astype(np.float64),
        "combined_degree": (degree_pos[src] + degree_pos[tgt]).astype(np.int64),
        "text_unit_ids": _Lists(np.arange(m + 1, dtype=np.int64), unit_ids, rel_unit),
    }, batch=100_000)
    del rel_text

    # ---- covariates.parquet
    dated = claim_dated.tolist()
    years = claim_year.tolist()
    emit("covariates", c_count, {
        "id": claim_ids,
        "human_readable_id": np.arange(c_count, dtype=np.int64),
        "covariate_type": ["claim"] * c_count,
        "type": [_CLAIM_TEMPLATES[k][0] for k in claim_kind.tolist()],
        "description": claim_desc,
        "subject_id": title_of(subj),
        "object_id": [title_by_pos[o] if o >= 0 else "NONE" for o in obj.tolist()],
        "status": claim_status.tolist(),
        "start_date": [f"{y}-{mo:02d}-01T00:00:00" if d else None
                       for y, mo, d in zip(years, claim_month.tolist(), dated, strict=True)],
        "end_date": [f"{y}-12-31T00:00:00" if d else None for y, d in zip(years, dated, strict=True)],
        "source_text": claim_source,
        "text_unit_id": lambda lo, hi: unit_ids.take(pa.array(claim_unit[lo:hi], type=pa.int64())),
    }, batch=100_000)
    del claim_desc, claim_source

    # ---- communities.parquet: members, intra-community relationships and text units per level
    cc = h.count
    cr_keys, cr_edges = [], []
    ct_keys, ct_units = [], []
    for lv in range(h.levels):
        at = h.at_level[lv]
        cs, ctg = at[src], at[tgt]
        intra = np.flatnonzero((cs == ctg) & (cs >= 0))
        cr_keys.append(cs[intra])
        cr_edges.append(intra)
        cm = at[mention_pos]
        inside = cm >= 0
        k, u = _unique_pairs(cm[inside], mention_unit[inside], u_count)
        ct_keys.append(k)
        ct_units.append(u)
    del mention_pos, mention_unit, mention_row
    cr_offsets, cr_values = _grouped(np.concatenate(cr_keys), np.concatenate(cr_edges), cc)
    ct_offsets, ct_values = _grouped(np.concatenate(ct_keys), np.concatenate(ct_units), cc)
    del cr_keys, cr_edges, ct_keys, ct_units
    c_offsets, c_members = _ranges(h.start, h.end)
    child_offsets = np.zeros(cc + 1, dtype=np.int64)
    np.cumsum([len(c) for c in h.children], out=child_offsets[1:])
    child_values = np.array([c for cs in h.children for c in cs], dtype=np.int64)
    children = pa.ListArray.from_arrays(pa.array(child_offsets.astype(np.int32)),
                                        pa.array(child_values, type=pa.int64()))
    sizes = (h.end - h.start).astype(np.int64)
    emit("communities", cc, {
        "id": community_ids,
        "human_readable_id": np.arange(cc, dtype=np.int64),
        "community": np.arange(cc, dtype=np.int64),
        "level": h.level,
        "parent": h.parent,
        "children": children,
        "title": [f"Community {c}" for c in range(cc)],
        "entity_ids": _Lists(c_offsets, ids_by_pos, c_members),
        "relationship_ids": _Lists(cr_offsets, rel_ids, cr_values),
        "text_unit_ids": _Lists(ct_offsets, unit_ids, ct_values),
        "period": [PERIOD] * cc,
        "size": sizes,
    }, batch=1_000)
    del c_members, cr_values, ct_values

    # ---- community_reports.parquet
    reports = _reports(rng, h, degree_pos, title_by_pos, type_by_pos, intro, np.diff(cr_offsets), children)
    emit("community_reports", cc, dict(zip(reports.column_names, reports.columns, strict=True)), batch=max(cc, 1))
    counts = {name: counts[name] for name in TABLES}
    marker["counts"] = counts
    (out / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    return counts


def _reports(
    rng: np.random.Generator,
    h: _Hierarchy,
    degree_pos: np.ndarray,
    title_by_pos: list[str],
    type_by_pos: np.ndarray,
    intro: list[str],
    intra_edges: np.ndarray,
    children: pa.Array,
) -> pa.Table:
    """One GraphRAG-style report per community, about its highest-degree members."""
    cc = h.count
    sizes = (h.end - h.start).astype(np.int64)
    themes = rng.integers(0, len(_THEMES), cc)
    noise = rng.normal(0.0, 0.8, cc)
    finding_count = rng.integers(2, 5, cc)
    biggest = max(int(sizes.max()), 2)
    rank = np.clip(np.round(2.0 + 6.0 * np.log(np.maximum(sizes, 1)) / np.log(biggest) + noise, 1), 1.0, 10.0)
    titles, summaries, contents, explanations, jsons = [], [], [], [], []
    f_summary: list[str] = []
    f_explanation: list[str] = []
    f_offsets = [0]
    for c in range(cc):
        s, e = int(h.start[c]), int(h.end[c])
        k = int(min(finding_count[c], e - s))
        local = degree_pos[s:e]
        top = (s + np.argsort(-local, kind="stable")[:k]).tolist()
        names = [title_by_pos[p] for p in top]
        title = f"{names[0]} {_THEMES[themes[c]]}"
        others = ", ".join(names[1:3])
        summary = (f"This community of {e - s} entities centres on {names[0]}"
                   f"{', with ' + others if others else ''}. Its members are linked by {int(intra_edges[c])} "
                   f"relationships{' and it is divided into ' + str(len(h.children[c])) + ' sub-communities' if h.children[c] else ''}.")
        explanation = (f"The impact rating of {rank[c]:.1f} reflects the community's size and the "
                       f"influence of {names[0]}.")
        findings = []
        for p in top:
            findings.append({
                "summary": f"{title_by_pos[p]} is a central {str(type_by_pos[p]).lower()} in the community",
                "explanation": f"{intro[p]} {title_by_pos[p]} has {int(degree_pos[p])} relationships in the index.",
            })
        f_summary.extend(f["summary"] for f in findings)
        f_explanation.extend(f["explanation"] for f in findings)
        f_offsets.append(len(f_summary))
        body = "\n\n".join(f"## {f['summary']}\n\n{f['explanation']}" for f in findings)
        titles.append(title)
        summaries.append(summary)
        explanations.append(explanation)
        contents.append(f"# {title}\n\n{summary}\n\n{body}")
        jsons.append(json.dumps({"title": title, "summary": summary, "rating": float(rank[c]),
                                 "rating_explanation": explanation, "findings": findings}, indent=4))
    finding_values = pa.StructArray.from_arrays(
        [pa.array(f_explanation, type=pa.string()), pa.array(f_summary, type=pa.string())],
        names=["explanation", "summary"],
    )
    return pa.table({
        "id": _uuids(rng, cc, dashes=False),
        "human_readable_id": pa.array(np.arange(cc, dtype=np.int64)),
        "community": pa.array(np.arange(cc, dtype=np.int64)),
        "level": pa.array(h.level),
        "parent": pa.array(h.parent),
        "children": children,
        "title": pa.array(titles),
        "summary": pa.array(summaries),
        "full_content": pa.array(contents),
        "rank": pa.array(rank.astype(np.float64)),
        "rating_explanation": pa.array(explanations),
        "findings": pa.ListArray.from_arrays(pa.array(np.array(f_offsets, dtype=np.int32)), finding_values),
        "full_content_json": pa.array(jsons),
        "period": pa.array([PERIOD] * cc),
        "size": pa.array(sizes),
    })
