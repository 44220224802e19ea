"""The in-memory graph (dataflows/local/graph_index.py) on graphs small enough to check by hand.
tests/test_plans.py checks it against the tables of a 20k-entity namespace."""

from __future__ import annotations

import random

import numpy as np
import pytest

from graphrag_dag.dataflows.local.graph_index import GraphIndex

# a - b (2.0), a - c (2.0), a - d (1.0), d - b (3.0), c - c (0.5), e alone
EDGES = [("a", "b", 2.0), ("c", "a", 2.0), ("a", "d", 1.0), ("d", "b", 3.0), ("c", "c", 0.5)]
# root r (level 0) > m (level 1) > leaves x, y (level 2); z is a level-1 leaf under r
COMMUNITIES = [("r", 0, None), ("m", 1, "r"), ("x", 2, "m"), ("y", 2, "m"), ("z", 1, "r")]
ENTITIES = [("a", "Alpha", "x"), ("b", "Beta", "y"), ("c", "Gamma", "z"), ("d", "Delta", "x"), ("e", "Eps", None)]
# u1 is about a (its page), u2 mentions a and b, u3 mentions a, u0 mentions b
UNITS = [("a", "u3", False), ("a", "u2", False), ("a", "u1", True), ("b", "u2", False), ("b", "u0", False)]
MEMBERS = [("r", e) for e in "abcd"] + [("m", e) for e in "abd"] + [("x", "a"), ("x", "d"), ("y", "b"), ("z", "c")]


def _numbered(entities, edges, communities, members, units, version: str = "v1") -> GraphIndex:
    """The index of rows given by id, numbered here as walk_sql.py numbers them in the database."""
    entities, communities = sorted(entities), sorted(communities)
    unit_ids = sorted({u for _, u, _ in units})
    pos = {e: n for n, (e, _, _) in enumerate(entities)}
    cpos = {c: n for n, (c, _, _) in enumerate(communities)}
    upos = {u: n for n, u in enumerate(unit_ids)}
    return GraphIndex(
        entities, communities, unit_ids,
        (np.array([pos[a] for a, _, _ in edges], dtype="i4"), np.array([pos[b] for _, b, _ in edges], dtype="i4"),
         np.array([w for _, _, w in edges], dtype="f8")),
        (np.array([cpos[c] for c, _ in members], dtype="i4"), np.array([pos[e] for _, e in members], dtype="i4")),
        (np.array([pos[e] for e, _, _ in units], dtype="i4"), np.array([upos[u] for _, u, _ in units], dtype="i4"),
         np.array([a for _, _, a in units], dtype="?")), version)


def _graph(shuffle: int | None = None) -> GraphIndex:
    parts = [list(ENTITIES), list(EDGES), list(COMMUNITIES), list(MEMBERS), list(UNITS)]
    if shuffle is not None:
        for part in parts:
            random.Random(shuffle).shuffle(part)
    return _numbered(*parts)


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
    graph = _numbered([("a", "A", "p")], [], [("p", 3, "q"), ("q", 2, "p")], [], [])
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


def test_rows_out_of_id_order_are_refused():
    with pytest.raises(ValueError, match="entities are not in id order"):
        GraphIndex([("b", "B", None), ("a", "A", None)], [], [], *_EMPTY)
    with pytest.raises(ValueError, match="units are not in id order"):
        GraphIndex([], [], ["u2", "u1"], *_EMPTY)


_EMPTY = ((np.zeros(0, "i4"), np.zeros(0, "i4"), np.zeros(0, "f8")), (np.zeros(0, "i4"), np.zeros(0, "i4")),
          (np.zeros(0, "i4"), np.zeros(0, "i4"), np.zeros(0, "?")))


def test_binary_columns_equal_the_rows_and_refuse_nulls(rag):
    """The graph's numbers come by binary COPY (drivers/store/scoped.py), in a snapshot or in a
    statement's own scoped transaction; they equal the rows, and a NULL is refused, not misread."""
    from graphrag_dag.dataflows.common.resources import Database

    query = "SELECT n::int4, (n * 0.5)::float8, mod(n, 3) = 0 FROM generate_series(-2, 5000) n WHERE %(ns)s <> ''"
    kinds = ["i4", "f8", "?"]
    with rag.reading("demo") as db:
        got = db.columns(query, {"ns": "demo"}, kinds)
        assert [c.tolist() for c in got] == [c.tolist() for c in Database.columns(db, query, {"ns": "demo"}, kinds)]
        assert got[0][:3].tolist() == [-2, -1, 0] and got[1][-1] == 2500.0 and got[2].sum() == 1667
        with pytest.raises(ValueError, match="NULL"):
            db.columns("SELECT NULL::int4 FROM generate_series(1, 3)", {}, ["i4"])
    alone = rag.store.scoped("demo")  # no snapshot: the scope is set in the COPY's own transaction
    try:
        entities = alone.columns("SELECT count(*)::int4 FROM entities", {}, ["i4"])[0][0]
    finally:
        alone.close()
    assert entities == rag.store.admin_rows("SELECT count(*) FROM entities WHERE namespace = 'demo'")[0][0] > 0


def test_binary_columns_read_pgvector_vectors_as_a_float32_matrix(rag):
    """A "vector(D)" column comes by binary COPY as the float32 values the database holds, row
    for row, and a vector of another dimension is refused, not misread."""
    from graphrag_dag.dataflows.common.resources import Database

    query = ("SELECT n::int4, ('[' || n || ',' || n * 0.1 || ',-1.5]')::vector(3) "
             "FROM generate_series(1, 400) n WHERE %(ns)s <> ''")
    kinds = ["i4", "vector(3)"]
    with rag.reading("demo") as db:
        numbers, vectors = db.columns(query, {"ns": "demo"}, kinds)
        assert vectors.dtype == np.float32 and vectors.shape == (400, 3)
        assert numbers[-1] == 400 and vectors[-1].tolist() == np.array([400, 40, -1.5], dtype=np.float32).tolist()
        slow = Database.columns(db, query, {"ns": "demo"}, kinds)
        assert np.array_equal(slow[1], vectors) and slow[1].dtype == np.float32
        with pytest.raises(ValueError, match="not"):
            db.columns("SELECT '[1,2]'::vector(2) FROM generate_series(1, 3)", {}, ["vector(3)"])


def test_the_memo_keeps_whole_namespaces_most_recent_first():
    from graphrag_dag.drivers.store.scoped import Memo

    memo, built = Memo(size=2), []

    def get(ns: str, name: str) -> str:
        return memo.get((ns, "v1", name), lambda: built.append((ns, name)) or f"{ns}:{name}")

    for ns in ("a", "b"):
        for name in ("names", "graph", "titles"):
            assert get(ns, name) == f"{ns}:{name}"
    get("a", "graph")  # a is now the most recent: c pushes b out, all of it
    get("c", "graph")
    before = len(built)
    assert [get("a", n) for n in ("names", "graph", "titles")] == ["a:names", "a:graph", "a:titles"]
    assert len(built) == before  # a kept every value
    get("b", "names")
    assert built[-1] == ("b", "names") and len(built) == before + 1  # b was dropped whole
