"""Community ids across an update: the same graph keeps every id, a community that is mostly the
same keeps its id, and a new one is numbered after the highest prior id (dataflows/index/leiden.py)."""

from __future__ import annotations

from graphrag_dag.dataflows.common.records import Community, Edge
from graphrag_dag.dataflows.index.leiden import communities


def _clique(prefix: str, size: int) -> list[Edge]:
    names = [f"{prefix}{k}" for k in range(size)]
    return [Edge(f"{a}-{b}", a, b, 1.0, "") for i, a in enumerate(names) for b in names[i + 1:]]


def _graph() -> list[Edge]:
    # three groups of six, each tightly knit, joined by one light edge each
    return [*_clique("a", 6), *_clique("b", 6), *_clique("c", 6),
            Edge("a0-b0", "a0", "b0", 0.1, ""), Edge("b0-c0", "b0", "c0", 0.1, "")]


def _by_members(found: list[Community]) -> dict[frozenset[str], str]:
    return {frozenset(c.member_ids): c.id for c in found}


def test_the_same_graph_keeps_every_id_and_a_first_run_numbers_them_as_leiden_does():
    first = communities(_graph(), max_cluster_size=10, leiden_seed=7)
    assert first and all(c.id.isdigit() for c in first)
    again = communities(_graph(), max_cluster_size=10, leiden_seed=7, prior_communities=first)
    assert [(c.id, c.level, c.parent_id, c.member_ids) for c in again] == \
           [(c.id, c.level, c.parent_id, c.member_ids) for c in first]


def test_a_mostly_unchanged_community_keeps_its_id_and_a_new_one_is_numbered_after_the_rest():
    first = communities(_graph(), max_cluster_size=10, leiden_seed=7)
    ids = _by_members(first)
    group_a = next(m for m in ids if "a1" in m)
    # a new member joins group a; a fourth group appears
    grown = [*_graph(), *(Edge(f"a{k}-a6", f"a{k}", "a6", 1.0, "") for k in range(6)), *_clique("d", 5),
             Edge("c0-d0", "c0", "d0", 0.1, "")]
    after = communities(grown, max_cluster_size=10, leiden_seed=7, prior_communities=first)
    now = _by_members(after)
    joined = next(m for m in now if "a1" in m)
    assert joined == group_a | {"a6"} and now[joined] == ids[group_a]  # 6 of 7 members shared: the id stays
    unchanged = [m for m in now if m in ids]
    assert unchanged and all(now[m] == ids[m] for m in unchanged)
    top = max(int(i) for i in ids.values())
    group_d = next(m for m in now if "d1" in m)
    assert int(now[group_d]) > top
    assert len(set(now.values())) == len(now)  # no id twice
