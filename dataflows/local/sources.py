"""Ranked sources: the passages (text units) behind a local result, best supported first.

A question about named things is best answered by the pages about those things and by the pages
they lead to, so names and the graph steer the ranking, not text similarity alone. The signals:

- `title`: pages the question names: documents whose title, or first line (imported GraphRAG
  documents are often titled by a file name), the question contains, longest title first;
- `link`: pages those pages name, found the same way in their text: the links of a hyperlinked
  corpus, which reach a question's second hop ("the director of film X") even when the index
  made no entity of the director;
- `graph`: personalised PageRank (as HippoRAG and fast-graphrag do) over the walked subgraph,
  seeded by the entities the question names and by the entities of the pages it names, then
  units by the rank of the entities in them (below). The walk is the bounded one of
  `reached_entities`, so its cost does not grow with the index;
- `entity`: units that mention a matched entity, by the summed seed weights of the entities in them;
- `vector` and `keyword`: the units of the recalled evidence chunks, in recall order;
- `claim`: the units of the selected communities' claims, in claim order.

A unit whose document title or first line names an entity (ignoring a trailing parenthetical
qualifier, as in "Ian Barry (director)") is *about* that entity. In the graph signal, units
about a walked entity come first, by that entity's rank: a page that names a thing in passing
supports an answer about it less than the thing's own page. Units that only mention walked
entities follow, by the summed ranks of those entities. Ranks are weighted by specificity,
log(1 + N / n) for an entity in n of N units, so "Film", mentioned everywhere, cannot pull every
passage up.

The order: the named pages, then RRF of `link` and `graph` (the second hop, two ways), then
everything else by RRF of the remaining signals. Without a named page or an entity the question
names with confidence (`named_entities`: by its name, and not a common word) the walk would start
from guesses, so the graph signals sit out, and so do the claims of the communities those guesses
selected: the sources are the text list, RRF of `vector` and `keyword`. A question the graph does
not understand is ranked as text retrieval would rank it, never worse. So is one that names only
concepts (terms of a subject, "basal cell carcinoma") and no page: a concept is discussed by many
passages, and on guides, reports and transcripts the walk from it, the entity units and the claims
ranked no better than the text signals, alone or fused with them (docs/evaluation.md).
Equal-weight RRF over all signals was measured first and ranks worse: the text signals agree with
each other on passages that share a question's common words ("director", "film") and outvote the
names (docs/evaluation.md).
"""

from __future__ import annotations

import numpy as np

from graphrag_dag.dataflows.common import sql
from graphrag_dag.dataflows.common.fusion import rank_by, reciprocal_rank_fusion
from graphrag_dag.dataflows.common.resources import Database
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.local.chunk_recall import RecalledChunk
from graphrag_dag.dataflows.local.entity_matching import MatchedEntity
from graphrag_dag.dataflows.local.entity_walk import _specificity
from graphrag_dag.dataflows.local.evidence import EvidenceItem, Source
from graphrag_dag.dataflows.local.graph_index import EntityUnits, GraphIndex

SIGNALS = ("title", "link", "graph", "entity", "vector", "keyword", "claim")


def entity_units(matched_entities: list[MatchedEntity], entity_ranks: dict[str, float], graph_index: GraphIndex,
                 source_entity_cap: int = LOCAL.source_entity_cap,
                 units_per_entity_cap: int = LOCAL.units_per_entity_cap) -> EntityUnits:
    """The units of the matched entities and of the `source_entity_cap` best-ranked others, each
    entity's own pages first when it has more than `units_per_entity_cap`."""
    ids = list(dict.fromkeys([m.id for m in matched_entities] + rank_by(entity_ranks)[:source_entity_cap]))
    return graph_index.entity_units(ids, units_per_entity_cap)


def chunk_units(ranked_claims: list[EvidenceItem], recalled_chunks: list[RecalledChunk]) -> dict[str, str]:
    """Evidence chunk id → its text unit, for the chunks recalled and the chunks claims cite."""
    out = {c.id: c.parent_id or c.id for c in recalled_chunks}
    out.update({c.chunk_id: c.unit_id for c in ranked_claims if c.chunk_id and c.unit_id})
    return out


def _units_by(entity_units: EntityUnits, weights: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's weight (its entity's), and each unit's summed weight over the rows that weigh
    more than 0. The sums run over the rows in order, one addition at a time (bincount), as a loop
    over the rows would add them."""
    weight = np.array(weights, dtype=np.float64)[entity_units.entity]
    kept = weight > 0
    summed = np.bincount(entity_units.unit[kept], weights=weight[kept], minlength=len(entity_units.unit_ids))
    return weight, summed


def _ordered(entity_units: EntityUnits, *keys: np.ndarray) -> list[str]:
    """The units with a positive last key, by the keys, highest first, the first key deciding
    first; ties in unit id order (unit places are id order)."""
    present = np.flatnonzero(keys[-1] > 0)
    order = np.lexsort((present, *(-k[present] for k in reversed(keys))))
    return [entity_units.unit_ids[u] for u in present[order].tolist()]


def _summed(entity_units: EntityUnits, weights: dict[str, float]) -> list[str]:
    """Units by the summed weights of the entities that mention them."""
    _, summed = _units_by(entity_units, [weights.get(e, 0.0) for e in entity_units.entity_ids])
    return _ordered(entity_units, summed)


def _walked(entity_units: EntityUnits, entity_ranks: dict[str, float], unit_total: int) -> list[str]:
    """Units about a walked entity first, by that entity's rank (times its specificity); then
    the units that only mention walked entities, by the summed ranks of those entities."""
    weights = []
    for entity_id, units in zip(entity_units.entity_ids, entity_units.units.tolist(), strict=True):
        rank = entity_ranks.get(entity_id, 0.0)
        weights.append(rank * _specificity(units, unit_total) if rank > 0 else 0.0)
    weight, mentioned = _units_by(entity_units, weights)
    about = np.zeros(len(entity_units.unit_ids))
    own = (weight > 0) & entity_units.about
    np.maximum.at(about, entity_units.unit[own], weight[own])
    return _ordered(entity_units, about, mentioned)


def graph_rankings(seed_weights: dict[str, float], entity_ranks: dict[str, float], unit_total: int,
                   entity_units: EntityUnits, titled_units: list[str],
                   linked_units: list[str]) -> dict[str, list[str]]:
    """The rankings the question's names and the graph make (`title`, `link`, `graph`, `entity`)."""
    return {
        "title": titled_units,
        "link": linked_units,
        "graph": _walked(entity_units, entity_ranks, unit_total),
        "entity": _summed(entity_units, seed_weights),
    }


def source_rankings(graph_rankings: dict[str, list[str]], vector_chunks: list[RecalledChunk],
                    keyword_chunks: list[RecalledChunk], ranked_claims: list[EvidenceItem],
                    chunk_units: dict[str, str]) -> dict[str, list[str]]:
    """Each signal's ranking of unit ids (see the module docstring)."""
    return {
        **graph_rankings,
        "vector": [chunk_units[c.id] for c in vector_chunks if c.id in chunk_units],
        "keyword": [chunk_units[c.id] for c in keyword_chunks if c.id in chunk_units],
        "claim": [chunk_units[c.chunk_id] for c in ranked_claims if c.chunk_id in chunk_units],
    }


TEXT_SIGNALS = ("vector", "keyword")


def _fused(source_rankings: dict[str, list[str]], named_entities: list[MatchedEntity],
           rrf_k: float) -> tuple[list[str], dict[str, float]]:
    """The lead (named pages, then RRF of links and the graph) and the RRF scores of the rest;
    with no named page and no named entity but concepts, no lead and the text list alone."""
    titled = source_rankings.get("title", [])
    if not titled and all(m.concept for m in named_entities):  # guesses or topics: the text decides
        return [], reciprocal_rank_fusion([source_rankings.get(s, []) for s in TEXT_SIGNALS], k=rrf_k)
    hops = [source_rankings.get("link", []), source_rankings.get("graph", [])]
    lead = [*titled, *rank_by(reciprocal_rank_fusion(hops, k=rrf_k))]
    skip = ("title", "graph", "link") if named_entities else ("title", "graph", "link", "entity")
    rest = [r for name, r in source_rankings.items() if name not in skip]
    return lead, reciprocal_rank_fusion(rest, k=rrf_k)


def ranked_units(source_rankings: dict[str, list[str]], named_entities: list[MatchedEntity],
                 rrf_k: float = LOCAL.rrf_k, source_cap: int = LOCAL.source_cap) -> list[str]:
    """Named pages, then RRF of links and the graph, then RRF of the rest (module docstring),
    at most `source_cap` of them."""
    lead, rest = _fused(source_rankings, named_entities, rrf_k)
    return list(dict.fromkeys([*lead, *rank_by(rest)]))[:source_cap]


def source_rows(ranked_units: list[str], db: Database, namespace: str) -> list[tuple]:
    """The ranked units with their documents and evidence chunks."""
    if not ranked_units:
        return []
    return db.rows(sql.SOURCE_ROWS, {"ns": namespace, "ids": ranked_units})


def sources(ranked_units: list[str], source_rows: list[tuple], source_rankings: dict[str, list[str]],
            rrf_k: float = LOCAL.rrf_k) -> list[Source]:
    """Each ranked unit with its place in its document and the signals that ranked it; its score
    is 1 / (k + its rank), the share it would bring to a further fusion, so scores fall with the
    order."""
    meta = {r[0]: r[1:5] for r in source_rows}
    positions = {name: {u: n for n, u in enumerate(dict.fromkeys(units))} for name, units in source_rankings.items()}
    out = []
    for unit in ranked_units:
        if unit not in meta:
            continue
        doc, title, start, end = meta[unit]
        found = sorted((p[unit], name) for name, p in positions.items() if unit in p)
        out.append(Source(unit, doc, title, start, end, 1.0 / (rrf_k + len(out) + 1), tuple(name for _, name in found)))
    return out


def source_chunks(source_rows: list[tuple]) -> list[RecalledChunk]:
    """The evidence chunks of the ranked sources, so the best-supported passages reach the
    answer's context even when no recall channel returned them."""
    return [RecalledChunk(r[5], r[6], r[1], r[0], r[7], r[8], 0.0, "source", r[9]) for r in source_rows
            if r[5] is not None]
