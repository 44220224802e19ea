"""Namespace-scoped reads: every statement runs as the row-level-security reader role with the
request's namespace set for its transaction, and checks the namespace the request declared.

A search reads through a snapshot handle: its statements share one READ ONLY REPEATABLE READ
transaction on one connection, opened at the first statement and ended by `close()`, so a
request sees its namespace entirely before or entirely after a concurrent rewrite, never old
entities with new evidence (drivers/store/snapshot.py). Without a snapshot, each statement runs
in a transaction of its own on a pooled connection (lookups, statistics, tools)."""

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

from graphrag_dag.dataflows.common.errors import BadInput, StoreUnavailable
from graphrag_dag.dataflows.common.resources import Database
from graphrag_dag.drivers.runtime.cancel import CancelToken
from graphrag_dag.drivers.store.binary_copy import binary_columns
from graphrag_dag.drivers.store.pool import NO_ROOM, Pool, first_line, no_room
from graphrag_dag.drivers.store.snapshot import Snapshot
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


class ScopedDatabase(Database):
    """Read access for one request to one version of one namespace; cancellable from any thread."""

    def __init__(self, pool: Pool, namespace: str, cancel: CancelToken, index_version: str = "",
                 memo: Memo | None = None, snapshot: bool = False, *, prepare: bool = True) -> None:
        self.pool = pool
        self._prepare = prepare  # a snapshot's statements prepared per connection (GRAPHRAG_DAG_PREPARE)
        self.namespace = namespace
        self.index_version = index_version
        self.cancel = cancel
        self._memo = memo
        self._snapshot = Snapshot(pool, namespace, SCOPE_SQL) if snapshot else None
        # A request sends its query embedding with 3-4 statements; rendering it as text costs more
        # than the search itself, so each vector is rendered once per request (kept by id, with
        # the array itself so the id cannot be reused while the handle lives).
        self._vector_texts: dict[int, tuple[np.ndarray, str]] = {}

    def _vector_text(self, vec: np.ndarray) -> str:
        held = self._vector_texts.get(id(vec))
        if held is None or held[0] is not vec:
            held = self._vector_texts[id(vec)] = (vec, pgvector_text(vec))
        return held[1]

    def _connection(self) -> contextlib.AbstractContextManager[psycopg.Connection]:
        """A pooled connection per statement, or the request's snapshot connection."""
        return self.pool.connection() if self._snapshot is None else self._snapshot.connection()

    def begin(self) -> NamespaceInfo | None:
        """Begin the snapshot now rather than at the first statement, and return the namespace as
        the snapshot sees it: None when it does not exist (or without a snapshot, which has nothing
        to begin). A request learns its embedder and index version from the transaction it reads
        in, so they cannot disagree with what it reads, and it pays no round trip of its own."""
        if self._snapshot is None:
            return None
        with self._snapshot.connection():
            pass
        row = self._snapshot.namespace_row
        if row is None:
            return None
        model, dim, version = row
        self.index_version = version  # the memo and the cache key: the version read, not one asked for
        return NamespaceInfo(self.namespace, model, dim, version)

    def close(self) -> None:
        """End the snapshot (if one was opened) and give its connection back."""
        if self._snapshot is not None:
            self._snapshot.close()

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
            cur = conn.cursor() if bind else psycopg.ClientCursor(conn)
            started = time.perf_counter()
            try:
                yield conn, cur
            except psycopg.errors.QueryCanceled as exc:
                if self.cancel.cancelled:
                    raise self.cancel.error() from exc
                raise
            except NO_ROOM as exc:
                raise no_room(exc, self.pool.dsn) from exc
            except psycopg.OperationalError as exc:
                # The connection broke under a statement (the server died or restarted): the
                # snapshot's connection is held outside the pool's own error handling.
                raise StoreUnavailable(f"lost the connection to PostgreSQL: {first_line(exc)}") from exc
            finally:
                cur.close()
                statement_meter.count += 1
                statement_meter.ms += (time.perf_counter() - started) * 1000

    def columns(self, query: Any, params: dict[str, Any], types: Sequence[str]) -> list[np.ndarray]:
        """A binary COPY of the statement's rows, read into arrays without a Python object per
        value (a load of every edge of a namespace moves 30 bytes a row this way)."""
        statement = sql.SQL("COPY ({}) TO STDOUT (FORMAT binary)").format(
            sql.SQL(query) if isinstance(query, str) else query)
        with self._cursor() as (conn, cur):
            with contextlib.nullcontext() if self._snapshot is not None else conn.transaction():
                if self._snapshot is None:  # COPY is a statement of its own: the scope goes first
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
        if self._snapshot is not None:
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
