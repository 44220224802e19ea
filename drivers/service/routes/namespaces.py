"""Namespaces (list, stats, warm, drop) and the lookups inside one (a community, an entity's
neighbours, where an evidence id sits). Every route checks the namespace against the key first."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Depends, Query, Request

from graphrag_dag.drivers.service.deps import Namespace, errors, Services, allowed, call, principal, services
from graphrag_dag.drivers.service.guard import HttpError
from graphrag_dag.drivers.service.keys import Principal

router = APIRouter(prefix="/v1/namespaces", responses=errors(400, 401, 403, 404, 429, 503, 504))


@router.get("", tags=["namespaces"])
async def namespaces(who: Principal = Depends(principal), svc: Services = Depends(services)) -> list[dict[str, Any]]:
    rows = await anyio.to_thread.run_sync(svc.rag.store.namespaces)
    names = set(who.visible([r["namespace"] for r in rows]))
    return [r for r in rows if r["namespace"] in names]


@router.get("/{namespace}/stats", tags=["namespaces"])
async def stats(namespace: Namespace, request: Request, who: Principal = Depends(principal),
                svc: Services = Depends(services)) -> dict[str, int]:
    allowed(who, namespace)
    return await svc.runner.call(request.is_disconnected, lambda _cancel: svc.rag.store.stats(namespace))


@router.get("/{namespace}/documents", tags=["namespaces"])
async def documents(namespace: Namespace, request: Request, who: Principal = Depends(principal),
                    svc: Services = Depends(services)) -> list[dict[str, str]]:
    """The namespace's documents, id and title, in id order (the ids `document-deletions` takes)."""
    allowed(who, namespace)
    return await svc.runner.call(request.is_disconnected, lambda _cancel: svc.rag.documents(namespace))


@router.post("/{namespace}/warm", tags=["namespaces"])
async def warm(namespace: Namespace, who: Principal = Depends(principal), svc: Services = Depends(services)) -> dict[str, Any]:
    """Read the namespace into the database server's buffers, as `graphrag-dag warm` does: after
    an import or a restart, so the first searches do not each wait on reads. A write key's, as
    it reads the whole namespace; outside the search slots and their timeout, as a drop is,
    since a large namespace takes minutes. The worker that serves it first builds its in-memory
    indexes of the namespace (`indexes_seconds`; other workers build theirs at first use), as
    `serve --warm` does (GraphRag.warm_for_search says why first)."""
    allowed(who, namespace, "write")
    built, report = await anyio.to_thread.run_sync(svc.rag.warm_for_search, namespace)
    return {**report.to_dict(), "indexes_seconds": round(built, 3)}


@router.delete("/{namespace}", tags=["namespaces"])
async def drop(namespace: Namespace, who: Principal = Depends(principal), svc: Services = Depends(services)) -> dict[str, Any]:
    allowed(who, namespace, "admin")
    if not await anyio.to_thread.run_sync(svc.rag.store.drop, namespace):
        raise HttpError(404, f"unknown namespace {namespace!r}")
    return {"dropped": namespace}


@router.get("/{namespace}/communities/{community_id:path}", tags=["lookups"])
async def community(namespace: Namespace, community_id: str, request: Request, who: Principal = Depends(principal),
                    svc: Services = Depends(services)) -> dict[str, Any]:
    """A community's summary, full content, members, edges, claims and evidence passages."""
    return await call(request, svc.rag.community_details, allowed(who, namespace), community_id)


@router.get("/{namespace}/entities/{name:path}/neighbors", tags=["lookups"])
async def neighbors(namespace: Namespace, name: str, request: Request, depth: int = Query(1, ge=1, le=3),
                    limit: int = Query(50, ge=1, le=1000), who: Principal = Depends(principal),
                    svc: Services = Depends(services)) -> dict[str, Any]:
    """The entity a name means (exact, alias and fuzzy channels) and its neighbours to `depth` hops."""
    return await call(request, svc.rag.entity_neighbors, allowed(who, namespace), name, depth=depth, limit=limit)


@router.get("/{namespace}/sources/{evidence_id:path}", tags=["lookups"])
async def source(namespace: Namespace, evidence_id: str, request: Request, context_chars: int = Query(200, ge=0, le=20000),
                 who: Principal = Depends(principal), svc: Services = Depends(services)) -> dict[str, Any]:
    """Where an evidence id sits: its document, title, span and the text around it."""
    return await call(request, svc.rag.source, allowed(who, namespace), evidence_id, context_chars=context_chars)
