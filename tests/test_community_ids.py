"""Communities across an update (dataflows/index/leiden.py): with the same graph nothing moves; only
entities whose edges changed move, each to the community it is most tied to, level by level; a
community that grows past the size limit is split; everything else keeps its members and its id."""

from __future__ import annotations

from graphrag_dag.dataflows.common.records import Community, Edge, PriorGraph
from graphrag_dag.dataflows.index.leiden import communities


def _clique(prefix: str, size: int, weight: float = 1.0) -> list[Edge]:
    names = [f"{prefix}{k}" for k in range(size)]
    return [Edge(f"{a}-{b}", a, b, weight, "") for i, a in enumerate(names) for b in names[i + 1:]]


def _graph() -> list[Edge]:
    # three groups of six, each tightly knit, joined by one light edge each
    return [*_clique("a", 6), *_clique("b", 6), *_clique("c", 6),
            Edge("a0-b0", "a0", "b0", 0.1, ""), Edge("b0-c0", "b0", "c0", 0.1, "")]


def _prior(edges: list[Edge], found: list[Community]) -> PriorGraph:
    weights: dict[tuple[str, str], float] = {}
    for e in edges:
        key = (min(e.source_id, e.target_id), max(e.source_id, e.target_id))
        weights[key] = weights.get(key, 0.0) + e.weight
    return PriorGraph(found, weights)


def _rows(found: list[Community]) -> list[tuple]:
    return [(c.id, c.level, c.parent_id, c.member_ids) for c in found]


def _home(found: list[Community], node: str) -> Community:
    return max((c for c in found if node in c.member_ids), key=lambda c: c.level)


def test_the_same_graph_moves_nothing_and_a_first_run_numbers_as_leiden_does():
    first = communities(_graph(), max_cluster_size=10, leiden_seed=7)
    assert first and all(c.id.isdigit() for c in first)
    again = communities(_graph(), max_cluster_size=10, leiden_seed=7, prior_graph=_prior(_graph(), first))
    assert _rows(again) == _rows(first)


def test_only_entities_whose_edges_changed_move_and_the_rest_keep_their_ids():
    first = communities(_graph(), max_cluster_size=10, leiden_seed=7)
    group_b = _home(first, "b3")
    # a new entity tied to group a; b3 loses its ties to b and gains strong ones to c; a fourth group appears
    changed = [e for e in _graph() if "b3" not in (e.source_id, e.target_id)]
    changed += [*(Edge(f"a{k}-a6", f"a{k}", "a6", 1.0, "") for k in range(6)),
                *(Edge(f"b3-c{k}", "b3", f"c{k}", 2.0, "") for k in range(6)),
                *_clique("d", 5), Edge("c0-d0", "c0", "d0", 0.1, "")]
    after = communities(changed, max_cluster_size=10, leiden_seed=7, prior_graph=_prior(_graph(), first))
    assert _home(after, "a6").id == _home(first, "a1").id  # joined the community it is tied to
    assert _home(after, "b3").id == _home(first, "c1").id
    # b lost b3 and kept its id; untouched groups keep their members and ids
    assert _home(after, "b1").id == group_b.id and _home(after, "b1").member_ids == sorted(
        m for m in group_b.member_ids if m != "b3")
    # the new group, tied to the rest by one light edge, forms a community of its own
    top = max(int(c.id) for c in first)
    assert int(_home(after, "d1").id) > top and set(_home(after, "d1").member_ids) == {f"d{k}" for k in range(5)}
    assert _home(after, "c1").member_ids == sorted([*_home(first, "c1").member_ids, "b3"])
    assert len({c.id for c in after}) == len(after)  # no id twice
    for c in after:  # a parent holds its children's members
        if c.parent_id is not None:
            parent = next(p for p in after if p.id == c.parent_id)
            assert set(c.member_ids) <= set(parent.member_ids) and parent.level == c.level - 1


def test_a_community_grown_past_the_limit_is_split_as_leiden_splits_it():
    prior = _prior(_clique("a", 6), [Community("0", 0, None, "", [f"a{k}" for k in range(6)])])
    # six new entities, each tied to a0 more than to the others: they join a's community, now 12
    grown = [*_clique("a", 6), *_clique("x", 6), *(Edge(f"a0-x{j}", "a0", f"x{j}", 6.0, "") for j in range(6))]
    after = communities(grown, max_cluster_size=10, leiden_seed=7, prior_graph=prior)
    home = next(c for c in after if c.id == "0")
    assert len(home.member_ids) == 12 and home.level == 0
    inner = [c for c in after if c.parent_id == "0"]
    assert len(inner) >= 2 and all(len(c.member_ids) <= 10 and c.level == 1 for c in inner)
    assert set().union(*(set(c.member_ids) for c in inner)) == set(home.member_ids)


def test_a_new_entity_whose_new_ties_were_placed_follows_them():
    prior = _prior(_clique("a", 6), [Community("0", 0, None, "", [f"a{k}" for k in range(6)])])
    # x is tied only to y, y more to a than to x: y joins a, and x, left without a group, follows y
    grown = [*_clique("a", 6), Edge("a0-y", "a0", "y", 5.0, ""), Edge("x-y", "x", "y", 3.0, "")]
    after = communities(grown, max_cluster_size=10, leiden_seed=7, prior_graph=prior)
    assert [(c.id, c.member_ids) for c in after] == [("0", sorted([*(f"a{k}" for k in range(6)), "x", "y"]))]
