"""Statements sent ahead (dataflows/common/resources.py `Reply`): on a request's one connection in
pipeline mode the server runs a sent statement before anything reads its rows; replies are read
in any order; a cancel reaches a statement nobody is reading yet; and the sequential plan puts
work between each statement's sending and the reading of its rows."""

from __future__ import annotations

import time
import types

import pytest
from hamilton import ad_hoc_utils, driver

from graphrag_dag.dataflows.common.resources import Ready, Reply
from graphrag_dag.drivers import engine
from graphrag_dag.drivers.schedule import _walk, planned


def _active(rag, marker: str) -> int:
    """Statements of the query login running `marker` now (a login sees its own sessions' queries in
    pg_stat_activity; the writer, not a superuser, would see none of them)."""
    with rag.store.query_pool.connection() as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE %s AND state = 'active' AND pid <> pg_backend_pid()",
            (f"%{marker}%",)).fetchone()[0]


def _until(check, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


def test_a_sent_statement_runs_on_the_server_before_its_rows_are_read(rag):
    from graphrag_dag.drivers.cancel import CancelToken

    db = rag.store.scoped("demo", CancelToken(), snapshot=True)
    try:
        assert db.begin() is not None
        first = db.send("SELECT pg_sleep(0.5), %(tag)s::text /* sent-ahead-probe */", {"tag": "first"})
        second = db.send("SELECT count(*) FROM entities WHERE namespace = %(ns)s", {"ns": "demo"})
        # Nothing has read a row yet: the server is already running the first statement.
        assert _until(lambda: _active(rag, "sent-ahead-probe") == 1), "the statement was not sent when made"
        assert second.rows()[0][0] > 0  # read before the first, sent before it
        assert first.rows() == [("", "first")]
        assert first.rows() == [("", "first")]  # read once, kept
        assert db.rows("SELECT %(n)s::int + 1", {"n": 1}) == [(2,)]  # a plain statement behind them
    finally:
        db.close()
    assert _active(rag, "sent-ahead-probe") == 0


def test_a_cancel_stops_a_statement_in_flight_that_nothing_reads_yet(rag):
    from graphrag_dag.dataflows.common.errors import Cancelled
    from graphrag_dag.drivers.cancel import CancelToken

    token = CancelToken()
    db = rag.store.scoped("demo", token, snapshot=True)
    try:
        assert db.begin() is not None
        reply = db.send("SELECT pg_sleep(30) /* in-flight-cancel-probe */")
        assert _until(lambda: _active(rag, "in-flight-cancel-probe") == 1)
        token.cancel()  # while no thread waits on the connection
        cancelled = time.monotonic()
        with pytest.raises(Cancelled):  # not the rows, 30 s later: the server stopped the statement
            reply.rows()
        assert time.monotonic() - cancelled < 10.0
    finally:
        db.close()
    assert rag.local_search("Who is Mara Quill?", "demo")["communities"]  # the pool still serves


def test_a_reply_is_read_without_waiting_for_the_statements_sent_after_it(rag):
    from graphrag_dag.dataflows.common.errors import Cancelled
    from graphrag_dag.drivers.cancel import CancelToken

    token = CancelToken()
    db = rag.store.scoped("demo", token, snapshot=True)
    try:
        assert db.begin() is not None
        quick = db.send("SELECT %(tag)s::text", {"tag": "quick"})
        slow = db.send("SELECT pg_sleep(30) /* sent-behind-probe */")
        started = time.monotonic()
        assert quick.rows() == [("quick",)]
        assert time.monotonic() - started < 10.0  # not 30 s: the slow one was still running
        token.cancel()
        with pytest.raises(Cancelled):
            slow.rows()
    finally:
        db.close()


def test_a_database_without_a_pipeline_reads_a_sent_statement_at_once(rag):
    from graphrag_dag.drivers.cancel import CancelToken

    for db in (rag.store.scoped("demo", CancelToken()), rag.store.scoped("demo", CancelToken(), snapshot=True, shared=True)):
        try:
            reply = db.send("SELECT %(n)s::int * 2", {"n": 21})
            assert isinstance(reply, Ready) and reply.rows() == [(42,)]
        finally:
            db.close()


def _module() -> types.ModuleType:
    def statement(x: int) -> Reply:
        return Ready([(x,)])

    def value(statement: Reply) -> int:
        return statement.rows()[0][0]

    def step_1(x: int) -> int:
        return x + 1

    def step_2(step_1: int) -> int:
        return step_1 * 2

    def answer(value: int, step_2: int) -> int:
        return value * 100 + step_2

    return ad_hoc_utils.create_temporary_module(statement, value, step_1, step_2, answer)


def test_the_plan_sends_first_and_reads_after_the_work_that_does_not_need_the_rows():
    dr = planned(driver.Builder().with_modules(_module()).build())
    assert dr.execute(["answer"], inputs={"x": 3}) == {"answer": 308}
    (plan,) = dr.graph_executor._plans.values()
    nodes = [s.name for s in plan if s.node is not None]
    assert nodes == ["statement", "step_1", "step_2", "value", "answer"]
    # Hamilton's own depth-first order reads the rows straight after sending them
    depth_first = [s.name for s in _walk(dr.graph, ["answer"], {"x"}, ()) if s.node is not None]
    assert depth_first.index("value") == depth_first.index("statement") + 1


def test_local_search_s_plan_runs_other_nodes_between_each_statement_and_its_rows():
    dr = engine.Engine().driver("local")
    needed = {n.name for n in dr.graph.get_upstream_nodes(["local_result"])[1]}
    plan = [s for s in _walk(dr.graph, ["local_result"], needed, (), overlapped=True)]
    names = [s.name for s in plan]
    replies = [s.name for s in plan if s.node is not None and s.node.type is Reply]
    assert len(replies) == 7, replies
    for reply in replies:
        sent = names.index(reply)
        read = min(i for i, s in enumerate(plan) if reply in s.inputs)
        between = [s.name for s in plan[sent + 1:read] if s.node is not None]
        assert between, reply


def test_the_work_that_waits_for_no_claim_runs_before_the_claims_are_read():
    """The selected summaries' lines are counted, and the order without the claims fused, while the
    claims are on their way: the plan reads the claims after both."""
    dr = engine.Engine().driver("local")
    needed = {n.name for n in dr.graph.get_upstream_nodes(["local_result"])[1]}
    names = [s.name for s in _walk(dr.graph, ["local_result"], needed, (), overlapped=True)]
    assert names.index("claim_reply") < names.index("summary_line_tokens") < names.index("ranked_claims")
    assert names.index("provisional_ranking") < names.index("ranked_claims") < names.index("ranked_units")
