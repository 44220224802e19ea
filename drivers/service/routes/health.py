"""Health and metrics. They take no key: they show no namespace data."""

from __future__ import annotations

import anyio
from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, PlainTextResponse

from graphrag_dag.drivers.service.deps import Services, services
from graphrag_dag.drivers.service.runner import status_of

router = APIRouter(tags=["service"])
HEALTH_WAIT_S = 1.0  # a dead database is reported within this, not after the pool's 10 s wait


@router.get("/healthz")
async def healthz(svc: Services = Depends(services)) -> JSONResponse:
    """200 `{"status": "ok"}`, or 503 with the reason within a second when the database is gone."""
    try:
        await anyio.to_thread.run_sync(svc.rag.store.ping, HEALTH_WAIT_S)
    except Exception as exc:  # noqa: BLE001 - any failure means not healthy
        return JSONResponse({"status": "unavailable", "detail": status_of(exc)[1]}, status_code=503)
    return JSONResponse({"status": "ok"})


@router.get("/metrics")
async def prometheus(svc: Services = Depends(services)) -> PlainTextResponse:
    return PlainTextResponse(svc.metrics.text(), media_type="text/plain; version=0.0.4")
