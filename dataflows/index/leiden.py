"""Indexer, stage 6: communities by hierarchical Leiden over the weighted entity graph.

graspologic-native's `hierarchical_leiden`, which Microsoft GraphRAG uses: level 0 partitions
the graph, and any community larger than `max_cluster_size` is split again at the next level,
so a parent's members are its children's members. The seed is fixed, so the same graph always
gives the same communities. Entities with no relationship belong to no community (as in
Microsoft GraphRAG).

An update gives the communities the namespace has (`prior_communities`): a community whose level
and members are mostly those of a prior one keeps its id (`_names`), so rows that name it stay as
they were; its report is written again only if its material changed. The partition itself is
computed afresh, as a new index would compute it. Starting Leiden from the prior partition was
tried and kept no more communities: a change of a few hundred of 350k edges still redraws about
half of the top-level communities either way.
"""

from __future__ import annotations

from graphrag_dag.dataflows.common.records import Community, Edge
from graphrag_dag.dataflows.common.settings import INDEX

KEEP_ID_AT = 0.5  # the least Jaccard similarity with a prior community at which a community keeps its id


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
    """Ids: Leiden's cluster numbers on a first run. On an update, a community takes the id of the
    prior community of its level it shares the most with, when they share at least half of the
    members of both together (Jaccard ≥ `KEEP_ID_AT`), best pairs first and each prior id once;
    the others are numbered after the highest prior id. A community that is mostly the same keeps
    its id, and so do its members' leaf community and its row, so an update rewrites less."""
    if not prior:
        return {cid: str(cid) for cid in order}
    held: dict[tuple[int, str], list[Community]] = {}
    for c in prior:
        for m in c.member_ids:
            held.setdefault((c.level, m), []).append(c)
    pairs: list[tuple[float, int, str]] = []
    for cid in order:
        mine = set(members[cid])
        seen: set[str] = set()
        for m in mine:
            for c in held.get((level[cid], m), ()):
                if c.id not in seen:
                    seen.add(c.id)
                    theirs = set(c.member_ids)
                    share = len(mine & theirs) / len(mine | theirs)
                    if share >= KEEP_ID_AT:
                        pairs.append((share, cid, c.id))
    out: dict[int, str] = {}
    taken: set[str] = set()
    for _share, cid, pid in sorted(pairs, key=lambda p: (-p[0], p[1], p[2])):
        if cid not in out and pid not in taken:
            out[cid] = pid
            taken.add(pid)
    following = 1 + max((int(c.id) for c in prior if c.id.isdigit()), default=-1)
    for cid in order:
        if cid not in out:
            out[cid], following = str(following), following + 1
    return out
