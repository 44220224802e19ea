"""Cancellation reaches the DAG, the running SQL statement and in-flight LLM requests."""

from __future__ import annotations

import threading
import time

import pytest

from llm_server import Reply


def _cancel_after(token, seconds: float, after: threading.Event | None = None) -> dict:
    mark: dict = {}

    def fire() -> None:
        if after is not None:
            after.wait(30)
        time.sleep(seconds)
        mark["at"] = time.monotonic()
        token.cancel()

    threading.Thread(target=fire, daemon=True).start()
    return mark


def test_cancel_stops_global_map_and_aborts_http(rag, llm_server, chat_config):
    from graphrag_dag.dataflows.common.errors import Cancelled
    from graphrag_dag.drivers.api import GlobalOptions
    from graphrag_dag.drivers.runtime.cancel import CancelToken

    first_call = threading.Event()

    def slow(rec):
        first_call.set()
        return Reply('{"answer": "x", "usefulness": 50}', delay=5.0)

    llm_server.responder = slow
    token = CancelToken()
    mark = _cancel_after(token, 0.3, after=first_call)
    opts = GlobalOptions(map_budget=600, map_output_reserve=100, map_concurrency=2)
    with pytest.raises(Cancelled):
        rag.run("global", "What are the main themes?", "demo", options=opts, chat=chat_config, cancel=token)
    returned = time.monotonic()
    assert returned - mark["at"] < 1.0
    started_after = [r for r in llm_server.chat_requests() if r.started > mark["at"]]
    assert started_after == []
    assert 0 < len(llm_server.chat_requests()) <= 2


def test_cancel_cancels_the_running_statement(rag):
    from graphrag_dag.dataflows.common.errors import Cancelled
    from graphrag_dag.drivers.runtime.cancel import CancelToken

    token = CancelToken()
    db = rag.store.scoped("demo", token)
    mark = _cancel_after(token, 0.5)
    with pytest.raises(Cancelled):
        db.rows("SELECT pg_sleep(30) /* graphrag-cancel-probe */")
    assert time.monotonic() - mark["at"] < 1.0
    active = rag.store.admin_rows(
        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE %s AND state = 'active' AND pid <> pg_backend_pid()",
        ("%graphrag-cancel-probe%",))[0][0]
    assert active == 0
    assert rag.local_search("Who is Mara Quill?", "demo")["communities"]  # the pool still serves


def test_deadline_gives_a_distinct_error(rag, llm_server, chat_config):
    from graphrag_dag.dataflows.common.errors import DeadlineExceeded

    llm_server.responder = lambda rec: Reply("{}", delay=5.0)
    t0 = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        rag.run("local", "Who is Mara Quill?", "demo", chat=chat_config, timeout=0.5)
    assert time.monotonic() - t0 < 2.0


def test_cancelled_before_start_runs_no_node(rag):
    from graphrag_dag.dataflows.common.errors import Cancelled
    from graphrag_dag.drivers.runtime.cancel import CancelToken

    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        rag.run("local", "Who is Mara Quill?", "demo", cancel=token)
