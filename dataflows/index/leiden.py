"""Indexer, stage 6: communities by hierarchical Leiden over the weighted entity graph.

graspologic-native's `hierarchical_leiden`, which Microsoft GraphRAG uses: level 0 partitions
the graph, and any community larger than `max_cluster_size` is split again at the next level,
so a parent's members are its children's members. The seed is fixed, so the same graph always
gives the same communities. Entities with no relationship belong to no community (as in
Microsoft GraphRAG).

An update gives the communities the namespace has (`prior_communities`): a community whose level
and members are those of a prior one keeps its id, so its rows and its report stay as they were.
The partition itself is computed afresh, as a new index would compute it. Starting Leiden from
the prior partition was tried and kept no more communities: a change of a few hundred of 350k
edges still redraws about half of the top-level communities either way.
"""

from __future__ import annotations

from graphrag_dag.dataflows.common.records import Community, Edge
from graphrag_dag.dataflows.common.settings import INDEX


def communities(edges: list[Edge], max_cluster_size: int = INDEX.max_cluster_size,
                leiden_seed: int = INDEX.leiden_seed,
                prior_communities: list[Community] | None = None) -> list[Community]:
    if not edges:
        return []
    from graspologic_native import hierarchical_leiden

    clusters = hierarchical_leiden(edges=[(e.source_id, e.target_id, float(e.weight)) for e in edges],
                                   max_cluster_size=max_cluster_size, seed=leiden_seed)
    members: dict[int, list[str]] = {}
    level: dict[int, int] = {}
    parent: dict[int, int | None] = {}
    for c in clusters:
        members.setdefault(c.cluster, []).append(c.node)
        level[c.cluster] = c.level
        parent[c.cluster] = c.parent_cluster
    order = sorted(members, key=lambda c: (level[c], c))
    name = _names(order, level, members, prior_communities or [])
    return [Community(name[cid], level[cid], None if parent[cid] is None else name[parent[cid]], "",
                      sorted(set(members[cid])))
            for cid in order]


def _names(order: list[int], level: dict[int, int], members: dict[int, list[str]],
           prior: list[Community]) -> dict[int, str]:
    """Ids: Leiden's cluster numbers on a first run; on an update, the prior id of a community with
    the same level and members, and numbers after the highest prior one for the others."""
    if not prior:
        return {cid: str(cid) for cid in order}
    known = {(c.level, frozenset(c.member_ids)): c.id for c in prior}
    following = 1 + max((int(c.id) for c in prior if c.id.isdigit()), default=-1)
    out: dict[int, str] = {}
    for cid in order:
        same = known.get((level[cid], frozenset(members[cid])))
        if same is None:
            same, following = str(following), following + 1
        out[cid] = same
    return out
