"""A small OpenAI-compatible HTTP server for tests.

Tests talk real HTTP to it through the real ``openai`` client, so retry,
timeout, error-mapping and concurrency behaviour are exercised end to end
instead of being faked with mocks. Each chat request is answered by a
``responder`` callable that the test controls (content, status, headers,
delay, dropped connection, token usage).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import select
import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

__all__ = ["Reply", "Recorded", "LlmServer", "scripted", "fake_embedding"]

# How often a delayed request checks whether its client has gone away.
_POLL_INTERVAL = 0.05


@dataclass
class Reply:
    """What the server should do with one chat request."""

    content: str | None = None  # assistant message content
    status: int = 200  # non-200 returns an OpenAI-style error JSON body
    headers: dict[str, str] = field(default_factory=dict)  # e.g. {"Retry-After": "1"}
    delay: float = 0.0  # seconds to wait first; cut short when the server stops
    drop: bool = False  # close the connection without answering
    prompt_tokens: int | None = None  # usage to report; default len(prompt)//4
    completion_tokens: int | None = None  # default len(content)//4


@dataclass
class Recorded:
    """One request as the server saw it, so tests can assert on traffic."""

    path: str
    body: dict  # parsed JSON request body
    started: float  # time.monotonic() when the request arrived
    finished: float | None  # when the reply was sent (None if dropped/aborted)
    stage: str | None  # request header "X-Stage", if present

    @property
    def prompt(self) -> str:
        """All message contents joined, so tests can search the whole prompt."""
        parts: list[str] = []
        for message in self.body.get("messages") or []:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
                parts.extend(
                    p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
                )
        return "\n".join(parts)


def scripted(*replies: Reply | str) -> Callable[[Recorded], Reply]:
    """Responder that returns ``replies`` in order, then repeats the last one.

    Thread-safe, so concurrent requests each consume exactly one reply.
    """
    if not replies:
        raise ValueError("scripted() needs at least one reply")
    queue = [Reply(content=r) if isinstance(r, str) else r for r in replies]
    lock = threading.Lock()
    index = 0

    def responder(_req: Recorded) -> Reply:
        nonlocal index
        with lock:
            reply = queue[min(index, len(queue) - 1)]
            index += 1
        return reply

    return responder


# Native widths of OpenAI's embedding models (their published sizes); any other model gets 8.
NATIVE_DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


def fake_embedding(text: str, dimensions: int = 8) -> list[float]:
    """Deterministic unit vector derived from a hash of ``text``.

    Same text gives the same vector across runs, so retrieval tests are stable.
    """
    values: list[float] = []
    counter = 0
    while len(values) < dimensions:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        for i in range(0, len(digest), 4):
            (n,) = struct.unpack("<I", digest[i : i + 4])
            values.append(n / 0xFFFFFFFF * 2.0 - 1.0)
        counter += 1
    values = values[:dimensions]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def _default_responder(_req: Recorded) -> Reply:
    return Reply(content="{}")


def _error_type(status: int) -> str:
    if status == 429:
        return "rate_limit_exceeded"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


class _Server(ThreadingHTTPServer):
    """HTTP server that knows its owning LlmServer and its open connections."""

    daemon_threads = True
    block_on_close = False  # stop() must not wait on idle keep-alive handlers
    owner: "LlmServer"

    def __init__(self, owner: "LlmServer") -> None:
        self.owner = owner
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Unblock handler threads waiting on idle keep-alive sockets."""
        with self.connections_lock:
            conns = list(self.connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    """Routes /v1/* requests; keep-alive like a real API server."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Quiet: access logs would only clutter test output."""

    def handle(self) -> None:
        """Swallow disconnect errors; clients dropping connections is expected in tests."""
        try:
            super().handle()
        except OSError:  # BrokenPipe, ConnectionReset, socket shut down by stop()
            self.close_connection = True

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass

    # -- routing ---------------------------------------------------------

    def do_GET(self) -> None:
        if self._route() == "/models":
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [{"id": "test-model", "object": "model", "created": 0, "owned_by": "tests"}],
                },
            )
        else:
            self._send_error(404, f"Unknown path {self.path}")

    def do_POST(self) -> None:
        started = time.monotonic()
        route = self._route()
        body = self._read_json()
        if body is None:
            return
        rec = Recorded(
            path=route, body=body, started=started, finished=None, stage=self.headers.get("X-Stage")
        )
        self.server.owner._record(rec)
        if route == "/chat/completions":
            self._chat(rec)
        elif route == "/embeddings":
            self._embeddings(rec)
        else:
            self._send_error(404, f"Unknown path {self.path}")

    # -- endpoints -------------------------------------------------------

    def _chat(self, rec: Recorded) -> None:
        owner = self.server.owner
        owner._enter()
        try:
            try:
                reply = owner.responder(rec)
            except Exception as exc:  # surface responder bugs to the test as a 500
                reply = Reply(content=f"responder raised {exc!r}", status=500)
            if reply.delay > 0 and not self._wait(reply.delay):
                self._abort()
                return
            if reply.drop:
                self._abort()
                return
            if reply.status != 200:
                sent = self._send_error(reply.status, reply.content, reply.headers)
            else:
                prompt = rec.prompt
                content = reply.content
                p_tok = reply.prompt_tokens if reply.prompt_tokens is not None else len(prompt) // 4
                c_tok = (
                    reply.completion_tokens
                    if reply.completion_tokens is not None
                    else len(content or "") // 4
                )
                if rec.body.get("stream"):
                    sent = self._send_stream(rec, content or "", p_tok, c_tok, reply.headers)
                    if sent:
                        rec.finished = time.monotonic()
                    return
                payload = {
                    "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": rec.body.get("model") or "test-model",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "logprobs": None,
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": p_tok,
                        "completion_tokens": c_tok,
                        "total_tokens": p_tok + c_tok,
                    },
                }
                sent = self._send_json(200, payload, reply.headers)
            if sent:
                rec.finished = time.monotonic()
        finally:
            owner._leave()

    def _embeddings(self, rec: Recorded) -> None:
        body = rec.body
        raw = body.get("input")
        inputs: list[Any] = [raw] if isinstance(raw, str) else list(raw or [])
        if inputs and all(isinstance(x, int) for x in inputs):  # a single token array
            inputs = [inputs]
        # Like the real service: a model's native width unless `dimensions` asks for fewer.
        dims = int(body.get("dimensions") or NATIVE_DIMENSIONS.get(body.get("model"), 8))
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        total_tokens = 0
        for i, item in enumerate(inputs):
            text = item if isinstance(item, str) else json.dumps(item)
            total_tokens += max(1, len(text) // 4)
            vec = fake_embedding(text, dims)
            embedding: Any = (
                base64.b64encode(struct.pack(f"<{dims}f", *vec)).decode() if as_base64 else vec
            )
            data.append({"object": "embedding", "index": i, "embedding": embedding})
        sent = self._send_json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or "test-embedding",
                "usage": {"prompt_tokens": total_tokens, "total_tokens": total_tokens},
            },
        )
        if sent:
            rec.finished = time.monotonic()

    # -- helpers ---------------------------------------------------------

    def _route(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path[len("/v1") :] if path.startswith("/v1/") else path

    def _read_json(self) -> dict | None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_error(400, "Request body is not valid JSON")
            return None
        if not isinstance(body, dict):
            self._send_error(400, "Request body must be a JSON object")
            return None
        return body

    def _wait(self, delay: float) -> bool:
        """Sleep up to ``delay``; False if the server stopped or the client left.

        Uses the stop Event (not time.sleep) so stop() returns promptly, and
        polls the socket so abandoned requests free their thread early.
        """
        stop = self.server.owner._stop_event
        deadline = time.monotonic() + delay
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            if stop.wait(min(remaining, _POLL_INTERVAL)):
                return False
            if self._client_gone():
                return False

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _abort(self) -> None:
        """Close the connection without sending a response."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send_error(self, status: int, message: str | None, headers: dict[str, str] | None = None) -> bool:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "Error"
        payload = {
            "error": {
                "message": message or phrase,
                "type": _error_type(status),
                "param": None,
                "code": _error_type(status) if status == 429 else None,
            }
        }
        self._send_json(status, payload, headers)

    def _send_stream(self, rec: Recorded, content: str, p_tok: int, c_tok: int,
                     headers: dict[str, str] | None = None) -> bool:
        """A streamed chat completion: the content word by word as server-sent events (each
        piece after `owner.stream_delay` seconds), then a usage chunk when the client asked for
        one, then [DONE]. False if the client went away."""
        owner = self.server.owner
        ident = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        model = rec.body.get("model") or "test-model"

        def chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
            body = {"id": ident, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                    "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if usage:
                body["usage"] = usage
            return b"data: " + json.dumps(body).encode() + b"\n\n"

        pieces = [w for w in content.split(" ")]
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.close_connection = True
            self.wfile.write(chunk({"role": "assistant", "content": ""}))
            for i, piece in enumerate(pieces):
                if owner.stream_delay and not self._wait(owner.stream_delay):
                    self._abort()
                    return False
                self.wfile.write(chunk({"content": piece if i == 0 else " " + piece}))
                self.wfile.flush()
            self.wfile.write(chunk({}, "stop"))
            if (rec.body.get("stream_options") or {}).get("include_usage"):
                self.wfile.write(chunk({}, usage={"prompt_tokens": p_tok, "completion_tokens": c_tok,
                                                  "total_tokens": p_tok + c_tok}))
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True
            return False
        return True

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> bool:
        """Write a JSON response; False if the client had already gone."""
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # BrokenPipe / ConnectionReset: client gave up
            self.close_connection = True
            return False
        return True


class LlmServer:
    """OpenAI-compatible server on 127.0.0.1 (random port) in a background thread."""

    def __init__(self, responder: Callable[[Recorded], Reply] | None = None) -> None:
        self.responder: Callable[[Recorded], Reply] = responder or _default_responder
        self.requests: list[Recorded] = []
        self.max_in_flight: int = 0
        self.stream_delay: float = 0.0  # seconds between the pieces of a streamed reply
        self.base_url: str = ""
        self._in_flight = 0
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._stop_event = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------

    def start(self) -> "LlmServer":
        """Bind a free port and serve in a daemon thread; returns self for chaining."""
        if self._httpd is not None:
            return self
        self._stop_event.clear()
        self._httpd = _Server(self)
        port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=f"llm-server-{port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, abort delayed requests and close open connections, promptly."""
        httpd = self._httpd
        if httpd is None:
            return
        self._stop_event.set()  # wakes every delayed handler
        httpd.shutdown()
        httpd.server_close()
        httpd.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        with self._idle:  # give in-flight handlers a moment to unwind
            self._idle.wait_for(lambda: self._in_flight == 0, timeout=0.5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> "LlmServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- inspection ------------------------------------------------------

    def chat_requests(self) -> list[Recorded]:
        """Only the /chat/completions requests, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.path == "/chat/completions"]

    def reset(self) -> None:
        """Forget recorded requests and the concurrency high-water mark."""
        with self._lock:
            self.requests.clear()
            self.max_in_flight = 0

    # -- used by the handler ---------------------------------------------

    def _record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._idle:
            self._in_flight -= 1
            self._idle.notify_all()
