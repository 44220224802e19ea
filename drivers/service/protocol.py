"""uvicorn's HTTP/1.1 protocol with Nagle's algorithm off on every connection.

asyncio turns Nagle off only for sockets it recognises as TCP, and the listening socket that a
`serve --workers N` process inherits is not one: a response's head and body then wait for the
client's delayed ACK on every request."""

from __future__ import annotations

import socket
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol


class NoDelayH11Protocol(H11Protocol):
    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
