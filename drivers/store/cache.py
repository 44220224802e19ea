"""The indexer's extraction cache in PostgreSQL: one row per (namespace, key), committed as each
reply arrives (the pool is in autocommit mode), so a crashed run keeps the calls it paid for."""

from __future__ import annotations

from graphrag_dag.dataflows.common.resources import ExtractionCache
from graphrag_dag.drivers.store.pool import Pool


class StoreExtractionCache(ExtractionCache):
    def __init__(self, pool: Pool, namespace: str) -> None:
        self.pool = pool
        self.namespace = namespace

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
