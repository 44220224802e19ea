"""The query path's plans on a 20k-entity synthetic namespace: no statement of a local or global
search reads a whole table sequentially, whatever the statistics, even with a planner misled on
purpose. A plan that flips to a scan (as ENTITY_COMMUNITIES once did after an import's ANALYZE,
and CLAIMS_FOR_COMMUNITIES on a misestimated member count) fails here before it slows anyone."""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import psycopg
import pytest
from psycopg import sql

from synthetic import PLANS_NAMESPACE

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes


TABLES = {"documents", "chunks", "chunk_words", "entities", "entity_aliases", "entity_units", "edges",
          "communities", "community_members", "community_summaries", "claims", "namespaces"}


@pytest.fixture(scope="module")
def plans(home):
    """A GraphRag over the home the 20k namespace was made in (begun at collection, see conftest)."""
    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.llm.chat import ChatConfig

    made = PLANS_NAMESPACE["plans-20k"]
    counts = made.result()
    assert counts["entities"] >= 20000
    instance = GraphRag(home=made.home, chat=ChatConfig())
    yield instance, made.namespace
    instance.close()


class Recording:
    """The request's own database handle, noting each statement and its parameters on the way."""

    def __init__(self, db, memo: bool = True) -> None:
        self._db = db
        self._memo = memo  # False: what is kept per namespace version is read again, and recorded
        self.statements: list[tuple[object, dict]] = []

    def rows(self, query, params=()):
        self.statements.append((query, dict(params) if params else {}))
        return self._db.rows(query, params)

    def memoized(self, name, build):
        return self._db.memoized(name, build) if self._memo else build()

    def __getattr__(self, name):
        return getattr(self._db, name)


# A table this small is cheaper to read whole than through an index, and the planner rightly does.
SMALL_TABLE_ROWS = 1000
# A scan that keeps at least this share of the table's rows reads little it did not need (global
# search reads every summary of a level; here that is most of the table). One that keeps less
# read the whole table to find a few rows: the plan an index should have served.
KEPT_SHARE = 0.25


def _scans(plan: dict, sizes: dict[str, float]) -> list[str]:
    found = []
    table = plan.get("Relation Name")
    if plan.get("Node Type") == "Seq Scan" and table in TABLES and sizes.get(table, 0) >= SMALL_TABLE_ROWS:
        kept = plan.get("Actual Rows", 0) * plan.get("Actual Loops", 1)
        if kept < KEPT_SHARE * sizes[table]:
            found.append(f"{table} ({kept:.0f} of {sizes[table]:.0f} rows kept)")
    for child in plan.get("Plans", []):
        found += _scans(child, sizes)
    return found


_PLAN_CHECKS = itertools.count()


def _plan(conn, namespace: str, query, params, random_page_cost: str = "", **settings: str) -> dict:
    """The executed plan of one statement as a search runs it: inside a scoped transaction, as the
    query role, prepared the way the snapshot prepares it (drivers/store/statements.py `bound_statement`) and
    on its generic plan. A `random_page_cost` misleads the planner on purpose (other `settings`
    likewise); a comment makes the statement new to the connection, so its plan is made here,
    under them."""
    from graphrag_dag.drivers.store.statements import bound_statement

    text, bound = bound_statement(query, params, namespace)
    mark = f"plan check {next(_PLAN_CHECKS)}"
    with conn.transaction():
        cur = psycopg.ClientCursor(conn)
        cur.execute("SELECT set_config('graphrag.namespace', %s, true), "
                    "set_config('role', 'graphrag_reader', true), "
                    "set_config('plan_cache_mode', 'force_generic_plan', true), "
                    "set_config('hnsw.iterative_scan', 'strict_order', true)", (namespace,))
        for name, value in (({"random_page_cost": random_page_cost} if random_page_cost else {}) | settings).items():
            cur.execute("SELECT set_config(%s, %s, true)", (name, value))
        conn.cursor().execute(f"{text} /* {mark} */", bound, prepare=True)
        (name,) = cur.execute("SELECT name FROM pg_prepared_statements WHERE statement LIKE %s",
                              (f"%/* {mark} */",)).fetchone()
        # psycopg's $1, $2, ... in that order (lists are bound in binary, `%(name)b`)
        order = list(dict.fromkeys(re.findall(r"%\((\w+)\)[sb]", text)))
        args = sql.SQL("({})").format(sql.SQL(", ").join(sql.Literal(bound[k]) for k in order)) if order else sql.SQL("")
        cur.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {}{}").format(sql.Identifier(name), args))
        return cur.fetchone()[0][0]["Plan"]


def _explain(rag, namespace: str, statements, random_page_cost: str = "") -> dict[str, tuple[list[str], str]]:
    """The statements whose plan scans a whole table: the tables, and the plan."""
    out = {}
    sizes = dict(rag.store.admin_rows("SELECT relname::text, reltuples FROM pg_class WHERE relname = ANY(%s)",
                                      (sorted(TABLES),)))
    with rag.store.query_pool.connection() as conn:
        for query, params in statements:
            plan = _plan(conn, namespace, query, params, random_page_cost)
            statement = sql.SQL(query) if isinstance(query, str) else query
            text = " ".join(statement.as_string(conn).split())
            if _scans(plan, sizes):
                out[text[:90]] = (_scans(plan, sizes), json.dumps(plan)[:3000])
    return out


def _recorded(rag, namespace: str, method: str, queries: list[str], memo: bool = True) -> list[tuple[object, dict]]:
    """Every statement the runs of `queries` sent, with its parameters (`memo` False: also those of
    what is kept per namespace version)."""
    recorded = []
    for query in queries:
        info = rag.store.namespace_info(namespace)
        db = Recording(rag.store.scoped(namespace, index_version=info.index_version, snapshot=True), memo)
        try:
            rag.run(method, query, namespace, offline=True, overrides={"db": db})
        finally:
            db.close()
        assert db.statements, "the run read nothing through the handle it was given"
        recorded += db.statements
    return recorded


@pytest.mark.parametrize("method", ["local", "global"])
def test_no_query_path_statement_scans_a_whole_table(plans, method):
    from graphrag_dag_tools.bench import generate_queries

    rag, plans_namespace = plans
    queries = generate_queries(rag, plans_namespace, 4, seed=11) if method == "local" else ["What are the main themes?"]
    # Loads made once per namespace version (the name and title indexes, the unit count) read the
    # namespace whole by design; a first run makes them, so what is recorded is what every query pays.
    # Global search's are its whole query path (a level's summaries and their claim blocks, kept per
    # version since): they are recorded as a first search of a version sends them.
    rag.run(method, queries[0], plans_namespace, offline=True)
    recorded = _recorded(rag, plans_namespace, method, queries, memo=method == "local")
    scans = _explain(rag, plans_namespace, recorded)
    assert not scans, scans
    # Random reads priced at 40 sequential ones stand for statistics that overcount rows: the
    # look-ups must stay look-ups (CLAIMS_FOR_COMMUNITIES once flipped on a fivefold misestimate).
    misled = _explain(rag, plans_namespace, recorded, random_page_cost="40")
    assert not misled, misled


def test_the_check_flags_a_whole_table_read_for_a_few_rows():
    sizes = {"communities": 15000.0, "entity_aliases": 12.0, "community_summaries": 15000.0}
    plan = {"Node Type": "Hash Join", "Plans": [
        {"Node Type": "Seq Scan", "Relation Name": "communities", "Actual Rows": 30, "Actual Loops": 1},
        {"Node Type": "Seq Scan", "Relation Name": "entity_aliases", "Actual Rows": 0, "Actual Loops": 1},
        {"Node Type": "Seq Scan", "Relation Name": "community_summaries", "Actual Rows": 9000, "Actual Loops": 1},
        {"Node Type": "Index Scan", "Relation Name": "entities", "Actual Rows": 3, "Actual Loops": 12}]}
    assert _scans(plan, sizes) == ["communities (30 of 15000 rows kept)"]


def _nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def test_claims_are_read_member_by_member_even_when_the_planner_misjudges(plans):
    """CLAIMS_FOR_COMMUNITIES once became a hash join over every claim of the namespace when the
    member count was misestimated. Random reads priced at 40 sequential ones mislead the planner
    the same way on purpose: the claims must still come through claims_subject_idx, once per member."""
    from graphrag_dag.dataflows.common.sql import CLAIMS_FOR_COMMUNITIES

    rag, ns = plans
    cids = [r[0] for r in rag.store.admin_rows(
        "SELECT community_id FROM community_members WHERE namespace = %s GROUP BY 1 HAVING count(*) BETWEEN 20 AND 40 "
        "ORDER BY 1 LIMIT 8", (ns,))]
    members = rag.store.admin_rows("SELECT DISTINCT entity_id FROM community_members "
                                   "WHERE namespace = %s AND community_id = ANY(%s)", (ns, cids))
    assert len(cids) == 8 and len(members) >= 160
    with rag.store.query_pool.connection() as conn:
        plan = _plan(conn, ns, CLAIMS_FOR_COMMUNITIES,
                     {"ns": ns, "cids": cids, "eids": [m[0] for m in members[:10]], "limit": 400}, "40")
    reads = [n for n in _nodes(plan) if n.get("Relation Name") == "claims"]
    assert [(n["Node Type"], n.get("Index Name")) for n in reads] == [("Index Scan", "claims_subject_idx")], reads
    assert reads[0]["Actual Loops"] == len(members)


# Indexes that carry every column their statements read (sql/013_covering_indexes.sql), with the
# search that reads each: a read through one of them that still visits the heap pays a random page
# per row on a large namespace, and `warm` leaves their tables' rows out (drivers/store/warm.py,
# INDEX_ONLY). (The covering indexes of edges and entity_units served the walk, the signals and the
# sources' units, which now read the in-memory graph.)
COVERING = {"local": {"chunk_words_pkey", "community_members_pkey"}, "global": {"community_members_pkey"}}


@pytest.mark.parametrize("method", ["local", "global"])
def test_covered_tables_are_read_through_their_index_alone(plans, method):
    from graphrag_dag.drivers.store.warm import INDEX_ONLY
    from graphrag_dag_tools.bench import generate_queries

    rag, ns = plans
    queries = generate_queries(rag, ns, 3, seed=13) if method == "local" else ["What are the main themes?"]
    rag.run(method, queries[0], ns, offline=True)  # what is kept per namespace version is made first
    reads = []
    with rag.store.query_pool.connection() as conn:
        # global: what is kept per namespace version is its whole path, so it is recorded unkept
        for query, params in _recorded(rag, ns, method, queries, memo=method == "local"):
            reads += [(n["Node Type"], n.get("Index Name"), n.get("Heap Fetches", 0))
                      for n in _nodes(_plan(conn, ns, query, params)) if n.get("Relation Name") in INDEX_ONLY]
    # every read of those tables goes through one of these indexes, every one of them is used, and
    # none visits a row
    assert {name for _, name, _ in reads} == COVERING[method], sorted(set(reads))
    assert {(kind, fetches) for kind, _, fetches in reads} == {("Index Only Scan", 0)}, sorted(set(reads))


# Oracles for the in-memory graph (dataflows/local/graph_index.py): what it answers, asked of the
# tables directly. Neighbours: each entity's strongest, ties by the other id in code-point order.
NEIGHBOURS = """
SELECT f.id, n.other, n.weight FROM unnest(%(ids)s::text[]) WITH ORDINALITY AS f(id, k)
CROSS JOIN LATERAL (
    SELECT other, weight FROM (
        SELECT target_id AS other, weight FROM edges WHERE namespace = %(ns)s AND source_id = f.id
        UNION ALL
        SELECT source_id, weight FROM edges WHERE namespace = %(ns)s AND target_id = f.id) both_ways
    ORDER BY weight DESC, other COLLATE "C" LIMIT %(cap)s) n
ORDER BY f.k, n.weight DESC, n.other COLLATE "C"
"""
# Communities: up the parent chain from the leaf to the level, the closest (the deeper of two).
COMMUNITIES = """
WITH RECURSIVE up AS (
    SELECT e.id AS entity_id, c.id, c.level, c.parent_id FROM entities e
    JOIN communities c ON c.namespace = e.namespace AND c.id = e.leaf_community_id
    WHERE e.namespace = %(ns)s AND e.id = ANY(%(ids)s)
    UNION ALL
    SELECT up.entity_id, p.id, p.level, p.parent_id FROM up
    JOIN communities p ON p.namespace = %(ns)s AND p.id = up.parent_id
    WHERE %(level)s::int IS NOT NULL AND up.level > %(level)s::int
)
SELECT DISTINCT ON (entity_id) entity_id, id, level FROM up
ORDER BY entity_id, abs(level - coalesce(%(level)s::int, level)), level DESC
"""
# Member signals: size, members among the entities, edge weight between them and the members, names.
MEMBER_SIGNALS = """
WITH members AS (
    SELECT community_id, entity_id FROM community_members WHERE namespace = %(ns)s AND community_id = ANY(%(cids)s)
)
SELECT m.community_id, count(*),
       count(*) FILTER (WHERE m.entity_id = ANY(%(eids)s)),
       coalesce((SELECT sum(w) FROM (
           SELECT e.weight AS w FROM members x JOIN edges e ON e.namespace = %(ns)s AND e.target_id = x.entity_id
           WHERE x.community_id = m.community_id AND e.source_id = ANY(%(eids)s)
           UNION ALL
           SELECT e.weight FROM members x JOIN edges e ON e.namespace = %(ns)s AND e.source_id = x.entity_id
           WHERE x.community_id = m.community_id AND e.target_id = ANY(%(eids)s)) both_ends), 0),
       coalesce((SELECT array_agg(n.name ORDER BY n.name COLLATE "C") FROM members x
                 JOIN entities n ON n.namespace = %(ns)s AND n.id = x.entity_id
                 WHERE x.community_id = m.community_id AND x.entity_id = ANY(%(eids)s)), '{}')
FROM members m GROUP BY m.community_id
"""
# Units: each entity's first `cap` (about it first, then by id) with its unit count; a unit's entities.
UNITS = """
SELECT x.entity_id, x.unit_id, x.about, n.units FROM unnest(%(ids)s::text[]) AS i(id)
CROSS JOIN LATERAL (SELECT count(*) AS units FROM entity_units WHERE namespace = %(ns)s AND entity_id = i.id) n
CROSS JOIN LATERAL (SELECT entity_id, unit_id, about FROM entity_units WHERE namespace = %(ns)s AND entity_id = i.id
                    ORDER BY about DESC, unit_id COLLATE "C" LIMIT %(cap)s) x
ORDER BY x.entity_id COLLATE "C", x.about DESC, x.unit_id COLLATE "C"
"""
MENTIONS = """
SELECT unit_id, entity_id FROM entity_units WHERE namespace = %(ns)s AND unit_id = ANY(%(units)s)
ORDER BY unit_id COLLATE "C", entity_id COLLATE "C"
"""


def test_the_graph_in_memory_answers_as_the_tables_do(plans):
    """The walk's neighbours, the communities at a level, the ranking's member signals and the
    sources' entity units, read from the in-memory graph, equal what the tables say, for hubs
    and ordinary entities alike; and a search reads none of it per query."""
    from graphrag_dag.dataflows.local.community_recall import graph_index

    rag, ns = plans
    hubs = [r[0] for r in rag.store.admin_rows(
        "SELECT source_id FROM edges WHERE namespace = %s GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 20", (ns,))]
    some = [r[0] for r in rag.store.admin_rows(
        "SELECT id FROM entities WHERE namespace = %s ORDER BY md5(id) LIMIT 300", (ns,))]
    ids = hubs + some
    with rag.reading(ns) as db:
        graph = graph_index(db, ns)
    for cap in (1, 10):
        want = rag.store.admin_rows(NEIGHBOURS, {"ns": ns, "ids": ids, "cap": cap})
        assert graph.neighbour_rows(ids, cap) == [(a, b, float(w)) for a, b, w in want]
    for level in (None, 0, 1, 2):
        want = rag.store.admin_rows(COMMUNITIES, {"ns": ns, "ids": ids, "level": level})
        assert sorted(graph.communities_at(ids, level)) == sorted((e, c, int(lvl)) for e, c, lvl in want)
        assert len(want) == len(ids)  # every synthetic entity has a leaf community
    cids = [r[0] for r in rag.store.admin_rows(
        "SELECT id FROM communities WHERE namespace = %s ORDER BY level, md5(id) LIMIT 60", (ns,))]
    for eids in (hubs[:5], some[:8], hubs[:2] + some[:3]):
        want = {c: (int(n), int(inter), round(float(w), 9), list(names)) for c, n, inter, w, names in
                rag.store.admin_rows(MEMBER_SIGNALS, {"ns": ns, "cids": cids, "eids": eids})}
        got = graph.member_signals(cids, eids)
        assert got == want and any(v[2] > 0 for v in got.values()) and any(v[1] > 0 for v in got.values())
    for cap in (1, 32):
        want = rag.store.admin_rows(UNITS, {"ns": ns, "ids": ids, "cap": cap})
        assert graph.unit_rows(ids, cap) == [(e, u, a, int(n)) for e, u, a, n in want]
        assert any(n > 32 for *_, n in want)  # a hub's units are cut (synthetic units are never `about`:
        # tests/test_graph_index.py checks that order)
    assert [graph.unit_count(e) for e in ids] == [int(r[0]) for r in rag.store.admin_rows(
        "SELECT (SELECT count(*) FROM entity_units WHERE namespace = %s AND entity_id = i) FROM unnest(%s::text[]) i",
        (ns, ids))]
    units = [u for _, u, _, _ in graph.unit_rows(some[:40], 3)] + ["no such unit"]
    assert graph.unit_mentions(units) == [tuple(r) for r in rag.store.admin_rows(MENTIONS, {"ns": ns, "units": units})]

    query = "Tell me about " + rag.store.admin_rows(
        "SELECT name FROM entities WHERE namespace = %s AND id = %s", (ns, hubs[0]))[0][0]
    full = rag.run("local", query, ns, offline=True, final_vars=["local_result", "reached_entities"])
    statements = {t.node: t.statements for t in full.trace}
    assert statements["entity_neighbourhood"] == statements["topology_communities"] == 0
    assert statements["seed_weights"] == statements["entity_units"] == 0
    assert statements["community_signals"] == 0
    assert 2 in full.values["reached_entities"].values()


REPORTS = """
SELECT c.id, c.level, c.title, coalesce(s.summary, ''),
       CASE WHEN s.embedding IS NULL THEN NULL ELSE 1 - ((s.embedding::vector({dim})) <=> %(q)s::vector({dim})) END,
       coalesce(s.rank, 0)
FROM communities c LEFT JOIN community_summaries s ON s.namespace = c.namespace AND s.community_id = c.id
WHERE c.namespace = %(ns)s AND c.id = ANY(%(cids)s) ORDER BY c.id COLLATE "C"
"""


def test_the_community_reports_in_memory_answer_as_the_tables_do(plans):
    """Titles, levels, summaries, report ranks and the summaries' similarity to a query, read from
    the in-memory reports (dataflows/local/community_reports.py), equal the tables' and
    pgvector's own, for communities of every level and for queries near some of them."""
    from graphrag_dag.dataflows.local.community_ranking import community_reports

    rag, ns = plans
    dim = int(rag.store.admin_rows("SELECT embed_dim FROM namespaces WHERE namespace = %s", (ns,))[0][0])
    cids = [r[0] for r in rag.store.admin_rows(
        "SELECT id FROM communities WHERE namespace = %s ORDER BY level, md5(id) LIMIT 200", (ns,))]
    with rag.reading(ns) as db:
        reports = community_reports(db, ns, dim)
    near = rag.store.admin_rows("SELECT community_id, embedding::text FROM community_summaries WHERE namespace = %s "
                                "ORDER BY md5(community_id) LIMIT 3", (ns,))
    cids += [cid for cid, _ in near]
    for _, text in near:
        query = np.array(json.loads(text), dtype=np.float32)
        got = sorted(reports.reports(cids + ["no such community"], query))
        want = rag.store.admin_rows(REPORTS.format(dim=dim), {"ns": ns, "cids": cids, "q": text})
        assert [g[:4] + g[5:] for g in got] == [(c, int(lvl), t, s, float(r)) for c, lvl, t, s, _, r in want]
        assert all(abs(g[4] - w[4]) < 1e-6 for g, w in zip(got, want)) and max(g[4] for g in got) > 0.999
