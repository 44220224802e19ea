"""The child process of test_warm's inner-page test (not a test module).

Run in a home that no other process uses, it starts the embedded server with empty buffers, reads
a namespace one way (`leaves`: each b-tree's namespace range in key order and nothing else;
`warm`: GraphRag.warm), then looks up every leading key value of the b-trees local search looks
values up in, each by its own descent from the root, and prints the blocks each b-tree's look-ups
read from outside the buffers, as JSON. A fresh process is what makes the buffers empty: the
library stops the server when the last process using it exits."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

# index -> (table, the key column after namespace that searches look values up by): ids and
# parents of chunks, words, communities' members (dataflows/common/sql.py).
LOOKED_UP = {"chunks_pkey": ("chunks", "id"), "chunks_parent_idx": ("chunks", "parent_id"),
             "chunk_words_pkey": ("chunk_words", "word"),
             "community_members_pkey": ("community_members", "community_id")}
_INDEX_PATHS = ("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off; "
                "SET LOCAL max_parallel_workers_per_gather = 0")


def _plan(cur: psycopg.Cursor, statement: sql.Composable, namespace: str) -> dict[str, Any]:
    cur.execute(sql.SQL("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) {}").format(statement), {"ns": namespace})
    raw = cur.fetchone()[0]
    return (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]


def _nodes(plan: dict[str, Any]):
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _leaves(cur: psycopg.Cursor, namespace: str) -> None:
    """Each b-tree's namespace range in key order, which reaches every leaf but only the inner pages
    on the way down to the first."""
    for index, (table, column) in LOOKED_UP.items():
        statement = sql.SQL("SELECT count(*) FROM (SELECT {c} FROM {t} WHERE namespace = %(ns)s ORDER BY {c}) s").format(
            c=sql.Identifier(column), t=sql.Identifier(table))
        plan = _plan(cur, statement, namespace)
        assert any(n.get("Index Name") == index for n in _nodes(plan)), (index, plan)


def _look_ups(cur: psycopg.Cursor, namespace: str) -> dict[str, dict[str, int]]:
    out = {}
    for index, (table, column) in LOOKED_UP.items():
        c, t = sql.Identifier(column), sql.Identifier(table)
        statement = sql.SQL(
            "SELECT count(x.k) FROM (SELECT DISTINCT {c} FROM {t} WHERE namespace = %(ns)s AND {c} IS NOT NULL) s(k) "
            "CROSS JOIN LATERAL (SELECT {c} AS k FROM {t} WHERE namespace = %(ns)s AND {c} = s.k "
            "ORDER BY {c} LIMIT 1) x").format(c=c, t=t)
        plan = _plan(cur, statement, namespace)
        # The inner side: one descent a value, through the index under test.
        inner = [n for n in _nodes(plan) if n.get("Index Name") == index and n.get("Actual Loops", 0) > 1]
        assert inner, (index, plan)
        out[index] = {"read": sum(int(n.get("Shared Read Blocks", 0)) for n in inner),
                      "descents": int(inner[0]["Actual Loops"]),
                      "heap_fetches": sum(int(n.get("Heap Fetches", 0)) for n in inner)}
    return out


def main(home: Path, namespace: str, mode: str) -> dict[str, dict[str, int]]:
    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.store.server import embedded_dsn

    with GraphRag(home=home) as rag:
        if mode == "warm":
            rag.warm(namespace)
        with psycopg.connect(embedded_dsn(home)) as conn, conn.cursor() as cur:
            cur.execute(_INDEX_PATHS)
            if mode == "leaves":
                _leaves(cur, namespace)
            return _look_ups(cur, namespace)


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3])), flush=True)
