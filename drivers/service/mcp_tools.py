"""The MCP tools (official `mcp` SDK): the same searches and lookups as the HTTP API, for agents.
`graphrag-dag mcp` serves them over stdio; `graphrag-dag serve` mounts them at /mcp as streamable
HTTP, where each call carries an API key like any other request and is held to its namespaces."""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.routing import Route

from graphrag_dag.dataflows.common.errors import GraphRagError
from graphrag_dag.drivers.api.options import OPTIONS
from graphrag_dag.drivers.api.results import DETAILS, brief_json
from graphrag_dag.drivers.service.keys import OPEN, KeyStore, Principal, bearer
from graphrag_dag.drivers.service.runner import Busy, SearchRunner, status_of
from graphrag_dag.drivers.store import validate_namespace

INSTRUCTIONS = (
    "Retrieval over GraphRAG indexes. Call list_namespaces first. For a question about specific "
    "people, places or things use local_search; for themes across a whole corpus use global_search; "
    "for a question that needs the big picture and then specific facts use drift_search. "
    "Answers cite evidence ids in brackets: pass one to get_source to read the passage, "
    "community ids to community_details, and entity names to entity_neighbors."
)


def build_mcp(rag: Any, runner: SearchRunner, keys: KeyStore | None) -> MCPServer:
    """The tools; `keys` None means every caller may use every namespace (stdio, or --no-auth)."""
    server = MCPServer("graphrag-dag", instructions=INSTRUCTIONS)

    async def who(ctx: Context) -> Principal:
        if keys is None or ctx.headers is None:  # stdio: the local user, who owns the database anyway
            return OPEN
        found = await anyio.to_thread.run_sync(keys.verify, bearer(ctx.headers))
        if found is None:
            raise ToolError("a valid API key is required")
        return found

    async def call(ctx: Context, namespace: str, fn: Any) -> Any:
        principal = await who(ctx)
        try:
            validate_namespace(namespace)
            if not principal.may(namespace):
                raise ToolError(f"this key has no access to namespace {namespace!r}")
            return await runner.call(_never, fn)
        except (GraphRagError, Busy) as exc:
            raise ToolError(status_of(exc)[1] if isinstance(exc, GraphRagError) else str(exc)) from None

    def search(flow: str, query: str, namespace: str, offline: bool, options: dict[str, Any],
               config: dict[str, Any] | None = None, detail: str = "brief") -> Any:
        if detail not in DETAILS:
            raise ToolError(f"detail must be brief or full, not {detail!r}")
        opts = OPTIONS[flow](**{k: v for k, v in options.items() if v is not None})
        cfg = {k: v for k, v in (config or {}).items() if v is not None}

        def run(cancel: Any) -> dict[str, Any]:
            result = rag.run(flow, query, namespace, options=opts, offline=offline, cancel=cancel, config=cfg).as_json()
            return brief_json(result) if detail == "brief" else result

        return run

    @server.tool()
    async def local_search(query: str, namespace: str, ctx: Context, top_k: int | None = None,
                           offline: bool = False, decompose: bool = False,
                           ranking: str | None = None, detail: str = "brief") -> dict[str, Any]:
        """Answer a question about specific entities from one namespace. Returns the answer with
        bracketed evidence ids, its status and warnings, the top evidence passages as snippets (ids
        for get_source) and the communities (ids for community_details); `detail` "full" adds the
        matched entities, scores, every passage with its document span and the ranked sources.
        `top_k` caps the communities used (default 8); `offline` answers extractively without an
        LLM; `decompose` splits a comparison or a chain of relations into sub-questions; `ranking`
        is "rrf" (default) or "weighted"."""
        return await call(ctx, namespace, search("local", query, namespace, offline, {"top_k": top_k},
                                                 {"decompose": decompose, "ranking": ranking}, detail))

    @server.tool()
    async def global_search(query: str, namespace: str, ctx: Context, level: int | None = None,
                            offline: bool = False, selection: str | None = None,
                            detail: str = "brief") -> dict[str, Any]:
        """Answer a question about a whole corpus (its main themes, trends, overall picture) by
        map-reduce over community summaries. `status` is completed, partial, no_results or failed
        (every map call failed; `error` says why). `level` picks the community level (default: leaves);
        `selection` "dynamic" rates communities from the roots down and maps only relevant branches
        (default "static": every community of the level). `detail` "brief" (default) returns the
        answer, status and the communities it rests on; "full" adds every map answer."""
        return await call(ctx, namespace, search("global", query, namespace, offline, {"level": level},
                                                 {"global_selection": selection}, detail))

    @server.tool()
    async def drift_search(query: str, namespace: str, ctx: Context, offline: bool = False,
                           follow_ups: int | None = None, depth: int | None = None,
                           detail: str = "brief") -> dict[str, Any]:
        """Answer a question that needs both the big picture and specific facts: a primer over the
        community reports nearest the question drafts an answer and follow-up questions, each
        follow-up runs as a local search (at most `follow_ups` per step, default 3, for `depth`
        steps, default 2), and a reduce writes the answer. `detail` "brief" (default) returns the
        answer, the top passages and the primer's communities; "full" adds the primer, every step
        with its evidence ids, and the evidence and sources of all steps."""
        return await call(ctx, namespace, search("drift", query, namespace, offline,
                                                 {"drift_follow_ups": follow_ups, "drift_depth": depth}, None,
                                                 detail))

    @server.tool()
    async def community_details(namespace: str, community_id: str, ctx: Context) -> dict[str, Any]:
        """A community's title, summary, full report, member entities, the edges among and out of
        its members with weights, claims, and the passages it was built from (with document spans)."""
        return await call(ctx, namespace, lambda cancel: rag.community_details(namespace, community_id, cancel=cancel))

    @server.tool()
    async def entity_neighbors(namespace: str, name: str, ctx: Context, depth: int = 1,
                               limit: int = 50) -> dict[str, Any]:
        """The entity a name means (exact, alias or typo-tolerant match) and its neighbours up to
        `depth` hops (1-3), nearest and strongest first, each with the edge weight that reached it,
        the entity it was reached through and its community."""
        return await call(ctx, namespace,
                          lambda cancel: rag.entity_neighbors(namespace, name, depth=depth, limit=limit, cancel=cancel))

    @server.tool()
    async def get_source(namespace: str, evidence_id: str, ctx: Context, context_chars: int = 200) -> dict[str, Any]:
        """Where an evidence id from a search result sits: its document id and title, the span
        [start, end), the evidence text and `context_chars` of document text before and after."""
        return await call(ctx, namespace,
                          lambda cancel: rag.source(namespace, evidence_id, context_chars=context_chars, cancel=cancel))

    @server.tool()
    async def list_namespaces(ctx: Context) -> list[dict[str, Any]]:
        """The namespaces (indexes) this caller may search, with their embedding model and source."""
        principal = await who(ctx)
        rows = await anyio.to_thread.run_sync(rag.store.namespaces)
        names = set(principal.visible([r["namespace"] for r in rows]))
        return [r for r in rows if r["namespace"] in names]

    return server


async def _never() -> bool:
    return False


class McpGuard:
    """ASGI wrapper of the MCP endpoint: a request without a valid key gets 401 before the MCP
    session sees it (each tool then checks the key's namespaces itself)."""

    def __init__(self, app: Any, keys: KeyStore | None) -> None:
        self.app, self.keys = app, keys

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if self.keys is not None and scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
            if await anyio.to_thread.run_sync(self.keys.verify, bearer(headers)) is None:
                body = json.dumps({"detail": "a valid API key is required (Authorization: Bearer <key>)"}).encode()
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def mount_mcp(app: Any, server: MCPServer, keys: KeyStore | None, host: str) -> Any:
    """Add /mcp to the FastAPI app; returns the session manager's `run` for the app's lifespan."""
    inner = server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, host=host)
    endpoint = next(r for r in inner.routes if getattr(r, "path", None) == "/mcp").endpoint
    app.router.routes.append(Route("/mcp", endpoint=McpGuard(endpoint, keys), methods=["GET", "POST", "DELETE"]))
    return server.session_manager.run
