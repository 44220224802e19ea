"""Assembling and running the Hamilton DAGs: drivers built once per configuration, per-run
timing/trace and cancellation hooks, and the Hamilton cache."""

from __future__ import annotations

import collections
import contextvars
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Collection

from hamilton import driver
from hamilton.lifecycle import base
from hamilton.node import Node

from graphrag_dag.dataflows import basic, drift, global_search, index, local
from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.drivers.runtime import fingerprints  # noqa: F401 - registers the cache's fingerprints
from graphrag_dag.drivers.runtime.cancel import CancelToken
from graphrag_dag.drivers.store.scoped import statement_meter

# Each flow's modules and final node. The index flows end in `prepare` (what the store writes);
# the import runs as two drivers (drivers/ingest/importer.py) but is drawn as one.
FLOWS: dict[str, tuple[list[ModuleType], str]] = {
    "local": (local.MODULES, local.FINAL),
    "global": (global_search.MODULES, global_search.FINAL),
    "basic": (basic.MODULES, basic.FINAL),
    "drift": (drift.MODULES, drift.FINAL),
    "index": ([*index.INDEX_MODULES, *index.PREPARE_MODULES], index.PREPARE_FINAL),
    "import": ([*index.IMPORT_MODULES, *index.PREPARE_MODULES], index.PREPARE_FINAL),
}

# The stages a flow's nodes fall in, where the flow names them (the lineage page folds by them).
STAGES: dict[str, dict[str, list[ModuleType]]] = {"local": local.STAGES, "global": global_search.STAGES}

# Inputs the cache must neither fingerprint nor store: an executor is how work runs, not what it
# computes. Every other resource (database, chat model, embedder, token counter) is keyed by its
# fingerprint (dataflows/common/resources.py).
UNVERSIONED_INPUTS = ["map_executor"]


def final_node(flow: str) -> str:
    if flow not in FLOWS:
        raise BadInput(f"unknown flow {flow!r}: use {', '.join(FLOWS)}")
    return FLOWS[flow][1]


def builder(flow: str, config: dict[str, Any] | None = None) -> driver.Builder:
    """A Builder with the flow's modules and config, before any adapter: pictures and tests use it
    bare; an Engine adds its hooks and the cache."""
    final_node(flow)
    return driver.Builder().with_modules(*FLOWS[flow][0]).with_config(config or {})


@dataclass
class TraceEntry:
    node: str
    ms: float
    cached: bool = False
    statements: int = 0  # database statements the node sent
    db_ms: float = 0.0  # time it waited for them
    ended: float = 0.0  # time.perf_counter() when it finished: with `ms`, when it ran


@dataclass
class RunState:
    cancel: CancelToken
    trace: list[TraceEntry] = field(default_factory=list)
    run_id: str | None = None
    verbose: Any = None  # a callable(str) for one line per stage
    flow: str = ""
    namespace: str = ""
    usage: Any = None  # the request's LlmUsage, read live (e.g. for token attributes on spans)
    hooks: list[Any] = field(default_factory=list)  # per-run lifecycle adapters (e.g. telemetry)
    execute_ms: float = 0.0  # wall time inside Hamilton's execute (nodes plus Hamilton's own work)
    on_node: Any = None  # a callable(TraceEntry) told of each finished node, as it finishes
    cache: Any = None  # the driver's Hamilton cache, when on_node must know hits as they happen
    # Per running node: this thread's statement count and wait before it, and when it started.
    _starts: dict[str, tuple[int, float, float]] = field(default_factory=dict)
    _say: threading.Lock = field(default_factory=threading.Lock)


current_run: contextvars.ContextVar[RunState | None] = contextvars.ContextVar("current_run", default=None)


class RunHooks(base.BasePreNodeExecute, base.BasePostNodeExecute, base.BasePreGraphExecute,
               base.BasePostGraphExecute):
    """Per-run timing and cancellation. The run's state is found by Hamilton's run id, not by
    thread: with a task executor, nodes run on other threads (and one driver serves many
    requests' threads at once).

    The hooks are Hamilton's base ones (as its own plugins use them), not `GraphExecutionHook` and
    `NodeExecutionHook`: the first converts the whole graph to `HamiltonGraph`s twice per run for
    a run id, the second builds each node's name, tags and input types into keyword arguments
    twice per node, which only a per-run hook (telemetry) reads. Those still get them, through
    their own wrappers."""

    def __init__(self) -> None:
        self._runs: dict[str, RunState] = {}

    def __reduce__(self) -> tuple:
        """Task executors (Ray) ship the adapters with each task; a remote copy starts empty and
        so leaves remote nodes untimed rather than failing to serialise the request's state."""
        return (RunHooks, ())

    def pre_graph_execute(self, *, run_id: str, graph: Any, final_vars: list[str], inputs: dict[str, Any],
                          overrides: dict[str, Any]) -> None:
        state = current_run.get()  # the graph hooks run in the calling thread
        if state is None:
            return
        state.run_id = run_id
        self._runs[run_id] = state
        for hook in state.hooks:
            if isinstance(hook, base.BasePreGraphExecute):
                hook.pre_graph_execute(run_id=run_id, graph=graph, final_vars=final_vars, inputs=inputs,
                                       overrides=overrides)

    def post_graph_execute(self, *, run_id: str, graph: Any, success: bool, error: Exception | None,
                           results: dict[str, Any] | None) -> None:
        state = self._runs.pop(run_id, None)
        if state is not None:
            for hook in state.hooks:
                if isinstance(hook, base.BasePostGraphExecute):
                    hook.post_graph_execute(run_id=run_id, graph=graph, success=success, error=error,
                                            results=results)

    def pre_node_execute(self, *, run_id: str, node_: Node, kwargs: dict[str, Any], task_id: str | None = None) -> None:
        state = self._runs.get(run_id)
        if state is None:
            return
        state.cancel.check()  # raising here stops the DAG before its next node
        meter = statement_meter  # this thread's statements so far, and when the node started
        state._starts[node_.name] = (meter.count, meter.ms, time.perf_counter())
        if state.hooks:
            for hook in state.hooks:
                if isinstance(hook, base.BasePreNodeExecute):
                    hook.pre_node_execute(run_id=run_id, node_=node_, kwargs=kwargs, task_id=task_id)

    def post_node_execute(self, *, run_id: str, node_: Node, kwargs: dict[str, Any], success: bool,
                          error: Exception | None, result: Any, task_id: str | None = None) -> None:
        ended = time.perf_counter()
        state = self._runs.get(run_id)
        if state is None:
            return
        node_name = node_.name
        started = state._starts.pop(node_name, None)
        if started is None:
            return
        count, db_ms, began = started
        meter = statement_meter
        entry = TraceEntry(node_name, (ended - began) * 1000, False, meter.count - count, meter.ms - db_ms, ended)
        if state.on_node is not None and state.cache is not None:
            entry.cached = cache_status(state.cache, run_id).get(node_name) == "hit"  # as the node finishes
        with state._say:  # nodes of task executors may finish at once: the trace, events and lines in one order
            state.trace.append(entry)
            if state.on_node is not None:
                state.on_node(entry)
            for hook in state.hooks:
                if isinstance(hook, base.BasePostNodeExecute):
                    hook.post_node_execute(run_id=run_id, node_=node_, kwargs=kwargs, success=success, error=error,
                                           result=result, task_id=task_id)
            if state.verbose:
                state.verbose(f"{node_name}: {entry.ms:.1f} ms{'' if success else ' (failed)'}")


class Engine:
    """Builds and runs the drivers of one GraphRag: its run hooks and a bounded cache of built
    drivers, so nothing is shared between instances through module state."""

    def __init__(self, max_drivers: int = 32) -> None:
        self.hooks = RunHooks()
        self.max_drivers = max_drivers
        self._drivers: collections.OrderedDict[tuple, driver.Driver] = collections.OrderedDict()
        self._lock = threading.Lock()

    def driver(self, flow: str, *, cache_path: str | Path | None = None, config: dict[str, Any] | None = None,
               adapters: tuple[Any, ...] = ()) -> driver.Driver:
        """One driver per (flow, cache, config, extra adapters), least recently used evicted first:
        building is cheap but not free, and a driver is reusable across threads with Hamilton's
        default executor. `adapters` are driver-level Hamilton adapters (e.g. the Hamilton UI tracker)."""
        key = (flow, str(cache_path) if cache_path else None, tuple(sorted((config or {}).items())),
               tuple(id(a) for a in adapters))
        with self._lock:
            dr = self._drivers.get(key)
            if dr is not None:
                self._drivers.move_to_end(key)
                return dr
            b = builder(flow, config).with_adapters(self.hooks, *adapters)
            if cache_path:
                b = b.with_cache(path=str(cache_path), ignore=UNVERSIONED_INPUTS)
            dr = b.build()
            self._drivers[key] = dr
            while len(self._drivers) > self.max_drivers:
                self._drivers.popitem(last=False)
            return dr

    def task_driver(self, flow: str, executor: Any, *, config: dict[str, Any] | None = None,
                    adapters: tuple[Any, ...] = ()) -> driver.Driver:
        """A driver whose Parallelizable blocks run on `executor` (e.g. Hamilton's RayTaskExecutor).
        Dynamic-execution drivers are not re-entrant, so this builds one per request (uncached)."""
        from hamilton.execution import executors

        return (
            builder(flow, {**(config or {}), "map_fanout": "tasks", "extraction_fanout": "tasks"})
            .with_adapters(self.hooks, *adapters)
            .enable_dynamic_execution(allow_experimental_mode=True)
            .with_local_executor(executors.SynchronousLocalTaskExecutor())
            .with_remote_executor(executor)
            .build()
        )


def ray_executor() -> Any:
    """Hamilton's Ray task executor on this process's Ray connection: a local Ray instance, or the
    cluster named by RAY_ADDRESS. Ray is an optional extra."""
    try:
        import ray
        from hamilton.plugins.h_ray import RayTaskExecutor
    except ImportError as exc:
        raise BadInput("the ray fan-out needs Ray: pip install 'graphrag-dag[ray]'") from exc
    if not ray.is_initialized():
        ray.init(ignore_reinit_error=True, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"LANCEDB_LOG": "error"}})
    return RayTaskExecutor(skip_init=True)


def execute(dr: driver.Driver, final_vars: Collection[str], inputs: dict[str, Any], state: RunState,
            overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    token = current_run.set(state)
    started = time.perf_counter()
    try:
        result = dr.execute(list(final_vars), inputs=inputs, overrides=overrides or {})
    finally:
        state.execute_ms = (time.perf_counter() - started) * 1000
        current_run.reset(token)
    if dr.cache is not None and state.run_id:
        _mark_cached(dr, state)
    return result


def _mark_cached(dr: driver.Driver, state: RunState) -> None:
    status = cached_nodes(dr, state.run_id)
    for entry in state.trace:
        entry.cached = status.get(entry.node) == "hit"


def cached_nodes(dr: driver.Driver, run_id: str) -> dict[str, str]:
    """node → "hit" | "executed" for one run, from Hamilton's cache logs."""
    return cache_status(dr.cache, run_id)


def cache_status(cache: Any, run_id: str) -> dict[str, str]:
    """node → "hit" | "executed" for one run so far, from a Hamilton cache's logs."""
    from hamilton.caching.adapter import CachingEventType

    out: dict[str, str] = {}
    for node_name, events in cache.logs(run_id=run_id, level="debug").items():
        name = node_name[0] if isinstance(node_name, tuple) else node_name
        for ev in events:
            if ev.event_type == CachingEventType.GET_RESULT and getattr(ev, "msg", None) == "hit":
                out[name] = "hit"
            elif ev.event_type == CachingEventType.EXECUTE_NODE:
                out.setdefault(name, "executed")
    return out
