"""The Python API: open a store, run local or global search, run any subset of nodes with
overrides, draw the DAGs, import and drop namespaces."""

from __future__ import annotations

import collections
import dataclasses
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from graphrag_dag.dataflows.local.entity_matching import NameIndex
from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common import sql
from graphrag_dag.dataflows.local import switches
from graphrag_dag.drivers import engine
from graphrag_dag.drivers.cancel import CancelToken
from graphrag_dag.drivers.resources import ChatConfig, chat_for_request, default_embedder, token_counter
from graphrag_dag.drivers.store import Store, current_namespace, embedded_dsn, validate_namespace

MAX_QUERY_CHARS = 4000
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def default_home() -> Path:
    env = os.environ.get("GRAPHRAG_DAG_HOME")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("graphrag-dag"))


@dataclass
class LocalOptions:
    """Local-search knobs; a fresh instance per request, so defaults are read per request."""

    top_k: int = 8
    vector_chunk_top_k: int = 12
    keyword_chunk_limit: int = 24
    keyword_candidate_cap: int = 32
    evidence_chunk_cap: int = 40
    rrf_k: float = 60.0
    hops: int = 2
    hop_neighbour_cap: int = 10
    hop_total_cap: int = 100
    topology_community_cap: int = 48
    level: int | None = None
    fuzzy_threshold: float = 85.0
    semantic_entity_top_k: int = 8
    semantic_min_similarity: float = 0.2
    semantic_community_top_k: int = 16
    max_matched_entities: int = 12
    selection_min_ratio: float = 0.5
    claim_candidate_limit: int = 400
    claim_cap: int = 20
    context_token_budget: int = 12000

    def validate(self) -> None:
        for name in ("rrf_k", "fuzzy_threshold", "semantic_min_similarity", "selection_min_ratio"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise BadInput(f"{name.replace('_', '-')} must be a number, got {value!r}")
            setattr(self, name, float(value))
        for name in ("top_k", "vector_chunk_top_k", "keyword_chunk_limit", "keyword_candidate_cap", "evidence_chunk_cap",
                     "semantic_entity_top_k", "semantic_community_top_k", "max_matched_entities",
                     "claim_candidate_limit", "context_token_budget", "hop_neighbour_cap", "hop_total_cap",
                     "topology_community_cap"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise BadInput(f"{name.replace('_', '-')} must be a positive integer, got {value!r}")
        if not 0 <= self.hops <= 2:
            raise BadInput(f"hops must be 0, 1 or 2, got {self.hops!r}")
        if self.rrf_k < 0:
            raise BadInput("rrf-k must be >= 0")
        if not 0 <= self.fuzzy_threshold <= 100:
            raise BadInput("fuzzy-threshold must be between 0 and 100")


@dataclass
class GlobalOptions:
    level: int | None = None
    seed: int = 42
    map_budget: int = 8000
    reduce_budget: int = 8000
    map_output_reserve: int = 512
    reduce_output_reserve: int = 1024
    map_concurrency: int = 4
    map_fanout: str = "threads"  # or "ray": one Hamilton task per batch on Ray
    claims_per_summary: int = 5
    excerpts_per_summary: int = 3

    def validate(self) -> None:
        if self.map_fanout not in ("threads", "ray"):
            raise BadInput(f"map fan-out must be threads or ray, not {self.map_fanout!r}")
        for name in ("map_budget", "reduce_budget", "map_concurrency"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise BadInput(f"{name.replace('_', '-')} must be a positive integer, got {value!r}")
        if self.map_output_reserve < 0 or self.map_output_reserve >= self.map_budget:
            raise BadInput("map output reserve must be >= 0 and smaller than the map budget")
        if self.reduce_output_reserve < 0 or self.reduce_output_reserve >= self.reduce_budget:
            raise BadInput("reduce output reserve must be >= 0 and smaller than the reduce budget")


LOCAL_FINAL = ["local_result"]
GLOBAL_FINAL = ["global_result"]


class GraphRag:
    """Entry point for programs: one per process (it owns the connection pool), thread-safe."""

    def __init__(self, dsn: str | None = None, *, home: str | Path | None = None, cache: bool | str | Path = False,
                 chat: ChatConfig | None = None, embedder: Any = None, pool_size: int = 8,
                 pool_timeout: float = 10.0, parallel: bool = False, telemetry: Any = False,
                 adapters: Sequence[Any] = ()) -> None:
        self.home = Path(home) if home else default_home()
        self.dsn = dsn or os.environ.get("GRAPHRAG_DAG_DSN") or embedded_dsn(self.home)
        self.store = Store(self.dsn, max_size=pool_size, pool_timeout=pool_timeout)
        # Independent local-search nodes run concurrently on a shared thread pool (engine.py).
        self.parallel = parallel
        self.chat = chat if chat is not None else ChatConfig.from_env()
        self._embedder = embedder
        if cache is True:
            self.cache_path: Path | None = self.home / "hamilton-cache"
        elif cache:
            self.cache_path = Path(cache)
        else:
            self.cache_path = None
        self._name_indexes: collections.OrderedDict[tuple[str, str], NameIndex] = collections.OrderedDict()
        self._name_lock = threading.Lock()
        # OpenTelemetry spans per node (drivers/telemetry.py): True = global provider, or a TracerProvider.
        self._telemetry: Any = None
        if telemetry is not None and telemetry is not False:
            from graphrag_dag.drivers.telemetry import OtelAdapter

            self._telemetry = OtelAdapter(None if telemetry is True else telemetry)
        self._adapters = tuple(adapters)  # driver-level Hamilton adapters, e.g. the Hamilton UI tracker

    # -- resources -----------------------------------------------------------------------------

    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            self._embedder = default_embedder(os.environ.get("GRAPHRAG_DAG_EMBED_MODEL") or None,
                                              os.environ.get("OPENAI_BASE_URL") or None,
                                              os.environ.get("OPENAI_API_KEY") or None)
        return self._embedder

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> "GraphRag":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def name_index(self, namespace: str, index_version: str) -> NameIndex:
        """Names and aliases for fuzzy matching, loaded once per namespace *version* (an import
        changes the version, so a stale index is never used)."""
        key = (namespace, index_version)
        with self._name_lock:
            if key in self._name_indexes:
                self._name_indexes.move_to_end(key)
                return self._name_indexes[key]
        db = self.store.scoped(namespace)
        pairs = [(i, n, n) for i, n in db.rows(sql.ENTITY_NAMES, {"ns": namespace})]
        names = {i: n for i, n, _ in pairs}
        pairs += [(i, names.get(i, a), a) for i, a in db.rows(sql.ALIAS_NAMES, {"ns": namespace})]
        index = NameIndex(pairs)
        with self._name_lock:
            self._name_indexes[key] = index
            while len(self._name_indexes) > 16:
                self._name_indexes.popitem(last=False)
        return index

    # -- running -------------------------------------------------------------------------------

    def _common_inputs(self, query: str, namespace: str, cancel: CancelToken, offline: bool,
                       chat: ChatConfig | None = None) -> tuple[dict, Any]:
        if not isinstance(query, str) or not query.strip():
            raise BadInput("the query is empty")
        query = _CONTROL_RE.sub(" ", query)  # NUL cannot be stored or compared in PostgreSQL text
        if len(query) > MAX_QUERY_CHARS:
            raise BadInput(f"the query is {len(query)} characters long; the limit is {MAX_QUERY_CHARS}")
        validate_namespace(namespace)
        info = self.store.namespace_info(namespace)
        embedder = self.embedder
        if info.embed_model != embedder.model or info.embed_dim != embedder.dim:
            raise BadInput(
                f"namespace {namespace!r} was built with embeddings from {info.embed_model} ({info.embed_dim} dims) "
                f"but the configured embedder is {embedder.model} ({embedder.dim} dims); configure the same "
                f"embedder or re-import with --embeddings recompute"
            )
        chat_config = ChatConfig() if offline else (chat or self.chat)
        chat_model = chat_for_request(chat_config, cancel)
        inputs = {
            "query": query,
            "namespace": namespace,
            "index_version": info.index_version,
            "embed_model": info.embed_model,
            "embed_dim": info.embed_dim,
            "db": self.store.scoped(namespace, cancel),
            "chat_model": chat_model,
            "llm_identity": chat_config.identity,
            "embedder": embedder,
            "token_counter": token_counter(),
        }
        return inputs, chat_model

    def run(self, flow: str, query: str, namespace: str, *, final_vars: Sequence[str] | None = None,
            overrides: dict[str, Any] | None = None, options: LocalOptions | GlobalOptions | None = None,
            offline: bool = False, cancel: CancelToken | None = None, timeout: float | None = None,
            verbose: Callable[[str], None] | None = None, config: dict[str, Any] | None = None,
            chat: ChatConfig | None = None) -> "RunOutput":
        """Run any subset of a flow's nodes (`final_vars`), injecting any node's value (`overrides`),
        with implementations switched by `config` (local: `channels`, `selector`; dataflows/switches.py)."""
        if flow not in ("local", "global"):
            raise BadInput(f"unknown method {flow!r}: use local or global")
        opts = options or (LocalOptions() if flow == "local" else GlobalOptions())
        opts.validate()
        config = switches.normalize(flow, config)
        if cancel is None:
            cancel = CancelToken(timeout)
        elif timeout:
            cancel.set_deadline(timeout)
        inputs, chat_model = self._common_inputs(query, namespace, cancel, offline, chat)
        inputs.update(dataclasses.asdict(opts))
        fanout = inputs.pop("map_fanout", "threads")
        if flow == "local":
            inputs["name_index"] = self.name_index(namespace, inputs["index_version"])
        else:
            inputs["map_executor"] = None
        if fanout == "ray":
            dr = engine.task_driver(flow, engine.ray_executor(), config=config, adapters=self._adapters)
        else:
            dr = engine.get_driver(flow, cache_path=self.cache_path, config=config, adapters=self._adapters,
                                   parallel=self.parallel and flow == "local")
        state = engine.RunState(cancel=cancel, verbose=verbose, flow=flow, namespace=namespace,
                                usage=chat_model.usage, hooks=[self._telemetry] if self._telemetry else [])
        scope = current_namespace.set(namespace)  # every statement of this request checks it
        try:
            values = engine.execute(dr, final_vars or (LOCAL_FINAL if flow == "local" else GLOBAL_FINAL), inputs,
                                    state, overrides)
        except KeyboardInterrupt:
            cancel.cancel()  # stop map workers and in-flight calls before the interpreter exits
            raise
        except Exception as exc:
            raise _unwrap(exc, cancel) from None
        finally:
            current_namespace.reset(scope)
            cancel.close()
            if hasattr(chat_model, "close"):
                chat_model.close()
        return RunOutput(flow, query, namespace, values, state.trace, chat_model.usage,
                         chat_model.offline, state.run_id, dr, state.execute_ms)

    def local_search(self, query: str, namespace: str, **kwargs: Any) -> dict[str, Any]:
        return self.run("local", query, namespace, **kwargs).as_json()

    def global_search(self, query: str, namespace: str, **kwargs: Any) -> dict[str, Any]:
        return self.run("global", query, namespace, **kwargs).as_json()

    def draw(self, flow: str, path: str | Path | None = None) -> Any:
        """Draw a flow's whole DAG; `.dot` needs no graphviz binary, `.svg`/`.png` do."""
        from graphrag_dag.drivers.drawing import draw_flow

        return draw_flow(flow, path)

    # -- data ----------------------------------------------------------------------------------

    def write(self, namespace: str, records: Any, *, replace: bool = False, source: str = "",
              progress: Callable[[str], None] | None = None) -> dict[str, int]:
        return self.store.write_index(namespace, records, self.embedder, replace=replace, source=source,
                                      progress=progress)

    def load_demo(self, *, progress: Callable[[str], None] | None = None) -> bool:
        """Load the bundled demo corpus into namespace "demo" unless it is already there."""
        from graphrag_dag.drivers.demo import DEMO_NAMESPACE, demo_records

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


@dataclass
class RunOutput:
    flow: str
    query: str
    namespace: str
    values: dict[str, Any]
    trace: list[engine.TraceEntry]
    usage: Any
    offline: bool
    run_id: str | None
    driver: Any = field(repr=False, default=None)
    execute_ms: float = 0.0  # time inside Hamilton's execute, nodes included

    def timings_ms(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for t in self.trace:
            out[t.node] = round(out.get(t.node, 0.0) + t.ms, 3)
        return out

    def llm_json(self) -> dict[str, Any]:
        u = self.usage
        return {"calls": u.calls, "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                "by_stage": u.by_stage}

    def as_json(self) -> dict[str, Any]:
        from graphrag_dag.drivers.results import result_json

        return result_json(self)
