"""Indexer, stage 6: communities by hierarchical Leiden over the weighted entity graph.

graspologic-native's `hierarchical_leiden`, which Microsoft GraphRAG uses: level 0 partitions
the graph, and any community larger than `max_cluster_size` is split again at the next level,
so a parent's members are its children's members. The seed is fixed, so the same graph always
gives the same communities. Entities with no relationship belong to no community (as in
Microsoft GraphRAG).

An update (`prior_graph`: the namespace's communities and edges) does not draw the communities
anew. Leiden is not local: on a 4 MB corpus, a change of a few hundred of 350k edges redraws most
communities below the top level, even started from the prior partition, and every community
redrawn is a report written again. Instead the update moves only the entities whose edges
changed (`_moved`): level by level, each stays in its community unless another holds more of its
edge weight, and a new one joins the community it is most tied to; a community that grows past
`max_cluster_size` without sub-communities is split as a new index would split it; every other
community stays as it was, with its id. Over many updates the partition drifts from what Leiden
would draw; `--replace` draws it afresh.
"""

from __future__ import annotations

from typing import Callable

from graphrag_dag.dataflows.common.records import Community, Edge, PriorGraph
from graphrag_dag.dataflows.common.settings import INDEX


def communities(edges: list[Edge], max_cluster_size: int = INDEX.max_cluster_size,
                leiden_seed: int = INDEX.leiden_seed, prior_graph: PriorGraph | None = None) -> list[Community]:
    if not edges:
        return []
    if prior_graph is not None and prior_graph.communities:
        return _moved(edges, prior_graph, max_cluster_size, leiden_seed)
    return _drawn(edges, max_cluster_size, leiden_seed, 0, None, str)


def _drawn(edges: list[Edge], max_cluster_size: int, seed: int, base_level: int, parent: str | None,
           name: Callable[[int], str]) -> list[Community]:
    """Hierarchical Leiden over `edges`, its levels from `base_level` on, its top communities
    under `parent`, its clusters named by `name`."""
    from graspologic_native import hierarchical_leiden

    clusters = hierarchical_leiden(edges=[(e.source_id, e.target_id, float(e.weight)) for e in edges],
                                   max_cluster_size=max_cluster_size, seed=seed)
    members: dict[int, list[str]] = {}
    level: dict[int, int] = {}
    above: dict[int, int | None] = {}
    for c in clusters:
        members.setdefault(c.cluster, []).append(c.node)
        level[c.cluster] = c.level
        above[c.cluster] = c.parent_cluster
    order = sorted(members, key=lambda c: (level[c], c))
    ids = {cid: name(cid) for cid in order}
    return [Community(ids[cid], base_level + level[cid], parent if above[cid] is None else ids[above[cid]], "",
                      sorted(set(members[cid])))
            for cid in order]


def _moved(edges: list[Edge], prior: PriorGraph, max_cluster_size: int, seed: int) -> list[Community]:
    """The prior communities with only the entities whose edges changed moved (module docstring)."""
    weights: dict[tuple[str, str], float] = {}
    ties: dict[str, dict[str, float]] = {}
    for e in edges:
        key = (min(e.source_id, e.target_id), max(e.source_id, e.target_id))
        weights[key] = weights.get(key, 0.0) + float(e.weight)
    for (a, b), w in weights.items():
        ties.setdefault(a, {})[b] = w
        ties.setdefault(b, {})[a] = w
    changed = {n for key in weights.keys() ^ prior.weights.keys() for n in key}
    changed |= {n for key, w in weights.items() if key in prior.weights and prior.weights[key] != w for n in key}
    nodes = set(ties)
    moving = sorted(changed & nodes)  # new entities among them
    found = {m for c in prior.communities for m in c.member_ids}
    gone = found - nodes

    by_id = {c.id: Community(c.id, c.level, c.parent_id, c.title, [m for m in c.member_ids if m not in gone])
             for c in prior.communities}
    children: dict[str | None, list[str]] = {}
    for c in sorted(by_id.values(), key=lambda c: (c.level, _order(c.id))):
        children.setdefault(c.parent_id, []).append(c.id)
    at: dict[tuple[int, str], str] = {(c.level, m): c.id for c in by_id.values() for m in c.member_ids}
    following = 1 + max((int(c.id) for c in prior.communities if c.id.isdigit()), default=-1)

    def new_community(level: int, parent: str | None) -> Community:
        nonlocal following
        c = Community(str(following), level, parent, "", [])
        following += 1
        by_id[c.id] = c
        children.setdefault(parent, []).append(c.id)
        return c

    def leave(node: str, level: int) -> None:
        """Take `node` out of its community at `level` and every level below."""
        while (level, node) in at:
            by_id[at.pop((level, node))].member_ids.remove(node)
            level += 1

    def place(node: str) -> None:
        """Local moving of one entity: at each level, within the community it belongs to above, it
        stays unless another one holds more of its edge weight; an entity new there joins the one
        holding most, or a new one when it is tied to none."""
        parent: str | None = None
        level = 0
        while parent is None or children.get(parent):
            score: dict[str, float] = {}
            for other, w in ties[node].items():
                cid = at.get((level, other))
                if cid is not None and other != node and by_id[cid].parent_id == parent:
                    score[cid] = score.get(cid, 0.0) + w
            current = at.get((level, node))
            best = min(score, key=lambda cid: (-score[cid], _order(cid))) if score else None
            if current is not None and (best is None or score[best] <= score.get(current, 0.0)):
                chosen = by_id[current]
            else:
                leave(node, level)
                chosen = by_id[best] if best is not None else new_community(level, parent)
                chosen.member_ids.append(node)
                at[(level, node)] = chosen.id
            parent, level = chosen.id, level + 1

    def name(_cluster: int) -> str:
        nonlocal following
        following += 1
        return str(following - 1)

    # Once per changed entity, in id order. An entity new to the graph that is tied more to other
    # new ones, not yet placed, than to any community waits: those form communities of their own,
    # drawn as a new index draws them; one that drew none (its new ties were placed) is placed then.
    new = nodes - found
    apart: list[str] = []
    for node in moving:
        if node in new:
            placed: dict[str, float] = {}
            for other, w in ties[node].items():
                if (0, other) in at:
                    placed[at[(0, other)]] = placed.get(at[(0, other)], 0.0) + w
            among_new = sum(w for other, w in ties[node].items() if other in new and (0, other) not in at)
            if among_new > max(placed.values(), default=0.0):
                apart.append(node)
                continue
        place(node)
    held = set(apart)
    among = [e for e in edges if e.source_id in held and e.target_id in held]
    for part in _drawn(among, max_cluster_size, seed, 0, None, name) if among else []:
        by_id[part.id] = part
        children.setdefault(part.parent_id, []).append(part.id)
        at.update({(part.level, m): part.id for m in part.member_ids})
    for node in apart:
        if (0, node) not in at:
            place(node)
    # A community without sub-communities that grew past the limit is split as a new index splits one.
    for c in sorted(by_id.values(), key=lambda c: (c.level, _order(c.id))):
        if len(c.member_ids) > max_cluster_size and not any(by_id[k].member_ids for k in children.get(c.id, [])):
            inside = set(c.member_ids)
            sub = [e for e in edges if e.source_id in inside and e.target_id in inside]
            for part in _beneath(c, _drawn(sub, max_cluster_size, seed, c.level + 1, c.id, name) if sub else []):
                by_id[part.id] = part
    kept = [c for c in by_id.values() if c.member_ids]
    return [Community(c.id, c.level, c.parent_id, c.title, sorted(set(c.member_ids)))
            for c in sorted(kept, key=lambda c: (c.level, _order(c.id)))]


def _beneath(c: Community, parts: list[Community]) -> list[Community]:
    """Communities drawn inside `c`, without a top one that is `c` again (Leiden on a community's
    own edges may first find the whole of it, then split it at its next level)."""
    while True:
        top = [p for p in parts if p.parent_id == c.id]
        if len(top) != 1 or set(top[0].member_ids) != set(c.member_ids):
            return parts
        same = top[0].id
        parts = [Community(p.id, p.level - 1, c.id if p.parent_id == same else p.parent_id, p.title, p.member_ids)
                 for p in parts if p.id != same]


def _order(cid: str) -> tuple[int, str]:
    return (int(cid), "") if cid.isdigit() else (1 << 62, cid)
