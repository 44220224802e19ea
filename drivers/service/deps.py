"""What every route depends on: the app's services, the caller's key, and the namespace check.

Routes take these through FastAPI's `Depends`, so each router module stays a flat list of
handlers and the app factory only wires services to routers (app.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Callable

import anyio
from fastapi import Path, Request
from pydantic import BaseModel

from graphrag_dag.drivers.api.graphrag import GraphRag
from graphrag_dag.drivers.service.guard import HttpError
from graphrag_dag.drivers.service.jobs import Jobs
from graphrag_dag.drivers.service.keys import OPEN, KeyStore, Principal, bearer
from graphrag_dag.drivers.service.metrics import Metrics
from graphrag_dag.drivers.service.runner import SearchRunner
from graphrag_dag.drivers.store import validate_namespace
from graphrag_dag.drivers.store.scoped import NAMESPACE_RE

if TYPE_CHECKING:
    from graphrag_dag.drivers.service.app import ServiceSettings


class ErrorBody(BaseModel):
    detail: str


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The documented error answers of a group of routes, for the OpenAPI document."""
    said = {400: "bad input", 401: "no valid API key", 403: "the key lacks this namespace or role",
            404: "no such namespace, community, entity, evidence id or job", 409: "the job is not running",
            413: "the body, upload or query is over its limit", 429: "every search slot is taken (Retry-After)",
            503: "the database cannot be reached", 504: "the request's time ran out"}
    return {code: {"model": ErrorBody, "description": said[code]} for code in codes}


# A namespace in a path: its pattern is in the OpenAPI document; `allowed` checks it (400, as the CLI).
Namespace = Annotated[str, Path(description="1-63 of a-z 0-9 _ - starting with a letter or digit",
                                json_schema_extra={"pattern": "^" + NAMESPACE_RE.pattern[2:-2] + "$"})]


@dataclass(frozen=True)
class Services:
    """The objects one app shares between its routes (kept on `app.state.services`)."""

    rag: GraphRag
    settings: "ServiceSettings"
    runner: SearchRunner
    jobs: Jobs
    keys: KeyStore
    metrics: Metrics


def services(request: Request) -> Services:
    return request.app.state.services


async def principal(request: Request) -> Principal:
    """The caller's key: 401 without a valid one (every caller is `OPEN` under `--no-auth`)."""
    svc = services(request)
    if not svc.settings.auth:
        return OPEN
    key = bearer(request.headers)
    found = await anyio.to_thread.run_sync(svc.keys.verify, key) if key else None
    if found is None:
        raise HttpError(401, "a valid API key is required (Authorization: Bearer <key>)",
                        {"WWW-Authenticate": "Bearer"})
    return found


def allowed(who: Principal, namespace: str, role: str = "query") -> str:
    """`namespace` if it is well formed (else 400) and the key has `role` on it (else 403). Checked
    before any read, so a namespace the key lacks is never touched."""
    validate_namespace(namespace)
    if not who.may(namespace, role):
        raise HttpError(403, f"this key has no {role} access to namespace {namespace!r}")
    return namespace


async def call(request: Request, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, cancel=..., **kwargs)` in a search slot, cancelled when the client goes away."""
    runner = services(request).runner
    return await runner.call(request.is_disconnected, lambda cancel: fn(*args, cancel=cancel, **kwargs))
