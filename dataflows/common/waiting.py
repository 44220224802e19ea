"""Waiting for worker threads from the main thread, so that Ctrl-C still interrupts (not a DAG module).

CPython raises KeyboardInterrupt in the main thread when that thread next runs Python code. The
kernel may hand SIGINT to any thread of the process, and when it picks a worker, a main thread
blocked in a lock wait with no timeout (`Future.result()`) is not woken: the interrupt would wait
as long as the work (a map call of seconds). tests/test_faults.py sends it to a worker on purpose.
Waiting in steps of `STEP_S` lets the interrupt through within one step.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")

STEP_S = 0.1


def result(future: Future[T]) -> T:
    """`future.result()`, waited for in steps."""
    while True:
        try:
            return future.result(timeout=STEP_S)
        except TimeoutError:
            if future.done():  # the work's own TimeoutError, not the wait's
                raise
