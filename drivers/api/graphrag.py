"""The Python API: open a store, index documents or import GraphRAG output, run the four searches
(typed results: drivers/api/types.py), run any subset of nodes with overrides, draw the DAGs."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, cast

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common import switches
from graphrag_dag.drivers.runtime.cancel import CancelToken
from graphrag_dag.drivers.api.options import (
    MAX_QUERY_CHARS, OPTIONS, BasicOptions, GlobalOptions, LocalOptions, checked_query, option_values,
)
from graphrag_dag.drivers.api.run_output import RunOutput
from graphrag_dag.drivers.api.types import DriftResult, GlobalResult, ImportReport, IndexReport, LocalResult
from graphrag_dag.drivers.llm.chat import ChatConfig, chat_for_request
from graphrag_dag.drivers.llm.embedders import configured_embedder, offline_embedder
from graphrag_dag.drivers.runtime.config import default_home
from graphrag_dag.drivers.llm.tokens import token_counter
from graphrag_dag.drivers.store import Store, current_namespace, embedded_dsn, validate_namespace
from graphrag_dag.drivers.store.warm import WarmReport

if TYPE_CHECKING:
    from graphrag_dag.drivers.runtime import engine



__all__ = ["GraphRag", "LocalOptions", "GlobalOptions", "BasicOptions", "RunOutput", "default_home"]


class GraphRag:
    """Entry point for programs: one per process (it owns the connection pool), thread-safe."""

    def __init__(self, dsn: str | None = None, *, query_dsn: str | None = None, home: str | Path | None = None,
                 cache: bool | str | Path = False, chat: ChatConfig | None = None, embedder: Any = None,
                 pool_size: int = 8, pool_timeout: float = 10.0, telemetry: Any = False,
                 adapters: Sequence[Any] = ()) -> None:
        self.home = Path(home) if home else default_home()
        # Two logins (drivers/store/__init__.py): the query DSN defaults to the writer's own for a
        # server of yours, and to the embedded server's query role.
        self.dsn = dsn or os.environ.get("GRAPHRAG_DAG_DSN")
        if self.dsn:
            query_dsn = query_dsn or os.environ.get("GRAPHRAG_DAG_QUERY_DSN") or self.dsn
        else:
            self.dsn = embedded_dsn(self.home)
            query_dsn = query_dsn or embedded_dsn(self.home, "query")
        self.store = Store(self.dsn, query_dsn=query_dsn, max_size=pool_size, pool_timeout=pool_timeout)
        self.chat = chat if chat is not None else ChatConfig.from_env()
        self._embedder = embedder
        self._embedder_given = embedder is not None
        if cache is True:
            self.cache_path: Path | None = self.home / "hamilton-cache"
        elif cache:
            self.cache_path = Path(cache)
        else:
            self.cache_path = None
        self._engine: Any = None  # Hamilton's drivers, built when a flow first runs
        # OpenTelemetry spans per node (drivers/runtime/telemetry.py): True = global provider, or a TracerProvider.
        self._telemetry: Any = None
        if telemetry is not None and telemetry is not False:
            from graphrag_dag.drivers.runtime.telemetry import OtelAdapter

            self._telemetry = OtelAdapter(None if telemetry is True else telemetry)
        self._adapters = tuple(adapters)  # driver-level Hamilton adapters, e.g. the Hamilton UI tracker

    # -- resources -----------------------------------------------------------------------------

    @property
    def engine(self) -> "engine.Engine":
        """The flows' Hamilton drivers. Imported and made on first use: a command that only lists
        or looks up (`namespaces`, `stats`, `keys`) never loads Hamilton."""
        if self._engine is None:
            from graphrag_dag.drivers.runtime import engine

            self._engine = engine.Engine()
        return self._engine

    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            self._embedder = configured_embedder()
        return self._embedder

    def embedder_for(self, namespace: str) -> Any:
        """The embedder whose vectors `namespace` holds, as a search of it embeds its question."""
        return self._embedder_for(namespace, self.store.namespace_info(namespace))

    def _embedder_for(self, namespace: str, info: Any) -> Any:
        """The embedder a namespace's queries need: the configured one when it made the namespace;
        else, unless an embedder was given explicitly, the namespace's own model: one of the offline
        models (GRAPHRAG_DAG_EMBEDDER's choices), or one at the configured OpenAI-compatible
        endpoint (an import may declare it: --source-embedding-model). GraphRAG's unnamed model
        cannot be fetched that way, and neither can any model without an endpoint: the query is
        refused, saying what would work."""
        from graphrag_dag.drivers.ingest.importer import endpoint_embedder

        embedder = self.embedder
        fits = lambda e: info.embed_model == e.model and info.embed_dim == e.dim  # noqa: E731
        if fits(embedder):
            return embedder
        hint = "configure the same embedder or re-import with --embeddings recompute"
        if not self._embedder_given:
            own = offline_embedder(info.embed_model)  # a namespace built by another offline model: that model
            if own is None and not info.embed_model.startswith(("wordllama", "graphrag-source:")):
                try:
                    own = endpoint_embedder(info.embed_model)
                except BadInput as exc:
                    hint = str(exc)
            if own is not None and fits(own):
                return own
        raise BadInput(
            f"namespace {namespace!r} was built with embeddings from {info.embed_model} ({info.embed_dim} dims) "
            f"but the configured embedder is {embedder.model} ({embedder.dim} dims); {hint}"
        )

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> "GraphRag":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- running -------------------------------------------------------------------------------

    def _common_inputs(self, query: str, namespace: str, cancel: CancelToken, offline: bool,
                       chat: ChatConfig | None = None) -> tuple[dict, Any]:
        query = checked_query(query)
        db = self.store.scoped(namespace, cancel, snapshot=True)
        try:
            # Begun here, and in the same round trip the namespace's embedder and version as the
            # snapshot sees them: the request's embedder and cache key cannot disagree with what it reads.
            info = db.begin()
            if info is None:
                raise BadInput(f"unknown namespace {namespace!r} (see `graphrag-dag namespaces`)")
            embedder = self._embedder_for(namespace, info)
            chat_config = ChatConfig() if offline else (chat or self.chat)
            chat_model = chat_for_request(chat_config, cancel)
        except BaseException:
            db.close()
            raise
        inputs = {
            "query": query,
            "namespace": namespace,
            "embed_dim": info.embed_dim,
            "db": db,
            "chat_model": chat_model,
            "embedder": embedder,
            "token_counter": token_counter(),
        }
        return inputs, chat_model

    def run(self, flow: str, query: str, namespace: str, *, final_vars: Sequence[str] | None = None,
            overrides: dict[str, Any] | None = None, options: LocalOptions | GlobalOptions | BasicOptions | None = None,
            offline: bool = False, cancel: CancelToken | None = None, timeout: float | None = None,
            verbose: Callable[[str], None] | None = None, config: dict[str, Any] | None = None,
            chat: ChatConfig | None = None, on_node: Callable[[engine.TraceEntry], None] | None = None,
            on_token: Callable[[str], None] | None = None) -> "RunOutput":
        """Run any subset of a flow's nodes (`final_vars`), injecting any node's value (`overrides`),
        with implementations switched by `config` (local: `channels`, `selector`; dataflows/common/switches.py).
        A service watches the run through `on_node` (each finished node, from the thread that ran
        it) and `on_token` (the answer's text as an LLM streams it)."""
        if flow not in OPTIONS:
            raise BadInput(f"unknown method {flow!r}: use local, global, basic or drift")
        opts = options or OPTIONS[flow]()
        opts.validate()
        config = switches.normalize(flow, config)
        if cancel is None:
            cancel = CancelToken(timeout)
        elif timeout:
            cancel.set_deadline(timeout)
        try:
            return self._run(flow, query, namespace, final_vars, overrides, opts, offline, cancel, verbose, config,
                             chat, on_node, on_token)
        finally:
            cancel.close()

    def _run(self, flow: str, query: str, namespace: str, final_vars: Sequence[str] | None,
             overrides: dict[str, Any] | None, opts: Any, offline: bool, cancel: CancelToken,
             verbose: Callable[[str], None] | None, config: dict[str, Any], chat: ChatConfig | None,
             on_node: Callable[[engine.TraceEntry], None] | None,
             on_token: Callable[[str], None] | None) -> "RunOutput":
        from graphrag_dag.drivers.runtime import engine

        inputs, chat_model = self._common_inputs(query, namespace, cancel, offline, chat)
        # The request's snapshot is open from here on: whatever fails, the `finally` ends it.
        scope = current_namespace.set(namespace)  # every statement of this request checks it
        try:
            if on_token is not None and hasattr(chat_model, "on_token") and flow != "drift":
                chat_model.on_token = on_token  # DRIFT's follow-ups answer too: only its result is the answer
            inputs.update(option_values(opts))
            fanout = inputs.pop("map_fanout", "threads")  # an execution choice, not a node input
            if flow == "global":
                inputs["map_executor"] = None
            if flow == "drift":  # the switches are its follow-ups' (local search's); its own DAG has none
                from graphrag_dag.drivers.api.follow_ups import FollowUpSearcher

                inputs["local_searcher"] = FollowUpSearcher(self, inputs, config, cancel, MAX_QUERY_CHARS)
                config = {}
            if fanout == "ray":
                dr = self.engine.task_driver(flow, engine.ray_executor(), config=config, adapters=self._adapters)
            else:
                dr = self.engine.driver(flow, cache_path=self.cache_path, config=config, adapters=self._adapters)
            state = engine.RunState(cancel=cancel, verbose=verbose, flow=flow, namespace=namespace,
                                    usage=chat_model.usage, hooks=[self._telemetry] if self._telemetry else [],
                                    on_node=on_node, cache=dr.cache if on_node is not None else None)
            values = engine.execute(dr, final_vars or [engine.final_node(flow)], inputs, state, overrides)
        except KeyboardInterrupt:
            cancel.cancel()  # stop map workers and in-flight calls before the interpreter exits
            raise
        except Exception as exc:
            raise _unwrap(exc, cancel) from None
        finally:
            current_namespace.reset(scope)
            inputs["db"].close()
            if hasattr(chat_model, "close"):
                chat_model.close()
        return RunOutput(flow, query, namespace, values, state.trace, chat_model.usage,
                         chat_model.offline, state.run_id, dr, state.execute_ms)

    def local_search(self, query: str, namespace: str, **kwargs: Any) -> LocalResult:
        return cast(LocalResult, self.run("local", query, namespace, **kwargs).as_json())

    def global_search(self, query: str, namespace: str, **kwargs: Any) -> GlobalResult:
        return cast(GlobalResult, self.run("global", query, namespace, **kwargs).as_json())

    def basic_search(self, query: str, namespace: str, **kwargs: Any) -> LocalResult:
        return cast(LocalResult, self.run("basic", query, namespace, **kwargs).as_json())

    def drift_search(self, query: str, namespace: str, **kwargs: Any) -> DriftResult:
        return cast(DriftResult, self.run("drift", query, namespace, **kwargs).as_json())

    # -- building namespaces (drivers/ingest/) ------------------------------------------------------

    def index(self, paths: str | Path | Sequence[str | Path], namespace: str, *, replace: bool = False,
              update: bool = False, offline: bool = False, options: Any = None,
              progress: Callable[[str], None] | None = None, cancel: CancelToken | None = None) -> IndexReport:
        """Index files and folders into `namespace`, as `graphrag-dag index` does: a new namespace,
        or `replace` to rebuild one, or `update` to redo only what changed. `options` is an
        `IndexOptions`; the LLM is the configured one unless `offline`."""
        from graphrag_dag.drivers.ingest.indexer import index_corpus

        given = [paths] if isinstance(paths, (str, Path)) else list(paths)
        return cast(IndexReport, index_corpus(self, given, namespace, replace=replace, update=update, offline=offline,
                                              options=options, progress=progress, cancel=cancel))

    def documents(self, namespace: str) -> list[dict[str, str]]:
        """The namespace's documents, id and title, in id order."""
        state = self.store.indexed_state(namespace)
        if state is None:
            raise BadInput(f"unknown namespace {namespace!r} (see `graphrag-dag namespaces`)")
        return [{"id": d.id, "title": d.title} for d in state.documents]

    def delete_documents(self, namespace: str, documents: Sequence[str], *,
                         progress: Callable[[str], None] | None = None,
                         cancel: CancelToken | None = None) -> IndexReport:
        """Remove documents (by id, or by file path) from a namespace this indexer wrote, with
        whatever only they supported, as `graphrag-dag delete-documents` does."""
        from graphrag_dag.drivers.ingest.indexer import delete_documents

        return cast(IndexReport, delete_documents(self, namespace, documents, progress=progress, cancel=cancel))

    def import_graphrag(self, path: str | Path, namespace: str, *, embeddings: str = "auto", replace: bool = False,
                        source_embedding_model: str | None = None,
                        progress: Callable[[str], None] | None = None) -> ImportReport:
        """Import a Microsoft GraphRAG output folder (any version) into `namespace` in one
        transaction, as `graphrag-dag import-graphrag` does."""
        from graphrag_dag.drivers.ingest.importer import import_graphrag

        return cast(ImportReport, import_graphrag(self, path, namespace, embeddings=embeddings, replace=replace,
                                                  progress=progress, source_embedding_model=source_embedding_model))

    # -- lookups (drivers/api/lookups.py) ------------------------------------------------------------

    @contextlib.contextmanager
    def reading(self, namespace: str, cancel: CancelToken | None = None) -> Iterator[Any]:
        """One namespace-scoped snapshot for a lookup, closed on exit (the same scope a search runs in)."""
        db = self.store.scoped(namespace, cancel, snapshot=True)
        try:
            if db.begin() is None:  # the namespace as the snapshot sees it, in the same round trip
                raise BadInput(f"unknown namespace {namespace!r} (see `graphrag-dag namespaces`)")
        except BaseException:
            db.close()
            raise
        scope = current_namespace.set(namespace)
        try:
            yield db
        finally:
            current_namespace.reset(scope)
            db.close()

    def community_details(self, namespace: str, community_id: str, **kwargs: Any) -> dict[str, Any]:
        """A community's summary, content, members, edges, claims and evidence passages."""
        from graphrag_dag.drivers.api import lookups

        with self.reading(namespace, kwargs.pop("cancel", None)) as db:
            return lookups.community_details(db, namespace, community_id, **kwargs).as_json()

    def entity_neighbors(self, namespace: str, name: str, depth: int = 1, **kwargs: Any) -> dict[str, Any]:
        """The entity a name means and its neighbours to `depth` hops, with weights and communities."""
        from graphrag_dag.drivers.api import lookups

        with self.reading(namespace, kwargs.pop("cancel", None)) as db:
            return lookups.entity_neighbors(db, namespace, name, depth=depth, **kwargs).as_json()

    def source(self, namespace: str, evidence_id: str, **kwargs: Any) -> dict[str, Any]:
        """The document, title, span and surrounding text of an evidence id."""
        from graphrag_dag.drivers.api import lookups

        with self.reading(namespace, kwargs.pop("cancel", None)) as db:
            return lookups.source(db, namespace, evidence_id, **kwargs).as_json()

    def draw(self, flow: str, path: str | Path | None = None) -> Any:
        """Draw a flow's whole DAG; `.dot` needs no graphviz binary, `.svg`/`.png` do."""
        from graphrag_dag.drivers.runtime.drawing import draw_flow

        return draw_flow(flow, path)

    # -- data ----------------------------------------------------------------------------------

    def write(self, namespace: str, records: Any, *, replace: bool = False, source: str = "",
              progress: Callable[[str], None] | None = None, embedder: Any = None) -> dict[str, int]:
        """Prepare `records` (IndexRecords) with `embedder` (default: the configured one) and write
        them as one namespace, in one transaction."""
        from graphrag_dag.drivers.ingest.importer import prepare_records

        validate_namespace(namespace)
        write_set = prepare_records(records, embedder or self.embedder, progress)
        return self.store.write_index(namespace, write_set, replace=replace, source=source, progress=progress)

    def warm(self, namespace: str, *, progress: Callable[[str], None] | None = None) -> WarmReport:
        """Read the namespace's rows, b-trees and HNSW graphs into the server's buffers, so the
        first searches after a start do not each pay for pages read from the OS or the disk
        (drivers/store/warm.py). Worth it once per server start; nothing changes in any result."""
        return self.store.warm(validate_namespace(namespace), progress)

    def load_indexes(self, namespace: str) -> float:
        """Build this process's in-memory indexes of the namespace's current version (the fuzzy
        names, the page titles, the unit count and the graph: dataflows/local/graph_index.py), which
        the first local search would otherwise build while its caller waits. Returns the seconds it took. Each process keeps its own, so a service warms
        them in every worker; a command that exits at once has nothing to gain from them."""
        from graphrag_dag.dataflows.local import MEMOIZED

        started = time.perf_counter()
        self.run("local", "load the indexes", validate_namespace(namespace), offline=True, final_vars=MEMOIZED)
        return time.perf_counter() - started

    def warm_for_search(self, namespace: str) -> tuple[float, WarmReport]:
        """This process's in-memory indexes (`load_indexes`), then the server's buffers (`warm`),
        in that order: the indexes' load reads whole tables, whose pages pushed out what a warm
        before it had read. Returns the
        indexes' seconds and the warm's report; `serve --warm`, `bench --prewarm` and the warm
        route all come through here."""
        built = self.load_indexes(namespace)
        return built, self.warm(namespace)

    def load_demo(self, *, progress: Callable[[str], None] | None = None) -> bool:
        """Load the bundled demo corpus into namespace "demo" unless it is already there."""
        from graphrag_dag.drivers.ingest.demo import DEMO_NAMESPACE, demo_records

        existing = {n["namespace"]: n for n in self.store.namespaces()}
        current = existing.get(DEMO_NAMESPACE)
        if current and current["embed_model"] == self.embedder.model:
            return False
        self.write(DEMO_NAMESPACE, demo_records(), replace=True, source="demo", progress=progress)
        return True


def _unwrap(exc: Exception, cancel: CancelToken) -> BaseException:
    """Hamilton may wrap errors raised in nodes; surface the original, and report a cancelled
    request as cancelled even when the visible failure is a closed connection."""
    from graphrag_dag.dataflows.common.errors import GraphRagError

    inner: BaseException | None = exc
    while inner is not None:
        if isinstance(inner, GraphRagError):
            return inner
        inner = inner.__cause__ or inner.__context__
    return cancel.error() if cancel.cancelled else exc
