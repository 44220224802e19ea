"""Namespace-scoped reads: every statement runs as the row-level-security reader role with the
request's namespace set for its transaction, and checks the namespace the request declared.

A search reads through a snapshot handle: its statements share one READ ONLY REPEATABLE READ
transaction on one connection, opened at the first statement and ended by `close()`, so a
request sees its namespace entirely before or entirely after a concurrent rewrite, never old
entities with new evidence. Parallel nodes read it on a second connection that joins the same
snapshot, when the pool has one free (drivers/store/snapshot.py)."""

from __future__ import annotations

import collections
import contextlib
import contextvars
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence, TypeVar

import numpy as np
import psycopg
from psycopg import sql

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.resources import Database, Reply
from graphrag_dag.drivers.cancel import CancelToken
from graphrag_dag.drivers.store import pipelined
from graphrag_dag.drivers.store.binary_copy import binary_columns
from graphrag_dag.drivers.store.pool import Pool
from graphrag_dag.drivers.store.snapshot import BEGIN, NAMESPACE_ROW, Snapshot
from graphrag_dag.drivers.store.statements import bound_statement, pgvector_text, scoped_params

T = TypeVar("T")
NAMESPACE_RE = re.compile(r"\A[a-z0-9][a-z0-9_-]{0,62}\Z")

class StatementMeter(threading.local):
    """Statements this thread sent and the time spent waiting for them (client side: the server's
    work plus the round trip). The engine reads it around each node to report both per stage."""

    def __init__(self) -> None:
        self.count = 0
        self.ms = 0.0


statement_meter = StatementMeter()

# The namespace of the request being served in this context; set once per request by the API.
current_namespace: contextvars.ContextVar[str | None] = contextvars.ContextVar("current_namespace", default=None)


def validate_namespace(namespace: str) -> str:
    if not isinstance(namespace, str) or not NAMESPACE_RE.match(namespace):
        raise BadInput(f"invalid namespace {namespace!r}: use 1-63 of a-z 0-9 _ - starting with a letter or digit")
    return namespace


@dataclass(frozen=True)
class NamespaceInfo:
    namespace: str
    embed_model: str
    embed_dim: int
    index_version: str


class Memo:
    """Values built once per (namespace, version, name), kept for the `size` namespace versions
    searched most recently: a namespace's values (its name, title and graph indexes) stay or go
    together, so a search never finds half of them built."""

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._spaces: collections.OrderedDict[tuple, dict[str, Any]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple, build: Callable[[], T]) -> T:
        space, name = key[:-1], key[-1]
        with self._lock:
            values = self._spaces.get(space)
            if values is not None and name in values:
                self._spaces.move_to_end(space)
                return values[name]
        value = build()  # outside the lock: two first requests may both build, neither waits
        with self._lock:
            self._spaces.setdefault(space, {})[name] = value
            self._spaces.move_to_end(space)
            while len(self._spaces) > self._size:
                self._spaces.popitem(last=False)
        return value


SCOPE_SQL = sql.SQL(
    "SELECT set_config('graphrag.namespace', %(_scope_ns)s, true), set_config('role', 'graphrag_reader', true), "
    "set_config('plan_cache_mode', 'force_generic_plan', true), "
    "set_config('hnsw.iterative_scan', 'strict_order', true), set_config('jit', 'off', true)"
)
_SCOPE_TEXT = SCOPE_SQL.as_string(None)


class NamespaceChanged(Exception):
    """The namespace's row, read in a begin sent ahead, is not the one the request assumed: it was
    rewritten or dropped since. The request is run again, beginning as `begin` does."""


class ScopedDatabase(Database):
    """Read access for one request to one version of one namespace; cancellable from any thread."""

    def __init__(self, pool: Pool, namespace: str, cancel: CancelToken, index_version: str = "",
                 memo: Memo | None = None, snapshot: bool = False, shared: bool = False, *,
                 prepare: bool = True) -> None:
        self.pool = pool
        self._prepare = prepare  # a snapshot's statements prepared per connection (GRAPHRAG_DAG_PREPARE)
        self.namespace = namespace
        self.index_version = index_version
        self.cancel = cancel
        self._memo = memo
        self._snapshot = snapshot
        # The snapshot's transactions, begun by the first statement; `shared` lets parallel nodes
        # read it on two connections (drivers/store/snapshot.py).
        self._held = Snapshot(pool, namespace, SCOPE_SQL, shared=shared) if snapshot else None
        # A snapshot on one connection keeps statements in flight (`send`): the connection is in
        # pipeline mode from the first one sent until something needs it out (a COPY, the end).
        self._pipelined = snapshot and not shared
        self._pipeline: Any = None
        self._in_flight: Any = None  # the cancel token's hold on the connection meanwhile
        # A begin sent ahead (`begin_ahead`): the namespace row assumed, and the cursor its row
        # comes on until the first read checks it; `_changed` once it was found to differ.
        self._assumed: NamespaceInfo | None = None
        self._begun: psycopg.Cursor | None = None
        self._changed = False
        # A request sends its query embedding with 3-4 statements; rendering 256 floats as text
        # costs more than the HNSW search itself, so each vector is rendered once per request
        # (kept by id, with the array itself so the id cannot be reused while the handle lives).
        self._vector_texts: dict[int, tuple[np.ndarray, str]] = {}

    def _vector_text(self, vec: np.ndarray) -> str:
        held = self._vector_texts.get(id(vec))
        if held is None or held[0] is not vec:
            held = self._vector_texts[id(vec)] = (vec, pgvector_text(vec))
        return held[1]

    def _connection(self) -> contextlib.AbstractContextManager[psycopg.Connection]:
        """A pooled connection per statement, or one of the request's snapshot connections."""
        if self._held is None:
            return self.pool.connection()
        return self._lent(self._held)

    @contextlib.contextmanager
    def _lent(self, snapshot: Snapshot) -> Iterator[psycopg.Connection]:
        with snapshot.connection() as conn:
            seen = snapshot.index_version
            if seen and self.index_version and seen != self.index_version:
                self.index_version = seen  # rewritten since the request began: memoize by what it sees
            yield conn

    def begin(self) -> NamespaceInfo | None:
        """Begin the snapshot now rather than at the first statement, and return the namespace as
        the snapshot sees it: None when it does not exist (or without a snapshot, which has nothing
        to begin). A request learns its embedder and index version from the transaction it reads
        in, so they cannot disagree with what it reads, and it pays no round trip of its own."""
        if self._held is None:
            return None
        with self._lent(self._held):
            pass
        row = self._held.namespace_row
        if row is None:
            return None
        model, dim, version = row
        self.index_version = version  # the memo and the cache key: the version read, not one asked for
        return NamespaceInfo(self.namespace, model, dim, version)

    def begin_ahead(self, assumed: NamespaceInfo) -> None:
        """Begin the snapshot without waiting for it, assuming the namespace's row is `assumed` (what
        an earlier request of this process read): the transaction's start, its scope and the row go
        out on the connection in pipeline mode, and the request's nodes start at once, with the
        embedder and index version the row names. The round trip (0.4-0.7 ms of a 14 ms local search
        at 100k entities) overlaps their first work instead of preceding it.

        Replies come back in order, so whatever the request reads first reads the row first, and
        checks it: a namespace rewritten or dropped since then raises `NamespaceChanged` at that
        read, and at `confirm()`, which a request calls before it returns anything. A handle that
        cannot keep statements in flight begins as `begin` does, and checks the row at once."""
        self._assumed = assumed
        self.index_version = assumed.index_version
        if not self._pipelined:
            self._check(self.begin())
            return
        self._held.ahead = self._send_begin
        with self._lent(self._held):
            pass

    def _send_begin(self, conn: psycopg.Connection) -> None:
        # The namespace written into the scope and the row's statements as `bound_statement` writes
        # it: with no parameter left, the prepared statements run on generic plans from the first
        # call (the scope's own plan_cache_mode is not in force yet when it runs).
        literal = sql.Literal(self.namespace).as_string(None)
        self._enter_pipeline(conn)
        conn.cursor().execute(BEGIN, prepare=False)
        conn.cursor().execute(_SCOPE_TEXT.replace("%(_scope_ns)s", literal), prepare=self._prepare)
        self._begun = conn.cursor()
        self._begun.execute(NAMESPACE_ROW.replace("%(_scope_ns)s", literal), prepare=self._prepare)
        pipelined.flushed(conn)

    def _confirmed(self, conn: psycopg.Connection) -> None:
        """The row of a begin sent ahead, read (once) and checked, on the connection lent for a read."""
        begun, self._begun = self._begun, None
        if begun is not None:
            pipelined.arrived(conn, begun)
            row = begun.fetchone()
            begun.close()
            self._check(NamespaceInfo(self.namespace, row[0], int(row[1]), row[2]) if row else None)
        if self._changed:
            raise NamespaceChanged(self.namespace)

    def _check(self, seen: NamespaceInfo | None) -> None:
        if seen != self._assumed:
            self._changed = True
            raise NamespaceChanged(self.namespace)

    def confirm(self) -> None:
        """Raise `NamespaceChanged` if the row of a begin sent ahead differs from the one assumed,
        reading it now if no statement has (a request whose nodes all came from a cache)."""
        if self._begun is not None or self._changed:
            with self._lent(self._held) as conn:
                self._confirmed(conn)

    def changed(self) -> bool:
        """`confirm` for a request that failed: whether the failure may come from a stale row (a
        row that cannot be read any more, in an aborted pipeline, says nothing either way)."""
        try:
            self.confirm()
        except NamespaceChanged:
            return True
        except (psycopg.Error, RuntimeError):
            return False
        return False

    def close(self) -> None:
        """End the snapshot (if one was opened) and give its connections back."""
        if self._held is not None:
            with contextlib.suppress(psycopg.Error):  # a failed request's statement failed already
                self._leave_pipeline(commit=True)
            self._held.close()

    def memoized(self, name: str, build: Callable[[], T]) -> T:
        if self._memo is None or not self.index_version:
            return build()
        return self._memo.get((self.namespace, self.index_version, name), build)

    @contextlib.contextmanager
    def _cursor(self, bind: bool = False) -> Iterator[tuple[psycopg.Connection, psycopg.Cursor]]:
        """A cursor for one statement of this request: its namespace checked, cancellable with the
        request, and metered for the stage that sends it. `bind`: parameters bound by the server
        (a prepared statement); otherwise psycopg writes them into the text."""
        self.cancel.check()
        scope = current_namespace.get()
        if scope is not None and scope != self.namespace:
            raise RuntimeError(f"namespace scope mismatch: request {scope!r}, handle {self.namespace!r}")
        with self._connection() as conn, self.cancel.running(conn):
            if self._assumed is not None:
                self._confirmed(conn)
            cur = conn.cursor() if bind else psycopg.ClientCursor(conn)
            started = time.perf_counter()
            try:
                yield conn, cur
            except psycopg.errors.QueryCanceled as exc:
                if self.cancel.cancelled:
                    raise self.cancel.error() from exc
                raise
            finally:
                cur.close()
                statement_meter.count += 1
                statement_meter.ms += (time.perf_counter() - started) * 1000

    def send(self, query: Any, params: Sequence[Any] | dict[str, Any] = ()) -> Reply:
        """In a snapshot on one connection: the statement sent at once on the connection in
        pipeline mode, where the server runs it while this thread goes on; its rows are read
        when the reply is (drivers/store/pipelined.py). Shared by parallel nodes, or without a
        snapshot, the rows are read now, as `rows` reads them."""
        if not self._pipelined:
            return super().send(query, params)
        self.cancel.check()
        scope = current_namespace.get()
        if scope is not None and scope != self.namespace:
            raise RuntimeError(f"namespace scope mismatch: request {scope!r}, handle {self.namespace!r}")
        text, bound = bound_statement(query, params, self.namespace)
        with self._lent(self._held) as conn:
            if self._pipeline is None:
                self._enter_pipeline(conn)
            cur = conn.cursor()
            cur.execute(text, bound, prepare=self._prepare)
            pipelined.flushed(conn)
        statement_meter.count += 1
        return pipelined.Sent(self._read, cur)

    def _enter_pipeline(self, conn: psycopg.Connection) -> None:
        # A cancel reaches the server's statement even while no node is reading it.
        self._in_flight = self.cancel.running(conn)
        self._in_flight.__enter__()
        self._pipeline = conn.pipeline()
        self._pipeline.__enter__()

    def _read(self, cur: psycopg.Cursor) -> list[tuple]:
        """A sent statement's rows (waiting for them is metered for the node that reads them). A
        statement cancelled in the pipeline fails the ones sent after it too (PipelineAborted)."""
        with self._lent(self._held) as conn:
            started = time.perf_counter()
            try:
                if self._assumed is not None:
                    self._confirmed(conn)
                pipelined.arrived(conn, cur)
                return cur.fetchall()
            except psycopg.Error as exc:
                if self.cancel.cancelled:
                    raise self.cancel.error() from exc
                raise
            finally:
                cur.close()
                statement_meter.ms += (time.perf_counter() - started) * 1000

    def _leave_pipeline(self, commit: bool = False) -> None:
        """Out of pipeline mode, every sent statement's rows kept by its cursor (for a COPY, which
        a pipeline cannot carry, and before the snapshot's transactions end). `commit`: the
        request is over, and its transaction ends in the same round trip (the snapshot's close
        then finds it ended)."""
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None:
            try:
                with self._lent(self._held) as conn:
                    if commit:
                        conn.execute("COMMIT")  # COMMIT, not ROLLBACK: snapshot.py `_end` says why
                    pipeline.__exit__(None, None, None)
            finally:
                self._in_flight.__exit__(None, None, None)

    def columns(self, query: Any, params: dict[str, Any], types: Sequence[str]) -> list[np.ndarray]:
        """A binary COPY of the statement's rows, read into arrays without a Python object per
        value (a load of every edge of a namespace moves 30 bytes a row this way)."""
        self._leave_pipeline()
        statement = sql.SQL("COPY ({}) TO STDOUT (FORMAT binary)").format(
            sql.SQL(query) if isinstance(query, str) else query)
        with self._cursor() as (conn, cur):
            with contextlib.nullcontext() if self._snapshot else conn.transaction():
                if not self._snapshot:  # COPY is a statement of its own: the scope goes first
                    cur.execute(SCOPE_SQL, scoped_params({}, self.namespace))
                with cur.copy(statement, scoped_params(params, self.namespace)) as copy:
                    data = b"".join(bytes(block) for block in copy)
        return binary_columns(data, types)

    def rows(self, query: Any, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple]:
        # In a snapshot, whose transaction already holds the scope, a statement is prepared on its
        # connection (unless GRAPHRAG_DAG_PREPARE=off) and runs on a generic plan, the namespace
        # and integers written into it (`bound_statement`); vectors go in pgvector's binary form. A strict
        # iterative scan keeps filtered vector searches (leaf or level summaries) from returning
        # fewer than k rows.
        # One round trip: outside a snapshot, the scope settings and the query go as one
        # simple-protocol message, which PostgreSQL runs as one implicit transaction, so the
        # transaction-local settings hold for the query and vanish after it. Parameters are then
        # bound client-side by psycopg (quoted and typed), never formatted by us; the namespace
        # literal in the text lets the planner match the namespace's partial HNSW index.
        # A statement given as text goes as text (dataflows/common/sql.py renders its composed
        # statements once): psycopg would otherwise compose it into bytes anew on every call.
        if self._snapshot:
            text, bound = bound_statement(query, params, self.namespace)
            with self._cursor(bind=True) as (_conn, cur):
                cur.execute(text, bound, prepare=self._prepare)
                return cur.fetchall()
        with self._cursor() as (_conn, cur):
            scoped = (_SCOPE_TEXT + "; " + query if isinstance(query, str)
                      else sql.SQL("{}; {}").format(SCOPE_SQL, query))
            cur.execute(scoped, scoped_params(params, self.namespace, self._vector_text))
            cur.nextset()
            return cur.fetchall()

    def __reduce__(self):  # pragma: no cover - a scoped handle must never be cached or pickled
        raise TypeError("ScopedDatabase is a resource and cannot be pickled")
