"""LLM faults end in the documented fallback or status, within the configured bounds."""

from __future__ import annotations

import json
import socket
import time

from llm_server import Reply, scripted

Q = "What did Dr. Mara Quill discover?"
PARSE_OK = json.dumps({"entities": ["Mara Quill"], "keywords": ["discover"], "themes": []})


def _config(base_url: str, **kw):
    from graphrag_dag.drivers.resources import ChatConfig

    return ChatConfig(model="test-model", base_url=base_url, api_key="test", **kw)


def test_429_with_retry_after_is_honoured_then_succeeds(rag, llm_server):
    llm_server.responder = scripted(Reply("rate limited", status=429, headers={"Retry-After": "1"}), PARSE_OK,
                                    '{"community_ids": []}', "answer [cl-14]")
    t0 = time.monotonic()
    run = rag.run("local", Q, "demo", chat=_config(llm_server.base_url, timeout=5, max_retries=2),
                  final_vars=["parsed_query"])
    assert run.values["parsed_query"].source == "llm"
    assert 0.9 <= time.monotonic() - t0 < 5
    assert len(llm_server.chat_requests()) == 2


def test_persistent_500_falls_back_with_warnings(rag, llm_server):
    llm_server.responder = lambda rec: Reply("boom", status=500)
    res = rag.local_search(Q, "demo", chat=_config(llm_server.base_url, timeout=5, max_retries=1))
    assert res["status"] == "completed" and res["communities"]
    assert any("parsing" in w for w in res["warnings"]) and any("answer" in w for w in res["warnings"])
    assert len(llm_server.chat_requests()) == 6  # 3 stages x (1 + 1 retry)


def test_timeouts_are_bounded(rag, llm_server):
    llm_server.responder = lambda rec: Reply("{}", delay=3.0)
    t0 = time.monotonic()
    res = rag.local_search(Q, "demo", chat=_config(llm_server.base_url, timeout=0.3, max_retries=0))
    assert time.monotonic() - t0 < 3.0
    assert res["communities"] and len(res["warnings"]) >= 2


def test_connection_refused_falls_back(rag):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    res = rag.local_search(Q, "demo", chat=_config(f"http://127.0.0.1:{port}/v1", timeout=2, max_retries=1))
    assert time.monotonic() - t0 < 10
    assert res["communities"] and any("failed" in w for w in res["warnings"])


def test_global_map_server_errors_give_no_results(rag, llm_server):
    from graphrag_dag.drivers.api import GlobalOptions

    llm_server.responder = lambda rec: Reply("boom", status=500)
    res = rag.global_search("What are the main themes?", "demo", options=GlobalOptions(map_budget=1500),
                            chat=_config(llm_server.base_url, timeout=5, max_retries=0))
    assert res["status"] == "no_results" and res["failed_batches"] >= 1
    assert all(r.stage == "map" for r in llm_server.chat_requests())


def test_call_cap_limits_llm_calls(rag, llm_server):
    from graphrag_dag.drivers.resources import LlmLimits

    llm_server.responder = scripted(PARSE_OK, '{"community_ids": []}', "answer")
    res = rag.local_search(Q, "demo", chat=_config(llm_server.base_url, timeout=5, max_retries=0,
                                                   limits=LlmLimits(max_calls=1)))
    assert len(llm_server.chat_requests()) == 1
    assert any("LlmBudgetExceeded" in w for w in res["warnings"])
