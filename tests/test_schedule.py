"""The planned executor (drivers/schedule.py) against Hamilton's default one, on real Hamilton
drivers: the same nodes run in the same order with the same inputs for every shape of request
(overrides, optional inputs left out, outputs that are also intermediates), errors are the same,
and a shape's walk is planned once and reused."""

from __future__ import annotations

import types

import pytest
from hamilton import ad_hoc_utils, driver
from hamilton.lifecycle import base

from graphrag_dag.drivers import engine
from graphrag_dag.drivers.parallel import parallel_adapter
from graphrag_dag.drivers.schedule import PlannedGraphExecutor, planned


class Calls(base.BasePreNodeExecute):
    """The order nodes start in, and what each is passed."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict]] = []

    def pre_node_execute(self, *, run_id: str, node_, kwargs: dict, task_id: str | None = None) -> None:
        self.seen.append((node_.name, dict(kwargs)))


def _module() -> types.ModuleType:
    def base_value(x: int) -> int:
        return x + 1

    def scaled(base_value: int, factor: int = 3) -> int:
        return base_value * factor

    def shifted(base_value: int, offset: int) -> int:
        return base_value + offset

    def combined(scaled: int, shifted: int, base_value: int) -> int:
        return scaled * 100 + shifted * 10 + base_value

    def labelled(combined: int, label: str = "n") -> str:
        return f"{label}{combined}"

    return ad_hoc_utils.create_temporary_module(base_value, scaled, shifted, combined, labelled)


def _drivers(*adapters) -> tuple[driver.Driver, driver.Driver, Calls, Calls]:
    module = _module()
    default_calls, planned_calls = Calls(), Calls()
    default = driver.Builder().with_modules(module).with_adapters(default_calls, *adapters).build()
    fast = planned(driver.Builder().with_modules(module).with_adapters(planned_calls, *adapters).build())
    assert isinstance(fast.graph_executor, PlannedGraphExecutor)
    return default, fast, default_calls, planned_calls


SHAPES = [
    (["labelled"], {"x": 1, "offset": 2}, {}),
    (["labelled", "scaled", "base_value"], {"x": 1, "offset": 2, "factor": 5, "label": "z"}, {}),
    (["labelled"], {"x": 1, "offset": 2}, {"shifted": 40}),
    (["combined"], {"offset": 2}, {"base_value": 7}),  # x is not needed once base_value is given
    (["shifted", "x"], {"x": 4, "offset": 1}, {}),  # an input asked for as an output
]


@pytest.mark.parametrize("adapters", [(), (parallel_adapter(4),)], ids=["plain", "parallel"])
@pytest.mark.parametrize("outputs,inputs,overrides", SHAPES)
def test_the_same_nodes_run_in_the_same_order_with_the_same_values(adapters, outputs, inputs, overrides):
    default, planned, default_calls, planned_calls = _drivers(*adapters)
    expected = default.execute(outputs, inputs=inputs, overrides=overrides)
    for _ in range(2):  # the first run plans, the second replays the plan
        planned_calls.seen.clear()
        assert planned.execute(outputs, inputs=inputs, overrides=overrides) == expected
        if not adapters:  # with the parallel adapter, start order follows the threads
            assert planned_calls.seen == default_calls.seen
        else:
            assert sorted(n for n, _ in planned_calls.seen) == sorted(n for n, _ in default_calls.seen)
    assert len(planned.graph_executor._plans) == 1


def test_each_shape_is_planned_once_and_a_new_shape_gets_its_own_plan():
    _, planned, _, _ = _drivers()
    for outputs, inputs, overrides in SHAPES * 3:
        planned.execute(outputs, inputs=inputs, overrides=overrides)
    assert len(planned.graph_executor._plans) == len(SHAPES)


def test_the_nodes_a_request_needs_are_searched_once_per_shape_and_equal_hamilton_s():
    _, fast, _, _ = _drivers()
    graph = fast.graph
    for outputs, inputs, overrides in SHAPES * 2:
        want = type(graph).get_upstream_nodes(graph, outputs, inputs, overrides)  # Hamilton's own search
        got = graph.get_upstream_nodes(outputs, inputs, overrides)
        assert got == want
        got[0].clear()  # a caller's change to its copy is not remembered
        assert graph.get_upstream_nodes(outputs, inputs, overrides) == want
    assert len(graph.get_upstream_nodes._found) == len(SHAPES)
    assert graph.get_upstream_nodes(["labelled"]) == type(graph).get_upstream_nodes(graph, ["labelled"])
    with pytest.raises(ValueError, match="Unknown nodes"):
        graph.get_upstream_nodes(["no_such_node"], {}, {})


def test_a_missing_input_and_a_node_error_fail_as_with_the_default_executor():
    default, planned, _, _ = _drivers()
    errors = []
    for dr in (default, planned):
        with pytest.raises(ValueError, match="offset") as missing:  # Hamilton's check, before any node
            dr.execute(["labelled"], inputs={"x": 1})
        with pytest.raises(TypeError) as failed:  # shifted adds 2 to a string
            dr.execute(["labelled"], inputs={"x": 1, "offset": 2}, overrides={"base_value": "text"})
        errors.append((str(missing.value), str(failed.value)))
    assert errors[0] == errors[1]
    assert len(planned.graph_executor._plans) == 1  # the refused request made none


def test_the_engine_runs_every_flow_s_driver_with_the_planned_walk_of_the_default_order():
    """For each real flow, the plan lists the nodes in the order Hamilton's own walk would start them."""
    from hamilton.execution import graph_functions

    from graphrag_dag.drivers.schedule import _walk

    for flow in engine.FLOWS:
        dr = engine.Engine().driver(flow)
        assert isinstance(dr.graph_executor, PlannedGraphExecutor)
        final = engine.final_node(flow)
        needed = {n.name for n in dr.graph.get_upstream_nodes([final])[1]}
        order: list[str] = []

        class Recorder(base.BaseDoRemoteExecute):
            def do_remote_execute(self, *, node, execute_lifecycle_for_node, **kwargs):
                order.append(node.name)
                return None

        plain = engine.builder(flow).with_adapters(Recorder()).build()
        graph_functions.execute_subdag([plain.graph.nodes[final]], {name: None for name in needed},
                                       adapter=plain.graph.adapter)
        planned = [s.name for s in _walk(dr.graph, [final], needed, ()) if s.node is not None]
        assert order and planned == order, flow


def test_a_value_no_later_node_reads_is_let_go_before_the_run_ends():
    """As with the default executor, a large intermediate is not kept for the whole run."""
    import weakref

    refs: list[weakref.ref] = []

    def blob(x: int) -> set:
        made = {x}  # a set, unlike an int, can be weakly referenced
        refs.append(weakref.ref(made))
        return made

    def size(blob: set) -> int:
        return 1

    def released(size: int) -> bool:
        return refs[-1]() is None

    module = ad_hoc_utils.create_temporary_module(blob, size, released)
    for executor in (None, PlannedGraphExecutor()):
        dr = driver.Builder().with_modules(module).build()
        if executor is not None:
            dr.graph_executor = executor
        assert dr.execute(["released"], inputs={"x": 1})["released"] is True


def _branches() -> types.ModuleType:
    """Two branches from one root: three nodes of Python, and a short one to a statement (a node
    that takes `db`). Hamilton's depth-first walk starts the Python branch first."""

    def root(x: int) -> int:
        return x

    def walk_1(root: int) -> int:
        return root + 1

    def walk_2(walk_1: int) -> int:
        return walk_1 + 1

    def walk_3(walk_2: int) -> int:
        return walk_2 + 1

    def terms(root: int) -> int:
        return root * 2

    def recall(terms: int, db: object) -> int:
        return terms + 1

    def answer(walk_3: int, recall: int) -> int:
        return walk_3 * 100 + recall

    return ad_hoc_utils.create_temporary_module(root, walk_1, walk_2, walk_3, terms, recall, answer)


def test_with_the_parallel_adapter_the_branch_to_a_statement_starts_before_a_longer_one_of_python():
    module = _branches()
    plain = planned(driver.Builder().with_modules(module).build())
    parallel = planned(driver.Builder().with_modules(module).with_adapters(parallel_adapter(2)).build())
    for dr in (plain, parallel):
        assert dr.execute(["answer"], inputs={"x": 1, "db": None}) == {"answer": 403}
    (plan_plain,) = plain.graph_executor._plans.values()
    (plan_parallel,) = parallel.graph_executor._plans.values()
    assert [s.name for s in plan_plain if s.node is not None][:2] == ["root", "walk_1"]  # depth-first
    assert [s.name for s in plan_parallel if s.node is not None] == ["root", "terms", "recall", "walk_1", "walk_2",
                                                                      "walk_3", "answer"]


def test_every_flow_s_critical_first_plan_is_a_topological_order_of_the_same_nodes_and_lets_values_go():
    from graphrag_dag.drivers.schedule import _walk

    for flow in engine.FLOWS:
        dr = engine.Engine().driver(flow)
        final = engine.final_node(flow)
        needed = {n.name for n in dr.graph.get_upstream_nodes([final])[1]}
        depth_first = _walk(dr.graph, [final], needed, ())
        critical = _walk(dr.graph, [final], needed, (), critical_first=True)
        assert sorted(s.name for s in critical) == sorted(s.name for s in depth_first), flow
        placed: set[str] = set()
        dropped: set[str] = set()
        for step in critical:
            assert set(step.inputs) <= placed - dropped, (flow, step.name)  # its inputs are there, not let go
            placed.add(step.name)
            dropped.update(step.drop)
        assert final not in dropped and len(dropped) == len(placed) - 1, flow  # all but the output let go
