"""The query worker: a warm process that runs `graphrag-dag query` for the command line.

A query in a new process spends most of its time loading (Hamilton with pandas, the cl100k token
counter, the offline embedder), not searching: about two seconds against a tenth of one in a
process that has them. The keeper that holds the embedded server up while it waits idle
(drivers/store/keeper.py) loads them once and serves queries on a Unix socket in the home
folder, `.query.sock`; `graphrag-dag query` (drivers/cli/entry.py) sends its arguments there
and prints what comes back. The worker runs the command line's own `main` on them, so output,
warnings and exit codes are the same as in-process.

It serves only a client whose environment and working folder are its own (as the command line
would see them, graphrag-dag.toml and .env applied): a different endpoint, model or setting is
declined, as is a request while one runs, and the client then runs the query itself. A client
that goes away (Ctrl-C) interrupts its query as Ctrl-C would in-process.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import select
import signal
import socket
import threading
from pathlib import Path
from typing import Any, Mapping

SOCKET_NAME = ".query.sock"
STATE_NAME = ".query-worker.json"
_SAME = ("GRAPHRAG_DAG_", "OPENAI_", "RAY_", "LANCEDB_", "PG")
_NOT_COMPARED = {"GRAPHRAG_DAG_SERVER_IDLE"}
_MAX_REQUEST = 1 << 20


def profile(environ: Mapping[str, str], cwd: str) -> dict[str, str]:
    """What must be the same for the worker's answer to be the client's: the settings' variables
    and the working folder (relative paths, graphrag-dag.toml and .env)."""
    same = {k: v for k, v in environ.items() if k.startswith(_SAME) and k not in _NOT_COMPARED}
    return {**same, "HOME": environ.get("HOME", ""), "cwd": cwd}


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps(message).encode() + b"\n")


def _read_line(conn: socket.socket, limit: int = _MAX_REQUEST) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > limit:
            raise ValueError("request too large")
    return data


class Worker:
    def __init__(self, home: Path) -> None:
        from graphrag_dag.drivers.cli.main import main

        self.main = main
        self.home = home
        self.profile = profile(os.environ, os.getcwd())
        self._warm()
        self.path = home / SOCKET_NAME
        self.path.unlink(missing_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o077)  # only this user may ask
        try:
            self.sock.bind(str(self.path))
        finally:
            os.umask(old)
        self.sock.listen(8)
        self.requests: queue.Queue[tuple[socket.socket, list[str]]] = queue.Queue()
        self.busy = threading.Lock()  # held from acceptance until the answer is sent
        self.closed = False
        self.served = 0
        self._main_thread = threading.get_ident()
        signal.signal(signal.SIGINT, signal.default_int_handler)  # may have been inherited ignored
        self._write_state()
        threading.Thread(target=self._accept, daemon=True, name="query-worker-accept").start()

    def _warm(self) -> None:
        """Load what a query loads, so the first client does not wait for it either."""
        from graphrag_dag.drivers.api.graphrag import GraphRag  # noqa: F401 - the import is the warming
        from graphrag_dag.drivers.llm.embedders import configured_embedder
        from graphrag_dag.drivers.llm.tokens import token_counter
        from graphrag_dag.drivers.runtime import engine

        engine.Engine().driver("local")
        token_counter()
        if not os.environ.get("GRAPHRAG_DAG_EMBED_MODEL"):  # an offline model: loaded here, once
            configured_embedder().embed(["warm"])

    def _write_state(self) -> None:
        state = {"pid": os.getpid(), "socket": str(self.path), "served": self.served}
        (self.home / STATE_NAME).write_text(json.dumps(state))

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                conn.settimeout(5)
                request = json.loads(_read_line(conn) or b"{}")
                conn.settimeout(None)
            except (OSError, ValueError):
                conn.close()
                continue
            if request.get("profile") != self.profile:
                _send(conn, {"declined": "environment"})
                conn.close()
            elif self.closed or not self.busy.acquire(blocking=False):
                _send(conn, {"declined": "busy"})
                conn.close()
            else:
                _send(conn, {"accepted": True})
                self.requests.put((conn, [str(a) for a in request.get("argv", [])]))

    def serve_for(self, seconds: float) -> bool:
        """Run one request in this (the main) thread if one comes within `seconds`."""
        try:
            conn, argv = self.requests.get(timeout=seconds)
        except queue.Empty:
            return False
        out, err = io.StringIO(), io.StringIO()
        running = threading.Event()
        running.set()
        threading.Thread(target=self._watch, args=(conn, running), daemon=True).start()
        try:
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    code = self.main(argv)
            finally:
                running.clear()
        except KeyboardInterrupt:  # the client left just as its query ended
            code = 130
        _send(conn, {"stdout": out.getvalue(), "stderr": err.getvalue(), "code": code})
        conn.close()
        self.served += 1
        self._write_state()
        self.busy.release()
        return True

    def _watch(self, conn: socket.socket, running: threading.Event) -> None:
        """A client that closed its end asked to stop: interrupt the query as Ctrl-C does."""
        while running.is_set():
            readable, _, _ = select.select([conn], [], [], 0.2)
            if readable and running.is_set():
                try:
                    gone = conn.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    gone = True
                if gone:
                    signal.pthread_kill(self._main_thread, signal.SIGINT)
                    return

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.close()
        self.path.unlink(missing_ok=True)
        (self.home / STATE_NAME).unlink(missing_ok=True)
        while True:  # accepted but never run: the client runs it itself
            try:
                conn, _ = self.requests.get_nowait()
            except queue.Empty:
                return
            _send(conn, {"declined": "stopping"})
            conn.close()


def open_service(home: Path) -> Worker:
    """The keeper's service (drivers/store/keeper.py)."""
    if len(str(home / SOCKET_NAME)) > 100:  # a Unix socket's path has a length limit
        raise OSError("the home folder's path is too long for a socket")
    return Worker(home)
