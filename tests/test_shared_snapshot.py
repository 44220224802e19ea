"""A request's snapshot on two connections (drivers/store/snapshot.py): the second connection joins
the first one's snapshot, so it sees what the first saw even after a rewrite committed in between;
it is taken only from a pool with one free; a free connection goes to the waiting statement with the
longest chain of statements behind it; and parallel searches answer as serial ones do."""

from __future__ import annotations

import contextvars
import threading
import time

from hamilton import ad_hoc_utils, driver
from test_isolation import _tenant

from graphrag_dag.drivers import engine
from graphrag_dag.drivers.cancel import CancelToken

from graphrag_dag.drivers.store.pool import Pool
from graphrag_dag.drivers.store.scoped import _SCOPE_SQL
from graphrag_dag.drivers.store.snapshot import Snapshot, statement_priority

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
    snap = Snapshot(pool, "joined", _SCOPE_SQL, shared=True)
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
    snap = Snapshot(pool, "demo", _SCOPE_SQL, shared=True)
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


def test_a_freed_connection_goes_to_the_most_urgent_waiting_statement(rag):
    pool = Pool(rag.store.query_pool.dsn, max_size=1)
    snap = Snapshot(pool, "demo", _SCOPE_SQL, shared=True)
    order: list[int] = []

    def wait_for(priority: int) -> threading.Thread:
        def take() -> None:
            statement_priority.set(priority)
            with snap.connection() as conn:
                conn.execute("SELECT 1")
                order.append(priority)

        thread = threading.Thread(target=contextvars.copy_context().run, args=(take,))
        thread.start()
        return thread

    def waiting() -> int:
        with snap._cv:
            return sum(snap._waiting.values())

    try:
        with snap.connection():
            # Three less urgent statements queue first, so arrival order alone would not pick the
            # urgent one (and a plain wake-up would pick it about one time in four).
            threads = [wait_for(p) for p in (1, 2, 1)]
            deadline = time.monotonic() + 30
            while waiting() < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            threads.append(wait_for(5))
            while waiting() < 4 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert waiting() == 4, "the statements did not all queue"
        for thread in threads:
            thread.join(30)
    finally:
        snap.close()
        pool.close()
    assert order[0] == 5 and sorted(order) == [1, 1, 2, 5], order
    assert order[1] == 2, order  # then the next most urgent


def test_parallel_nodes_run_with_the_length_of_the_statement_chain_behind_them():
    def first(db: object) -> int:
        return statement_priority.get()

    def second(first: int, db: object) -> int:
        return statement_priority.get()

    def aside(db: object) -> int:
        return statement_priority.get()

    def report(first: int, second: int, aside: int) -> tuple[int, int, int]:
        return first, second, aside

    module = ad_hoc_utils.create_temporary_module(first, second, aside, report, module_name="priorities")
    dr = driver.Builder().with_modules(module).with_adapters(engine._context_future_adapter(4)).build()
    got = engine.execute(dr, ["report"], {"db": object()}, engine.RunState(cancel=CancelToken()))
    assert got["report"] == (2, 1, 1)
    assert engine.statement_priorities(dr)["report"] == 0

    local = engine.statement_priorities(engine.builder("local").build())
    # The match channels lead the chain the walk, the signals and the claims wait on; evidence
    # recalls only the last stages read come after them.
    assert local["name_key_rows"] > local["entity_neighbourhood"] > local["community_signals"] > local["vector_chunks"]
    assert local["local_answer"] == 0


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
