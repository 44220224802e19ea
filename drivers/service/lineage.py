"""Stage-level experimentation over HTTP: a flow's DAG as nodes and edges, and runs of any part of
it with chosen `final_vars`, switched implementations, changed settings and overridden node
outputs, returning every node's value as JSON (drivers/service/values.py) with the trace of what
ran and what the cache served. The lineage page is built on these two (routes/lineage.py)."""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common import switches
from graphrag_dag.drivers.runtime import engine
from graphrag_dag.drivers.api.options import OPTIONS
from graphrag_dag.drivers.service.values import from_json, to_json

SEARCH_FLOWS = ("local", "global", "basic", "drift")
# Inputs that are resources or request plumbing: never shown as values, never overridable.
RESOURCES = frozenset({"db", "chat_model", "embedder", "token_counter", "map_executor", "namespace", "embed_dim"})


class RunBody(BaseModel):
    """A run of part of a flow: `final_vars` (default: every node), `overrides` (node → a JSON
    value of the node's type), and the search body's `options`, `config` and `offline`."""

    model_config = ConfigDict(extra="forbid")
    flow: str = "local"
    query: str
    namespace: str
    final_vars: list[str] = Field(default_factory=list)
    overrides: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    offline: bool = False
    timeout: float | None = Field(default=None, gt=0)
    stream: bool = False  # server-sent events: a stage event per finished node, then the run


@functools.lru_cache(maxsize=32)
def _graph(flow: str, config: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    dr = engine.builder(flow, dict(config)).build()
    shown = [n for n in dr.list_available_variables() if n.name not in RESOURCES]
    inputs = {n.name: sorted(d for d in n.required_dependencies | n.optional_dependencies if d not in RESOURCES)
              for n in shown}
    default = tuple(sorted(switches.normalize(flow, None).items()))
    known = None if config == default else {n["name"]: n["stage"] for n in _graph(flow, default)["nodes"]}
    stage_of = node_stages([n for n in shown if not n.is_external_input], inputs, engine.STAGES.get(flow, {}), known)
    nodes = [{"name": n.name, "input": n.is_external_input, "type": getattr(n.type, "__name__", str(n.type)),
              "doc": (n.documentation or "").strip().split("\n\n")[0][:400], "inputs": inputs[n.name],
              "stage": stage_of.get(n.name)} for n in shown]
    edges = [[d, name] for name, deps in inputs.items() for d in deps]
    return {"flow": flow, "config": dict(config), "stages": list(engine.STAGES.get(flow, {})),
            "nodes": sorted(nodes, key=lambda x: x["name"]), "edges": edges,
            "types": {n.name: n.type for n in dr.list_available_variables()}}


def node_stages(nodes: list[Any], inputs: dict[str, list[str]], stages: dict[str, list[Any]],
                known: dict[str, str] | None = None) -> dict[str, str]:
    """Each computed node's stage, for a flow that names its stages (else empty): the stage it
    has in the flow's default graph (`known`: a switched implementation keeps its place), else its
    module's, moved no earlier than its inputs' (a sub-question's matches follow the name index),
    else, for a module no stage names (the prompts), the earliest stage that consumes it."""
    if not stages:
        return {}
    order = list(stages)
    by_module = {module.__name__: stage for stage, modules in stages.items() for module in modules}
    computed = {n.name: n for n in nodes}
    consumers: dict[str, list[str]] = {}
    for name in computed:
        for d in inputs[name]:
            consumers.setdefault(d, []).append(name)
    # inputs before the nodes that take them
    ordered: list[str] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name not in seen:
            seen.add(name)
            for d in inputs[name]:
                if d in computed:
                    visit(d)
            ordered.append(name)

    for name in computed:
        visit(name)
    stage_of: dict[str, str] = {}
    for name in ordered:
        module = computed[name].tags.get("module")
        if known and name in known:
            stage_of[name] = known[name]
        elif module in by_module:
            after = [stage_of[d] for d in inputs[name] if d in stage_of]
            stage_of[name] = max([by_module[module], *after], key=order.index)
    for name in reversed(ordered):  # consumers before the prompts they take
        if name not in stage_of:
            found = [stage_of[c] for c in consumers.get(name, []) if c in stage_of]
            stage_of[name] = min(found, key=order.index) if found else order[-1]
    return stage_of


def flow_graph(flow: str, config: dict[str, Any] | None) -> dict[str, Any]:
    if flow not in SEARCH_FLOWS:
        raise BadInput(f"unknown flow {flow!r}: use {', '.join(SEARCH_FLOWS)}")
    return _graph(flow, tuple(sorted(switches.normalize(flow, config).items())))


def run_nodes(rag: Any, body: RunBody, cancel: Any, **hooks: Any) -> dict[str, Any]:
    graph = flow_graph(body.flow, body.config)
    computed = [n["name"] for n in graph["nodes"] if not n["input"]]
    final = body.final_vars or computed
    unknown = sorted(set(final) - set(computed)) + sorted(set(body.overrides) - set(computed))
    if unknown:
        raise BadInput(f"not nodes of the {body.flow} flow: {', '.join(unknown)}")
    overrides = {name: from_json(value, graph["types"][name], name) for name, value in body.overrides.items()}
    try:
        options = OPTIONS[body.flow](**body.options)
    except TypeError as exc:
        raise BadInput(f"unknown option for {body.flow} search: {exc}") from None
    run = rag.run(body.flow, body.query, body.namespace, final_vars=final, overrides=overrides, options=options,
                  offline=body.offline, config=body.config or None, cancel=cancel, **hooks)
    out: dict[str, Any] = {
        "flow": body.flow, "namespace": body.namespace,
        "values": {name: to_json(run.values[name]) for name in final if name in run.values},
        "trace": [{"node": t.node, "ms": round(t.ms, 3), "cached": t.cached} for t in run.trace],
        "overridden": sorted(overrides),
        "llm": run.llm_json(),
    }
    if engine.final_node(body.flow) in run.values:
        out["result"] = run.as_json()
    return out
