"""Indexer, stage 6: communities by hierarchical Leiden over the weighted entity graph.

graspologic-native's `hierarchical_leiden`, which Microsoft GraphRAG uses: level 0 partitions
the graph, and any community larger than `max_cluster_size` is split again at the next level,
so a parent's members are its children's members. The seed is fixed, so the same graph always
gives the same communities. Entities with no relationship belong to no community (as in
Microsoft GraphRAG).
"""

from __future__ import annotations

from graphrag_dag.dataflows.common.records import Community, Edge
from graphrag_dag.dataflows.common.settings import INDEX


def communities(edges: list[Edge], max_cluster_size: int = INDEX.max_cluster_size,
                leiden_seed: int = INDEX.leiden_seed) -> list[Community]:
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
    return [Community(str(cid), level[cid], None if parent[cid] is None else str(parent[cid]), "",
                      sorted(set(members[cid])))
            for cid in sorted(members, key=lambda c: (level[c], c))]
