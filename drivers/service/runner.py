"""Running searches for the service: on worker threads (a search blocks on SQL and the LLM), at
most `max_concurrent` at once, each cancelled when its deadline passes or its client goes away;
streamed as server-sent events when asked.

Cancelling reaches the whole DAG: the CancelToken stops it before its next node, cancels the SQL
statement running on the server and closes the request's LLM client (drivers/runtime/cancel.py)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from graphrag_dag.dataflows.common.errors import (
    BadInput,
    Cancelled,
    DeadlineExceeded,
    GraphRagError,
    NotFound,
    StoreUnavailable,
)
from graphrag_dag.drivers.api.results import brief_json
from graphrag_dag.drivers.runtime.cancel import CancelToken
from graphrag_dag.drivers.llm.chat import LlmBudgetExceeded


class Busy(Exception):
    """Every search slot is taken: the caller answers 429 with Retry-After."""


def status_of(exc: BaseException) -> tuple[int, str]:
    """The HTTP status and one-line message of an error raised by a search or lookup."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, NotFound):
        return 404, first
    if isinstance(exc, BadInput):
        return 400, first
    if isinstance(exc, DeadlineExceeded):
        return 504, f"timed out: {first}"
    if isinstance(exc, Cancelled):
        return 499, first
    if isinstance(exc, LlmBudgetExceeded):
        return 429, first
    if isinstance(exc, StoreUnavailable):
        return 503, first
    if isinstance(exc, GraphRagError):
        return 500, first
    return 500, f"{type(exc).__name__}: {first}"


def sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


@dataclass
class Observed:
    """What the metrics learn of one finished search."""

    flow: str
    stages: list[tuple[str, float]] = field(default_factory=list)
    llm_by_stage: dict[str, dict[str, int]] = field(default_factory=dict)


class SearchRunner:
    def __init__(self, rag: Any, *, max_concurrent: int, request_timeout: float,
                 observe: Callable[[Observed], None] = lambda _o: None) -> None:
        self.rag = rag
        self.request_timeout = request_timeout
        self.max_concurrent = max_concurrent
        self._slots = threading.BoundedSemaphore(max_concurrent)
        # One thread per slot and a few for lookups waiting on their own slot: searches never
        # queue behind each other inside the pool, they are refused at the door instead.
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max_concurrent + 2,
                                                           thread_name_prefix="graphrag-search")
        self._observe = observe
        self.active: set[CancelToken] = set()
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            for token in list(self.active):
                token.cancel()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _token(self, timeout: float | None) -> CancelToken:
        limit = self.request_timeout if timeout is None else min(timeout, self.request_timeout)
        return CancelToken(limit)

    def _acquire(self) -> None:
        if not self._slots.acquire(blocking=False):
            raise Busy(f"all {self.max_concurrent} search slots are busy")

    def _job(self, work: Callable[[CancelToken], Any], cancel: CancelToken) -> Any:
        with self._lock:
            self.active.add(cancel)
        try:
            return work(cancel)
        finally:
            with self._lock:
                self.active.discard(cancel)
            cancel.close()
            self._slots.release()

    def _search(self, flow: str, query: str, namespace: str, kwargs: dict[str, Any], cancel: CancelToken,
                detail: str = "full", **hooks: Any) -> dict[str, Any]:
        run = self.rag.run(flow, query, namespace, cancel=cancel, **kwargs, **hooks)
        result = run.as_json()
        self._observe(Observed(flow, [(t.node, t.ms) for t in run.trace], dict(result.get("llm", {}).get("by_stage", {}))))
        return brief_json(result) if detail == "brief" else result

    async def call(self, is_disconnected: Callable[[], Any], work: Callable[[CancelToken], Any],
                   timeout: float | None = None) -> Any:
        """Run `work(cancel)` in a slot; a client that disconnects cancels it."""
        self._acquire()
        cancel = self._token(timeout)
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(self._pool, self._job, work, cancel)
        except BaseException:
            self._slots.release()
            raise
        while True:
            done, _ = await asyncio.wait({future}, timeout=0.1)
            if done:
                return future.result()
            if await is_disconnected():
                cancel.cancel()
                return await future  # returns promptly: every layer was cancelled

    async def search(self, is_disconnected: Callable[[], Any], flow: str, query: str, namespace: str,
                     kwargs: dict[str, Any], timeout: float | None = None, detail: str = "full") -> dict[str, Any]:
        """A search's result, whole or brief (`detail`, drivers/api/results.py)."""
        return await self.call(is_disconnected,
                               lambda cancel: self._search(flow, query, namespace, kwargs, cancel, detail), timeout)

    def stream(self, flow: str, query: str, namespace: str, kwargs: dict[str, Any],
               timeout: float | None = None, detail: str = "full") -> AsyncIterator[bytes]:
        """A search as server-sent events (see `stream_work`); the `result` event as `detail` asks."""
        return self.stream_work(
            lambda cancel, **hooks: self._search(flow, query, namespace, kwargs, cancel, detail, **hooks), timeout)

    def stream_work(self, work: Callable[..., dict[str, Any]], timeout: float | None = None) -> AsyncIterator[bytes]:
        """`work(cancel, on_node=, on_token=)` as server-sent events: a stage event as each node
        finishes, then answer tokens as the LLM sends them (offline: the answer in one piece), then
        the result; an `error` event ends a failed run. The slot is taken now, so a full service
        refuses before the stream starts."""
        self._acquire()
        cancel = self._token(timeout)
        return self._events(work, cancel)

    async def _events(self, work: Callable[..., dict[str, Any]], cancel: CancelToken) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue()
        streamed = threading.Event()

        def put(item: tuple[str, Any] | None) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        def on_token(text: str) -> None:
            streamed.set()
            put(("token", {"text": text}))

        def job(token: CancelToken) -> None:
            try:
                result = work(token, on_token=on_token,
                              on_node=lambda e: put(("stage", {"node": e.node, "ms": round(e.ms, 3), "cached": e.cached})))
                answer = (result.get("result") or result).get("answer")
                if not streamed.is_set() and answer is not None:
                    put(("token", {"text": answer}))
                put(("result", result))
            except Exception as exc:  # noqa: BLE001 - reported to the client as the last event
                code, message = status_of(exc)
                put(("error", {"status": code, "detail": message}))
            finally:
                put(None)

        try:
            future = loop.run_in_executor(self._pool, self._job, job, cancel)
        except BaseException:
            self._slots.release()
            raise
        try:
            while (item := await queue.get()) is not None:
                yield sse(*item)
        finally:
            if not future.done():
                cancel.cancel()  # the client went away (or the server is stopping)
