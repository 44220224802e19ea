"""Background jobs: importing Microsoft GraphRAG output, indexing uploaded documents and removing
documents, each answered 202 with the job; then its status and its cancellation. A job belongs to the namespace's
write keys: for any other key it does not exist (404)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from pydantic import BaseModel, ConfigDict, Field

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.drivers.service import uploads
from graphrag_dag.drivers.service.deps import Namespace, errors, Services, allowed, principal, services
from graphrag_dag.drivers.service.guard import HttpError
from graphrag_dag.drivers.service.keys import Principal

router = APIRouter(prefix="/v1", tags=["jobs"], responses=errors(400, 401, 403, 404, 409, 413, 503))


def _public(job: dict[str, Any] | None) -> dict[str, Any]:
    """A job as a caller sees it: everything but the id of the key that started it."""
    return {k: v for k, v in (job or {}).items() if k != "owner"}


@router.post("/namespaces/{namespace}/imports", status_code=202)
async def start_import(namespace: Namespace, request: Request, who: Principal = Depends(principal),
                       svc: Services = Depends(services)) -> dict[str, Any]:
    """Import Microsoft GraphRAG output: JSON `{"path", "embeddings", "replace"}` naming a folder
    under the server's import root, or a multipart upload of a zip (`file`) with the same fields."""
    allowed(who, namespace, "write")
    source = await uploads.import_source(request, svc.settings.import_root, svc.settings.zip_limits)
    from graphrag_dag.drivers.ingest.importer import import_graphrag

    def work(progress: Any, cancel: Any) -> dict[str, Any]:
        return import_graphrag(svc.rag, source.folder, namespace, embeddings=source.embeddings,
                               replace=source.replace, progress=progress)

    return _public(await _start(svc, "import", namespace, who, work, source.cleanup))


@router.post("/namespaces/{namespace}/documents", status_code=202)
async def start_indexing(namespace: Namespace, files: list[UploadFile] = File(...), replace: bool = Form(False),
                         update: bool = Form(False), offline: bool = Form(False),
                         who: Principal = Depends(principal), svc: Services = Depends(services)) -> dict[str, Any]:
    """Index uploaded documents (.txt .md .html .pdf .docx .pptx, .json/.jsonl/.csv records) into a namespace."""
    allowed(who, namespace, "write")
    if replace and update:
        raise BadInput("replace and update exclude each other")
    folder = Path(tempfile.mkdtemp(prefix="graphrag-upload-"))
    try:
        await uploads.save_files(files, folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    from graphrag_dag.drivers.ingest.indexer import index_corpus

    def work(progress: Any, cancel: Any) -> dict[str, Any]:
        return index_corpus(svc.rag, [folder], namespace, replace=replace, update=update, offline=offline,
                            progress=progress, cancel=cancel)

    return _public(await _start(svc, "documents", namespace, who, work, folder))


class DeletionBody(BaseModel):
    """Documents to remove: ids, or files' paths in the corpus (each names all its documents)."""

    model_config = ConfigDict(extra="forbid")
    documents: list[Annotated[str, Field(min_length=1, max_length=4096)]] = Field(min_length=1, max_length=100_000)


@router.post("/namespaces/{namespace}/document-deletions", status_code=202)
async def start_deletion(namespace: Namespace, body: DeletionBody, who: Principal = Depends(principal),
                         svc: Services = Depends(services)) -> dict[str, Any]:
    """Remove documents from a namespace this service (or `graphrag-dag index`) indexed, with what
    only they supported, as `graphrag-dag delete-documents` does. Unknown names, every document,
    or an imported namespace are refused here (400), before any job starts."""
    allowed(who, namespace, "write")
    from graphrag_dag.drivers.ingest.indexer import delete_documents, planned_deletion

    await anyio.to_thread.run_sync(planned_deletion, svc.rag, namespace, body.documents)

    def work(progress: Any, cancel: Any) -> dict[str, Any]:
        return delete_documents(svc.rag, namespace, body.documents, progress=progress, cancel=cancel)

    return _public(await _start(svc, "document-deletion", namespace, who, work, None))


async def _start(svc: Services, kind: str, namespace: str, who: Principal, work: Any,
                 cleanup: Path | None) -> dict[str, Any]:
    """The job, started; its folder is removed if it cannot start (the job removes it when it ends)."""
    try:
        return await anyio.to_thread.run_sync(svc.jobs.start, kind, namespace, who.key_id, work, cleanup)
    except BaseException:
        if cleanup is not None:
            shutil.rmtree(cleanup, ignore_errors=True)
        raise


async def _own_job(job_id: str, who: Principal, svc: Services) -> dict[str, Any]:
    job = await anyio.to_thread.run_sync(svc.jobs.get, job_id)
    if job is None or not who.may(job["namespace"], "write"):
        raise HttpError(404, f"unknown job {job_id!r}")  # another tenant's job does not exist for you
    return job


@router.get("/jobs/{job_id}")
async def job_status(job_id: str, who: Principal = Depends(principal), svc: Services = Depends(services)) -> dict[str, Any]:
    return _public(await _own_job(job_id, who, svc))


@router.delete("/jobs/{job_id}")
async def cancel_job(job_id: str, who: Principal = Depends(principal), svc: Services = Depends(services)) -> dict[str, Any]:
    job = await _own_job(job_id, who, svc)
    if job["status"] != "running":
        raise HttpError(409, f"job {job_id!r} is not running: it is {job['status']}")
    return _public(await anyio.to_thread.run_sync(svc.jobs.cancel, job_id))
