"""What the synthetic index is about, drawn before any table is written: entities in a hidden
order, the graph, claims, and the sentences and text units that mention them.

Everything is drawn from one generator in a fixed order (entities, graph, claims, texts, ids),
so the same seed gives the same index. Entities have a row (their place in the entities table)
and a position in a hidden order that communities cut into ranges: the entity at position p is
row `perm[p]`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from graphrag_dag_tools.synth.arrays import pick_in, random_sizes, uuids
from graphrag_dag_tools.synth.constants import CLAIMS_PER_ENTITY, UNITS_PER_DOCUMENT, UNITS_PER_ENTITY
from graphrag_dag_tools.synth.graph import Hierarchy, draw_edges
from graphrag_dag_tools.synth.vocabulary import (
    ADJECTIVES,
    CLAIM_TEMPLATES,
    FILLERS,
    INTRO,
    REL_TEMPLATES,
    STATUS_P,
    STATUS_WORDS,
    STATUSES,
    TYPE_P,
    TYPES,
    entity_titles,
)


@dataclass
class Entities:
    count: int
    types: np.ndarray  # by row
    titles: list[str]  # by row
    ids: pa.Array  # by row
    perm: np.ndarray  # position → row
    title_by_pos: list[str]
    type_by_pos: np.ndarray
    ids_by_pos: pa.Array


def draw_entities(rng: np.random.Generator, n: int) -> Entities:
    types = np.array(TYPES)[rng.choice(len(TYPES), n, p=TYPE_P)]
    titles = entity_titles(rng, types)
    ids = uuids(rng, n)
    perm = rng.permutation(n)
    return Entities(n, types, titles, ids, perm, [titles[r] for r in perm.tolist()], types[perm],
                    ids.take(pa.array(perm)))


@dataclass
class Graph:
    hierarchy: Hierarchy
    src: np.ndarray  # positions
    tgt: np.ndarray
    degree_pos: np.ndarray
    weight: np.ndarray

    @property
    def count(self) -> int:
        return len(self.src)


def draw_graph(rng: np.random.Generator, n: int) -> Graph:
    h = Hierarchy(rng, n)
    src, tgt = draw_edges(rng, n, h)
    degree_pos = np.bincount(src, minlength=n) + np.bincount(tgt, minlength=n)
    weight = np.round(1.0 + 9.0 * rng.beta(1.2, 4.0, len(src)), 1)
    return Graph(h, src, tgt, degree_pos, weight)


@dataclass
class Claims:
    count: int
    subj: np.ndarray  # positions
    obj: np.ndarray  # positions, -1 for none
    kind: np.ndarray  # index into CLAIM_TEMPLATES
    year: np.ndarray
    amount: np.ndarray
    status: np.ndarray
    month: np.ndarray
    dated: np.ndarray


def draw_claims(rng: np.random.Generator, n: int, g: Graph) -> Claims:
    """Subjects partly uniform, partly popular (relationship sources); objects from the subject's
    community, for the claim kinds that have one."""
    h, m = g.hierarchy, g.count
    count = round(CLAIMS_PER_ENTITY * n)
    uniform = rng.integers(0, n, count)
    popular = g.src[rng.integers(0, m, count)] if m else uniform
    subj = np.where(rng.random(count) < 0.6, uniform, popular)
    kind = rng.integers(0, len(CLAIM_TEMPLATES), count)
    needs_object = np.array([t[3] for t in CLAIM_TEMPLATES])[kind]
    obj = pick_in(rng, h.start[h.group[subj]], (h.end - h.start)[h.group[subj]])
    obj = np.where(needs_object & (obj != subj), obj, -1)
    kind = np.where(needs_object & (obj < 0), 6 + kind % 4, kind)  # objectless kinds
    year = rng.integers(1700, 1900, count)
    amount = rng.integers(5, 5000, count)
    status = STATUSES[rng.choice(3, count, p=STATUS_P)]
    month = rng.integers(1, 13, count)
    dated = rng.random(count) < 0.9
    return Claims(count, subj, obj, kind, year, amount, status, month, dated)


@dataclass
class Texts:
    intro: list[str]  # by position
    rel_text: list[str]
    claim_source: list[str]  # the exact sentence of each claim's text unit
    claim_desc: list[str]
    unit_text: list[str]  # emptied once the text units are written
    unit_count: int
    kind: np.ndarray  # per sentence: 0 intro, 1 relationship, 2 claim
    item: np.ndarray  # per sentence: the entity position, relationship or claim it states
    sentence_unit: np.ndarray  # per sentence: its text unit


def _intros(rng: np.random.Generator, ents: Entities) -> list[str]:
    n = ents.count
    adjective = rng.integers(0, len(ADJECTIVES), n)
    intro_x = rng.integers(0, 1 << 30, n)
    intro_y = rng.integers(0, 1 << 30, n)
    intro_year = rng.integers(1600, 1890, n)
    intro: list[str] = []
    for p, (t, a, x, y, yr) in enumerate(zip(ents.type_by_pos.tolist(), adjective.tolist(), intro_x.tolist(),
                                             intro_y.tolist(), intro_year.tolist(), strict=True)):
        template, xs, ys = INTRO[t]
        if t == "ORGANIZATION" and yr % 2:
            template = "{t} is a {a} {x} founded in " + str(yr) + "."
        intro.append(template.format(t=ents.title_by_pos[p], a=ADJECTIVES[a], x=xs[x % len(xs)], y=ys[y % len(ys)]))
    return intro


def _claim_texts(c: Claims, titles: list[str]) -> tuple[list[str], list[str]]:
    source: list[str] = []
    desc: list[str] = []
    for k, s, o, y, a, st in zip(c.kind.tolist(), c.subj.tolist(), c.obj.tolist(), c.year.tolist(),
                                 c.amount.tolist(), c.status.tolist(), strict=True):
        _, sentence, description, _ = CLAIM_TEMPLATES[k]
        values = {"s": titles[s], "o": titles[o] if o >= 0 else "", "y": y, "n": a}
        source.append(sentence.format(**values))
        desc.append(f"{STATUS_WORDS[st]} {description.format(**values)}")
    return source, desc


def write_texts(rng: np.random.Generator, ents: Entities, g: Graph, c: Claims) -> Texts:
    """An introduction per entity, a sentence per relationship and per claim, ordered by the
    position they are about, then cut into text units, so neighbouring entities share units."""
    n, m = ents.count, g.count
    kind = np.concatenate([np.zeros(n, np.int64), np.ones(m, np.int64), np.full(c.count, 2, np.int64)])
    item = np.concatenate([np.arange(n), np.arange(m), np.arange(c.count)])
    anchor = np.concatenate([np.arange(n), g.src, c.subj])
    order = np.lexsort((item, kind, anchor))
    kind, item = kind[order], item[order]
    s_count = len(order)
    u_count = max(1, min(round(UNITS_PER_ENTITY * n), s_count))
    unit_sizes = random_sizes(rng, s_count, u_count, minimum=1)
    sentence_unit = np.repeat(np.arange(u_count), unit_sizes)
    filler = np.where(rng.random(u_count) < 0.3, rng.integers(0, len(FILLERS), u_count), -1)
    intro = _intros(rng, ents)
    rel_template = rng.integers(0, len(REL_TEMPLATES), m)
    rel_text = [REL_TEMPLATES[k].format(s=ents.title_by_pos[s], t=ents.title_by_pos[t])
                for k, s, t in zip(rel_template.tolist(), g.src.tolist(), g.tgt.tolist(), strict=True)]
    claim_source, claim_desc = _claim_texts(c, ents.title_by_pos)
    by_kind = (intro, rel_text, claim_source)
    sentences = [by_kind[k][i] for k, i in zip(kind.tolist(), item.tolist(), strict=True)]
    bounds = np.concatenate(([0], np.cumsum(unit_sizes))).tolist()
    unit_text = []
    for u in range(u_count):
        parts = sentences[bounds[u]:bounds[u + 1]]
        if filler[u] >= 0:
            parts = [*parts, FILLERS[filler[u]]]
        unit_text.append(" ".join(parts))
    return Texts(intro, rel_text, claim_source, claim_desc, unit_text, u_count, kind, item, sentence_unit)


@dataclass
class Ids:
    units: pa.Array
    doc_sizes: np.ndarray  # text units per document
    relationships: pa.Array
    claims: pa.Array
    communities: pa.Array


def draw_ids(rng: np.random.Generator, texts: Texts, g: Graph, c: Claims) -> Ids:
    """Text unit ids are sha512 of their text, as GraphRAG makes them; the rest are uuids."""
    units = pa.array([hashlib.sha512(f"{u}\x00{t}".encode()).hexdigest() for u, t in enumerate(texts.unit_text)])
    u_count = len(texts.unit_text)
    d_count = max(1, round(u_count / UNITS_PER_DOCUMENT))
    doc_sizes = random_sizes(rng, u_count, d_count, minimum=1)
    return Ids(units, doc_sizes, uuids(rng, g.count), uuids(rng, c.count), uuids(rng, g.hierarchy.count))


@dataclass
class Mentions:
    """Where each relationship, claim and entity is mentioned (text unit indexes)."""

    rel_unit: np.ndarray
    claim_unit: np.ndarray
    pos: np.ndarray  # per mention: the entity position
    unit: np.ndarray  # per mention: the text unit
    row: np.ndarray  # per mention: the entity row


def find_mentions(ents: Entities, g: Graph, c: Claims, texts: Texts) -> Mentions:
    kind, item, unit = texts.kind, texts.item, texts.sentence_unit
    rel_unit = np.empty(g.count, dtype=np.int64)
    rel_unit[item[kind == 1]] = unit[kind == 1]
    claim_unit = np.empty(c.count, dtype=np.int64)
    claim_unit[item[kind == 2]] = unit[kind == 2]
    intro_unit = np.empty(ents.count, dtype=np.int64)
    intro_unit[item[kind == 0]] = unit[kind == 0]
    has_obj = c.obj >= 0
    pos = np.concatenate([np.arange(ents.count), g.src, g.tgt, c.subj, c.obj[has_obj]])
    units = np.concatenate([intro_unit, rel_unit, rel_unit, claim_unit, claim_unit[has_obj]])
    return Mentions(rel_unit, claim_unit, pos, units, ents.perm[pos])


@dataclass
class World:
    entities: Entities
    graph: Graph
    claims: Claims
    texts: Texts
    ids: Ids
    mentions: Mentions


def draw_world(rng: np.random.Generator, n: int) -> World:
    ents = draw_entities(rng, n)
    g = draw_graph(rng, n)
    c = draw_claims(rng, n, g)
    texts = write_texts(rng, ents, g, c)
    ids = draw_ids(rng, texts, g, c)
    return World(ents, g, c, texts, ids, find_mentions(ents, g, c, texts))
