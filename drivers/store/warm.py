"""Warming a namespace: reading its rows, b-trees and HNSW graphs into PostgreSQL's shared buffers
before the first search, through the access paths the searches use.

Why: a search touches a few thousand pages of its namespace (the HNSW graphs' neighbourhoods, the
walk's edges, the keyword table's words, the rows they point to). A page that is not in the shared
buffers yet costs a read from the operating system, a system call and a copy at best and the disk at
worst. On a server that has just started, or that served other namespaces, most are not there, and
a new question's statements take noticeably longer than when run again.

PostgreSQL's own `pg_prewarm` is a contrib extension that the embedded server does not ship and
another server may not allow, so each relation is read with a plain, namespace-scoped SELECT:

- a table: a bitmap heap scan of the namespace's rows (a sequential scan of a big table reads
  through a small ring of buffers and would leave almost nothing behind);
- a b-tree led by `namespace`: an index scan of the namespace's key range, in key order, with a
  walk that goes back to the root about once a leaf page, for the inner pages the scan passes by;
- a namespace's HNSW graph: an iterative scan (pgvector 0.8) asked for every vector, which visits
  every element of the graph and the row each points to.

Tables first, graphs last: when the namespace is larger than the buffers, the pages read last are the
ones that stay, and vector searches gain most from staying. Each statement runs under
`EXPLAIN (ANALYZE, BUFFERS)`, so the report says what was read rather than what was hoped for.

Two tables are left out, with their b-trees: `edges` and `entity_units`. No search statement reads
them. A searching process loads them whole, once per namespace version, into its in-memory graph
(dataflows/local/graph_index.py, through the COPYs of dataflows/common/walk_sql.py). The rows of
`chunk_words` and `community_members` are left out too, not their primary keys: each table is
nothing but its key, which keyword recall and the communities' claims read alone (index-only scans,
with the visibility map the writer's VACUUM leaves; tests/test_plans.py checks the plans). Reading
all of these would only push out pages the searches do read. The in-memory load before a warm
(GraphRag.warm_for_search) reads those rows anyway, with the edges' and the units' b-trees.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from typing import Any, Callable, Iterator

import psycopg
from psycopg import sql

from graphrag_dag.dataflows.common.sql import vector_expr
from graphrag_dag.drivers.store.pool import Pool
from graphrag_dag.drivers.store.writer import INDEX_PREDICATES, NS_TABLES, VECTOR_TABLES, vector_index_names

# The b-trees of our tables whose first key column is the namespace, with their key columns. Partial
# indexes are left out: a scan of the whole key range cannot use them.
_BTREES_SQL = """
SELECT t.relname, i.relname,
       array(SELECT pg_get_indexdef(x.indexrelid, k, true) FROM generate_series(1, x.indnkeyatts) AS k),
       i.reltuples / greatest(i.relpages, 1)
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_am am ON am.oid = i.relam
WHERE t.relname = ANY(%(tables)s) AND t.relnamespace = current_schema()::regnamespace
  AND am.amname = 'btree' AND x.indpred IS NULL
  AND pg_get_indexdef(x.indexrelid, 1, true) = 'namespace'
ORDER BY t.relname, i.relname
"""

_PLAIN_COLUMN = re.compile(r"^[a-z_][a-z0-9_]*$")

# Planner settings per kind of read, transaction-local: they steer each statement to the access
# path named above, and nothing else. One process reads it all: parallel workers would only
# compete with the searches being served.
_ONE_PROCESS = {"max_parallel_workers_per_gather": "0", "enable_seqscan": "off"}
_INDEX_ORDER = {**_ONE_PROCESS, "enable_indexscan": "on", "enable_indexonlyscan": "on", "enable_bitmapscan": "off",
                "enable_sort": "off"}
_PATHS = {
    "table": {**_ONE_PROCESS, "enable_indexscan": "off", "enable_indexonlyscan": "off", "enable_bitmapscan": "on",
              "enable_sort": "on"},
    "btree": _INDEX_ORDER,
    # Every vector, in whatever order the graph gives them: the scan goes on until the graph is
    # exhausted. Its visited set is bounded by work_mem times the multiplier: 64 MB x 8 holds
    # millions of elements.
    "hnsw": {**_INDEX_ORDER, "hnsw.iterative_scan": "relaxed_order", "hnsw.max_scan_tuples": "2147483647",
             "work_mem": "64MB", "hnsw.scan_mem_multiplier": "8"},
}


@dataclasses.dataclass(frozen=True)
class WarmedRelation:
    """One relation as the warming read it: `read_mb` came from the OS or the disk; `hit_mb` was in
    the buffers already (for a graph, each visit counts, so it can exceed the relation's size)."""

    relation: str
    kind: str  # table | btree | hnsw
    rows: int
    read_mb: float
    hit_mb: float
    ms: float


@dataclasses.dataclass(frozen=True)
class WarmReport:
    namespace: str
    relations: list[WarmedRelation]
    shared_buffers_mb: float
    seconds: float

    @property
    def read_mb(self) -> float:
        return round(sum(r.read_mb for r in self.relations), 1)

    def to_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "read_mb": self.read_mb, "shared_buffers_mb": self.shared_buffers_mb,
                "seconds": self.seconds, "relations": [dataclasses.asdict(r) for r in self.relations]}


def warm_namespace(pool: Pool, namespace: str, dim: int, scope_sql: sql.Composable,
                   say: Callable[[str], None] = lambda _msg: None) -> WarmReport:
    """Read the namespace's relations into the shared buffers (module docstring), in one read-only
    transaction under the namespace's scope, so row-level security bounds what it can read."""
    started = time.perf_counter()
    relations: list[WarmedRelation] = []
    with pool.connection() as conn:
        cur = psycopg.ClientCursor(conn)
        try:
            cur.execute(sql.SQL("BEGIN READ ONLY; {}").format(scope_sql), {"_scope_ns": namespace})
            memory = memory_settings(cur)
            block_mb = memory["block_size"] / 1048576
            btrees = cur.execute(_BTREES_SQL, {"tables": NS_TABLES}).fetchall()
            for statement, kind, name in _statements(cur, namespace, dim, btrees):
                relations.append(_read(cur, statement, kind, name, namespace, block_mb))
                say(f"warm: {relations[-1].relation} ({relations[-1].read_mb:.0f} MB read)")
        finally:
            cur.execute("ROLLBACK")
            cur.close()
    return WarmReport(namespace, relations, memory["shared_buffers_mb"], round(time.perf_counter() - started, 2))


_MEMORY_SETTINGS = ("SELECT name, setting FROM pg_settings WHERE name IN "
                    "('shared_buffers', 'block_size', 'huge_pages', 'huge_pages_status', 'shared_memory_size_in_huge_pages')")


def memory_settings(cur: psycopg.Cursor | psycopg.Connection) -> dict[str, Any]:
    """The server's block size, its shared buffers' size, whether they sit on huge pages
    (`huge_pages_status` from PostgreSQL 17; before that only the setting, e.g. `try`), and how many
    huge pages its shared memory would take (from PostgreSQL 15; None before, or where the
    platform has none), which is what a host must reserve. Readable by any login: none of these is
    a superuser-only setting."""
    rows = dict(cur.execute(_MEMORY_SETTINGS).fetchall())
    block = int(rows["block_size"])
    needed = int(rows.get("shared_memory_size_in_huge_pages", -1))
    return {"block_size": block, "shared_buffers_mb": round(int(rows["shared_buffers"]) * block / 1048576, 1),
            "huge_pages": rows.get("huge_pages_status", rows.get("huge_pages", "unknown")),
            "huge_pages_needed": needed if needed >= 0 else None}


# Tables that searches only ever load whole into their own memory (module docstring): not warmed.
LOADED_WHOLE = ("edges", "entity_units")
# Tables that searches read through an index alone: their b-trees are warmed, their rows are not.
INDEX_ONLY = ("chunk_words", "community_members")


def _statements(cur: psycopg.Cursor, namespace: str, dim: int,
                btrees: list[tuple[str, str, list[str], float]]) -> list[tuple[sql.Composable, str, str]]:
    """(statement, kind, relation it should read) in the order they run: tables, b-trees, graphs."""
    out: list[tuple[sql.Composable, str, str]] = []
    for table in (t for t in NS_TABLES if t not in LOADED_WHOLE + INDEX_ONLY):
        # xmin lives only in the row, so no index alone can answer: every row's page is read.
        out.append((sql.SQL("SELECT count(xmin) FROM {} WHERE namespace = %(ns)s").format(sql.Identifier(table)),
                    "table", table))
    for table, index, columns, per_page in btrees:
        if table in LOADED_WHOLE or not all(_PLAIN_COLUMN.match(c) for c in columns):
            continue  # never searched by statement, or an expression key: not ours to order by
        out.append((_btree_read(table, columns, _stride(per_page)), "btree", index))
    for table in VECTOR_TABLES:
        graphs = vector_index_names(cur.connection, table, namespace)
        if not graphs:
            continue
        expr = vector_expr(dim)
        where = sql.SQL("namespace = %(ns)s AND embedding IS NOT NULL{}").format(
            sql.SQL(INDEX_PREDICATES.get(table, "")))
        # Any vector of the namespace will do as the starting point: the scan visits them all.
        out.append((sql.SQL("SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {where} ORDER BY {expr} <=> "
                            "(SELECT {expr} FROM {table} WHERE {where} LIMIT 1) LIMIT 2147483647) AS s").format(
                        table=sql.Identifier(table), where=where, expr=expr), "hnsw", graphs[-1]))
    return out


def _stride(entries_per_page: float) -> int:
    """Entries between two of the walk's descents (`_btree_read`): about one a leaf page, from the
    index's statistics (all namespaces'), or 64 where it has none yet (reltuples is -1)."""
    return max(16, int(entries_per_page)) if entries_per_page > 0 else 64


def _btree_read(table: str, columns: list[str], stride: int) -> sql.Composable:
    """Every leaf page of a b-tree's namespace range, in key order, and the inner pages above them.

    A scan in key order walks the leaves from one to the next and never comes back up, but a
    search's look-up descends from the root through an inner page to its leaf. Warming only the
    leaves left those inner pages to the searches: at 100k entities 4.9 blocks a query came from
    outside the buffers, all of them b-tree pages (chunks_pkey 3.3, chunks_parent_idx 1.2,
    chunk_words_pkey 0.8, community_members_pkey 0.4) of relations whose leaves were all in.

    So after the scan, a second walk over the same range looks up, every `stride` entries, the
    first entry past the key it stopped at, as a look-up by key does: from the root down. With
    about a leaf page's worth of entries between descents, it comes down about as often as there
    are leaves, and so through each inner page right above them once for each leaf it holds a
    downlink to: tens to hundreds of times. Fixed strides were too coarse for some b-trees and
    too fine for others: every 1,024 entries missed one of the inner pages of chunks_pkey in a
    2k-entity namespace (about 35 entries a page there), and a descent every 64 entries, counted
    with row_number(), made the read of the largest, chunk_words_pkey, four times as long.

    A NULL in a key column ends the walk: ours hold NULLs only in a leading column, where they sort
    last, and no look-up looks for one. The scan still reads the leaves, because in a b-tree whose
    keys repeat the walk steps over the rest of a value's run."""
    keys = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    rest = [c for c in columns if c != "namespace"]
    scan = sql.SQL("SELECT count(*) FROM (SELECT {keys} FROM {table} WHERE namespace = %(ns)s ORDER BY {keys}) AS s")
    if not rest:
        return scan.format(keys=keys, table=sql.Identifier(table))
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in rest)
    past = sql.SQL(", ").join(sql.Identifier("h", c) for c in rest)
    return sql.SQL(
        "SELECT ({scan}), (WITH RECURSIVE hop({cols}) AS ("
        "(SELECT {cols} FROM {table} WHERE namespace = %(ns)s ORDER BY {cols} LIMIT 1) UNION ALL "
        "SELECT n.* FROM hop AS h CROSS JOIN LATERAL (SELECT {cols} FROM {table} WHERE namespace = %(ns)s "
        "AND ({cols}) > ({past}) ORDER BY {cols} OFFSET {skip} LIMIT 1) AS n) SELECT count(*) FROM hop)"
    ).format(scan=scan.format(keys=keys, table=sql.Identifier(table)), cols=cols, past=past,
             table=sql.Identifier(table), skip=sql.Literal(stride - 1))


def _read(cur: psycopg.Cursor, statement: sql.Composable, kind: str, name: str, namespace: str,
          block_mb: float) -> WarmedRelation:
    started = time.perf_counter()
    settings = list(_PATHS[kind].items())
    cur.execute(sql.SQL("SELECT {}").format(sql.SQL(", ").join(sql.SQL("set_config(%s, %s, true)") for _ in settings)),
                [v for pair in settings for v in pair])
    cur.execute(sql.SQL("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) {}").format(statement), {"ns": namespace})
    raw = cur.fetchone()[0]
    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
    nodes = list(_nodes(plan))
    if kind != "table" and not any(n.get("Index Name") == name for n in nodes):
        # The planner read another index than the one asked for: report what was read.
        name = next((str(n["Index Name"]) for n in nodes if n.get("Index Name")), name)
    scans = [n for n in nodes if n.get("Node Type") in _ROW_SCANS]
    # A b-tree is read twice over, along its leaves and in its descents: the leaves give the rows.
    mine = [n for n in scans if kind == "table" or n.get("Index Name") == name] or scans[:1]
    return WarmedRelation(
        relation=name,
        kind=kind,
        rows=max((int(n.get("Actual Rows", 0) * n.get("Actual Loops", 1)) for n in mine), default=0),
        read_mb=round(int(plan.get("Shared Read Blocks", 0)) * block_mb, 1),
        hit_mb=round(int(plan.get("Shared Hit Blocks", 0)) * block_mb, 1),
        ms=round((time.perf_counter() - started) * 1000, 1),
    )


_ROW_SCANS = ("Bitmap Heap Scan", "Index Scan", "Index Only Scan")


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The plan's nodes, outermost first (an InitPlan's too)."""
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)
