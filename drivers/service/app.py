"""The HTTP API of `graphrag-dag serve` (FastAPI): searches, lookups, namespaces, background jobs,
health and metrics, everything versioned under /v1 and described at /docs.

Every route that touches a namespace checks it against the caller's key first (401 without a
valid key, 403 for a namespace the key lacks) and only then reads; the read itself then runs in
the namespace scope that row-level security enforces (drivers/store/scoped.py)."""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import anyio
from fastapi import Depends, FastAPI, File, Form, Query, Request, UploadFile
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from graphrag_dag.dataflows.common.errors import BadInput, GraphRagError
from graphrag_dag.drivers.api.graphrag import GraphRag
from graphrag_dag.drivers.api.options import MAX_QUERY_CHARS
from graphrag_dag.drivers.api.options import OPTIONS
from graphrag_dag.drivers.service import uploads
from graphrag_dag.drivers.service.guard import HttpError, RequestLimits
from graphrag_dag.drivers.service.jobs import Jobs
from graphrag_dag.drivers.service.keys import OPEN, KeyStore, Principal, bearer
from graphrag_dag.drivers.service.lineage import add_lineage_routes
from graphrag_dag.drivers.service.metrics import Metrics
from graphrag_dag.drivers.service.runner import Busy, SearchRunner, status_of
from graphrag_dag.drivers.store import validate_namespace

API_VERSION = "v1"


@dataclass
class ServiceSettings:
    auth: bool = True  # False only with `--no-auth` on a loopback host
    max_body_bytes: int = 1_000_000
    max_upload_bytes: int = 200_000_000
    max_concurrent: int = 8
    request_timeout: float = 120.0
    import_root: Path | None = None  # server-side import paths must lie under it (none: uploads only)
    lifespans: list[Callable[[], Any]] = field(default_factory=list)  # async context managers run with the app
    mcp: bool = True  # mount the MCP tools at /mcp (streamable HTTP)
    host: str = "127.0.0.1"  # the host the server listens on (MCP's DNS-rebinding protection on loopback)

    def as_json(self) -> dict[str, Any]:
        return {"auth": self.auth, "max_body_bytes": self.max_body_bytes, "max_upload_bytes": self.max_upload_bytes,
                "max_concurrent": self.max_concurrent, "request_timeout": self.request_timeout,
                "import_root": str(self.import_root) if self.import_root else None, "mcp": self.mcp,
                "host": self.host}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ServiceSettings":
        root = data.get("import_root")
        return cls(**{**data, "import_root": Path(root) if root else None})


class SearchBody(BaseModel):
    """A search request; `options` are the method's settings (`top_k`, `rrf_k`, `map_budget`, ...),
    `config` switches implementations (`channels`, `selector`, `ranking`, `decompose`, `global_selection`;
    dataflows/common/switches.py)."""

    model_config = ConfigDict(extra="forbid")
    query: str
    namespace: str
    stream: bool = False
    offline: bool = False
    timeout: float | None = Field(default=None, gt=0)
    options: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)


def _public(job: dict[str, Any] | None) -> dict[str, Any]:
    """A job as a caller sees it: everything but the id of the key that started it."""
    return {k: v for k, v in (job or {}).items() if k != "owner"}


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

    app = FastAPI(title="graphrag-dag", version=API_VERSION, lifespan=lifespan,
                  description="GraphRAG local and global search as Hamilton DAGs over PostgreSQL + pgvector")
    app.state.rag, app.state.runner, app.state.jobs, app.state.keys = rag, runner, jobs, keys
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

    async def principal(request: Request) -> Principal:
        if not settings.auth:
            return OPEN
        key = bearer(request.headers)
        found = await anyio.to_thread.run_sync(keys.verify, key) if key else None
        if found is None:
            raise HttpError(401, "a valid API key is required (Authorization: Bearer <key>)",
                            {"WWW-Authenticate": "Bearer"})
        return found

    def allowed(who: Principal, namespace: str, role: str = "query") -> str:
        validate_namespace(namespace)
        if not who.may(namespace, role):
            raise HttpError(403, f"this key has no {role} access to namespace {namespace!r}")
        return namespace

    async def lookup(request: Request, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await runner.call(request.is_disconnected, lambda cancel: fn(*args, cancel=cancel, **kwargs))

    # -- health and metrics (no key: they show no namespace data) ---------------------------------

    @app.get("/healthz", tags=["service"])
    async def healthz() -> JSONResponse:
        try:
            await anyio.to_thread.run_sync(rag.store.admin_rows, "SELECT 1")
        except Exception as exc:  # noqa: BLE001 - any failure means not healthy
            return JSONResponse({"status": "unavailable", "detail": status_of(exc)[1]}, status_code=503)
        return JSONResponse({"status": "ok"})

    @app.get("/metrics", tags=["service"])
    async def prometheus() -> PlainTextResponse:
        return PlainTextResponse(metrics.text(), media_type="text/plain; version=0.0.4")

    # -- searches -----------------------------------------------------------------------------------

    async def search(flow: str, body: SearchBody, request: Request, who: Principal) -> Any:
        allowed(who, body.namespace)
        if len(body.query) > MAX_QUERY_CHARS:
            raise HttpError(413, f"the query is {len(body.query)} characters long; the limit is {MAX_QUERY_CHARS}")
        try:
            options = OPTIONS[flow](**body.options)
        except TypeError as exc:
            raise BadInput(f"unknown option for {flow} search: {exc}") from None
        kwargs = {"options": options, "offline": body.offline, "config": body.config or None}
        if body.stream:
            events = runner.stream(flow, body.query, body.namespace, kwargs, body.timeout)
            return StreamingResponse(events, media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        return await runner.search(request.is_disconnected, flow, body.query, body.namespace, kwargs, body.timeout)

    @app.post("/v1/search/local", tags=["search"])
    async def local_search(body: SearchBody, request: Request, who: Principal = Depends(principal)) -> Any:
        """Local search; the result is the `query --json` contract, or server-sent events with `stream`."""
        return await search("local", body, request, who)

    @app.post("/v1/search/global", tags=["search"])
    async def global_search(body: SearchBody, request: Request, who: Principal = Depends(principal)) -> Any:
        """Global search (map-reduce over community summaries); streams like local search."""
        return await search("global", body, request, who)

    @app.post("/v1/search/drift", tags=["search"])
    async def drift_search(body: SearchBody, request: Request, who: Principal = Depends(principal)) -> Any:
        """DRIFT search: a primer over the nearest community reports, follow-up local searches and a
        reduce; `config` holds the follow-ups' local switches. Streams stage events, not tokens."""
        return await search("drift", body, request, who)

    @app.post("/v1/search/basic", tags=["search"])
    async def basic_search(body: SearchBody, request: Request, who: Principal = Depends(principal)) -> Any:
        """Naive RAG over evidence chunks, the baseline."""
        return await search("basic", body, request, who)

    # -- namespaces and lookups -------------------------------------------------------------------

    @app.get("/v1/namespaces", tags=["namespaces"])
    async def namespaces(who: Principal = Depends(principal)) -> list[dict[str, Any]]:
        rows = await anyio.to_thread.run_sync(rag.store.namespaces)
        names = set(who.visible([r["namespace"] for r in rows]))
        return [r for r in rows if r["namespace"] in names]

    @app.get("/v1/namespaces/{namespace}/stats", tags=["namespaces"])
    async def stats(namespace: str, request: Request, who: Principal = Depends(principal)) -> dict[str, int]:
        allowed(who, namespace)
        return await runner.call(request.is_disconnected, lambda _cancel: rag.store.stats(namespace))

    @app.post("/v1/namespaces/{namespace}/warm", tags=["namespaces"])
    async def warm(namespace: str, who: Principal = Depends(principal)) -> dict[str, Any]:
        """Read the namespace into the database server's buffers, as `graphrag-dag warm` does: after
        an import or a restart, so the first searches do not each wait on reads. A write key's, as
        it reads the whole namespace; outside the search slots and their timeout, as a drop is,
        since a large namespace takes minutes. The worker that serves it first builds its in-memory
        indexes of the namespace (`indexes_seconds`; other workers build theirs at first use), as
        `serve --warm` does (GraphRag.warm_for_search says why first)."""
        allowed(who, namespace, "write")
        built, report = await anyio.to_thread.run_sync(rag.warm_for_search, namespace)
        return {**report.to_dict(), "indexes_seconds": round(built, 3)}

    @app.delete("/v1/namespaces/{namespace}", tags=["namespaces"])
    async def drop(namespace: str, who: Principal = Depends(principal)) -> dict[str, Any]:
        allowed(who, namespace, "admin")
        if not await anyio.to_thread.run_sync(rag.store.drop, namespace):
            raise HttpError(404, f"unknown namespace {namespace!r}")
        return {"dropped": namespace}

    @app.get("/v1/namespaces/{namespace}/communities/{community_id}", tags=["lookups"])
    async def community(namespace: str, community_id: str, request: Request,
                        who: Principal = Depends(principal)) -> dict[str, Any]:
        """A community's summary, full content, members, edges, claims and evidence passages."""
        return await lookup(request, rag.community_details, allowed(who, namespace), community_id)

    @app.get("/v1/namespaces/{namespace}/entities/{name}/neighbors", tags=["lookups"])
    async def neighbors(namespace: str, name: str, request: Request, depth: int = Query(1, ge=1, le=3),
                        limit: int = Query(50, ge=1, le=1000), who: Principal = Depends(principal)) -> dict[str, Any]:
        """The entity a name means (exact, alias and fuzzy channels) and its neighbours to `depth` hops."""
        return await lookup(request, rag.entity_neighbors, allowed(who, namespace), name, depth=depth, limit=limit)

    @app.get("/v1/namespaces/{namespace}/sources/{evidence_id}", tags=["lookups"])
    async def source(namespace: str, evidence_id: str, request: Request,
                     context_chars: int = Query(200, ge=0, le=20000),
                     who: Principal = Depends(principal)) -> dict[str, Any]:
        """Where an evidence id sits: its document, title, span and the text around it."""
        return await lookup(request, rag.source, allowed(who, namespace), evidence_id, context_chars=context_chars)

    # -- background jobs --------------------------------------------------------------------------

    @app.post("/v1/namespaces/{namespace}/imports", tags=["jobs"], status_code=202)
    async def start_import(namespace: str, request: Request, who: Principal = Depends(principal)) -> dict[str, Any]:
        """Import Microsoft GraphRAG output: JSON `{"path", "embeddings", "replace"}` naming a folder
        under the server's import root, or a multipart upload of a zip (`file`) with the same fields."""
        allowed(who, namespace, "write")
        folder, cleanup, embeddings, replace = await uploads.import_source(request, settings.import_root)
        from graphrag_dag.drivers.ingest.importer import import_graphrag

        def work(progress: Any, cancel: Any) -> dict[str, Any]:
            return import_graphrag(rag, folder, namespace, embeddings=embeddings, replace=replace, progress=progress)

        return _public(await anyio.to_thread.run_sync(jobs.start, "import", namespace, who.key_id, work, cleanup))

    @app.post("/v1/namespaces/{namespace}/documents", tags=["jobs"], status_code=202)
    async def start_indexing(namespace: str, files: list[UploadFile] = File(...), replace: bool = Form(False),
                             update: bool = Form(False), offline: bool = Form(False),
                             who: Principal = Depends(principal)) -> dict[str, Any]:
        """Index uploaded documents (.txt .md .html .pdf, .json/.jsonl/.csv records) into a namespace."""
        allowed(who, namespace, "write")
        if replace and update:
            raise BadInput("replace and update exclude each other")
        folder = Path(tempfile.mkdtemp(prefix="graphrag-upload-"))
        await uploads.save_files(files, folder)
        from graphrag_dag.drivers.ingest.indexer import index_corpus

        def work(progress: Any, cancel: Any) -> dict[str, Any]:
            return index_corpus(rag, [folder], namespace, replace=replace, update=update, offline=offline,
                                progress=progress, cancel=cancel)

        return _public(await anyio.to_thread.run_sync(jobs.start, "documents", namespace, who.key_id, work, folder))

    async def own_job(job_id: str, who: Principal) -> dict[str, Any]:
        job = await anyio.to_thread.run_sync(jobs.get, job_id)
        if job is None or not who.may(job["namespace"], "write"):
            raise HttpError(404, f"unknown job {job_id!r}")  # another tenant's job does not exist for you
        return job

    @app.get("/v1/jobs/{job_id}", tags=["jobs"])
    async def job_status(job_id: str, who: Principal = Depends(principal)) -> dict[str, Any]:
        return _public(await own_job(job_id, who))

    @app.delete("/v1/jobs/{job_id}", tags=["jobs"])
    async def cancel_job(job_id: str, who: Principal = Depends(principal)) -> dict[str, Any]:
        await own_job(job_id, who)
        return _public(await anyio.to_thread.run_sync(jobs.cancel, job_id))

    add_lineage_routes(app, rag, runner, principal, allowed)
    if settings.mcp:
        from graphrag_dag.drivers.service.mcp_tools import build_mcp, mount_mcp

        guard = keys if settings.auth else None
        lifespans.append(mount_mcp(app, build_mcp(rag, runner, guard), guard, settings.host))
    return app
