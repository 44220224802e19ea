"""One request's snapshot, on one connection or, while its nodes run in parallel, on two.

A search reads its namespace through one READ ONLY REPEATABLE READ transaction, so it sees the
namespace entirely before or entirely after a concurrent rewrite. Statements of parallel nodes
(the match channels, the vector and keyword recalls) would take turns on that one connection;
instead, the first transaction exports its snapshot (`pg_export_snapshot`) and a second
connection imports it (`SET TRANSACTION SNAPSHOT`), which PostgreSQL guarantees sees exactly the
same data. The second connection is taken only if the pool has one free at once, so a busy
service falls back to taking turns rather than having requests wait on each other's connections.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

import psycopg
from psycopg import generators, pq, sql

from graphrag_dag.drivers.store.pool import Pool

# A snapshot's transaction, and the namespace's row as it sees it (after the scope: the query role
# reads the namespaces table through row security). drivers/store/scoped.py sends the same ones
# ahead, without waiting for them.
BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
NAMESPACE_ROW = "SELECT embed_model, embed_dim, index_version FROM namespaces WHERE namespace = %(_scope_ns)s"

# Two: the nodes that run at once are a few short statements each, on a two-core machine a second
# connection already overlaps the server's work with the other node's Python; more would hold
# more of a shared pool for little.
MAX_CONNECTIONS = 2


class Snapshot:
    """The connections of one snapshot; `connection()` lends one, waiting for a busy one only
    when no other can be had."""

    def __init__(self, pool: Pool, namespace: str, scope_sql: sql.Composable, *, shared: bool) -> None:
        self._pool = pool
        self._namespace = namespace
        self._scope_sql = scope_sql
        self._shared = shared  # export the snapshot, so that a second connection can join it
        self._cv = threading.Condition()
        self._held: list[tuple[Any, psycopg.Connection]] = []
        self._idle: list[psycopg.Connection] = []
        self._opening = False
        self._can_grow = True
        self._snapshot_id: str | None = None
        # The second transaction, sent as soon as the snapshot was exported and not yet confirmed
        # (see `_send_join`).
        self._sent: tuple[Any, psycopg.Connection] | None = None
        self._closed = False
        self.index_version: str | None = None  # what the snapshot sees, read when it began
        # The namespace's row as the snapshot sees it: (embed_model, embed_dim, index_version), or
        # None when there is no such namespace. Read with the scope, so a request needs no round
        # trip of its own to learn which embedder and index version its namespace has.
        self.namespace_row: tuple[str, int, str] | None = None
        # Set by a request that sends its begin ahead (drivers/store/scoped.py `begin_ahead`): the
        # first connection is handed to it to send the transaction's start, scope and namespace row
        # without waiting for them; the row is then read and checked by the request, not here.
        self.ahead: Callable[[psycopg.Connection], None] | None = None

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        conn = self._acquire()
        try:
            yield conn
        finally:
            with self._cv:
                self._idle.append(conn)
                self._cv.notify_all()  # a waiting statement, or close() waiting for every connection

    def _acquire(self) -> psycopg.Connection:
        with self._cv:
            while True:
                if self._closed:
                    # A node of a failed request may still start after the request ended: it must
                    # not begin a new transaction that nobody would end.
                    raise RuntimeError("the request's snapshot is closed")
                if self._idle:
                    return self._idle.pop()
                first = not self._held
                grow = (self._can_grow and self._snapshot_id is not None and len(self._held) < MAX_CONNECTIONS)
                if not self._opening and (first or grow):
                    self._opening = True
                    break
                self._cv.wait()
        held = None
        late = False
        try:
            held = self._begin() if first else self._join()
        finally:
            with self._cv:
                self._opening = False
                late = held is not None and self._closed
                if held is None and not first:
                    self._can_grow = False  # the pool is busy: take turns from now on
                elif held is not None and not late:
                    self._held.append(held)
                self._cv.notify_all()
        if late:
            _end(held)
            raise RuntimeError("the request's snapshot is closed")
        return held[1] if held is not None else self._acquire()

    def _begin(self) -> tuple[Any, psycopg.Connection]:
        """The snapshot's first transaction, its scope and the namespace's row as it sees it, in one
        round trip (the scope first: the query role reads the namespaces table through row security)."""
        manager = self._pool.connection()
        conn = manager.__enter__()
        if self.ahead is not None:
            try:
                self.ahead(conn)
            except BaseException as exc:
                manager.__exit__(type(exc), exc, exc.__traceback__)
                raise
            return manager, conn
        try:
            cur = psycopg.ClientCursor(conn)
            export = sql.SQL("; SELECT pg_export_snapshot()" if self._shared else "")
            cur.execute(sql.SQL("{}; {}; {}{}").format(sql.SQL(BEGIN), self._scope_sql, sql.SQL(NAMESPACE_ROW), export),
                        {"_scope_ns": self._namespace})
            cur.nextset()
            cur.nextset()
            row = cur.fetchone()
            if self._shared:
                cur.nextset()
                self._snapshot_id = cur.fetchone()[0]
            cur.close()
            if self._shared and row is not None:
                self._sent = self._send_join()
        except BaseException as exc:
            manager.__exit__(type(exc), exc, exc.__traceback__)
            raise
        self.namespace_row = (row[0], int(row[1]), row[2]) if row else None
        self.index_version = row[2] if row else None
        return manager, conn

    def _join_text(self, conn: psycopg.Connection) -> bytes:
        return psycopg.ClientCursor(conn).mogrify(
            sql.SQL("{}; SET TRANSACTION SNAPSHOT {}; {}")
            .format(sql.SQL(BEGIN), sql.Literal(self._snapshot_id), self._scope_sql), {"_scope_ns": self._namespace}).encode()

    def _send_join(self) -> tuple[Any, psycopg.Connection] | None:
        """Send the second transaction's start without waiting for the reply, or None if no
        connection is free. The join is a round trip, and the server reads the snapshot from a
        file: about 1 ms that the first parallel statement used to wait for. Sent here, its reply
        is in by the time a statement wants the connection (`_join` reads it)."""
        manager = self._pool.spare()
        if manager is None:
            return None
        conn = manager.__enter__()
        try:
            with conn.lock:
                conn.pgconn.send_query(self._join_text(conn))
                conn.wait(generators.send(conn.pgconn))
        except psycopg.Error:
            _discard((manager, conn))
            return None
        except BaseException as exc:
            manager.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return manager, conn

    def _join(self) -> tuple[Any, psycopg.Connection] | None:
        """A second transaction on the first one's snapshot, or None if no connection is free."""
        sent, self._sent = self._sent, None  # only the thread opening a connection is here
        if sent is not None:
            return sent if _confirmed(sent) else None
        manager = self._pool.spare()
        if manager is None:
            return None
        conn = manager.__enter__()
        try:
            psycopg.ClientCursor(conn).execute(self._join_text(conn))
        except psycopg.Error:
            _discard((manager, conn))
            return None  # the snapshot could not be joined: the first connection serves alone
        except BaseException as exc:
            manager.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return manager, conn

    def close(self) -> None:
        """End every transaction of the snapshot and give the connections back, once the
        statements running on them (a failed request's other nodes) have finished."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()
            self._cv.wait_for(lambda: len(self._idle) == len(self._held) and not self._opening, timeout=CLOSE_WAIT_S)
            held, self._held, self._idle = self._held, [], []
            sent, self._sent = self._sent, None
        unused = [sent] if sent is not None and _confirmed(sent) else []  # a join no statement wanted
        _end_all(unused + held[::-1])  # the exporter's COMMIT sent last


# A statement in flight when its request ends is a short read (a cancelled one stops at once).
CLOSE_WAIT_S = 30.0


def _confirmed(sent: tuple[Any, psycopg.Connection]) -> bool:
    """Read the replies to a join sent by `_send_join`: True if it began the transaction on the
    snapshot; otherwise the connection is given back and the first connection serves alone."""
    _manager, conn = sent
    try:
        with conn.lock:
            results = conn.wait(generators.fetch_many(conn.pgconn))
        if results and all(r.status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK) for r in results):
            return True
    except psycopg.Error:
        pass
    _discard(sent)
    return False


def _discard(held: tuple[Any, psycopg.Connection]) -> None:
    """Give back a connection whose join failed, its transaction (if any) ended."""
    manager, conn = held
    with contextlib.suppress(psycopg.Error):
        conn.rollback()
    manager.__exit__(None, None, None)


def _end_all(held: list[tuple[Any, psycopg.Connection]]) -> None:
    """End the snapshot's transactions and give their connections back, each COMMIT sent before
    any reply is read: a request's two transactions end in one round trip instead of two (`_end`
    says why COMMIT). A connection that cannot take the COMMIT ends as `_end` ends it."""
    pending = []
    for one in held:
        conn = one[1]
        if conn.pgconn.transaction_status == pq.TransactionStatus.INTRANS:  # not failed, not busy
            try:
                with conn.lock:
                    conn.pgconn.send_query(b"COMMIT")
                    conn.wait(generators.send(conn.pgconn))
                pending.append(one)
                continue
            except psycopg.Error:
                pass
        _end(one)
    for manager, conn in pending:
        with contextlib.suppress(psycopg.Error), conn.lock:
            conn.wait(generators.fetch_many(conn.pgconn))
        manager.__exit__(None, None, None)


def _end(held: tuple[Any, psycopg.Connection]) -> None:
    """End a transaction of the snapshot and give its connection back. COMMIT, not ROLLBACK: both
    end a read-only transaction alike, but on a ROLLBACK psycopg forgets every statement prepared on
    the connection (and has the server deallocate them), and the next request would prepare its
    statements again (drivers/store/scoped.py)."""
    manager, conn = held
    try:
        conn.commit()
    except psycopg.Error:
        pass  # a broken connection is discarded by the pool
    manager.__exit__(None, None, None)
