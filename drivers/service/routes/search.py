"""The four searches. Each answers the `query --json` contract, or server-sent events with `stream`."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.drivers.api.options import MAX_QUERY_CHARS, OPTIONS
from graphrag_dag.drivers.service.deps import errors, Services, allowed, principal, services
from graphrag_dag.drivers.service.guard import HttpError
from graphrag_dag.drivers.service.keys import Principal

router = APIRouter(prefix="/v1/search", tags=["search"], responses=errors(400, 401, 403, 404, 413, 429, 503, 504))


class SearchBody(BaseModel):
    """A search request; `options` are the method's settings (`top_k`, `rrf_k`, `map_budget`, ...),
    `config` switches implementations (`channels`, `selector`, `ranking`, `decompose`, `global_selection`;
    dataflows/common/switches.py); `detail` "brief" returns the result an agent needs (drivers/api/results.py)."""

    model_config = ConfigDict(extra="forbid")
    query: str
    namespace: str
    stream: bool = False
    offline: bool = False
    timeout: float | None = Field(default=None, gt=0)
    options: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    detail: Literal["brief", "full"] = "full"  # brief: answer, status, top sources as snippets, ids


async def _search(flow: str, body: SearchBody, request: Request, who: Principal, svc: Services) -> Any:
    allowed(who, body.namespace)
    if len(body.query) > MAX_QUERY_CHARS:
        raise HttpError(413, f"the query is {len(body.query)} characters long; the limit is {MAX_QUERY_CHARS}")
    try:
        options = OPTIONS[flow](**body.options)
    except TypeError as exc:
        raise BadInput(f"unknown option for {flow} search: {exc}") from None
    kwargs = {"options": options, "offline": body.offline, "config": body.config or None}
    if body.stream:
        events = svc.runner.stream(flow, body.query, body.namespace, kwargs, body.timeout, body.detail)
        return StreamingResponse(events, media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    return await svc.runner.search(request.is_disconnected, flow, body.query, body.namespace, kwargs, body.timeout,
                                   body.detail)


@router.post("/local")
async def local_search(body: SearchBody, request: Request, who: Principal = Depends(principal),
                       svc: Services = Depends(services)) -> Any:
    """Local search; the result is the `query --json` contract, or server-sent events with `stream`."""
    return await _search("local", body, request, who, svc)


@router.post("/global")
async def global_search(body: SearchBody, request: Request, who: Principal = Depends(principal),
                        svc: Services = Depends(services)) -> Any:
    """Global search (map-reduce over community summaries); streams like local search."""
    return await _search("global", body, request, who, svc)


@router.post("/drift")
async def drift_search(body: SearchBody, request: Request, who: Principal = Depends(principal),
                       svc: Services = Depends(services)) -> Any:
    """DRIFT search: a primer over the nearest community reports, follow-up local searches and a
    reduce; `config` holds the follow-ups' local switches. Streams stage events, not tokens."""
    return await _search("drift", body, request, who, svc)


@router.post("/basic")
async def basic_search(body: SearchBody, request: Request, who: Principal = Depends(principal),
                       svc: Services = Depends(services)) -> Any:
    """Naive RAG over evidence chunks, the baseline."""
    return await _search("basic", body, request, who, svc)
