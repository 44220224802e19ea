"""Cancellation that reaches every layer: the DAG (checked before each node), the running SQL
statement (cancelled on the server) and in-flight LLM HTTP requests (their sockets shut down)."""

from __future__ import annotations

import collections
import contextlib
import socket
import threading
import time
import weakref
from typing import Any, Callable, Iterator

from graphrag_dag.dataflows.common.errors import Cancelled, DeadlineExceeded


class CancelToken:
    def __init__(self, deadline_s: float | None = None) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._running: collections.Counter[Any] = collections.Counter()  # a connection may be entered twice
        self._callbacks: list[Callable[[], None]] = []
        self.deadline: float | None = None
        self._timer: threading.Timer | None = None
        self._deadline_hit = False
        if deadline_s:
            self.set_deadline(deadline_s)

    def set_deadline(self, seconds: float) -> None:
        """Cancel automatically after `seconds`; the error is then DeadlineExceeded."""
        if seconds <= 0:
            raise ValueError("a deadline must be positive")
        if self._timer:
            self._timer.cancel()
        self.deadline = time.monotonic() + seconds
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def _expire(self) -> None:
        self._deadline_hit = True
        self.cancel()

    def cancel(self) -> None:
        if self._event.is_set():
            return
        self._event.set()
        with self._lock:
            running = list(+self._running)
            callbacks = list(self._callbacks)
        # The callbacks (in-flight LLM sockets shut down) first: they take no time, while each
        # statement's cancel opens a connection to the server.
        for cb in callbacks:
            with contextlib.suppress(Exception):
                cb()
        for conn in running:
            with contextlib.suppress(Exception):
                conn.cancel_safe(timeout=2.0)

    def error(self) -> Cancelled:
        if self._deadline_hit:
            return DeadlineExceeded("the request ran past its deadline")
        return Cancelled("the request was cancelled")

    def check(self) -> None:
        if self._event.is_set():
            raise self.error()

    def wait(self, seconds: float) -> bool:
        """Sleep that wakes up on cancellation; returns True when cancelled."""
        return self._event.wait(seconds)

    def remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    @contextlib.contextmanager
    def running(self, conn: Any) -> Iterator[None]:
        """While inside, a cancel cancels what the server runs on `conn` (entered for each
        statement)."""
        with self._lock:
            self._running[conn] += 1
        try:
            yield
        finally:
            with self._lock:
                self._running[conn] -= 1
                if self._running[conn] <= 0:
                    del self._running[conn]

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Register a callback run on cancel; returns a function that unregisters it."""
        with self._lock:
            self._callbacks.append(callback)

        def remove() -> None:
            with self._lock:
                if callback in self._callbacks:
                    self._callbacks.remove(callback)

        if self._event.is_set():
            with contextlib.suppress(Exception):
                callback()
        return remove

    def close(self) -> None:
        if self._timer:
            self._timer.cancel()


def track_sockets(client: Any) -> "weakref.WeakSet[socket.socket]":
    """The sockets an HTTP client opens, so a cancel can shut them down: closing a socket does not
    wake a thread blocked reading it, so an LLM call would otherwise wait for the server's reply.
    This reaches into the client's connection pool (its network backend), which httpx and httpx2
    both have; where it is missing the set stays empty and a cancelled call is only abandoned."""
    sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
    backend = getattr(getattr(getattr(client, "_transport", None), "_pool", None), "_network_backend", None)
    connect = getattr(backend, "connect_tcp", None)
    if connect is None:
        return sockets

    def connect_tcp(*args: Any, **kwargs: Any) -> Any:
        stream = connect(*args, **kwargs)
        sock = stream.get_extra_info("socket") if hasattr(stream, "get_extra_info") else None
        if sock is not None:
            sockets.add(sock)
        return stream

    backend.connect_tcp = connect_tcp  # this client's own backend instance: no one else is affected
    return sockets


def shut_down(sockets: "weakref.WeakSet[socket.socket]") -> None:
    for sock in list(sockets):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
