"""Writing and deleting namespaces. A namespace is written in one transaction, whole or (an
update) as the rows that differ, so readers see the old index or the new one, never a mix, and
a failure leaves the old one untouched. What to write was decided by the index flow
(dataflows/index/prepare.py); this module only writes it.

No write takes a lock that blocks reads of other namespaces. Tenants share the tables, and
dropping an index locks its whole table (ACCESS EXCLUSIVE) until the transaction ends, so the
write creates each per-namespace HNSW index under a new name (CREATE INDEX only blocks other
writers) and drops the old ones after the commit, CONCURRENTLY.

CREATE INDEX waits for every other writer of its table, and a write holds the shared tables from
its first COPY to its commit, so two namespaces written at once would each wait for the other (a
deadlock PostgreSQL resolves by aborting one). Writes of different namespaces therefore take
turns on one advisory lock; reading, embedding and preparing, the long part, runs before it."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import uuid
from typing import Any, Callable, Iterable, Iterator, Sequence

import psycopg
from psycopg import sql

from graphrag_dag.dataflows.common.errors import BadInput, StoreUnavailable
from graphrag_dag.dataflows.common.records import Chunk, WriteSet
from graphrag_dag.dataflows.common.sql import HALFVEC_ABOVE, vector_expr
from graphrag_dag.dataflows.common.textproc import name_key
from graphrag_dag.drivers.store.pool import Pool, first_line
from graphrag_dag.drivers.store.server import MEMORY_SIZE, asked_setting

# maintenance_work_mem of the HNSW builds (build_memory_kb says how much each one gets unless
# GRAPHRAG_DAG_BUILD_MEMORY fixes it). pgvector holds the graph in memory until it outgrows that, then
# goes on on disk several times slower, so a build is given its graph's size where it can.
# Per vector the graph (m = 16) takes the vector's own bytes plus about 714: pgvector 0.8.5's notice
# "graph no longer fits into maintenance_work_mem after N tuples" came at 967-971 bytes a vector at
# 64 dimensions and 1,736-1,740 at 256, at 1, 2, 8 and 16 MB (it counts the graph in 1 MB blocks).
# Halfvec's (above 2,000 dimensions) is taken to be its 2-byte values plus the same.
HNSW_VECTOR_OVERHEAD = 714
BUILD_MEMORY_FLOOR_KB = 1 << 20  # 1 GB, every build's allowance before it was sized: smaller ones never reach it
NS_TABLES = ["documents", "chunks", "chunk_words", "entities", "entity_aliases", "entity_units", "edges",
             "communities", "community_members", "community_summaries", "claims"]
VECTOR_TABLES = ("entities", "chunks", "community_summaries")
# Extra partial-index predicates that the vector queries in dataflows/common/sql.py repeat verbatim,
# so the planner can answer them from the index without post-filtering (which could starve results).
INDEX_PREDICATES = {"chunks": " AND kind = 'evidence'"}

# The keyword-recall word table, derived in the database with PostgreSQL's own tokenizer; its
# rows name chunks by their integer keys (sql/012_chunk_keys.sql says why).
CHUNK_WORDS_SQL = """
INSERT INTO chunk_words (namespace, word, chunk_key)
SELECT DISTINCT c.namespace, w, c.chunk_key
FROM chunks c, unnest(tsvector_to_array(to_tsvector('simple', c.text))) AS w
WHERE c.namespace = %s AND c.kind = 'evidence'
"""


SHARED_WRITE_LOCK = "graphrag-shared-write"


def build_memory_setting() -> str | None:
    """GRAPHRAG_DAG_BUILD_MEMORY, validated before anything is read or written (a malformed size
    exits 2); None when unset, and each build is then sized by build_memory_kb."""
    return asked_setting("GRAPHRAG_DAG_BUILD_MEMORY", MEMORY_SIZE, "a size such as 1GB or 512MB") or None


def hnsw_graph_kb(vectors: int, dim: int) -> int:
    """What pgvector's in-memory HNSW graph of `vectors` vectors takes (see HNSW_VECTOR_OVERHEAD),
    in kB, rounded up."""
    per_vector = (2 if dim > HALFVEC_ABOVE else 4) * dim + HNSW_VECTOR_OVERHEAD  # halfvec: 2 bytes a value
    return -(-vectors * per_vector // 1024)


def build_memory_kb(vectors: int, dim: int, physical_kb: int) -> int:
    """One HNSW build's allowance: its graph with a tenth to spare, so that the build stays in
    memory; at least 1 GB (as before), and at most a quarter of this machine's memory, which the
    embedded server shares with the import itself (a server elsewhere is sized the same way: set
    GRAPHRAG_DAG_BUILD_MEMORY for it)."""
    return max(BUILD_MEMORY_FLOOR_KB, min(hnsw_graph_kb(vectors, dim) * 11 // 10, physical_kb // 4))


def _physical_kb() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 1024
    except (ValueError, OSError):  # not reported: stay at the floor
        return 4 * BUILD_MEMORY_FLOOR_KB


def _lock(conn: psycopg.Connection, namespace: str) -> None:
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"graphrag-ns:{namespace}",))


def _take_write_turn(conn: psycopg.Connection, say: Callable[[str], None]) -> None:
    """Wait for any other namespace's write to commit (see the module docstring), saying so."""
    if not conn.execute("SELECT pg_try_advisory_xact_lock(hashtext(%s))", (SHARED_WRITE_LOCK,)).fetchone()[0]:
        say("waiting for another namespace's write to finish")
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (SHARED_WRITE_LOCK,))


def write_namespace(pool: Pool, namespace: str, ws: WriteSet, *, replace: bool, source: str,
                    say: Callable[[str], None], build_memory: str | None = None,
                    settings: dict[str, Any] | None = None) -> dict[str, int]:
    """Write the whole namespace anew; `settings` are what the indexer was given (none for an import)."""
    generation = uuid.uuid4().hex[:8]
    with pool.connection() as conn, conn.transaction():
        _lock(conn, namespace)
        exists = conn.execute("SELECT 1 FROM namespaces WHERE namespace = %s", (namespace,)).fetchone()
        if exists and not replace:
            raise BadInput(f"namespace {namespace!r} already exists; pass --replace to overwrite it")
        _take_write_turn(conn, say)
        delete_rows(conn, namespace)
        _copy_records(conn, namespace, ws, say)
        _create_vector_indexes(conn, namespace, ws, generation, build_memory, say)
        conn.execute(
            "INSERT INTO namespaces (namespace, embed_model, embed_dim, index_version, source, index_settings) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            (namespace, ws.embed_model, ws.embed_dim, uuid.uuid4().hex, source,
             json.dumps(settings) if settings is not None else None),
        )
    drop_old_indexes(pool, namespace, keep=generation, say=say)
    vacuum(pool, say)
    say(f"wrote namespace {namespace}")
    return ws.records.counts()


def vacuum(pool: Pool, say: Callable[[str], None]) -> None:
    """Fresh statistics for the planner and a visibility map for index-only scans. VACUUM cannot
    run in a transaction, so it follows the commit; failing it is not fatal. It never truncates:
    that locks the shared table against every tenant (migration 008)."""
    try:
        with pool.connection() as conn:  # pool connections are in autocommit mode
            for table in NS_TABLES:
                conn.execute(sql.SQL("VACUUM (ANALYZE, TRUNCATE false) {}").format(sql.Identifier(table)))
    except (psycopg.Error, StoreUnavailable) as exc:
        say(f"warning: VACUUM ANALYZE after the import failed: {first_line(exc)}")


def drop_namespace(pool: Pool, namespace: str) -> bool:
    """Delete the namespace and what its indexer kept (a rewrite keeps the extraction cache; a drop
    forgets it)."""
    with pool.connection() as conn, conn.transaction():
        _lock(conn, namespace)
        existed = conn.execute("SELECT 1 FROM namespaces WHERE namespace = %s", (namespace,)).fetchone()
        # A delete holds the tables too: between a write's two CREATE INDEX it would deadlock it.
        _take_write_turn(conn, lambda _msg: None)
        delete_rows(conn, namespace)
        conn.execute("DELETE FROM extraction_cache WHERE namespace = %s", (namespace,))
    drop_old_indexes(pool, namespace, keep=None, say=lambda _msg: None)
    return existed is not None


def delete_rows(conn: psycopg.Connection, namespace: str) -> None:
    for table in NS_TABLES + ["namespaces"]:
        conn.execute(sql.SQL("DELETE FROM {} WHERE namespace = %s").format(sql.Identifier(table)), (namespace,))


def vector_index_prefix(table: str, namespace: str) -> str:
    digest = hashlib.sha1(namespace.encode()).hexdigest()[:10]
    return f"hnsw_{table}_{digest}_"


def vector_index_names(conn: psycopg.Connection, table: str, namespace: str) -> list[str]:
    """The namespace's HNSW indexes on `table`: one, or two for a moment after a rewrite."""
    rows = conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s AND starts_with(indexname, %s) "
                        "ORDER BY indexname", (table, vector_index_prefix(table, namespace))).fetchall()
    return [r[0] for r in rows]


def drop_old_indexes(pool: Pool, namespace: str, *, keep: str | None, say: Callable[[str], None]) -> None:
    """After the commit, every index of the namespace but generation `keep`, CONCURRENTLY (it cannot
    run in a transaction, and waits for readers instead of blocking them). A failure is not fatal:
    the next write of the namespace drops what is left."""
    try:
        with pool.connection() as conn:  # autocommit
            for table in VECTOR_TABLES:
                for name in vector_index_names(conn, table, namespace):
                    if keep is None or not name.endswith(f"_{keep}"):
                        conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
    except (psycopg.Error, StoreUnavailable) as exc:
        say(f"warning: dropping the namespace's old vector indexes failed: {first_line(exc)}")


def _create_vector_indexes(conn: psycopg.Connection, namespace: str, ws: WriteSet, generation: str,
                           build_memory: str | None, say: Callable[[str], None]) -> None:
    """A partial HNSW index per namespace keeps each tenant's vectors in its own graph, so a
    search is neither answered nor starved by another namespace's rows. Each build gets the
    memory its graph needs (build_memory_kb) unless GRAPHRAG_DAG_BUILD_MEMORY says otherwise."""
    dim = ws.embed_dim
    ops = "halfvec_cosine_ops" if dim > HALFVEC_ABOVE else "vector_cosine_ops"
    physical_kb = _physical_kb()
    for table in VECTOR_TABLES:
        vectors = len(ws.vectors.get(table, {}))  # chunks: evidence chunks only have one
        memory = build_memory or f"{build_memory_kb(vectors, dim, physical_kb)}kB"
        conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (memory,))
        say(f"indexing the vectors of {table}: {vectors}, with {memory} of build memory")
        conn.execute(
            sql.SQL("CREATE INDEX {name} ON {table} USING hnsw ({expr} {ops}) WHERE namespace = {ns}{extra}").format(
                name=sql.Identifier(vector_index_prefix(table, namespace) + generation),
                table=sql.Identifier(table),
                expr=vector_expr(dim),
                ops=sql.SQL(ops),
                ns=sql.Literal(namespace),
                extra=sql.SQL(INDEX_PREDICATES.get(table, "")),
            )
        )


@functools.lru_cache(maxsize=8)
def _vec_format(dim: int) -> str:
    return "[" + ",".join(["%.6g"] * dim) + "]"


def _vec_text(vec: Iterable[float] | None) -> str | None:
    """pgvector's text form, each value to 6 significant digits. One %-format per vector: the text
    is the same as formatting value by value, in half the time (an import writes 60k+ of them)."""
    if vec is None:
        return None
    values = tuple(vec.tolist() if hasattr(vec, "tolist") else map(float, vec))
    return _vec_format(len(values)) % values


def _copy(conn: psycopg.Connection, table: str, columns: list[str], rows: Iterator[Sequence[Any]]) -> int:
    stmt = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table), sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    )
    n = 0
    with conn.cursor().copy(stmt) as copy:
        for row in rows:
            copy.write_row(row)
            n += 1
    return n


def _chunk_keys(chunks: Iterable[Chunk]) -> dict[str, int]:
    """The evidence chunks' keys in the word table: 1, 2, ... in id order, as migration 012 numbers
    the chunks written before it (Python compares strings by code point, as COLLATE "C" does)."""
    return {cid: n for n, cid in enumerate(sorted({c.id for c in chunks if c.kind == "evidence"}), 1)}


def _table_rows(ns: str, ws: WriteSet, chunk_keys: dict[str, int]) -> list[tuple[str, list[str], Iterator[Sequence[Any]]]]:
    """Each table's columns and rows as the namespace stores them."""
    rec = ws.records
    vec = ws.vectors
    child_of = {c.parent_id for c in rec.communities if c.parent_id}
    level_of = {c.id: c.level for c in rec.communities}
    no_place = (None, None, None)
    unit_ids = {c.id for c in rec.chunks if c.kind != "evidence"}  # a stale GraphRAG id names no unit
    # Read with each claim by local search (sql/011_claim_subjects.sql says why they are copies).
    entity_names = {e.id: e.name for e in rec.entities}
    chunk_units = {c.id: c.id if c.parent_id is None else c.parent_id for c in rec.chunks}
    return [
        ("documents", ["namespace", "id", "title", "text", "record_title"],
         ((ns, d.id, d.title, d.text, d.record_title) for d in rec.documents)),
        ("chunks", ["namespace", "id", "document_id", "parent_id", "kind", "text", "start_char", "end_char", "embedding",
                    "chunk_key", "line_tokens"],
         ((ns, c.id, c.document_id, c.parent_id, c.kind, c.text, c.start, c.end,
           _vec_text(vec["chunks"].get(c.id) if c.kind == "evidence" else None), chunk_keys.get(c.id),
           ws.chunk_tokens.get(c.id) if c.kind == "evidence" else None)
          for c in rec.chunks)),
        ("entities", ["namespace", "id", "name", "name_key", "type", "description", "degree", "synthesized", "embedding",
                      "leaf_community_id"],
         ((ns, e.id, e.name, name_key(e.name), e.type, e.description, e.degree, e.synthesized,
           _vec_text(vec["entities"].get(e.id)), ws.leaf_communities.get(e.id)) for e in rec.entities)),
        ("entity_aliases", ["namespace", "entity_id", "alias", "alias_key"],
         ((ns, a.entity_id, a.alias, name_key(a.alias)) for a in {(a.entity_id, a.alias): a for a in rec.aliases}.values())),
        ("entity_units", ["namespace", "entity_id", "unit_id", "about"],
         ((ns, e.id, u, (e.id, u) in ws.subject_units) for e in rec.entities for u in dict.fromkeys(e.unit_ids)
          if u in unit_ids)),
        ("edges", ["namespace", "id", "source_id", "target_id", "weight", "description"],
         ((ns, e.id, e.source_id, e.target_id, e.weight, e.description) for e in rec.edges)),
        ("communities", ["namespace", "id", "level", "parent_id", "title", "is_leaf"],
         ((ns, c.id, c.level, c.parent_id, c.title, c.id not in child_of) for c in rec.communities)),
        ("community_members", ["namespace", "community_id", "entity_id"],
         ((ns, c.id, m) for c in rec.communities for m in dict.fromkeys(c.member_ids))),
        ("community_summaries", ["namespace", "community_id", "level", "is_leaf", "title", "summary", "full_content",
                                 "rank", "findings", "embedding"],
         ((ns, s.community_id, level_of.get(s.community_id, 0), s.community_id not in child_of, s.title, s.summary,
           s.full_content, s.rank, json.dumps(s.findings, ensure_ascii=False),
           _vec_text(vec["community_summaries"].get(s.community_id))) for s in rec.summaries)),
        ("claims", ["namespace", "id", "subject_id", "object_id", "type", "status", "description", "start_date",
                    "end_date", "source_text", "document_id", "chunk_id", "start_char", "end_char", "quote",
                    "subject_name", "unit_id", "line_tokens"],
         ((ns, c.id, c.subject_id, c.object_id, c.type, c.status, c.description, c.start_date, c.end_date,
           c.source_text, c.document_id, c.chunk_id, *ws.claim_places.get(c.id, no_place),
           entity_names.get(c.subject_id), chunk_units.get(c.chunk_id), ws.claim_tokens.get(c.id)) for c in rec.claims)),
    ]


def _copy_records(conn: psycopg.Connection, ns: str, ws: WriteSet, say: Callable[[str], None]) -> None:
    for table, columns, rows in _table_rows(ns, ws, _chunk_keys(ws.records.chunks)):
        n = _copy(conn, table, columns, rows)
        say(f"wrote {table}: {n} rows")
    n = conn.execute(CHUNK_WORDS_SQL, (ns,)).rowcount
    say(f"wrote chunk_words: {n} rows")


def update_namespace(pool: Pool, namespace: str, ws: WriteSet, *, settings: dict[str, Any], source: str,
                     say: Callable[[str], None]) -> dict[str, dict[str, int]]:
    """Make the stored namespace equal to `ws` by writing only the rows that differ, in one
    transaction: readers see it old or new as a whole, as with a rewrite. A row is kept when it is
    the same in every column; a changed one is deleted and written anew. The vector indexes take
    the new rows as they are written, so nothing is rebuilt. Evidence chunks keep their keys; new
    ones are numbered after the highest (a rewrite numbers them all in id order again).

    Returns, per table, the rows deleted and written; with none, the namespace (its version
    included) is untouched, so caches keyed by the version stay valid."""
    changes: dict[str, dict[str, int]] = {}
    with pool.connection() as conn, conn.transaction():
        _lock(conn, namespace)
        if conn.execute("SELECT 1 FROM namespaces WHERE namespace = %s", (namespace,)).fetchone() is None:
            raise BadInput(f"namespace {namespace!r} does not exist")
        _take_write_turn(conn, say)
        conn.execute("SELECT set_config('work_mem', '64MB', true)")  # the comparisons hash whole tables
        keys = _kept_chunk_keys(conn, namespace, ws.records.chunks)
        gone: set[int] = set()
        new: set[int] = set()
        for table, columns, rows in _table_rows(namespace, ws, keys):
            deleted, written = _diff_table(conn, namespace, table, columns, rows)
            changes[table] = {"deleted": len(deleted), "written": len(written)}
            if table == "chunks":
                gone, new = {k for k in deleted if k is not None}, {k for k in written if k is not None}
            if deleted or written:
                say(f"{table}: {len(deleted)} rows deleted, {len(written)} written")
        removed = conn.execute("DELETE FROM chunk_words WHERE namespace = %s AND chunk_key = ANY(%s)",
                               (namespace, sorted(gone))).rowcount if gone else 0
        added = conn.execute(CHUNK_WORDS_SQL + " AND c.chunk_key = ANY(%s)", (namespace, sorted(new))).rowcount if new else 0
        changes["chunk_words"] = {"deleted": removed, "written": added}
        changed = any(c["deleted"] or c["written"] for c in changes.values())
        if changed:
            conn.execute("UPDATE namespaces SET index_version = %s, updated_at = now(), index_settings = %s, source = %s "
                         "WHERE namespace = %s", (uuid.uuid4().hex, json.dumps(settings), source, namespace))
        else:  # the same rows, perhaps now without an unfinished unit: the version stays
            conn.execute("UPDATE namespaces SET index_settings = %s::jsonb WHERE namespace = %s "
                         "AND index_settings IS DISTINCT FROM %s::jsonb", (json.dumps(settings), namespace, json.dumps(settings)))
    if changed:
        vacuum(pool, say)
    return changes


def _kept_chunk_keys(conn: psycopg.Connection, namespace: str, chunks: Iterable[Chunk]) -> dict[str, int]:
    """Each evidence chunk's word-table key: its stored one, or a new one after the highest."""
    keys = dict(conn.execute("SELECT id, chunk_key FROM chunks WHERE namespace = %s AND chunk_key IS NOT NULL",
                             (namespace,)).fetchall())
    after = max(keys.values(), default=0)
    out: dict[str, int] = {}
    for cid in sorted({c.id for c in chunks if c.kind == "evidence"}):
        if cid not in keys:
            after += 1
            keys[cid] = after
        out[cid] = keys[cid]
    return out


def _diff_table(conn: psycopg.Connection, namespace: str, table: str, columns: list[str],
                rows: Iterator[Sequence[Any]]) -> tuple[list[Any], list[Any]]:
    """Copy the new rows into a temporary table, then delete the stored rows that none of them
    equals and write those that no stored row equals. Rows are compared whole: by a digest of
    their text form (the same for equal values of every column type, JSON included), so the
    comparisons are hash joins, and their vectors as vectors. Returns the chunk keys (or a None
    per row) deleted and written."""
    temp = sql.Identifier(f"new_{table}")
    conn.execute(sql.SQL("CREATE TEMP TABLE {} (LIKE {}) ON COMMIT DROP").format(temp, sql.Identifier(table)))
    _copy(conn, f"new_{table}", columns, rows)

    # A vector is compared as a vector: rendering it as text for the digest would cost more than
    # everything else the comparison does.
    plain = [c for c in columns if c != "embedding"]

    def same(a: str, b: str) -> sql.Composable:
        digests = sql.SQL("md5(ROW({})::text) = md5(ROW({})::text)").format(
            sql.SQL(", ").join(sql.Identifier(a, c) for c in plain), sql.SQL(", ").join(sql.Identifier(b, c) for c in plain))
        if len(plain) == len(columns):
            return digests
        return sql.SQL("{} AND {} IS NOT DISTINCT FROM {}").format(
            digests, sql.Identifier(a, "embedding"), sql.Identifier(b, "embedding"))

    key = sql.SQL("chunk_key" if table == "chunks" else "NULL")
    deleted = conn.execute(sql.SQL(
        "DELETE FROM {table} t WHERE t.namespace = %s AND NOT EXISTS "
        "(SELECT 1 FROM {temp} n WHERE {same}) RETURNING {key}").format(
            table=sql.Identifier(table), temp=temp, same=same("n", "t"), key=key), (namespace,)).fetchall()
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    written = conn.execute(sql.SQL(
        "INSERT INTO {table} ({cols}) SELECT {ncols} FROM {temp} n WHERE NOT EXISTS "
        "(SELECT 1 FROM {table} t WHERE t.namespace = %s AND {same}) RETURNING {key}").format(
            table=sql.Identifier(table), cols=cols, temp=temp, same=same("t", "n"), key=key,
            ncols=sql.SQL(", ").join(sql.Identifier("n", c) for c in columns)), (namespace,)).fetchall()
    return [r[0] for r in deleted], [r[0] for r in written]
