"""The service's outer layer, as plain ASGI (a BaseHTTPMiddleware would buffer streams and hide
client disconnects from the searches): body size limits answered with 413 before a route reads
anything (or, for a body without a length, as soon as it passes the limit), a path holding NUL
refused, security headers on every response, and one metrics record per request, by route
template (never by namespace or id)."""

from __future__ import annotations

import json
import time
from typing import Any

UPLOAD_SUFFIXES = ("/imports", "/documents")
# Sent with every response: no sniffing a JSON answer into a script, no framing (clickjacking the
# page's key field), no referrer carrying a namespace or id elsewhere, and a policy that lets the
# lineage page load only its own files. Swagger UI at /docs starts itself with an inline script.
PAGE_POLICY = ("default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
               "form-action 'self'; frame-ancestors 'none'")
DOCS_POLICY = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
               "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"no-referrer")]


def _with_security_headers(message: dict, path: str) -> dict:
    policy = DOCS_POLICY if path.startswith("/docs") else PAGE_POLICY
    have = {name.lower() for name, _ in message.get("headers", [])}
    extra = [(k, v) for k, v in [*SECURITY_HEADERS, (b"content-security-policy", policy.encode())] if k not in have]
    return {**message, "headers": [*message.get("headers", []), *extra]}


class HttpError(Exception):
    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers


class _TooLarge(Exception):
    pass


async def _reply(send: Any, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(_with_security_headers({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close")]}, ""))
    await send({"type": "http.response.body", "body": body})


class RequestLimits:
    def __init__(self, app: Any, *, metrics: Any, max_body: int, max_upload: int) -> None:
        self.app, self.metrics, self.max_body, self.max_upload = app, metrics, max_body, max_upload

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        limit = self.max_upload if path.endswith(UPLOAD_SUFFIXES) else self.max_body
        started = time.perf_counter()
        status: dict[str, Any] = {"code": 500, "sent": False}

        async def counted_send(message: dict) -> None:
            if message["type"] == "http.response.start":
                status["code"], status["sent"] = message["status"], True
                message = _with_security_headers(message, path)
            await send(message)

        def record() -> None:
            route = scope.get("route")
            template = getattr(route, "path", None) or ("unmatched" if path.startswith("/v1/") else path)
            self.metrics.request(scope.get("method", ""), template, status["code"], time.perf_counter() - started)

        if "\x00" in path:
            # no route can use it, and the database refuses NUL in text: refused before any route
            status["code"] = 400
            await _reply(send, 400, "a path cannot contain a NUL character")
            record()
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            status["code"] = 413
            await _reply(send, 413, f"the request body is over the {limit}-byte limit")
            record()
            return
        seen = 0

        async def limited_receive() -> dict:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    # A body without a length (chunked) passes the check above: answer 413 now,
                    # before the route's body parser turns the error into one of its own.
                    if not status["sent"]:
                        status["code"] = 413
                        await _reply(send, 413, f"the request body is over the {limit}-byte limit")
                        status["sent"] = status["refused"] = True
                    raise _TooLarge()
            return message

        async def guarded_send(message: dict) -> None:
            if not status.get("refused"):  # the app's own answer to a refused body is not sent
                await counted_send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except _TooLarge:
            pass
        finally:
            record()
