"""Run the GraphRAG import dataflow: a folder of GraphRAG output in, `IndexRecords` out.

Writing the records to PostgreSQL is `drivers.store`'s job; this runner only reads, normalises,
derives evidence chunks and decides about source embeddings.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Callable

from hamilton import driver

from dataflows import graphrag_import
from dataflows.records import IndexRecords
from dataflows.resources import Embedder


@lru_cache(maxsize=1)
def import_driver() -> driver.Driver:
    """The import DAG's driver, built once and reused (building is cheap but not free)."""
    return driver.Builder().with_modules(graphrag_import).build()


def read_graphrag(
    path: str | Path,
    embeddings: str = "auto",
    embedder: Embedder | None = None,
    progress: Callable[[str], None] | None = None,
) -> IndexRecords:
    """Read a GraphRAG output folder into normalised records.

    `embeddings` is "auto" (reuse source vectors only if `embedder` made them), "keep" (reuse or
    fail) or "recompute". `embedder=None` leaves vectors unset; the writer embeds what is missing.
    Raises `BadInput` for a missing path, a non-GraphRAG folder or an unreadable parquet file.
    """
    result = import_driver().execute(
        ["index_records"],
        inputs={
            "source_path": str(path),
            "embeddings_mode": embeddings,
            "embedder": embedder,
            "progress": progress,
        },
    )
    return result["index_records"]
