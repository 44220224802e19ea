"""A request's snapshot on two connections (drivers/store/snapshot.py): the second connection joins
the first one's snapshot, so it sees what the first saw even after a rewrite committed in between;
it is taken only from a pool with one free; and parallel searches answer as serial ones do."""

from __future__ import annotations

import threading
import time

from test_isolation import _tenant

from graphrag_dag.drivers.store.pool import Pool
from graphrag_dag.drivers.store.scoped import SCOPE_SQL
from graphrag_dag.drivers.store.snapshot import Snapshot

COUNT = ("SELECT count(*) FILTER (WHERE id LIKE 'a-%%'), count(*) FILTER (WHERE id LIKE 'b-%%'), pg_backend_pid() "
         "FROM entities WHERE namespace = %s")


def _version(rag, namespace: str) -> str:
    return rag.store.admin_rows("SELECT index_version FROM namespaces WHERE namespace = %s", (namespace,))[0][0]


def test_a_second_connection_sees_the_first_ones_snapshot_after_a_rewrite(rag):
    rag.write("joined", _tenant("a-", "FACT-A"), replace=True)
    old = _version(rag, "joined")
    errors: list[BaseException] = []

    def rewrite() -> None:
        try:  # after its commit it waits for the open snapshot, to drop the old vector indexes
            rag.write("joined", _tenant("b-", "FACT-B"), replace=True)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    pool = rag.store.query_pool
    with pool.connection(), pool.connection():
        pass  # two connections open: the second one is free at once, instead of being opened
        # while spare() waits its 2 ms (a miss would leave this thread waiting on itself)
    snap = Snapshot(pool, "joined", SCOPE_SQL, shared=True)
    writer = threading.Thread(target=rewrite)
    try:
        with snap.connection() as first:
            seen_first = first.execute(COUNT, ("joined",)).fetchone()
            writer.start()
            deadline = time.monotonic() + 120
            while _version(rag, "joined") == old and not errors and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _version(rag, "joined") != old, errors or "the rewrite did not commit"
            with snap.connection() as second:
                seen_second = second.execute(COUNT, ("joined",)).fetchone()
    finally:
        snap.close()
        if writer.ident is not None:
            writer.join(120)
    try:
        assert not errors, errors
        assert seen_first[0] > 0 and seen_first[1] == 0
        assert seen_second[2] != seen_first[2], "the second statement ran on the first connection"
        assert seen_second[:2] == seen_first[:2], "the second connection saw the rewrite"
        fresh = rag.store.admin_rows(COUNT, ("joined",))[0]
        assert fresh[:2] == (0, seen_first[0])
    finally:
        rag.store.drop("joined")


def test_a_snapshot_takes_turns_on_its_connection_when_the_pool_has_none_free(rag):
    pool = Pool(rag.store.query_pool.dsn, max_size=1)
    snap = Snapshot(pool, "demo", SCOPE_SQL, shared=True)
    pids: list[int] = []

    def second() -> None:
        with snap.connection() as conn:
            pids.append(conn.execute("SELECT pg_backend_pid()").fetchone()[0])

    try:
        with snap.connection() as first:
            pids.append(first.execute("SELECT pg_backend_pid()").fetchone()[0])
            waiter = threading.Thread(target=second)
            waiter.start()
            waiter.join(0.5)
            assert waiter.is_alive(), "the second statement got a connection of its own from a full pool"
        waiter.join(30)
    finally:
        snap.close()
        pool.close()
    assert len(pids) == 2 and pids[0] == pids[1]


def test_parallel_searches_answer_as_serial_ones(rag, home):
    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.resources import ChatConfig

    assert rag.parallel  # the default
    serial = GraphRag(rag.dsn, home=home, chat=ChatConfig(), parallel=False)
    try:
        for q in ["Who funded the Stormwatch Project?", "What did Dr. Mara Quill discover about the storm surge?",
                  "Tell me about Alice Tern and Storm Orla"]:
            got = [g.local_search(q, "demo", offline=True) for g in (rag, serial)]
            for res in got:
                res.pop("timings_ms")
                trace = res.pop("trace")
            assert got[0] == got[1], q
            assert {t["node"] for t in trace} >= {"semantic_matches", "vector_chunks", "keyword_chunks"}
    finally:
        serial.close()
