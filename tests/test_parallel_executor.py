"""The parallel executor (drivers/parallel.py) on a real Hamilton driver: a chain of nodes runs in
the thread that finished each node's input, parallel branches still run at once, errors reach the
caller, and nodes see the caller's context variables."""

from __future__ import annotations

import contextvars
import threading
import time
import types

import pytest
from hamilton import ad_hoc_utils, driver

from graphrag_dag.drivers.parallel import NodeFuture, parallel_adapter

REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="unset")


def _module(*functions) -> types.ModuleType:
    return ad_hoc_utils.create_temporary_module(*functions)  # a fresh module name each time


def _driver(module: types.ModuleType, workers: int = 8) -> driver.Driver:
    return driver.Builder().with_modules(module).with_adapters(parallel_adapter(workers)).build()


def test_a_chain_runs_in_the_thread_that_finished_each_input():
    seen: dict[str, int] = {}

    def first(x: int) -> int:
        seen["first"] = threading.get_ident()
        time.sleep(0.2)  # still running when the others are submitted: a plain pool gives them threads
        return x + 1

    def second(first: int) -> int:
        seen["second"] = threading.get_ident()
        return first * 2

    def third(second: int) -> int:
        seen["third"] = threading.get_ident()
        return second - 3

    out = _driver(_module(first, second, third)).execute(["third"], inputs={"x": 4})
    assert out["third"] == 7
    assert seen["first"] == seen["second"] == seen["third"] != threading.get_ident()


def test_branches_made_ready_at_once_run_at_once():
    both = threading.Barrier(2, timeout=10)  # broken unless the two branches run together

    def root(x: int) -> int:
        return x

    def left(root: int) -> int:
        both.wait()
        return root + 1

    def right(root: int) -> int:
        both.wait()
        return root + 2

    def joined(left: int, right: int) -> int:
        return left * right

    dr = _driver(_module(root, left, right, joined))
    assert dr.execute(["joined"], inputs={"x": 1})["joined"] == 6


def test_a_node_error_reaches_the_caller_and_its_dependents_never_run():
    ran: list[str] = []

    def broken(x: int) -> int:
        raise ValueError(f"bad {x}")

    def after(broken: int) -> int:
        ran.append("after")
        return broken

    with pytest.raises(ValueError, match="bad 3"):
        _driver(_module(broken, after)).execute(["after"], inputs={"x": 3})
    assert ran == []


def test_nodes_see_the_callers_context_variables():
    def seen_request(x: int) -> str:
        return f"{REQUEST.get()}:{x}"

    def later(seen_request: str) -> str:
        return seen_request + ":" + REQUEST.get()

    dr = _driver(_module(seen_request, later))
    token = REQUEST.set("request-7")
    try:
        assert dr.execute(["later"], inputs={"x": 1})["later"] == "request-7:1:request-7"
    finally:
        REQUEST.reset(token)


def test_many_requests_at_once_share_one_small_pool():
    """More concurrent runs than pool threads: no node blocks a thread waiting for another."""

    def step(x: int) -> int:
        return x + 1

    def step2(step: int) -> int:
        return step + 1

    dr = _driver(_module(step, step2), workers=2)
    results: list[int] = []
    lock = threading.Lock()

    def run(n: int) -> None:
        value = dr.execute(["step2"], inputs={"x": n})["step2"]
        with lock:
            results.append(value)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(results) == [n + 2 for n in range(12)]


def test_a_node_future_keeps_a_futures_promises():
    """The light future: a reader blocked before completion wakes with the value, callbacks added
    before and after completion each run once, a failing callback does not stop the next, an error
    is raised to the reader, a second completion is refused and a bounded wait can time out."""
    fut = NodeFuture()
    assert not fut.done()
    with pytest.raises(TimeoutError):
        fut.result(timeout=0.01)
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(fut.result()))
    reader.start()
    time.sleep(0.05)
    assert got == []  # still waiting
    calls: list[str] = []
    fut.add_done_callback(lambda f: calls.append("before"))
    fut.add_done_callback(lambda f: 1 / 0)
    fut.add_done_callback(lambda f: calls.append(f"value {f.result()}"))
    fut.set_result(42)
    reader.join(timeout=5)
    assert got == [42] and fut.done() and fut.exception() is None
    assert calls == ["before", "value 42"]
    fut.add_done_callback(lambda f: calls.append("after"))
    assert calls[-1] == "after"
    with pytest.raises(RuntimeError):
        fut.set_result(0)

    failed = NodeFuture()
    failed.set_exception(KeyError("x"))
    with pytest.raises(KeyError):
        failed.result()
    assert isinstance(failed.exception(), KeyError)
