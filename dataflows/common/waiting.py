"""Waiting for worker threads from the main thread, so that Ctrl-C still interrupts (not a DAG module).

CPython raises KeyboardInterrupt in the main thread when that thread next runs Python code. The
kernel may hand SIGINT to any thread of the process, and when it picks a worker, a main thread
blocked in a lock wait with no timeout (`Future.result()`) is not woken: the interrupt would wait
as long as the work (a map call of seconds). tests/test_faults.py sends it to a worker on purpose.
Waiting in steps of `STEP_S` lets the interrupt through within one step.

Once through, the interrupt must not wait either. `with ThreadPoolExecutor()` waits on its way out
for every call running or queued, and the request's cancel token, which would stop the calls in
flight, is set only after the interrupt has left the DAG (drivers/api/graphrag.py, drivers/ingest/indexer.py): a
Ctrl-C during DRIFT's follow-ups or an index's extraction waited for the LLM calls in flight, then
ran the queued ones. `thread_pool` leaves without waiting when its block is left by an exception.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")

STEP_S = 0.1


def result(future: Future[T]) -> T:
    """`future.result()`, waited for in steps."""
    while True:
        try:
            return future.result(timeout=STEP_S)
        except TimeoutError:
            if future.done():  # the work's own TimeoutError, not the wait's
                raise


def results(pool: ThreadPoolExecutor, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """`list(pool.map(fn, items))`, each result waited for in steps (`pool.map` waits without)."""
    return [result(f) for f in [pool.submit(fn, item) for item in items]]


@contextlib.contextmanager
def thread_pool(max_workers: int, thread_name_prefix: str) -> Iterator[ThreadPoolExecutor]:
    """A thread pool for the block: on a normal exit it waits for its calls, as `with
    ThreadPoolExecutor()` does; left by an exception (an interrupt, a cancellation, a failed call)
    it drops the queued calls and does not wait for the running ones, which the request's
    cancellation then stops."""
    pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
