"""Stage 3 of local search: candidate communities, reached through the graph and by summary vectors."""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np

from graphrag_dag.dataflows.common import sql, walk_sql
from graphrag_dag.dataflows.local.entity_matching import MatchedEntity
from graphrag_dag.dataflows.local.graph_index import GraphIndex
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.common.resources import Database
from graphrag_dag.dataflows.common.switches import switch_is


@dataclass
class TopologyCandidate:
    id: str
    level: int
    reached: list[str] = field(default_factory=list)  # entity ids that led here
    hops: int = 0  # smallest hop distance from a matched entity


@dataclass(frozen=True)
class SemanticCandidate:
    id: str
    similarity: float


@dataclass
class Neighbourhood:
    """What a bounded walk saw: each entity's hop distance, and the edges it read on the way
    (both endpoints reached), which the ranked sources walk again with PageRank."""

    hops: dict[str, int] = field(default_factory=dict)
    edges: dict[tuple[str, str], float] = field(default_factory=dict)  # (a, b) with a < b → weight


def graph_index(db: Database, namespace: str) -> GraphIndex:
    """The namespace's edges, communities with their members, and the entities' text units, loaded
    once per namespace version (kept in memory by the database resource; an import changes the
    version), so that the walk, the signals and the sources read arrays rather than the database
    (graph_index.py says what it costs)."""
    return db.memoized("graph_index", lambda: _load_graph_index(db, namespace))


def _load_graph_index(db: Database, namespace: str) -> GraphIndex:
    params = {"ns": namespace}
    return GraphIndex(
        db.rows(walk_sql.GRAPH_ENTITIES, params), db.rows(walk_sql.GRAPH_COMMUNITIES, params),
        [u for (u,) in db.rows(walk_sql.GRAPH_UNIT_IDS, params)],
        db.columns(walk_sql.GRAPH_EDGES, params, ["i4", "i4", "f8"]),
        db.columns(walk_sql.GRAPH_MEMBERS, params, ["i4", "i4"]),
        db.columns(walk_sql.GRAPH_UNITS, params, ["i4", "i4", "?"]), db.fingerprint,
        [c for (c,) in db.rows(walk_sql.GRAPH_CONCEPTS, params)])


def entity_neighbourhood(matched_entities: list[MatchedEntity], graph_index: GraphIndex, hops: int = LOCAL.hops,
                         hop_neighbour_cap: int = LOCAL.hop_neighbour_cap,
                         hop_total_cap: int = LOCAL.hop_total_cap) -> Neighbourhood:
    """The walk up to `hops` hops from the matched entities. Each hop takes at most
    `hop_neighbour_cap` strongest neighbours per entity and `hop_total_cap` new entities in all
    (strongest edges first), so neither a hub nor a fan-out of hubs can explode it."""
    return _walk([m.id for m in matched_entities], graph_index, hops, hop_neighbour_cap, hop_total_cap)


def reached_entities(entity_neighbourhood: Neighbourhood) -> dict[str, int]:
    """Entity id → hop distance from the matched entities."""
    return entity_neighbourhood.hops


def _walk(start: list[str], graph: GraphIndex, hops: int, hop_neighbour_cap: int, hop_total_cap: int,
          seen: Neighbourhood | None = None) -> Neighbourhood:
    """The bounded breadth-first walk (not a node: the sources extend it from more seeds, and the
    `neighbors` lookup walks with it). `seen` is a walk to extend: its entities keep their
    distances and are not read again."""
    out = Neighbourhood(dict(seen.hops), dict(seen.edges)) if seen else Neighbourhood()
    frontier = [i for i in dict.fromkeys(start) if i not in out.hops]
    out.hops.update({i: 0 for i in frontier})
    read: list[tuple[str, str, float]] = []
    for hop in range(1, max(0, hops) + 1):
        if not frontier:
            break
        rows = graph.neighbour_rows(frontier, hop_neighbour_cap)
        read += rows
        rows.sort(key=itemgetter(1))  # then stably by weight, strongest first: (-weight, other id)
        rows.sort(key=itemgetter(2), reverse=True)
        frontier = []
        for _src, other, _w in rows:
            if other not in out.hops:
                if len(frontier) >= hop_total_cap:
                    break
                out.hops[other] = hop
                frontier.append(other)
    hops_seen, edges = out.hops, out.edges
    for src, other, weight in read:  # a comparison, not min() and max(): a walk reads some 400 rows
        if src != other and src in hops_seen and other in hops_seen:
            edges[(src, other) if src < other else (other, src)] = float(weight)
    return out


def topology_communities(reached_entities: dict[str, int], graph_index: GraphIndex,
                         level: int | None = LOCAL.level,
                         topology_community_cap: int = LOCAL.topology_community_cap) -> list[TopologyCandidate]:
    """Reached entities mapped to their leaf communities, or through the parent chain to `level`;
    the closest and most-reached `topology_community_cap` communities go on to ranking."""
    out: dict[str, TopologyCandidate] = {}
    for entity_id, community_id, lvl in graph_index.communities_at(reached_entities, level):
        cand = out.get(community_id)
        if cand is None:  # made once per community, not once per reached entity as setdefault would
            cand = out[community_id] = TopologyCandidate(community_id, lvl, hops=99)
        cand.reached.append(entity_id)
        cand.hops = min(cand.hops, reached_entities[entity_id])
    return sorted(out.values(), key=lambda c: (c.hops, -len(c.reached), c.id))[:topology_community_cap]


def _nearest_summaries(query_embedding: np.ndarray, db: Database, namespace: str, embed_dim: int,
                       level: int | None, semantic_community_top_k: int) -> list[SemanticCandidate]:
    rows = db.rows(sql.nearest_summaries(embed_dim, leaf_only=level is None),
                   {"ns": namespace, "qvec": query_embedding, "k": semantic_community_top_k, "level": level})
    return [SemanticCandidate(cid, float(sim)) for cid, sim in rows]


@switch_is("decompose", "off")
def semantic_communities__plain(query_embedding: np.ndarray, db: Database, namespace: str, embed_dim: int,
                                level: int | None = LOCAL.level,
                                semantic_community_top_k: int = LOCAL.semantic_community_top_k) -> list[SemanticCandidate]:
    """Summary embeddings nearest the query, at the same level as the topology candidates (leaves
    when no level is requested)."""
    return _nearest_summaries(query_embedding, db, namespace, embed_dim, level, semantic_community_top_k)
