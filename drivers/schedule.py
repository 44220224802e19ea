"""A graph executor that walks each request shape's DAG once and replays the walk.

Hamilton's default executor finds the nodes to run by walking the graph depth-first on every
run. After each node it also checks every input of that node, and every other consumer of each
input, to see what it may drop. A node's `name` is a property that joins its namespace each
time it is read. For local search's nodes (some 55 functions and 32 inputs), one run read it
about 2,500 times. The calling thread holds the interpreter lock all that time, so on two cores no
node can start until the walk is done.

Which nodes run, in what order, with which inputs, and when each value is last needed depends
only on the graph, the requested outputs, and which inputs and overrides were given, not on
their values. This executor computes that plan on the first run of each shape and keeps it.
Later runs only look up values and call Hamilton's node lifecycle, including the adapters' remote
execution (drivers/parallel.py), exactly as the default executor does.

With the parallel adapter the plan is also the order in which nodes start, and it is not Hamilton's
depth-first one: the longest remaining branch goes first, a statement weighing more than a node of
Python (`_critical_first`).
"""

from __future__ import annotations

import heapq
import threading
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Collection

from hamilton import driver, graph, node
from hamilton.execution import graph_functions

from graphrag_dag.dataflows.common.resources import Reply

# A step: where the value comes from (an override, an input or a node), the name it is kept under,
# the node (for "node"), the names of the values passed to it, and the values no later step needs.
_OVERRIDE, _INPUT, _NODE = 0, 1, 2

# What a node that runs a statement weighs against one that does not, in `_critical_first`: at 100k
# entities a local search's statements take 0.5-2 ms of the server each (README, Scale), and its
# other nodes 0.01-0.2 ms of Python.
STATEMENT_WEIGHT = 10.0


@dataclass(frozen=True)
class _Step:
    kind: int
    name: str
    node: node.Node | None
    inputs: tuple[str, ...]
    drop: tuple[str, ...]


class PlannedGraphExecutor(driver.GraphExecutor):
    """Hamilton's in-memory executor (no Parallelizable/Collect), with its walk planned once per
    (graph, outputs, inputs given, overrides given)."""

    MAX_PLANS = 64

    def __init__(self) -> None:
        self._plans: dict[tuple, tuple[_Step, ...]] = {}
        self._lock = threading.Lock()

    def validate(self, nodes_to_execute: list[node.Node]) -> None:
        driver.DefaultGraphExecutor.validate(self, nodes_to_execute)

    def execute(self, fg: graph.FunctionGraph, final_vars: list[str], overrides: dict[str, Any],
                inputs: dict[str, Any], run_id: str) -> dict[str, Any]:
        inputs = graph_functions.combine_config_and_inputs(fg.config, inputs)
        plan = self._plan(fg, final_vars, inputs, overrides)
        adapter = fg.adapter
        remote = _remote_execute(adapter)
        hooks = None if remote is not None else _node_hooks(adapter)
        computed: dict[str, Any] = {}
        for step in plan:
            if step.kind == _OVERRIDE:
                computed[step.name] = overrides[step.name]
            elif step.kind == _INPUT:
                computed[step.name] = inputs[step.name]
            else:
                kwargs = {name: computed[name] for name in step.inputs}
                if hooks is not None:
                    computed[step.name] = _lifecycle(hooks, step.node, run_id, kwargs)
                else:
                    run_node = partial(graph_functions.execute_lifecycle_for_node, __node_=step.node,
                                       __adapter=adapter, __run_id=run_id, __task_id=None)
                    if remote is not None:
                        computed[step.name] = remote(node=step.node, execute_lifecycle_for_node=run_node, **kwargs)
                    else:
                        computed[step.name] = run_node(**kwargs)
            for name in step.drop:
                del computed[name]
        return {name: computed.get(name, inputs.get(name)) for name in final_vars}

    def _plan(self, fg: graph.FunctionGraph, final_vars: list[str], inputs: dict[str, Any],
              overrides: dict[str, Any]) -> tuple[_Step, ...]:
        # The graph itself, not its id: a materializing run passes a graph of its own, and a freed
        # graph's id may be given to the next one.
        key = (fg, tuple(final_vars), frozenset(inputs), frozenset(overrides))
        plan = self._plans.get(key)
        if plan is None:
            plan = _walk(fg, final_vars, inputs.keys(), overrides.keys(),
                         critical_first=_remote_execute(fg.adapter) is not None, overlapped=True)
            with self._lock:
                if len(self._plans) >= self.MAX_PLANS:
                    self._plans.pop(next(iter(self._plans)))
                self._plans[key] = plan
        return plan


def planned(dr: driver.Driver) -> driver.Driver:
    """A driver that runs each request shape's walk once: the planned executor, and the search
    Hamilton's driver makes before every run for the nodes the request needs and the inputs they
    take (`FunctionGraph.get_upstream_nodes`, which checks the inputs given against them), kept
    per shape too. That search reads every node's `name` as well, about 0.2 ms a local search
    before its first node can start. The inputs' values are still checked on every run."""
    dr.graph_executor = PlannedGraphExecutor()
    dr.graph.get_upstream_nodes = _UpstreamNodes(dr.graph.get_upstream_nodes)
    return dr


class _UpstreamNodes:
    """FunctionGraph.get_upstream_nodes, remembered per (outputs, input names, override names): its
    answer depends on nothing else (the graph and its config are fixed). Callers get copies."""

    MAX_SHAPES = 64

    def __init__(self, search: Any) -> None:
        self._search = search
        self._found: dict[tuple, tuple[frozenset, frozenset]] = {}
        self._lock = threading.Lock()

    def __call__(self, final_vars: list[str], runtime_inputs: dict[str, Any] | None = None,
                 runtime_overrides: dict[str, Any] | None = None) -> tuple[set[node.Node], set[node.Node]]:
        key = (tuple(final_vars), None if runtime_inputs is None else frozenset(runtime_inputs),
               None if runtime_overrides is None else frozenset(runtime_overrides))
        found = self._found.get(key)
        if found is None:
            nodes, user_nodes = self._search(final_vars, runtime_inputs, runtime_overrides)
            found = (frozenset(nodes), frozenset(user_nodes))
            with self._lock:
                if len(self._found) >= self.MAX_SHAPES:
                    self._found.pop(next(iter(self._found)))
                self._found[key] = found
        return set(found[0]), set(found[1])


def _remote_execute(adapter: Any) -> Any:
    """The one adapter's `do_remote_execute`, found once per run as Hamilton finds it for each node
    (LifecycleAdapterSet.call_lifecycle_method_sync): a parallel run hands all ~55 nodes of a
    local search to it before the first can start, and the lookup and its keyword repacking per
    node were half of that hand-over."""
    if not adapter.does_method("do_remote_execute", is_async=False):
        return None
    (owner,) = adapter.sync_methods["do_remote_execute"]
    return owner.do_remote_execute


def _node_hooks(adapter: Any) -> tuple[Callable[..., None], Callable[..., None]] | None:
    """The one adapter's pre- and post-node hooks, when the run's adapters hook each node through
    one adapter alone and none executes nodes itself (the engine's own RunHooks, with no cache or
    tracker): `_lifecycle` then calls them as Hamilton's `execute_lifecycle_for_node` would, without
    looking the hooks up by name and repacking their keyword arguments twice per node (3 of the 6 us
    a node's lifecycle cost, measured alone, of about 60 nodes a local search)."""
    if adapter.does_method("do_node_execute", is_async=False):
        return None
    pre, post = adapter.sync_hooks.get("pre_node_execute", []), adapter.sync_hooks.get("post_node_execute", [])
    if len(pre) != 1 or post != pre or adapter.async_hooks:
        return None
    return pre[0].pre_node_execute, pre[0].post_node_execute


def _lifecycle(hooks: tuple[Callable[..., None], Callable[..., None]], node_: node.Node, run_id: str,
               kwargs: dict[str, Any]) -> Any:
    """graph_functions.execute_lifecycle_for_node for one adapter's hooks (`_node_hooks`): the
    post-node hook runs whether the node succeeded or not, unless the pre-node hook failed (a
    cancel), and a failure is logged as Hamilton logs it."""
    pre, post = hooks
    pre(run_id=run_id, node_=node_, kwargs=kwargs, task_id=None)
    result, error = None, None
    try:
        result = node_.callable(**kwargs)
        return result
    except Exception as exc:
        error = exc
        graph_functions.logger.exception(graph_functions.create_error_message(kwargs, node_, ""))
        raise
    finally:
        post(run_id=run_id, node_=node_, kwargs=kwargs, success=error is None, error=error, result=result,
             task_id=None)


def _walk(fg: graph.FunctionGraph, final_vars: list[str], given: Collection[str],
          overridden: Collection[str], critical_first: bool = False, overlapped: bool = False) -> tuple[_Step, ...]:
    """The default executor's depth-first walk (graph_functions.execute_subdag), run on names
    instead of values: the same steps in the same order, each with the values it is passed; with
    `critical_first`, the same steps in the order `_critical_first` gives them; otherwise with
    `overlapped`, when some node sends a statement, in the order `_overlapped` gives them."""
    done: set[str] = set()
    steps: list[tuple[int, str, node.Node | None, tuple[str, ...]]] = []

    def visit(node_: node.Node, dependency: node.DependencyType) -> None:
        name = node_.name
        if name in done:
            return
        if name in overridden:
            done.add(name)
            steps.append((_OVERRIDE, name, None, ()))
            return
        for upstream in node_.dependencies:
            if upstream.name not in done:
                visit(upstream, node_.input_types[upstream.name][1])
        if node_.user_defined:
            if name not in given:
                if dependency != node.DependencyType.OPTIONAL:
                    raise NotImplementedError(f"{name} was expected to be passed in but was not.")
                return  # an optional input left out: its consumers use their defaults
            done.add(name)
            steps.append((_INPUT, name, None, ()))
            return
        done.add(name)
        steps.append((_NODE, name, node_, tuple(d.name for d in node_.dependencies if d.name in done)))

    for name in final_vars:
        if name in fg.nodes:
            start = fg.nodes[name]
            visit(start, node.DependencyType.OPTIONAL if start.user_defined else node.DependencyType.REQUIRED)
    if critical_first:
        steps = _critical_first(steps)
    elif overlapped and any(kind == _NODE and _sends(node_) for kind, _, node_, _ in steps):
        steps = _overlapped(steps)
    # A value is dropped after the last step that reads it, unless it is an output.
    last_use: dict[str, int] = {}
    for i, (_, _, _, used) in enumerate(steps):
        for name in used:
            last_use[name] = i
    keep = set(final_vars)
    drops: dict[int, list[str]] = {}
    for name, i in last_use.items():
        if name not in keep:
            drops.setdefault(i, []).append(name)
    return tuple(_Step(kind, name, node_, used, tuple(drops.get(i, ())))
                 for i, (kind, name, node_, used) in enumerate(steps))


def _critical_first(steps: list[tuple[int, str, node.Node | None, tuple[str, ...]]]) -> list:
    """The steps in a topological order that starts the longest remaining branch first.

    With the parallel adapter the plan's order is the order of starting: the nodes with no pending
    input go to the pool in it, and when a node's end makes several ready, the first in it runs
    next in the same thread while the others wait for the interpreter lock. Hamilton's depth-first
    order left the branch to the claims (the walk's communities, their signals, the selection)
    waiting behind the walk's PageRank, and keyword recall behind both.

    A step's weight is the longest path from it to the end, in nodes, a node that takes `db`
    counting `STATEMENT_WEIGHT`. Among the steps whose inputs are placed, Kahn's algorithm places
    the heaviest first (ties in the depth-first order), which is classic critical-path list
    scheduling. Only the order of starting changes, never a node's inputs."""
    position, consumers = _consumers(steps)
    remaining = _remaining(steps, consumers, lambda kind, node_: 0.0 if kind != _NODE else
                           STATEMENT_WEIGHT if "db" in node_.input_types else 1.0)
    left = {name: len(used) for _, name, _, used in steps}
    ready = [(-remaining[name], position[name]) for name, n in left.items() if n == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, i = heapq.heappop(ready)
        out.append(steps[i])
        for c in consumers[steps[i][1]]:
            left[c] -= 1
            if not left[c]:
                heapq.heappush(ready, (-remaining[c], position[c]))
    return out


def _consumers(steps: list[tuple[int, str, node.Node | None, tuple[str, ...]]]
               ) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Each step's place in `steps`, and the steps that take its value."""
    position = {name: i for i, (_, name, _, _) in enumerate(steps)}
    consumers: dict[str, list[str]] = {name: [] for name in position}
    for _, name, _, used in steps:
        for u in used:
            consumers[u].append(name)
    return position, consumers


def _remaining(steps: list[tuple[int, str, node.Node | None, tuple[str, ...]]], consumers: dict[str, list[str]],
               weight: Callable[[int, node.Node | None], float]) -> dict[str, float]:
    """Each step's longest path to the end, its own `weight(kind, node)` included."""
    remaining: dict[str, float] = {}
    for kind, name, node_, _ in reversed(steps):  # a step's consumers come after it
        remaining[name] = weight(kind, node_) + max((remaining[c] for c in consumers[name]), default=0.0)
    return remaining


def _sends(node_: node.Node | None) -> bool:
    """Whether the node sends a statement whose rows another node reads (it returns a `Reply`)."""
    return node_ is not None and isinstance(node_.type, type) and issubclass(node_.type, Reply)


def _overlapped(steps: list[tuple[int, str, node.Node | None, tuple[str, ...]]]) -> list:
    """The steps in a topological order for one thread, in which the server works on each sent
    statement while the nodes that do not need its rows run (dataflows/common/resources.py `Reply`).

    A list schedule on a simulated clock: a node costs 1, the server runs the sent statements one
    after another (one connection), each for `STATEMENT_WEIGHT`. Among the steps whose inputs are
    placed and whose replies have arrived, the one with the longest remaining path goes first (a
    statement on the path counting its weight, so statements are sent as early as they can be);
    when every placed step waits for a reply, the one arriving first. Only the order changes."""
    position, consumers = _consumers(steps)
    cost = {name: 0.0 if kind != _NODE else 1.0 for kind, name, _, _ in steps}
    sends = {name for kind, name, node_, _ in steps if kind == _NODE and _sends(node_)}
    remaining = _remaining(steps, consumers, lambda kind, node_: 0.0 if kind != _NODE else
                           1.0 + (STATEMENT_WEIGHT if _sends(node_) else 0.0))
    left = {name: len(used) for _, name, _, used in steps}
    ready = {name for name, n in left.items() if n == 0}
    arrives: dict[str, float] = {}  # a sent statement's name -> when its rows are in
    clock = server = 0.0
    out = []
    while ready:
        start = {n: max([clock, *(arrives[u] for u in steps[position[n]][3] if u in arrives)]) for n in ready}
        free = [n for n in ready if start[n] <= clock]
        if free:
            name = min(free, key=lambda n: (-remaining[n], position[n]))
        else:
            name = min(ready, key=lambda n: (start[n], -remaining[n], position[n]))
            clock = start[name]
        ready.discard(name)
        out.append(steps[position[name]])
        clock += cost[name]
        if name in sends:
            server = arrives[name] = max(clock, server) + STATEMENT_WEIGHT
        for c in consumers[name]:
            left[c] -= 1
            if not left[c]:
                ready.add(c)
    return out
