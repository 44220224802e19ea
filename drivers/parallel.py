"""The parallel executor of the DAGs: Hamilton's FutureAdapter, with each node started by the
thread that finished its last input.

Hamilton submits every node of a run at once, in topological order. Its FutureAdapter hands each
one to a pool thread that blocks until the node's inputs are done. So every step of a chain
(match → walk → communities → signals → claims → sources → context → answer) is a hand-off: a
sleeping thread is woken, then waits for the interpreter lock. On two cores that cost about 0.4 ms
a step, or about 9 ms over the ~22 steps on local search's critical path at 100k entities.

Here a node waits for nothing. It is registered on its inputs' futures and starts when the last one
is done. It starts in the thread that finished that input, right after that node, with no hand-off.
When one node makes several ready, the first runs in the same thread and the others go to the pool,
so parallel branches stay parallel. A node whose inputs are already done when it is submitted also
goes to the pool, so the thread that submits the graph never runs nodes itself. Chains run in a
loop, not by recursion, so a long chain cannot exhaust the stack.

Each node runs in a copy of the submitting thread's context. The request's namespace check
(drivers/store/scoped.py), its run state and its OpenTelemetry span are context variables, which a
pool thread would not otherwise see.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from concurrent.futures import Future
from typing import Any, Callable

from hamilton.plugins.h_threadpool import FutureAdapter

from graphrag_dag.dataflows.common import waiting

Task = Callable[[], list[Callable[[], Any]]]  # runs one node; returns the nodes its end made ready


class _Finishing(threading.local):
    """While this thread completes a node's future: the nodes that completion made ready."""

    ready: list[Task] | None = None


_finishing = _Finishing()


_log = logging.getLogger(__name__)


class NodeFuture(Future):
    """A node's result, with the interface Hamilton reads (`isinstance(v, Future)`, `result()`)
    and the adapter uses (`add_done_callback`, `set_result`, `set_exception`), but a plain lock in
    place of a Future's Condition and RLock. A local search makes about fifty of these a request,
    and all but the final one are done before anyone reads them, so a waiter's Event is only made
    for a `result()` that really has to wait. Nothing cancels a node, so there is no cancel state."""

    def __init__(self) -> None:  # noqa: D107 - Future's own state is not used
        self._lock = threading.Lock()
        self._finished = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Future], Any]] = []
        self._waiter: threading.Event | None = None

    def __repr__(self) -> str:
        state = "pending" if not self._finished else "raised" if self._error is not None else "finished"
        return f"<NodeFuture {state}>"

    def _finish(self, value: Any, error: BaseException | None) -> None:
        with self._lock:
            if self._finished:
                raise RuntimeError("a node's future was completed twice")
            self._value, self._error, self._finished = value, error, True
            callbacks, self._callbacks = self._callbacks, []
            waiter = self._waiter
        if waiter is not None:
            waiter.set()
        for callback in callbacks:
            try:
                callback(self)
            except Exception:  # as Future does: one failing callback must not stop the others
                _log.exception("exception calling callback for %r", self)

    def set_result(self, result: Any) -> None:
        self._finish(result, None)

    def set_exception(self, exception: BaseException | None) -> None:
        self._finish(None, exception)

    def add_done_callback(self, fn: Callable[[Future], Any]) -> None:
        with self._lock:
            if not self._finished:
                self._callbacks.append(fn)
                return
        fn(self)

    def done(self) -> bool:
        return self._finished

    def running(self) -> bool:
        return not self._finished

    def cancelled(self) -> bool:
        return False

    def cancel(self) -> bool:
        return False

    def _wait(self, timeout: float | None) -> None:
        if self._finished:
            return
        with self._lock:
            if self._finished:
                return
            if self._waiter is None:
                self._waiter = threading.Event()
            waiter = self._waiter
        if timeout is None:
            while not waiter.wait(waiting.STEP_S):  # in steps, so Ctrl-C reaches the main thread (waiting.py)
                pass
        elif not waiter.wait(timeout):
            raise TimeoutError()

    def result(self, timeout: float | None = None) -> Any:
        self._wait(timeout)
        if self._error is not None:
            raise self._error
        return self._value

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._error


def _value(value: Any) -> Any:
    while isinstance(value, Future):
        value = value.result()
    return value


class ContinuationFutureAdapter(FutureAdapter):
    """Hamilton's FutureAdapter, each node started by the thread that finished its last input (see
    the module docstring)."""

    def _run_chain(self, task: Task) -> None:
        while True:
            ready = task()
            if not ready:
                return
            for other in ready[1:]:
                self.executor.submit(self._run_chain, other)
            task = ready[0]

    def _ready(self, task: Task) -> None:
        """A node whose last input just finished: next in this thread if a node's completion made it
        ready here, else (inputs done before it was registered) on the pool."""
        if _finishing.ready is not None:
            _finishing.ready.append(task)
        else:
            self.executor.submit(self._run_chain, task)

    def do_remote_execute(self, *, execute_lifecycle_for_node: Callable, node: Any, **kwargs: Any) -> Future:
        out = NodeFuture()
        context = contextvars.copy_context()

        def task() -> list[Task]:
            try:
                result = context.run(execute_lifecycle_for_node, **{k: _value(v) for k, v in kwargs.items()})
            except BaseException as exc:  # noqa: BLE001 - the node's own error, raised where its result is read
                return _complete(out, exc, None)
            return _complete(out, None, result)

        pending = [v for v in kwargs.values() if isinstance(v, Future)]
        if not pending:
            self.executor.submit(self._run_chain, task)
            return out
        left = [len(pending)]
        lock = threading.Lock()

        def input_done(_done: Future) -> None:
            with lock:
                left[0] -= 1
                if left[0]:
                    return
            self._ready(task)

        for future in pending:
            future.add_done_callback(input_done)
        return out


def _complete(out: Future, error: BaseException | None, result: Any) -> list[Task]:
    """Complete a node's future, collecting the nodes that its completion made ready."""
    outer, _finishing.ready = _finishing.ready, []
    try:
        if error is not None:
            out.set_exception(error)
        else:
            out.set_result(result)
        return _finishing.ready
    finally:
        _finishing.ready = outer


def parallel_adapter(workers: int) -> ContinuationFutureAdapter:
    return ContinuationFutureAdapter(max_workers=workers, thread_name_prefix="graphrag-node")
