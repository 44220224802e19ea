"""The indexer's extraction cache in PostgreSQL: one row per (namespace, key), committed as each
reply arrives (the pool is in autocommit mode), so a crashed run keeps the calls it paid for.

A copy sent to another process (a Ray extraction task) pickles to the server's address and the
namespace, and opens a pool of one connection there on first use."""

from __future__ import annotations

from typing import Any

from graphrag_dag.dataflows.common.resources import ExtractionCache
from graphrag_dag.drivers.store.pool import Pool


class StoreExtractionCache(ExtractionCache):
    def __init__(self, pool: Pool, namespace: str) -> None:
        self._pool: Pool | None = pool
        self._dsn = pool.dsn
        self.namespace = namespace

    @property
    def pool(self) -> Pool:
        if self._pool is None:
            self._pool = Pool(self._dsn, max_size=1)
        return self._pool

    def __getstate__(self) -> dict[str, Any]:
        return {"_dsn": self._dsn, "namespace": self.namespace}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._pool, self._dsn, self.namespace = None, state["_dsn"], state["namespace"]

    def get(self, key: str) -> str | None:
        with self.pool.connection() as conn:
            row = conn.execute("SELECT value FROM extraction_cache WHERE namespace = %s AND key = %s",
                               (self.namespace, key)).fetchone()
        return row[0] if row else None

    def put(self, key: str, value: str) -> None:
        with self.pool.connection() as conn:
            conn.execute("INSERT INTO extraction_cache (namespace, key, value) VALUES (%s, %s, %s) "
                         "ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value, created_at = now()",
                         (self.namespace, key, value))
