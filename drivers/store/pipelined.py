"""A request's statements in flight on its one connection (drivers/store/scoped.py `send`).

In pipeline mode psycopg sends each statement at once, but reads a cursor's rows by asking for
every reply in flight (its Pipeline._fetch_gen, after one flush request behind them all): the
first statement a local search read waited for all those sent after it, about 2 ms at 100k
entities. Here a flush request follows each statement, so the server sends each one's rows as it
ends, and a cursor's rows are read by taking the pipeline's replies in order only up to its own.
That goes through psycopg's queue of pending replies, its internal API (3.2-3.3). It is checked
at import: without it, the rows are read psycopg's way, the same rows, a little later.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import psycopg
import psycopg._pipeline_base
from psycopg import generators

from graphrag_dag.dataflows.common.resources import Reply

STREAMED = hasattr(getattr(psycopg._pipeline_base, "BasePipeline", None), "_process_results")


def flushed(conn: psycopg.Connection) -> None:
    """A flush request right behind the statement just sent, sent at once."""
    if STREAMED:
        with conn.lock:
            conn.pgconn.send_flush_request()
            conn.wait(generators.send(conn.pgconn))


def arrived(conn: psycopg.Connection, cur: psycopg.Cursor) -> None:
    """The pipeline's replies read in order up to and including `cur`'s (its rows are then in)."""
    if STREAMED and cur.pgresult is None and conn._pipeline is not None:
        with conn.lock:
            conn.wait(_up_to(conn, cur))


def _up_to(conn: psycopg.Connection, cur: psycopg.Cursor) -> Iterator[Any]:
    pipeline = conn._pipeline
    while cur.pgresult is None and getattr(pipeline, "result_queue", None):
        results = yield from generators.fetch_many(conn.pgconn)
        if not results:
            break
        pipeline._process_results(pipeline.result_queue.popleft(), results)


class Sent(Reply):
    """A statement sent in pipeline mode; its rows are read once, by `read`, when first asked for."""

    def __init__(self, read: Callable[[psycopg.Cursor], list[tuple]], cur: psycopg.Cursor) -> None:
        self._read = read
        self._cur: psycopg.Cursor | None = cur
        self._rows: list[tuple] = []

    def rows(self) -> list[tuple]:
        if self._cur is not None:
            self._rows = self._read(self._cur)
            self._cur = None
        return self._rows
