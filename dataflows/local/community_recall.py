"""Stage 3 of local search: candidate communities, reached through the graph and by summary vectors."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from graphrag_dag.dataflows.common import sql, walk_sql
from graphrag_dag.dataflows.local.entity_matching import MatchedEntity
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
    # (entity, community, level) of every entity in `hops`, at `community_level` (None: its leaf),
    # when the walk read them on its way (see `_walk`); None when it did not.
    communities: list[tuple[str, str, int]] | None = None
    community_level: int | None = None


def entity_neighbourhood(matched_entities: list[MatchedEntity], db: Database, namespace: str,
                         hops: int = LOCAL.hops, hop_neighbour_cap: int = LOCAL.hop_neighbour_cap,
                         hop_total_cap: int = LOCAL.hop_total_cap, level: int | None = LOCAL.level) -> Neighbourhood:
    """The walk up to `hops` hops from the matched entities. Each hop takes at most
    `hop_neighbour_cap` strongest neighbours per entity and `hop_total_cap` new entities in all
    (strongest edges first), so neither a hub nor a fan-out of hubs can explode it. The statement
    that walks also reads each reached entity's community at `level`, which
    `topology_communities` would otherwise ask for one round trip later on the critical path."""
    return _walk([m.id for m in matched_entities], db, namespace, hops, hop_neighbour_cap, hop_total_cap,
                 communities=True, level=level)


def reached_entities(entity_neighbourhood: Neighbourhood) -> dict[str, int]:
    """Entity id → hop distance from the matched entities."""
    return entity_neighbourhood.hops


def _walk(start: list[str], db: Database, namespace: str, hops: int, hop_neighbour_cap: int,
          hop_total_cap: int, seen: Neighbourhood | None = None, *, communities: bool = False,
          level: int | None = None) -> Neighbourhood:
    """The bounded breadth-first walk (not a node: the sources extend it from more seeds, and
    `seen` is a walk to extend: its entities keep their distances and are not read again). With
    `communities`, a two-hop walk also reads the reached entities' communities at `level`."""
    out = Neighbourhood(dict(seen.hops), dict(seen.edges)) if seen else Neighbourhood()
    frontier = [i for i in dict.fromkeys(start) if i not in out.hops]
    out.hops.update({i: 0 for i in frontier})
    read: list[tuple[str, str, float]] = []
    ahead: dict[int, list[tuple]] = {}
    if seen is None and hops >= 2 and frontier:
        # Hops 1 and 2 in one round trip; the loop below replays them on the rows it fetched.
        params = {"ns": namespace, "ids": frontier, "cap": hop_neighbour_cap, "total": hop_total_cap,
                  "communities": communities, "level": level}
        ahead = {0: [], 1: [], 2: [], 3: [], 4: []}
        for hop, a, b, weight, lvl in db.rows(walk_sql.TWO_HOPS, params):
            ahead[int(hop)].append((a, b, weight) if hop < 4 else (a, b, int(lvl)))
    chosen = {src for src, _o, _w in ahead.pop(0, [])}
    second = {src for src, _o, _w in ahead.pop(3, [])}  # the second frontier as the SQL chose it
    found = ahead.pop(4, None)
    replayed = found is not None and communities
    for hop in range(1, max(0, hops) + 1):
        if not frontier:
            break
        rows = ahead.pop(hop, None)
        if rows is None or (hop == 2 and chosen != set(frontier)):  # (never seen: the SQL chooses alike)
            rows = db.rows(walk_sql.NEIGHBOURS, {"ns": namespace, "ids": frontier, "cap": hop_neighbour_cap})
            replayed = False
        read += rows
        rows.sort(key=lambda r: (-r[2], r[1]))
        frontier = []
        for _src, other, _w in rows:
            if other not in out.hops:
                if len(frontier) >= hop_total_cap:
                    break
                out.hops[other] = hop
                frontier.append(other)
    for src, other, weight in read:
        if src in out.hops and other in out.hops and src != other:
            out.edges[(min(src, other), max(src, other))] = float(weight)
    # The communities belong to the entities the SQL reached: used only when those are the ones
    # reached here (the same two frontiers), which the SQL's choice guarantees.
    if replayed and second == {e for e, h in out.hops.items() if h == 2}:
        out.communities, out.community_level = found, level
    return out


def topology_communities(reached_entities: dict[str, int], entity_neighbourhood: Neighbourhood, db: Database,
                         namespace: str, level: int | None = LOCAL.level,
                         topology_community_cap: int = LOCAL.topology_community_cap) -> list[TopologyCandidate]:
    """Reached entities mapped to their leaf communities, or through the parent chain to `level`;
    the closest and most-reached `topology_community_cap` communities go on to ranking. The walk
    read them already unless `reached_entities` or the level differ from its own (an override):
    then they are read here."""
    if not reached_entities:
        return []
    walk = entity_neighbourhood
    if walk.communities is not None and walk.community_level == level and walk.hops == reached_entities:
        rows = walk.communities
    else:
        rows = db.rows(walk_sql.ENTITY_COMMUNITIES, {"ns": namespace, "ids": list(reached_entities), "level": level})
    out: dict[str, TopologyCandidate] = {}
    for entity_id, community_id, lvl in rows:
        cand = out.setdefault(community_id, TopologyCandidate(community_id, int(lvl), hops=99))
        cand.reached.append(entity_id)
        cand.hops = min(cand.hops, reached_entities[entity_id])
    return sorted(out.values(), key=lambda c: (c.hops, -len(c.reached), c.id))[:topology_community_cap]


@switch_is("decompose", "off")
def semantic_communities__plain(query_embedding: np.ndarray, db: Database, namespace: str, embed_dim: int,
                         level: int | None = LOCAL.level,
                         semantic_community_top_k: int = LOCAL.semantic_community_top_k) -> list[SemanticCandidate]:
    """Summary embeddings nearest the query, at the same level as the topology candidates (leaves
    when no level is requested)."""
    rows = db.rows(sql.nearest_summaries(embed_dim, leaf_only=level is None),
                   {"ns": namespace, "qvec": query_embedding, "k": semantic_community_top_k,
                    "level": level})
    return [SemanticCandidate(cid, float(sim)) for cid, sim in rows]
