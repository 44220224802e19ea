"""The MCP tools through the official SDK's client: over stdio (`graphrag-dag mcp` as a child
process) and over streamable HTTP (`/mcp` on the real service, with API keys)."""

from __future__ import annotations

import asyncio
import json
import sys

import httpx2
import pytest
from served import Served

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes


TOOLS = {"local_search", "global_search", "drift_search", "community_details", "entity_neighbors", "get_source", "list_namespaces"}
QUESTION = "What did Dr. Mara Quill discover about the storm surge in Corran Sound, and who funded the work?"


async def _exercise(session) -> dict[str, object]:
    """List the tools and call each one; returns what came back, by tool."""
    await session.initialize()
    listed = (await session.list_tools()).tools
    out: dict[str, object] = {"tools": {t.name: t for t in listed}}
    calls = {
        "list_namespaces": {},
        "local_search": {"query": QUESTION, "namespace": "demo", "offline": True, "detail": "full"},
        "global_search": {"query": "What are the main themes?", "namespace": "demo", "offline": True, "detail": "full"},
        "drift_search": {"query": QUESTION, "namespace": "demo", "offline": True, "follow_ups": 2, "depth": 1,
                         "detail": "full"},
        "community_details": {"namespace": "demo", "community_id": "c2-1"},
        "entity_neighbors": {"namespace": "demo", "name": "Oren Pike", "depth": 2},
        "get_source": {"namespace": "demo", "evidence_id": "cl-3"},
    }
    for name, args in calls.items():
        out[name] = await session.call_tool(name, args)
    out["forbidden"] = await session.call_tool("get_source", {"namespace": "tenant-x", "evidence_id": "cl-3"})
    out["switched_local"] = await session.call_tool("local_search", {**calls["local_search"], "decompose": True,
                                                                     "ranking": "weighted"})
    out["switched_global"] = await session.call_tool("global_search", {**calls["global_search"], "selection": "dynamic"})
    out["brief_local"] = await session.call_tool("local_search", {"query": QUESTION, "namespace": "demo",
                                                                  "offline": True})  # the default detail
    out["brief_sources"] = [await session.call_tool("get_source", {"namespace": "demo", "evidence_id": src["evidence_id"]})
                            for src in out["brief_local"].structured_content["sources"]]
    return out


def _check(out: dict, rag, *, keyed: bool) -> None:
    tools = out["tools"]
    assert set(tools) == TOOLS
    for t in tools.values():  # an agent needs a description and a schema to act on
        assert len(t.description or "") > 60 and t.input_schema["type"] == "object"
    assert "namespace" in tools["get_source"].input_schema["required"]
    for name in TOOLS:
        assert not out[name].is_error, (name, out[name].content)
    local = out["local_search"].structured_content
    assert local["status"] == "completed" and [e["id"] for e in local["evidence"]] == \
        [e["id"] for e in rag.local_search(QUESTION, "demo")["evidence"]]
    assert out["community_details"].structured_content == rag.community_details("demo", "c2-1")
    assert out["entity_neighbors"].structured_content == rag.entity_neighbors("demo", "Oren Pike", depth=2)
    assert out["get_source"].structured_content == rag.source("demo", "cl-3")
    assert out["global_search"].structured_content["status"] in ("completed", "partial")
    names = [n["namespace"] for n in out["list_namespaces"].structured_content["result"]]
    assert names == (["demo"] if keyed else sorted(n["namespace"] for n in rag.store.namespaces()))
    assert "sub_questions" in out["switched_local"].structured_content["parsed_query"]
    assert out["switched_global"].structured_content["selection"]["method"] == "dynamic"
    drift = out["drift_search"].structured_content
    assert drift["status"] == "completed" and 1 <= len(drift["steps"]) <= 2 and drift["evidence"]
    brief = out["brief_local"].structured_content
    assert brief["detail"] == "brief" and brief["answer"] == local["answer"] and 1 <= len(brief["sources"]) <= 5
    assert all(len(src["snippet"]) <= 300 for src in brief["sources"]) and "evidence" not in brief
    assert [r.structured_content["evidence_id"] for r in out["brief_sources"]] == \
        [src["evidence_id"] for src in brief["sources"]]  # each id the brief result gives resolves
    forbidden = out["forbidden"]
    assert forbidden.is_error and ("no access" in forbidden.content[0].text if keyed else "unknown namespace" in forbidden.content[0].text)


def test_mcp_over_stdio(rag, cli_env):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def main() -> dict:
        params = StdioServerParameters(command=sys.executable, args=["-m", "graphrag_dag.drivers.cli", "mcp"], env=cli_env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            return await _exercise(session)

    _check(asyncio.run(asyncio.wait_for(main(), 120)), rag, keyed=False)


@pytest.fixture(scope="module")
def keyed_service(rag, home):
    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.llm.chat import ChatConfig
    from graphrag_dag.drivers.service.app import create_app
    from graphrag_dag.drivers.service.keys import KeyStore

    served_rag = GraphRag(rag.dsn, home=home, chat=ChatConfig())
    with Served(create_app(served_rag)) as srv:
        srv.key = KeyStore(rag.store).create(["demo"], "query")["key"]
        yield srv
    served_rag.close()


def test_mcp_over_streamable_http_with_a_key(rag, keyed_service):
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> dict:
        headers = {"Authorization": f"Bearer {keyed_service.key}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
                streamable_http_client(keyed_service.url + "/mcp", http_client=http) as streams, \
                ClientSession(streams[0], streams[1]) as session:
            return await _exercise(session)

    _check(asyncio.run(asyncio.wait_for(main(), 120)), rag, keyed=True)


def test_mcp_over_http_needs_a_key(keyed_service):
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    r = httpx2.post(keyed_service.url + "/mcp", content=json.dumps(body), headers=headers)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    r = httpx2.post(keyed_service.url + "/mcp", content=json.dumps(body),
                    headers={**headers, "Authorization": "Bearer grd_nope_nope"})
    assert r.status_code == 401
    r = httpx2.post(keyed_service.url + "/mcp", content=json.dumps(body),
                    headers={**headers, "Authorization": f"Bearer {keyed_service.key}"})
    assert r.status_code == 200


def test_two_apps_from_one_settings_each_run_their_own_mcp(rag, home):
    """create_app must not add its MCP session manager to the caller's settings: a second app made
    from the same settings would start the first one's manager too (and fail to start)."""
    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.llm.chat import ChatConfig
    from graphrag_dag.drivers.service.app import ServiceSettings, create_app

    settings = ServiceSettings()
    served_rag = GraphRag(rag.dsn, home=home, chat=ChatConfig())
    try:
        apps = [create_app(served_rag, settings), create_app(served_rag, settings)]
        assert settings.lifespans == []
        with Served(apps[0]) as one, Served(apps[1]) as two:
            for srv in (one, two):
                assert httpx2.post(srv.url + "/mcp", content="{}").status_code == 401
                assert httpx2.get(srv.url + "/healthz").json() == {"status": "ok"}
    finally:
        served_rag.close()


def _tokens(value: object) -> int:
    from graphrag_dag.drivers.llm.tokens import token_counter

    return token_counter().count(json.dumps(value, ensure_ascii=False))


def test_brief_results_fit_an_agents_context_on_the_demo_and_a_benchmark(rag, keyed_service):
    """The default detail through the SDK client: local and global results on the demo and on a
    slice of GraphRAG-Bench Medical stay under 2,000 cl100k tokens (the full ones are several times
    that), and carry the ids that get_source and community_details resolve."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from shared_data import shared_data

    from graphrag_dag.drivers.ingest.indexer import index_corpus
    from graphrag_dag.drivers.service.keys import KeyStore

    guides = sorted((shared_data() / "benchmarks" / "graphrag-bench-medical" / "documents").glob("*.txt"))[:3]
    index_corpus(rag, [str(g) for g in guides], "medbrief", replace=True, offline=True)
    key = KeyStore(rag.store).create(["demo", "medbrief"], "query")["key"]
    asked = [("demo", QUESTION, "What are the main themes?"),
             ("medbrief", "What are the treatment options for advanced cancer?", "What are the most common treatments?")]

    async def main() -> list[tuple]:
        out = []
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120) as http, \
                streamable_http_client(keyed_service.url + "/mcp", http_client=http) as streams, \
                ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            for ns, local_q, global_q in asked:
                local = (await session.call_tool("local_search", {"query": local_q, "namespace": ns, "offline": True}))
                full = (await session.call_tool("local_search", {"query": local_q, "namespace": ns, "offline": True,
                                                                 "detail": "full"}))
                glob = (await session.call_tool("global_search", {"query": global_q, "namespace": ns, "offline": True}))
                sources = [await session.call_tool("get_source", {"namespace": ns, "evidence_id": s["evidence_id"]})
                           for s in local.structured_content["sources"]]
                details = [await session.call_tool("community_details", {"namespace": ns, "community_id": c["id"]})
                           for c in glob.structured_content["communities"][:2]]
                out.append((ns, local, full, glob, sources, details))
        return out

    try:
        for ns, local, full, glob, sources, details in asyncio.run(asyncio.wait_for(main(), 240)):
            assert not (local.is_error or glob.is_error), (ns, local.content, glob.content)
            assert _tokens(local.structured_content) < 2000 and _tokens(glob.structured_content) < 2000, ns
            assert _tokens(full.structured_content) > 2 * _tokens(local.structured_content), ns
            assert local.structured_content["sources"] and glob.structured_content["communities"], ns
            assert all(not r.is_error for r in sources + details), ns
    finally:
        rag.store.drop("medbrief")
