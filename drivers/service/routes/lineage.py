"""The lineage page and the two routes it is built on: a flow's DAG, and runs of chosen nodes
(drivers/service/lineage.py holds what they compute)."""

from __future__ import annotations

import functools
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response, StreamingResponse

from graphrag_dag.drivers.service.deps import errors, Services, allowed, principal, services
from graphrag_dag.drivers.service.keys import Principal
from graphrag_dag.drivers.service.lineage import RunBody, flow_graph, run_nodes

router = APIRouter(responses=errors(400, 401, 403, 404, 413, 429, 503, 504))
PAGE_FILES = {"page.js": "text/javascript", "page.css": "text/css"}


@functools.cache
def _page_file(name: str) -> bytes:
    from importlib import resources

    return (resources.files("graphrag_dag.drivers.service") / "page" / name).read_bytes()


@router.get("/", include_in_schema=False)
async def page() -> HTMLResponse:
    """The lineage page: it holds no data of its own (every value comes through the keyed API)."""
    return HTMLResponse(_page_file("index.html"))


@router.get("/static/{name}", include_in_schema=False)
async def asset(name: str) -> Response:
    if name not in PAGE_FILES:
        return Response(status_code=404)
    return Response(_page_file(name), media_type=PAGE_FILES[name], headers={"Cache-Control": "no-cache"})


@router.get("/v1/dag/{flow}", tags=["lineage"])
async def dag(flow: str, channels: str | None = None, selector: str | None = None, ranking: str | None = None,
              decompose: str | None = None, global_selection: str | None = None,
              _who: Principal = Depends(principal)) -> dict[str, Any]:
    """A flow's nodes (with their inputs, types and first doc paragraph) and edges, under a config."""
    given = {"channels": channels, "selector": selector, "ranking": ranking, "decompose": decompose,
             "global_selection": global_selection}
    config = {k: v for k, v in given.items() if v is not None}
    graph = flow_graph(flow, config)
    return {k: v for k, v in graph.items() if k != "types"}


@router.post("/v1/run", tags=["lineage"])
async def run(body: RunBody, request: Request, who: Principal = Depends(principal),
              svc: Services = Depends(services)) -> Any:
    """Run chosen nodes with overrides; every node's value as JSON and the trace (with cache
    hits). With `stream`, the search's event stream, whose `result` event is this object."""
    allowed(who, body.namespace)
    flow_graph(body.flow, body.config)  # a bad flow or config is a 400, not an event
    if body.stream:
        work = lambda cancel, **hooks: run_nodes(svc.rag, body, cancel, **hooks)  # noqa: E731
        return StreamingResponse(svc.runner.stream_work(work, body.timeout), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    return await svc.runner.call(request.is_disconnected, lambda cancel: run_nodes(svc.rag, body, cancel), body.timeout)
