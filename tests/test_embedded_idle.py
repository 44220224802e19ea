"""The embedded server's idle grace period: after its last command it stays up (a keeper waits
as its user), the next command joins it instead of starting it, and it stops once idle for the
set time or at `graphrag-dag server stop`, which refuses while a process uses it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from processes import alive, wait_for
from shared_data import PROJECT_ROOT

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes

USER = textwrap.dedent("""
    import sys
    from graphrag_dag.drivers.api import GraphRag
    rag = GraphRag(home=sys.argv[1])
    print(len(rag.store.namespaces()), flush=True)
    sys.stdin.readline()
    rag.close()
""")


def _env(home: Path, idle: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GRAPHRAG_DAG_DSN"))}
    return {**env, "GRAPHRAG_DAG_HOME": str(home), "GRAPHRAG_DAG_SERVER_IDLE": idle}


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", *args], env=env, cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=120)


def _status(env: dict[str, str]) -> dict:
    proc = _cli(env, "server", "status", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_server_waits_idle_is_joined_and_stops_after_the_grace_period(tmp_path):
    env = _env(tmp_path / "home", "4")
    assert _status(env)["running"] is False
    assert _cli(env, "namespaces").returncode == 0
    wait_for(lambda: _status(env)["keeper"] is not None, 30)  # the detached keeper has joined
    first = _status(env)
    assert first["running"] and first["users"] == [] and alive(first["keeper"]) and first["idle_seconds"] == 4
    assert _cli(env, "namespaces").returncode == 0  # joins the same server
    second = _status(env)
    assert second["pid"] == first["pid"] and second["keeper"] == first["keeper"]
    wait_for(lambda: not _status(env)["running"], 30)  # idle for 4 s: the keeper stops it and leaves
    wait_for(lambda: not alive(first["keeper"]) and not alive(first["pid"]), 10)


def test_server_stop_ends_the_wait_and_refuses_while_the_server_is_in_use(tmp_path):
    home = tmp_path / "home"
    env = _env(home, "300")
    user = subprocess.Popen([sys.executable, "-c", USER, str(home)], env=env, cwd=PROJECT_ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert user.stdout.readline().strip().isdigit(), user.stderr.read()
        proc = _cli(env, "server", "stop")
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1, proc.stderr
        assert lines[0] == (f"graphrag-dag: error: the embedded server in {home} is in use by 1 process(es) "
                            f"({user.pid}); it stops once they exit")
    finally:
        user.communicate("\n", timeout=60)
    wait_for(lambda: _status(env)["keeper"] is not None, 30)  # the user left it to a keeper
    shown = _status(env)
    assert shown["running"] and alive(shown["keeper"])
    proc = _cli(env, "server", "stop")
    assert proc.returncode == 0 and proc.stdout.strip() == f"stopped the embedded server in {home}", proc.stderr
    assert not _status(env)["running"]
    wait_for(lambda: not alive(shown["keeper"]) and not alive(shown["pid"]), 10)
    proc = _cli(env, "server", "stop")
    assert proc.returncode == 0 and proc.stdout.strip() == f"no embedded server runs in {home}"


def test_a_bad_grace_period_is_one_line_and_exit_2(tmp_path):
    proc = _cli(_env(tmp_path / "home", "soon"), "namespaces")
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "graphrag-dag: error: GRAPHRAG_DAG_SERVER_IDLE must be a whole number of seconds (0 stops the server "
        "with its last user), not 'soon'")
    assert not (tmp_path / "home" / "pgdata" / "postmaster.pid").exists()
