"""The in-memory graph (dataflows/local/graph_index.py) on graphs small enough to check by hand.
tests/test_plans.py checks it against the tables of a 20k-entity namespace."""

from __future__ import annotations

import random

from graphrag_dag.dataflows.local.graph_index import GraphIndex

# a - b (2.0), a - c (2.0), a - d (1.0), d - b (3.0), c - c (0.5), e alone
EDGES = [("a", "b", 2.0), ("c", "a", 2.0), ("a", "d", 1.0), ("d", "b", 3.0), ("c", "c", 0.5)]
# root r (level 0) > m (level 1) > leaves x, y (level 2); z is a level-1 leaf under r
COMMUNITIES = [("r", 0, None), ("m", 1, "r"), ("x", 2, "m"), ("y", 2, "m"), ("z", 1, "r")]
ENTITIES = [("a", "Alpha", "x"), ("b", "Beta", "y"), ("c", "Gamma", "z"), ("d", "Delta", "x"), ("e", "Eps", None)]
# u1 is about a (its page), u2 mentions a and b, u3 mentions a, u0 mentions b
UNITS = [("a", "u3", False), ("a", "u2", False), ("a", "u1", True), ("b", "u2", False), ("b", "u0", False)]
MEMBERS = [("r", e) for e in "abcd"] + [("m", e) for e in "abd"] + [("x", "a"), ("x", "d"), ("y", "b"), ("z", "c")]


def _graph(shuffle: int | None = None) -> GraphIndex:
    parts = [list(ENTITIES), list(EDGES), list(COMMUNITIES), list(MEMBERS), list(UNITS)]
    if shuffle is not None:
        for part in parts:
            random.Random(shuffle).shuffle(part)
    return GraphIndex(*parts, version="v1")


def test_neighbours_come_strongest_first_with_ties_by_id_whatever_the_load_order():
    want = [("a", "b", 2.0), ("a", "c", 2.0), ("a", "d", 1.0)]
    for seed in (None, 1, 2, 3):
        graph = _graph(seed)
        assert graph.neighbour_rows(["a"], 10) == want
        assert graph.neighbour_rows(["a"], 2) == want[:2]  # the cap cuts after the tie, by id
        assert graph.neighbour_rows(["c"], 10) == [("c", "a", 2.0), ("c", "c", 0.5), ("c", "c", 0.5)]  # a loop: both ends
    assert _graph().neighbour_rows(["e", "nobody", "d"], 1) == [("d", "b", 3.0)]


def test_communities_at_a_level_follow_the_parent_chain_to_the_closest():
    graph = _graph(5)
    assert sorted(graph.communities_at("abcde", None)) == [("a", "x", 2), ("b", "y", 2), ("c", "z", 1), ("d", "x", 2)]
    assert sorted(graph.communities_at("abc", 1)) == [("a", "m", 1), ("b", "m", 1), ("c", "z", 1)]
    assert sorted(graph.communities_at("ac", 0)) == [("a", "r", 0), ("c", "r", 0)]
    assert graph.communities_at(["c"], 2) == [("c", "z", 1)]  # a leaf above the level is its own answer


def test_a_parent_cycle_ends_the_chain():
    graph = GraphIndex([("a", "A", "p")], [], [("p", 3, "q"), ("q", 2, "p")], [])
    assert graph.communities_at(["a"], 0) == [("a", "q", 2)]


def test_member_signals_count_sizes_members_and_edges_from_the_given_entities():
    graph = _graph(7)
    got = graph.member_signals(["r", "m", "x", "y", "z", "unknown"], ["a", "c"])
    # r holds a, c: a's edges to b, c, d (2 + 2 + 1) and c's to a (2) and itself, once per end (0.5 + 0.5)
    assert got["r"] == (4, 2, 8.0, ["Alpha", "Gamma"])
    assert got["m"] == (3, 1, 5.0, ["Alpha"])  # a - b, a - d, and c - a: c is given, a a member
    assert got["x"] == (2, 1, 3.0, ["Alpha"])  # a - d, c - a
    assert got["y"] == (1, 0, 2.0, [])  # a - b: b is a member, a is not
    assert got["z"] == (1, 1, 3.0, ["Gamma"])  # c - a (2) and the loop's two ends
    assert "unknown" not in got
    assert graph.member_signals(["r"], []) == {"r": (4, 0, 0.0, [])}


def test_units_come_about_first_then_by_id_with_each_entity_s_count():
    graph = _graph(11)
    assert graph.unit_rows(["b", "a", "e", "nobody"], 2) == [
        ("a", "u1", True, 3), ("a", "u2", False, 3), ("b", "u0", False, 2), ("b", "u2", False, 2)]
    assert [graph.unit_count(e) for e in "abe"] == [3, 2, 0]
    assert graph.unit_mentions(["u2", "u1", "missing", "u2"]) == [("u1", "a"), ("u2", "a"), ("u2", "b")]
