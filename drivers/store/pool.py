"""A psycopg connection pool that turns every connection failure into StoreUnavailable naming the
DSN (password masked), and replaces itself after a failure so that a restarted server is used at
once instead of after the old pool's backoff."""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
import weakref
from typing import Iterator

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from graphrag_dag.dataflows.common.errors import StoreFull, StoreUnavailable

RECENT_S = 2.0
DOWN_PROBE_S = 2  # seconds a probe of a server that failed may take to connect (libpq's minimum is 2)
# psycopg_pool logs each failed reconnection in the background at WARNING. With no logging set up,
# Python would print those beside the one error line a failure already gives; an application that
# sets up logging still receives them (the records propagate).
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
_returned_at: "weakref.WeakKeyDictionary[psycopg.Connection, float]" = weakref.WeakKeyDictionary()


def mask_dsn(dsn: str) -> str:
    """Hide the password in a DSN so it can appear in error messages."""
    masked = re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", masked, flags=re.IGNORECASE)


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


# SQLSTATE 53100 and 53200: the server ran out of disk or memory. psycopg files them under
# OperationalError, as it does a dropped connection, but the connection is sound and only the
# failed transaction is gone: the pool must not be renewed nor the server called down.
NO_ROOM = (psycopg.errors.DiskFull, psycopg.errors.OutOfMemory)


def no_room(exc: psycopg.Error, dsn: str) -> StoreFull:
    return StoreFull(f"PostgreSQL at {mask_dsn(dsn)} ran out of room, and nothing of this work was kept: "
                     f"{first_line(exc)}")


def _mark_returned(conn: psycopg.Connection) -> None:
    _returned_at[conn] = time.monotonic()


def _check_if_idle(conn: psycopg.Connection) -> None:
    """Ping a connection on checkout only if it sat idle: one just returned by a successful request
    is known good, and skipping the ping saves a round trip per query. A server restart is still
    noticed (connections go idle while it is down), and a failure renews the pool anyway."""
    if time.monotonic() - _returned_at.get(conn, 0.0) > RECENT_S:
        ConnectionPool.check_connection(conn)


# A backend whose client died must end promptly, or it keeps its locks (seen: 13.6 s after a
# SIGKILL). PostgreSQL notices a closed socket only when it next talks to the client, so a long
# statement polls it (client_connection_check_interval, PostgreSQL 14+); keepalives catch a peer
# that vanished without closing TCP; a transaction left idle by a stuck client is ended. None of
# these shortens a healthy request: an open snapshot idles while the LLM answers, far below it.
SESSION_SETTINGS = {
    "client_connection_check_interval": "1s",
    "idle_in_transaction_session_timeout": "10min",
    "tcp_keepalives_idle": "30",
    "tcp_keepalives_interval": "10",
    "tcp_keepalives_count": "3",
}
CLIENT_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}


def _configure(conn: psycopg.Connection) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)
    calls = ", ".join("set_config(%s, %s, false)" for _ in SESSION_SETTINGS)
    try:  # one round trip per new connection
        conn.execute(f"SELECT {calls}", [x for pair in SESSION_SETTINGS.items() for x in pair])  # noqa: S608
    except psycopg.errors.UndefinedObject:  # an older server lacks one: set those it has
        for name, value in SESSION_SETTINGS.items():
            try:
                conn.execute("SELECT set_config(%s, %s, false)", (name, value))
            except psycopg.errors.UndefinedObject:
                pass
    conn.commit()


# A statement is prepared only when its execute asks (`prepare=True`: a search's statements, see
# drivers/store/scoped.py), never because it ran often: psycopg prepares a statement after this
# many runs, and its None (never) would refuse the asked-for ones too.
ONLY_WHEN_ASKED = 2**31 - 1


class Pool:
    """Autocommit connections with pgvector types registered, shared by all threads."""

    def __init__(self, dsn: str, *, max_size: int = 8, timeout: float = 10.0) -> None:
        self.dsn = dsn
        self.timeout = timeout
        self._max_size = max_size
        self._lock = threading.Lock()
        self._down = False  # a connection failed: callers probe the server first (_still_down)
        self._pool = self._new()

    def _new(self) -> ConnectionPool:
        return ConnectionPool(
            self.dsn,
            min_size=1,
            max_size=self._max_size,
            kwargs={"prepare_threshold": ONLY_WHEN_ASKED, "connect_timeout": 10, "autocommit": True,
                    **CLIENT_KEEPALIVES},
            configure=_configure,
            check=_check_if_idle,
            reset=_mark_returned,
            open=True,
            name="graphrag-dag",
        )

    def _renew(self, broken: ConnectionPool) -> None:
        with self._lock:
            if self._pool is not broken:
                return
            self._pool = self._new()
        threading.Thread(target=broken.close, kwargs={"timeout": 1.0}, daemon=True).start()

    def _still_down(self) -> str | None:
        """After a failure, whether the server still refuses connections: one direct connection
        attempt, so that while it is down every caller hears so at once instead of waiting out the
        pool's timeout; the first success lets callers through to the pool again."""
        if not self._down:
            return None
        try:
            psycopg.connect(self.dsn, connect_timeout=DOWN_PROBE_S, **CLIENT_KEEPALIVES).close()
        except psycopg.Error as exc:
            return first_line(exc)
        self._down = False
        return None

    @contextlib.contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[psycopg.Connection]:
        """A connection, waiting at most `timeout` seconds (the pool's own by default)."""
        down = self._still_down()
        if down is not None:
            raise StoreUnavailable(f"cannot connect to PostgreSQL at {mask_dsn(self.dsn)}: {down}")
        pool = self._pool
        try:
            with pool.connection(timeout=self.timeout if timeout is None else timeout) as conn:
                yield conn
        except NO_ROOM as exc:
            raise no_room(exc, self.dsn) from exc
        except (psycopg.OperationalError, PoolTimeout) as exc:
            if isinstance(exc, psycopg.errors.QueryCanceled):
                raise
            self._down = True
            self._renew(pool)
            raise StoreUnavailable(f"lost or could not get a connection to PostgreSQL at {mask_dsn(self.dsn)}: "
                                   f"{first_line(exc)}") from exc

    def spare(self) -> contextlib.AbstractContextManager[psycopg.Connection] | None:
        """A connection if one is free at once, else None: for work that can also wait for a
        connection it already holds, and so must never wait on the pool (a request holding one
        connection and waiting for a second could starve, with others, the pool it waits on).
        A busy pool still grows towards its maximum for the next caller."""
        pool = self._pool
        try:
            conn = pool.getconn(timeout=SPARE_WAIT_S)
        except (psycopg.OperationalError, PoolTimeout):
            return None
        return _returned_to(pool, conn)

    def lent(self) -> int:
        """Connections lent so far (psycopg_pool's request count): which login a piece of work
        reads through shows here, for the service's metrics and for the tests."""
        return int(self._pool.get_stats().get("requests_num", 0))

    def close(self) -> None:
        self._pool.close()


SPARE_WAIT_S = 0.002


@contextlib.contextmanager
def _returned_to(pool: ConnectionPool, conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
    try:
        yield conn
    finally:
        pool.putconn(conn)
