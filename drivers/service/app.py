"""The HTTP API of `graphrag-dag serve` (FastAPI): searches, lookups, namespaces, background jobs,
health and metrics, everything versioned under /v1 and described at /docs.

Every route that touches a namespace checks it against the caller's key first (401 without a
valid key, 403 for a namespace the key lacks) and only then reads; the read itself then runs in
the namespace scope that row-level security enforces (drivers/store/scoped.py).

This module makes the app: its services, the size limits, the error answers and the routers
(routes/, one module per group of routes; deps.py holds what they share)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from fastapi import FastAPI, Request
from fastapi_offline import FastAPIOffline
from fastapi.responses import JSONResponse

from graphrag_dag.dataflows.common.errors import GraphRagError
from graphrag_dag.drivers.api.graphrag import GraphRag
from graphrag_dag.drivers.service.deps import Services
from graphrag_dag.drivers.service.guard import HttpError, RequestLimits
from graphrag_dag.drivers.service.jobs import Jobs
from graphrag_dag.drivers.service.keys import KeyStore
from graphrag_dag.drivers.service.metrics import Metrics
from graphrag_dag.drivers.service.routes import ROUTERS
from graphrag_dag.drivers.service.runner import Busy, SearchRunner, status_of
from graphrag_dag.drivers.service.uploads import ZipLimits

API_VERSION = "v1"


@dataclass
class ServiceSettings:
    auth: bool = True  # False only with `--no-auth` on a loopback host
    max_body_bytes: int = 1_000_000
    max_upload_bytes: int = 200_000_000
    max_unzipped_bytes: int = ZipLimits.max_bytes  # an uploaded zip's limits (uploads.ZipLimits)
    max_zip_members: int = ZipLimits.max_members
    max_zip_ratio: float = ZipLimits.max_ratio
    max_concurrent: int = 8
    request_timeout: float = 120.0
    import_root: Path | None = None  # server-side import paths must lie under it (none: uploads only)
    lifespans: list[Callable[[], Any]] = field(default_factory=list)  # async context managers run with the app
    mcp: bool = True  # mount the MCP tools at /mcp (streamable HTTP)
    host: str = "127.0.0.1"  # the host the server listens on (MCP's DNS-rebinding protection on loopback)

    @property
    def zip_limits(self) -> ZipLimits:
        return ZipLimits(self.max_unzipped_bytes, self.max_zip_members, self.max_zip_ratio)

    def as_json(self) -> dict[str, Any]:
        return {"auth": self.auth, "max_body_bytes": self.max_body_bytes, "max_upload_bytes": self.max_upload_bytes,
                "max_unzipped_bytes": self.max_unzipped_bytes, "max_zip_members": self.max_zip_members,
                "max_zip_ratio": self.max_zip_ratio,
                "max_concurrent": self.max_concurrent, "request_timeout": self.request_timeout,
                "import_root": str(self.import_root) if self.import_root else None, "mcp": self.mcp,
                "host": self.host}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ServiceSettings":
        root = data.get("import_root")
        return cls(**{**data, "import_root": Path(root) if root else None})


def create_app(rag: GraphRag, settings: ServiceSettings | None = None, *, owns_rag: bool = False) -> FastAPI:
    """The app over `rag`; with `owns_rag` the app closes it when it stops (a worker process)."""
    settings = settings or ServiceSettings()
    metrics = Metrics()
    keys = KeyStore(rag.store)
    runner = SearchRunner(rag, max_concurrent=settings.max_concurrent, request_timeout=settings.request_timeout,
                          observe=metrics.search)
    jobs = Jobs(rag.store)
    lifespans = list(settings.lifespans)  # this app's own (the MCP session manager joins below)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for enter in lifespans:
                await stack.enter_async_context(enter())
            try:
                yield
            finally:
                jobs.close()
                runner.close()
                if owns_rag:
                    rag.close()

    # /docs from Swagger UI's files in the fastapi-offline wheel, not a CDN: it works offline
    app = FastAPIOffline(title="graphrag-dag", version=API_VERSION, lifespan=lifespan, redoc_url=None,
                         description="GraphRAG local and global search as Hamilton DAGs over PostgreSQL + pgvector")
    app.state.services = Services(rag=rag, settings=settings, runner=runner, jobs=jobs, keys=keys, metrics=metrics)
    app.add_middleware(RequestLimits, metrics=metrics, max_body=settings.max_body_bytes,
                       max_upload=settings.max_upload_bytes)

    @app.exception_handler(GraphRagError)
    async def _graphrag_error(_request: Request, exc: GraphRagError) -> JSONResponse:
        code, message = status_of(exc)
        return JSONResponse({"detail": message}, status_code=code)

    @app.exception_handler(HttpError)
    async def _http_error(_request: Request, exc: HttpError) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(Busy)
    async def _busy(_request: Request, exc: Busy) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=429, headers={"Retry-After": "1"})

    for router in ROUTERS:
        app.include_router(router)
    if settings.mcp:
        from graphrag_dag.drivers.service.mcp_tools import build_mcp, mount_mcp

        guard = keys if settings.auth else None
        lifespans.append(mount_mcp(app, build_mcp(rag, runner, guard), guard, settings.host))
    return app
