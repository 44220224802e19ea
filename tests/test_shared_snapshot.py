"""A request's snapshot on two connections (drivers/store/snapshot.py): the second connection joins
the first one's snapshot, so it sees what the first saw even after a rewrite committed in between;
it joins as the snapshot begins when a connection is free then, and when a statement first wants it
otherwise; it is taken only from a pool with one free; and parallel searches answer as serial ones do."""

from __future__ import annotations

import threading
import time

import pytest
from psycopg import pq
from test_isolation import _tenant

from graphrag_dag.drivers.store.pool import Pool
from graphrag_dag.drivers.store.scoped import SCOPE_SQL
from graphrag_dag.drivers.store.snapshot import Snapshot

COUNT = ("SELECT count(*) FILTER (WHERE id LIKE 'a-%%'), count(*) FILTER (WHERE id LIKE 'b-%%'), pg_backend_pid() "
         "FROM entities WHERE namespace = %s")


def _version(rag, namespace: str) -> str:
    return rag.store.admin_rows("SELECT index_version FROM namespaces WHERE namespace = %s", (namespace,))[0][0]


class Rewrite:
    """A namespace written as tenant a-, then rewritten as tenant b- on a thread of its own (after
    its commit the rewrite waits for open snapshots, to drop the old vector indexes)."""

    def __init__(self, rag, namespace: str) -> None:
        self.rag, self.namespace = rag, namespace
        rag.write(namespace, _tenant("a-", "FACT-A"), replace=True)
        self.old = _version(rag, namespace)
        self.errors: list[BaseException] = []
        self.writer = threading.Thread(target=self._rewrite)

    def _rewrite(self) -> None:
        try:
            self.rag.write(self.namespace, _tenant("b-", "FACT-B"), replace=True)
        except BaseException as exc:  # noqa: BLE001 - asserted by the test
            self.errors.append(exc)

    def committed(self) -> None:
        """Start the rewrite and wait until it has committed."""
        self.writer.start()
        deadline = time.monotonic() + 120
        while _version(self.rag, self.namespace) == self.old and not self.errors and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _version(self.rag, self.namespace) != self.old, self.errors or "the rewrite did not commit"

    def joined(self) -> None:
        if self.writer.ident is not None:
            self.writer.join(120)
        assert not self.errors, self.errors


def test_a_second_connection_sees_the_first_ones_snapshot_after_a_rewrite(rag):
    rewrite = Rewrite(rag, "joined")
    pool = rag.store.query_pool
    with pool.connection(), pool.connection():
        pass  # two connections open: the second one is free at once, instead of being opened
        # while spare() waits its 2 ms (a miss would leave this thread waiting on itself)
    snap = Snapshot(pool, "joined", SCOPE_SQL, shared=True)
    try:
        with snap.connection() as first:
            seen_first = first.execute(COUNT, ("joined",)).fetchone()
            rewrite.committed()
            with snap.connection() as second:
                seen_second = second.execute(COUNT, ("joined",)).fetchone()
    finally:
        snap.close()
    try:
        rewrite.joined()
        assert seen_first[0] > 0 and seen_first[1] == 0
        assert seen_second[2] != seen_first[2], "the second statement ran on the first connection"
        assert seen_second[:2] == seen_first[:2], "the second connection saw the rewrite"
        fresh = rag.store.admin_rows(COUNT, ("joined",))[0]
        assert fresh[:2] == (0, seen_first[0])
    finally:
        rag.store.drop("joined")


JOINING = ("SELECT pid, state FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
           "AND query LIKE 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT%' "
           "AND state <> 'idle'")


def _joining(pool: Pool) -> list[tuple]:
    """The query role's sessions in a snapshot's join (seen by that role: the admin may not see them)."""
    with pool.connection() as conn:
        return conn.execute(JOINING).fetchall()


def test_the_second_connection_joins_as_the_snapshot_begins_and_is_ended_unused(rag):
    pool = rag.store.query_pool
    with pool.connection(), pool.connection():
        pass  # two connections open, so one is free at once when the snapshot begins
    assert not _joining(pool)
    snap = Snapshot(pool, "demo", SCOPE_SQL, shared=True)
    try:
        with snap.connection() as first:
            pid = first.execute("SELECT pg_backend_pid()").fetchone()[0]
            # Before any statement asked for a second connection, one has begun on the snapshot
            # (its reply unread: the server has run it and waits in the transaction). On a loaded
            # machine its backend may not have read it yet when first looked at: looked at until
            # it has, for a while.
            deadline = time.monotonic() + 10
            joined = _joining(pool)
            while not (joined and joined[0][1] == "idle in transaction") and time.monotonic() < deadline:
                time.sleep(0.01)
                joined = _joining(pool)
            assert len(joined) == 1 and joined[0][0] != pid and joined[0][1] == "idle in transaction"
    finally:
        snap.close()
    # No statement used it: close read its reply and ended its transaction all the same.
    assert not _joining(pool)
    with pool.connection() as conn:
        assert not conn.execute("SELECT pid FROM pg_stat_activity WHERE pid IN (%s, %s) AND pid <> pg_backend_pid() "
                                "AND state <> 'idle'",
                                (pid, joined[0][0])).fetchall()


def test_a_second_connection_joins_later_when_none_was_free_as_the_snapshot_began(rag):
    rewrite = Rewrite(rag, "joined-late")
    pool = Pool(rag.store.query_pool.dsn, max_size=2)
    snap = Snapshot(pool, "joined-late", SCOPE_SQL, shared=True)
    try:
        with pool.connection():  # the pool's other connection is busy while the snapshot begins
            with snap.connection() as first:
                seen_first = first.execute(COUNT, ("joined-late",)).fetchone()
        assert not _joining(pool)
        rewrite.committed()
        with snap.connection() as first, snap.connection() as second:  # the second one joins now
            seen_second = second.execute(COUNT, ("joined-late",)).fetchone()
            assert first.execute("SELECT pg_backend_pid()").fetchone()[0] == seen_first[2]
    finally:
        snap.close()
        pool.close()
    try:
        rewrite.joined()
        assert seen_second[2] != seen_first[2], "the second statement ran on the first connection"
        assert seen_second[:2] == seen_first[:2] and seen_first[1] == 0, "the late join saw the rewrite"
    finally:
        rag.store.drop("joined-late")


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

    assert not rag.parallel  # the default: one connection, its statements sent ahead
    parallel = GraphRag(rag.dsn, home=home, chat=ChatConfig(), parallel=True)
    try:
        for q in ["Who funded the Stormwatch Project?", "What did Dr. Mara Quill discover about the storm surge?",
                  "Tell me about Alice Tern and Storm Orla"]:
            got = [g.local_search(q, "demo", offline=True) for g in (rag, parallel)]
            for res in got:
                res.pop("timings_ms")
                trace = res.pop("trace")
            assert got[0] == got[1], q
            assert {t["node"] for t in trace} >= {"semantic_matches", "vector_chunks", "keyword_chunks",
                                                 "vector_chunk_reply", "claim_reply"}
    finally:
        parallel.close()


def test_searches_end_their_transactions_and_give_back_their_connections(rag, home):
    """Back-to-back searches on a pool of two each find their connections, and once they have
    returned, both connections are back in the pool and none holds a transaction open."""
    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.resources import ChatConfig

    small = GraphRag(rag.dsn, home=home, chat=ChatConfig(), pool_size=2)
    try:
        answers = [small.local_search(q, "demo", offline=True)["status"]
                   for q in ["Who funded the Stormwatch Project?", "Tell me about Alice Tern and Storm Orla"] * 3]
        assert answers == ["completed"] * 6
        # psycopg_pool puts a returned connection back from its worker thread (the pool has a
        # reset hook): looked at until it has, for a while.
        deadline = time.monotonic() + 10
        stats = small.store.query_pool._pool.get_stats()
        while stats.get("pool_available") != 2 and time.monotonic() < deadline:
            time.sleep(0.01)
            stats = small.store.query_pool._pool.get_stats()
        assert stats.get("pool_available") == stats["pool_size"] == 2, stats
        with small.store.query_pool.connection() as conn:
            open_ = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = session_user "
                                 "AND pid <> pg_backend_pid() AND state <> 'idle'").fetchone()[0]
        assert open_ == 0
    finally:
        small.close()


def test_a_search_returns_before_its_transaction_ends_and_a_failed_one_ends_it_before_raising(rag, home):
    """A search that succeeded hands the end of its transaction to the instance's ending thread;
    on a pool of one connection the next search waits for it, and `close()` waits for the last.
    A failed search ends its own before it raises: the connection is free at once."""
    from graphrag_dag.dataflows.common.errors import Cancelled
    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.cancel import CancelToken
    from graphrag_dag.drivers.resources import ChatConfig

    small = GraphRag(rag.dsn, home=home, chat=ChatConfig(), pool_size=1)
    try:
        for q in ["Who funded the Stormwatch Project?", "Tell me about Alice Tern and Storm Orla"] * 2:
            assert small.local_search(q, "demo", offline=True)["status"] == "completed"
        assert small._ending is not None  # the successful searches' ends went to the ending thread
        held = threading.Event()
        small._ending.submit(held.wait, 30)  # the ending thread is busy: an end handed to it waits
        try:
            token = CancelToken()
            token.cancel()
            with pytest.raises(Cancelled):
                small.run("local", "Who is Mara Quill?", "demo", offline=True, cancel=token)
            spare = small.store.query_pool.spare()
            assert spare is not None, "the failed search had not given its connection back"
            with spare as conn:
                assert conn.pgconn.transaction_status == pq.TransactionStatus.IDLE
        finally:
            held.set()
    finally:
        small.close()
    assert small._ending is None
