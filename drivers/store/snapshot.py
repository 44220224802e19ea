"""One request's snapshot: a READ ONLY REPEATABLE READ transaction on one pooled connection.

A search reads its namespace through one snapshot, so it sees the namespace entirely before or
entirely after a concurrent rewrite, never old entities with new evidence. The transaction
begins at the first statement, together with the namespace scope and the namespace's row as the
snapshot sees it (one round trip), and ends at `close()`. Statements of the request take turns on
the connection, whichever thread sends them.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

import psycopg
from psycopg import sql

from graphrag_dag.drivers.store.pool import Pool

BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
# After the scope: the query role reads the namespaces table through row security.
NAMESPACE_ROW = "SELECT embed_model, embed_dim, index_version FROM namespaces WHERE namespace = %(_scope_ns)s"


class Snapshot:
    """The connection of one snapshot, lent to one statement at a time."""

    def __init__(self, pool: Pool, namespace: str, scope_sql: sql.Composable) -> None:
        self._pool = pool
        self._namespace = namespace
        self._scope_sql = scope_sql
        self._lock = threading.Lock()
        self._held: tuple[Any, psycopg.Connection] | None = None
        self._closed = False
        # The namespace's row as the snapshot sees it: (embed_model, embed_dim, index_version), or
        # None when there is no such namespace; read when the snapshot begins.
        self.namespace_row: tuple[str, int, str] | None = None

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        with self._lock:
            if self._closed:
                # A node of a failed request may still start after the request ended: it must not
                # begin a transaction that nobody would end.
                raise RuntimeError("the request's snapshot is closed")
            if self._held is None:
                self._held = self._begin()
            yield self._held[1]

    def _begin(self) -> tuple[Any, psycopg.Connection]:
        """The transaction, its scope and the namespace's row, as one message."""
        manager = self._pool.connection()
        conn = manager.__enter__()
        try:
            cur = psycopg.ClientCursor(conn)
            cur.execute(sql.SQL("{}; {}; {}").format(sql.SQL(BEGIN), self._scope_sql, sql.SQL(NAMESPACE_ROW)),
                        {"_scope_ns": self._namespace})
            cur.nextset()
            cur.nextset()
            row = cur.fetchone()
            cur.close()
        except BaseException as exc:
            manager.__exit__(type(exc), exc, exc.__traceback__)
            raise
        self.namespace_row = (row[0], int(row[1]), row[2]) if row else None
        return manager, conn

    def close(self) -> None:
        """End the transaction (if it began) and give the connection back, once a statement still
        running on it (a failed request's) has finished. COMMIT, not ROLLBACK: both end a read-only
        transaction alike, but on a ROLLBACK psycopg forgets the statements prepared on the
        connection, and the next request would prepare them again."""
        with self._lock:
            self._closed = True
            held, self._held = self._held, None
        if held is None:
            return
        manager, conn = held
        with contextlib.suppress(psycopg.Error):  # a broken connection is discarded by the pool
            conn.commit()
        manager.__exit__(None, None, None)
