"""The graph walk behind the ranked sources (see sources.py): where it starts, the subgraph it may
visit, and personalised PageRank over it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from graphrag_dag.dataflows.common import sql
from graphrag_dag.dataflows.common.resources import Database
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.common.textproc import name_key
from graphrag_dag.dataflows.local.community_recall import Neighbourhood, _walk
from graphrag_dag.dataflows.local.entity_matching import MatchedEntity
from graphrag_dag.dataflows.local.graph_index import GraphIndex

NAME_CHANNELS = frozenset({"exact", "alias", "intent"})  # the question names the entity
# A one-word name mentioned in more than this share of the text units is a common word ("Types",
# "Film"): matching it says little about what the question is about.
COMMON_SPREAD = 0.05
# The error shrinks by d per step: at d = 0.5 about 30 steps reach the tolerance.
_PPR_MAX_ITERATIONS = 200
_PPR_TOLERANCE = 1e-9


def named_entities(matched_entities: list[MatchedEntity], graph_index: GraphIndex,
                   unit_total: int) -> list[MatchedEntity]:
    """The matched entities the question names with confidence, which the graph signals may follow.

    A match is a name when the question holds the entity's name or an alias (or the model's parse
    names it), and the name is specific: a name of one word mentioned in more than `COMMON_SPREAD`
    of the text units is a common word. Matches by embedding alone, by a typo, or on a common word
    are guesses: they still recall communities, but they do not steer the sources. Each is marked
    when it is a concept (a term of a subject, sources.py says what follows)."""
    common = max(1.0, COMMON_SPREAD * unit_total)
    out = []
    for m in matched_entities:
        several = len(m.name.split()) > 1
        by_name = bool(NAME_CHANNELS.intersection(m.channels))
        if m.score > 0 and by_name and (several or graph_index.unit_count(m.id) <= common):
            out.append(replace(m, concept=m.id in graph_index.concepts))
    return out


def _specificity(units: int, total: int) -> float:
    """log(1 + N / n): an entity mentioned in every passage ("Film") says little about which
    passage answers, one mentioned in a single passage says much (the idea of IDF)."""
    return float(np.log1p(max(total, 1) / max(units, 1)))


def unit_total(db: Database, namespace: str) -> int:
    """Text units in the namespace, read once per index version."""
    return db.memoized("unit_total", lambda: int(db.rows(sql.UNIT_COUNT, {"ns": namespace})[0][0]))


def _inside_longer(match: MatchedEntity, named_entities: list[MatchedEntity]) -> bool:
    """Whether the match's name stands, word for word, inside a longer name of the named entities."""
    own = f" {name_key(match.name)} "
    return any(own != f" {name_key(n.name)} " and own in f" {name_key(n.name)} " for n in named_entities)


def seed_weights(matched_entities: list[MatchedEntity], named_entities: list[MatchedEntity], titled_units: list[str],
                 unit_total: int, graph_index: GraphIndex, rrf_k: float = LOCAL.rrf_k,
                 titled_unit_cap: int = LOCAL.titled_unit_cap) -> dict[str, float]:
    """Where the graph walk starts, each weight times the entity's specificity: the matched
    entities by match score, when the question names one with confidence (`named_entities`: with
    guesses alone the walk would start from nothing the question names); and the entities of the
    pages the question names, each page worth one top-ranked match, 1 / (k + 1), shared among the
    entities it mentions. A match whose name is part of a longer name the question names ("Countess"
    in "Beatrice I, Countess of Burgundy") is that name's part, not a thing of its own."""
    named = [m for m in matched_entities if m.score > 0 and not _inside_longer(m, named_entities)] \
        if named_entities else []
    pages = titled_units[:titled_unit_cap]
    if not (named or pages):
        return {}
    weights: dict[str, float] = {}
    mentioned: dict[str, list[str]] = {}
    for unit_id, entity_id in graph_index.unit_mentions(pages):
        mentioned.setdefault(unit_id, []).append(entity_id)
    for m in named:
        weights[m.id] = weights.get(m.id, 0.0) + m.score
    for ids in mentioned.values():
        for entity_id in ids:
            weights[entity_id] = weights.get(entity_id, 0.0) + 1.0 / (rrf_k + 1) / len(ids)
    return {e: w * _specificity(graph_index.unit_count(e), unit_total) for e, w in weights.items()}


def walked_entities(seed_weights: dict[str, float], entity_neighbourhood: Neighbourhood, graph_index: GraphIndex,
                    hops: int = LOCAL.hops, hop_neighbour_cap: int = LOCAL.hop_neighbour_cap,
                    hop_total_cap: int = LOCAL.hop_total_cap) -> Neighbourhood:
    """The subgraph PageRank walks: the matched entities' neighbourhood, extended by the same
    bounded walk from the seeds it does not hold yet (the entities of the pages the question
    names). One walk serves communities and sources when every seed is already in it."""
    missing = [e for e in seed_weights if e not in entity_neighbourhood.hops]
    if not missing:
        return entity_neighbourhood
    return _walk(missing, graph_index, hops, hop_neighbour_cap, hop_total_cap, seen=entity_neighbourhood)


def entity_graph(walked_entities: Neighbourhood) -> dict[str, dict[str, float]]:
    """Weighted adjacency of the walked entities, both directions: the edges the walk read (each
    entity's strongest), not every edge among them, so a hub costs no more than its cap."""
    adjacency: dict[str, dict[str, float]] = {i: {} for i in walked_entities.hops}
    for (a, b), weight in walked_entities.edges.items():
        w = max(weight, 0.0)
        adjacency[a][b] = w
        adjacency[b][a] = w
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
    # The walked subgraph is sparse (a few hundred entities and edges), so a step spreads rank along
    # the edges (bincount), not through a dense matrix.
    rows, cols, weights = [], [], []
    for src, out in entity_graph.items():
        n = index[src]
        for dst, w in out.items():
            rows.append(n)
            cols.append(index[dst])
            weights.append(w)
    src_of, dst_of, weight = np.array(rows, dtype=np.intp), np.array(cols, dtype=np.intp), np.array(weights)
    totals = np.bincount(src_of, weights=weight, minlength=len(ids))
    dangling = totals <= 0
    share = np.divide(weight, totals[src_of], out=np.zeros_like(weight), where=totals[src_of] > 0)
    restart = (1 - ppr_damping) * seeds
    ranks = seeds.copy()
    has_dangling = bool(dangling.any())  # without dangling entities the term adds zeros: skipping it changes no bit
    for _ in range(_PPR_MAX_ITERATIONS):
        spread = np.bincount(dst_of, weights=ranks[src_of] * share, minlength=len(ids))
        if has_dangling:
            spread = spread + ranks[dangling].sum() * seeds
        ranks, before = restart + ppr_damping * spread, ranks
        if np.abs(ranks - before).sum() < _PPR_TOLERANCE:
            break
    return {e: r for e, r in zip(ids, ranks.tolist(), strict=True) if r > 0}
