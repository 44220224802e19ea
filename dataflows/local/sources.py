"""Ranked sources: the passages (text units) behind a local result, best supported first.

A question about named things is best answered by the passages about those things and about the
things they lead to, so the graph steers the ranking, not only text similarity. Five signals rank
the candidate units:

- `graph`: personalised PageRank over the reached subgraph, seeded by the match scores (as HippoRAG
  and fast-graphrag do), then units by the rank of the entities in them (below). The walk only
  covers the entities `reached_entities` already bounded, so its cost does not grow with the index;
- `entity`: units that mention a matched entity, by the summed seed weights of the entities in them;
- `vector` and `keyword`: the units of the recalled evidence chunks, in recall order;
- `claim`: the units of the selected communities' claims, in claim order.

A unit whose document is titled by an entity, or whose first line names it (a heading; imported
GraphRAG documents are often titled by a file name), ignoring a trailing parenthetical qualifier
as in "Ian Barry (director)", is *about* that entity. In the graph signal, units about a reached
entity come first, by that entity's rank: a passage that names a thing in passing supports an
answer about it less than its own page. Units that only mention reached entities follow, by the
summed ranks of those entities. Ranks are weighted by specificity, log(1 + N / n) for an entity in
n of N units, so "Film", mentioned everywhere, cannot pull every passage up.

When the question names an entity the index knows (a match by name, alias, typo or parsed
entity), the order is the graph's ranking, then the units it does not reach by RRF over the other
signals. An entity found only by embedding similarity is a guess, so without a named entity the
graph is one signal among equals: RRF over all five.
Equal-weight RRF over all five was measured first and ranks worse: the text signals agree with
each other on passages that share a question's common words ("director", "film"), and outvote
the graph. They still order everything the graph does not reach, and carry questions that name
no entity at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from graphrag_dag.dataflows.common import sql
from graphrag_dag.dataflows.common.fusion import rank_by, reciprocal_rank_fusion
from graphrag_dag.dataflows.common.resources import Database
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.common.textproc import name_key
from graphrag_dag.dataflows.local.chunk_recall import RecalledChunk
from graphrag_dag.dataflows.local.entity_matching import MatchedEntity
from graphrag_dag.dataflows.local.evidence import EvidenceItem, Source

SIGNALS = ("graph", "entity", "vector", "keyword", "claim")
NAME_CHANNELS = frozenset({"exact", "alias", "fuzzy", "intent"})  # the question names the entity


def _named(matched_entities: list[MatchedEntity]) -> bool:
    return any(NAME_CHANNELS.intersection(m.channels) for m in matched_entities)
_PPR_ITERATIONS = 30  # d = 0.5 halves the error per step: 30 steps are exact to ~1e-9
_QUALIFIER_RE = re.compile(r"\s*\([^()]*\)\s*$")


@dataclass(frozen=True)
class EntityUnit:
    entity_id: str
    unit_id: str
    about: bool  # the unit's document is titled by the entity
    units: int  # how many units mention the entity in all


def _specificity(units: int, total: int) -> float:
    """log(1 + N / n): an entity mentioned in every passage ("Film") says little about which
    passage answers, one mentioned in a single passage says much (the idea of IDF)."""
    return float(np.log1p(max(total, 1) / max(units, 1)))


def unit_total(db: Database, namespace: str) -> int:
    """Text units in the namespace, read once per index version."""
    return db.memoized("unit_total", lambda: int(db.rows(sql.UNIT_COUNT, {"ns": namespace})[0][0]))


def seed_weights(matched_entities: list[MatchedEntity], unit_total: int, db: Database,
                 namespace: str) -> dict[str, float]:
    """Each matched entity's match score times its specificity: what the graph walk starts from."""
    if not matched_entities:
        return {}
    counts = dict(db.rows(sql.ENTITY_UNIT_COUNTS, {"ns": namespace, "ids": [m.id for m in matched_entities]}))
    return {m.id: max(m.score, 0.0) * _specificity(int(counts.get(m.id, 1)), unit_total) for m in matched_entities}


def entity_graph(reached_entities: dict[str, int], db: Database, namespace: str) -> dict[str, dict[str, float]]:
    """Weighted adjacency of the reached entities, both directions."""
    ids = list(reached_entities)
    adjacency: dict[str, dict[str, float]] = {i: {} for i in ids}
    if len(ids) < 2:
        return adjacency
    for src, dst, weight in db.rows(sql.REACHED_EDGES, {"ns": namespace, "ids": ids}):
        w = max(float(weight), 0.0)
        adjacency[src][dst] = adjacency[src].get(dst, 0.0) + w
        adjacency[dst][src] = adjacency[dst].get(src, 0.0) + w
    return adjacency


def entity_ranks(seed_weights: dict[str, float], entity_graph: dict[str, dict[str, float]],
                 ppr_damping: float = LOCAL.ppr_damping) -> dict[str, float]:
    """Personalised PageRank: r = (1 - d)·s + d·Pᵀr, with s the seed weights; a walker on an
    entity with no edge returns to the seeds. d = 0.5 keeps most mass within two hops."""
    ids = list(entity_graph)
    if not ids or not seed_weights:
        return {}
    index = {e: n for n, e in enumerate(ids)}
    seeds = np.zeros(len(ids))
    for eid, w in seed_weights.items():
        if eid in index:
            seeds[index[eid]] += w
    if seeds.sum() <= 0:
        return {}
    seeds /= seeds.sum()
    matrix = np.zeros((len(ids), len(ids)))
    for src, out in entity_graph.items():
        for dst, w in out.items():
            matrix[index[src], index[dst]] = w
    totals = matrix.sum(axis=1, keepdims=True)
    dangling = totals[:, 0] <= 0
    matrix = np.divide(matrix, totals, out=np.zeros_like(matrix), where=totals > 0)
    ranks = seeds.copy()
    for _ in range(_PPR_ITERATIONS):
        spread = ranks @ matrix + ranks[dangling].sum() * seeds
        ranks = (1 - ppr_damping) * seeds + ppr_damping * spread
    return {e: float(ranks[index[e]]) for e in ids if ranks[index[e]] > 0}


def _about(entity_key: str, title: str) -> bool:
    title_key = name_key(title)
    return bool(entity_key) and (title_key == entity_key or name_key(_QUALIFIER_RE.sub("", title)) == entity_key)


def entity_units(matched_entities: list[MatchedEntity], entity_ranks: dict[str, float], db: Database,
                 namespace: str, source_entity_cap: int = LOCAL.source_entity_cap,
                 units_per_entity_cap: int = LOCAL.units_per_entity_cap) -> list[EntityUnit]:
    """The units of the matched entities and of the `source_entity_cap` best-ranked others."""
    ids = list(dict.fromkeys([m.id for m in matched_entities] + rank_by(entity_ranks)[:source_entity_cap]))
    if not ids:
        return []
    names = dict(db.rows(sql.ENTITIES_BY_ID, {"ns": namespace, "ids": ids}))
    rows = db.rows(sql.ENTITY_UNITS, {"ns": namespace, "ids": ids, "cap": units_per_entity_cap})
    keys = {eid: name_key(name) for eid, name in names.items()}
    return [EntityUnit(eid, uid, _about(keys.get(eid, ""), title) or _about(keys.get(eid, ""), first_line), int(n))
            for eid, uid, _doc, title, first_line, n in rows]


def chunk_units(ranked_claims: list[EvidenceItem], recalled_chunks: list[RecalledChunk], db: Database,
                namespace: str) -> dict[str, str]:
    """Evidence chunk id → its text unit, for the chunks recalled and the chunks claims cite."""
    out = {c.id: c.parent_id or c.id for c in recalled_chunks}
    missing = list({c.chunk_id for c in ranked_claims if c.chunk_id and c.chunk_id not in out})
    if missing:
        out.update(dict(db.rows(sql.UNITS_OF_CHUNKS, {"ns": namespace, "ids": missing})))
    return out


def _summed(entity_units: list[EntityUnit], weights: dict[str, float]) -> list[str]:
    """Units by the summed weights of the entities that mention them."""
    totals: dict[str, float] = {}
    for eu in entity_units:
        w = weights.get(eu.entity_id, 0.0)
        if w > 0:
            totals[eu.unit_id] = totals.get(eu.unit_id, 0.0) + w
    return rank_by(totals)


def _walked(entity_units: list[EntityUnit], entity_ranks: dict[str, float], unit_total: int) -> list[str]:
    """Units about a reached entity first, by that entity's rank (times its specificity); then
    the units that only mention reached entities, by the summed ranks of those entities."""
    about: dict[str, float] = {}
    mentioned: dict[str, float] = {}
    for eu in entity_units:
        w = entity_ranks.get(eu.entity_id, 0.0) * _specificity(eu.units, unit_total)
        if w <= 0:
            continue
        mentioned[eu.unit_id] = mentioned.get(eu.unit_id, 0.0) + w
        if eu.about:
            about[eu.unit_id] = max(about.get(eu.unit_id, 0.0), w)
    ranked = sorted(mentioned, key=lambda u: (-about.get(u, 0.0), -mentioned[u], u))
    return ranked


def source_rankings(seed_weights: dict[str, float], entity_ranks: dict[str, float], unit_total: int,
                    entity_units: list[EntityUnit], vector_chunks: list[RecalledChunk],
                    keyword_chunks: list[RecalledChunk], ranked_claims: list[EvidenceItem],
                    chunk_units: dict[str, str]) -> dict[str, list[str]]:
    """Each signal's ranking of unit ids (see the module docstring)."""
    return {
        "graph": _walked(entity_units, entity_ranks, unit_total),
        "entity": _summed(entity_units, seed_weights),
        "vector": [chunk_units[c.id] for c in vector_chunks if c.id in chunk_units],
        "keyword": [chunk_units[c.id] for c in keyword_chunks if c.id in chunk_units],
        "claim": [chunk_units[c.chunk_id] for c in ranked_claims if c.chunk_id in chunk_units],
    }


def sources(source_rankings: dict[str, list[str]], matched_entities: list[MatchedEntity], db: Database,
            namespace: str, rrf_k: float = LOCAL.rrf_k, source_cap: int = LOCAL.source_cap) -> list[Source]:
    """The graph's ranking first, then the units it does not reach by RRF over the other signals.
    Each source lists the signals that ranked it; its score is 1 / (k + its rank), the share it
    would bring to a further fusion, so scores fall with the order."""
    if _named(matched_entities):
        rest = reciprocal_rank_fusion([r for name, r in source_rankings.items() if name != "graph"], k=rrf_k)
        ranked = list(dict.fromkeys([*source_rankings.get("graph", []), *rank_by(rest)]))[:source_cap]
    else:
        text = [r for name, r in source_rankings.items() if name not in ("graph", "entity")]
        ranked = rank_by(reciprocal_rank_fusion(text, k=rrf_k))[:source_cap]
    if not ranked:
        return []
    meta = {r[0]: r[1:] for r in db.rows(sql.SOURCE_UNITS, {"ns": namespace, "ids": ranked})}
    positions = {name: {u: n for n, u in enumerate(dict.fromkeys(units))} for name, units in source_rankings.items()}
    out = []
    for unit in ranked:
        if unit not in meta:
            continue
        doc, title, start, end = meta[unit]
        found = sorted((p[unit], name) for name, p in positions.items() if unit in p)
        out.append(Source(unit, doc, title, start, end, 1.0 / (rrf_k + len(out) + 1), tuple(name for _, name in found)))
    return out


def source_chunks(sources: list[Source], db: Database, namespace: str) -> list[RecalledChunk]:
    """The evidence chunks of the ranked sources, so the best-supported passages reach the
    answer's context even when no recall channel returned them."""
    if not sources:
        return []
    rows = db.rows(sql.SOURCE_CHUNKS, {"ns": namespace, "ids": [s.unit_id for s in sources]})
    return [RecalledChunk(r[0], r[1], r[2], r[3], r[4], r[5], 0.0, "source") for r in rows]
