"""Run the index flows: a folder of GraphRAG output in, `IndexRecords` out (the import flow), and
records in, a `WriteSet` out (the prepare flow) that `drivers.store` writes as one transaction."""

from __future__ import annotations

import gc
import os
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
from hamilton import driver

from graphrag_dag.dataflows import index
from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.records import IndexRecords, WriteSet
from graphrag_dag.dataflows.common.resources import Embedder
from graphrag_dag.drivers.llm.tokens import token_counter


def endpoint_embedder(model: str) -> Embedder:
    """An embedder for `model` at the configured OpenAI-compatible endpoint, or BadInput when none
    is configured (an embedding model named without an endpoint cannot be reached)."""
    from graphrag_dag.drivers.llm.embedders import default_embedder

    base_url, api_key = os.environ.get("OPENAI_BASE_URL") or None, os.environ.get("OPENAI_API_KEY") or None
    if not (base_url or api_key):
        raise BadInput(f"embedding model {model!r} needs an OpenAI-compatible endpoint: set OPENAI_BASE_URL "
                       "and/or OPENAI_API_KEY")
    return default_embedder(model, base_url, api_key)


def _declared_embedder(model: str) -> Embedder:
    model = model.strip()
    if not model or any(ch.isspace() or not ch.isprintable() for ch in model) or len(model) > 200:
        raise BadInput(f"--source-embedding-model: {model!r} is not a model name")
    return endpoint_embedder(model)


@lru_cache(maxsize=1)
def import_driver() -> driver.Driver:
    """The import DAG's driver, built once and reused (building is cheap but not free)."""
    return driver.Builder().with_modules(*index.IMPORT_MODULES).build()


@lru_cache(maxsize=1)
def prepare_driver() -> driver.Driver:
    return driver.Builder().with_modules(*index.PREPARE_MODULES).build()


def prepare_records(records: IndexRecords, embedder: Embedder,
                    progress: Callable[[str], None] | None = None) -> WriteSet:
    """Vectors, leaf communities and claim quotes for `records` (dataflows/index/prepare.py)."""
    inputs = {"index_records": records, "embedder": embedder, "progress": progress, "token_counter": token_counter()}
    return prepare_driver().execute([index.PREPARE_FINAL], inputs=inputs)[index.PREPARE_FINAL]


def read_graphrag(
    path: str | Path,
    embeddings: str = "auto",
    embedder: Embedder | None = None,
    progress: Callable[[str], None] | None = None,
    source_embedding_model: str | None = None,
) -> IndexRecords:
    """Read a GraphRAG output folder into normalised records.

    `embeddings` is "auto" (reuse source vectors only if `embedder` made them), "keep" (reuse or
    fail) or "recompute". `embedder=None` leaves vectors unset; the writer embeds what is missing.
    Raises `BadInput` for a missing path, a non-GraphRAG folder or an unreadable parquet file.
    """
    # LanceDB's Rust logger (it reads LANCEDB_LOG) warns about index metadata it skips; a user's
    # own setting wins.
    os.environ.setdefault("LANCEDB_LOG", "error")
    result = import_driver().execute(
        [index.IMPORT_FINAL],
        inputs={
            "source_path": str(path),
            "embeddings_mode": embeddings,
            "source_embedding_model": source_embedding_model,
            "embedder": embedder,
            "progress": progress,
        },
    )
    _release_source_tables()
    return result[index.IMPORT_FINAL]


def _release_source_tables() -> None:
    """The decoded parquet tables are garbage
    once the records are built, but the run leaves them in reference cycles, and Arrow's allocator keeps memory it
    frees. Both are undone before the import's longest phases, embedding and writing, which would
    otherwise carry that memory along."""
    gc.collect()
    pa.default_memory_pool().release_unused()


EMBEDDING_MODES = ("auto", "keep", "recompute")


def import_graphrag(rag: Any, path: str | Path, namespace: str, *, embeddings: str = "auto", replace: bool = False,
                    progress: Callable[[str], None] | None = None,
                    source_embedding_model: str | None = None) -> dict[str, Any]:
    """Read a GraphRAG output folder and write it as one namespace, atomically.

    Checks that cannot depend on the data (namespace name, --replace) run before anything is read,
    so a refused import costs nothing; the write itself is one transaction.

    `source_embedding_model` declares the model that made GraphRAG's vectors (it does not record
    it). They are then kept under that name, the vectors GraphRAG never made (our evidence
    chunks) come from the same model at the configured OpenAI-compatible endpoint, and the
    namespace records it, so its queries are embedded there too.
    """
    from graphrag_dag.drivers.store import validate_namespace

    validate_namespace(namespace)
    if embeddings not in EMBEDDING_MODES:
        raise BadInput(f"--embeddings must be auto, keep or recompute, not {embeddings!r}")
    if not replace and any(n["namespace"] == namespace for n in rag.store.namespaces()):
        raise BadInput(f"namespace {namespace!r} already exists; pass --replace to overwrite it")
    embedder = rag.embedder if source_embedding_model is None else _declared_embedder(source_embedding_model)
    started = time.perf_counter()
    records = read_graphrag(path, embeddings=embeddings, embedder=embedder, progress=progress,
                            source_embedding_model=source_embedding_model)
    counts = rag.write(namespace, records, replace=replace, source=f"graphrag:{Path(path).name}", progress=progress,
                       embedder=embedder)
    elapsed = time.perf_counter() - started
    if progress:
        rows = sum(counts.values())
        progress(f"imported {rows} rows into {namespace!r} in {elapsed:.1f} s ({rows / max(elapsed, 1e-9):.0f} rows/s)")
    return {**counts, "warnings": list(records.warnings)}
