"""Database faults and CLI interruption: clear errors, exit codes, and recovery without a restart."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from importlib import resources
from pathlib import Path

import pytest

from llm_server import Reply
from shared_data import PROJECT_ROOT

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes


def _cli_env(base: dict[str, str], server=None) -> dict[str, str]:
    env = dict(base)
    if server is not None:
        env.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test", GRAPHRAG_DAG_CHAT_MODEL="test-model")
    return env


def _popen(env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "graphrag_dag.drivers.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=PROJECT_ROOT)


def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_unreachable_server_names_the_dsn_with_the_password_masked(cli_env):
    env = dict(cli_env, GRAPHRAG_DAG_DSN="postgresql://alice:s3cret@127.0.0.1:1/graphrag")
    proc = subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", "stats", "--namespace", "demo"], capture_output=True,
                          text=True, env=env, cwd=PROJECT_ROOT, timeout=60)
    assert proc.returncode == 1
    line = _one_line(proc.stderr)
    assert "postgresql://alice:***@127.0.0.1:1/graphrag" in line and "s3cret" not in proc.stderr


def test_server_stopped_mid_request_fails_it_and_recovers_after_restart(rag):
    from graphrag_dag.dataflows.common.errors import StoreUnavailable
    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.llm.chat import ChatConfig
    from graphrag_dag.drivers.store.server import _servers

    home = Path(tempfile.mkdtemp(prefix="graphrag-dag-fault-"))
    g = GraphRag(home=home, chat=ChatConfig(), pool_size=2, pool_timeout=3, embedder=rag.embedder)
    try:
        g.load_demo()
        assert g.local_search("Who is Mara Quill?", "demo")["communities"]
        server = _servers[home / "pgdata"]
        failure: dict = {}

        def slow() -> None:
            try:
                g.store.scoped("demo").rows("SELECT pg_sleep(20)")
            except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
                failure["exc"] = exc

        worker = threading.Thread(target=slow)
        worker.start()
        time.sleep(0.5)
        server.stop()
        worker.join(10)
        assert isinstance(failure.get("exc"), StoreUnavailable), failure
        with pytest.raises(StoreUnavailable):
            g.local_search("Who is Mara Quill?", "demo")
        server.start()
        assert g.local_search("Who is Mara Quill?", "demo")["communities"]  # same process, same pool
    finally:
        g.close()


def test_postmaster_killed_health_says_so_within_a_second_and_no_request_gets_a_500(rag):
    """kill -9 of the embedded server's postmaster under a live service: /healthz answers 503 within
    a second (not after the pool's wait), and searches and lookups answer 503, never 500."""
    import os

    import httpx2
    from served import Served

    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.llm.chat import ChatConfig
    from graphrag_dag.drivers.service.app import ServiceSettings, create_app
    from graphrag_dag.drivers.store.server import _servers

    home = Path(tempfile.mkdtemp(prefix="graphrag-dag-fault-"))
    g = GraphRag(home=home, chat=ChatConfig(), pool_size=4, embedder=rag.embedder)
    try:
        g.load_demo()
        server = _servers[home / "pgdata"]
        with Served(create_app(g, ServiceSettings(auth=False, mcp=False))) as srv:
            body = {"query": "Who is Mara Quill?", "namespace": "demo", "offline": True}
            assert httpx2.post(srv.url + "/v1/search/local", json=body, timeout=30).status_code == 200
            pid = int((home / "pgdata" / "postmaster.pid").read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
            statuses = []
            for _ in range(3):
                started = time.monotonic()
                health = httpx2.get(srv.url + "/healthz", timeout=10)
                assert health.status_code == 503 and time.monotonic() - started < 1.5, health.text
                assert health.json()["status"] == "unavailable"
                statuses.append(httpx2.post(srv.url + "/v1/search/local", json=body, timeout=30).status_code)
                statuses.append(httpx2.get(srv.url + "/v1/namespaces/demo/stats", timeout=30).status_code)
            assert set(statuses) == {503}, statuses
    finally:
        g.close()
        time.sleep(1.0)  # the killed server's backends notice and exit
        try:
            server.start()  # so that the library's exit handler finds a server to stop
        except Exception:  # noqa: BLE001 - a restart is a courtesy to the exit handler only
            pass


_FULL_DISK_SCRIPT = r"""
set -u
mount -t tmpfs -o size=160m tmpfs "$HOME_DIR"
export GRAPHRAG_DAG_HOME="$HOME_DIR/home"
run() { name=$1; shift; "$PYTHON" -m graphrag_dag.drivers.cli "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"; echo $? >"$OUT/$name.rc"; }
run init namespaces
# leave 3 MB: the server runs, and an index of the corpus cannot be written
fallocate -l $(( $(df -B1 --output=avail "$HOME_DIR" | tail -1) - 3145728 )) "$HOME_DIR/filler"
run full index "$CORPUS" --namespace full --json
rm "$HOME_DIR/filler"
run after namespaces
run again index "$CORPUS" --namespace full --json
run last namespaces
cp "$GRAPHRAG_DAG_HOME/pgdata/log" "$OUT/server.log"
"""


def test_a_full_disk_fails_the_index_in_one_line_keeps_nothing_and_the_next_index_succeeds(cli_env, tmp_path):
    """The embedded server's disk fills during an index (a private tmpfs in its own mount
    namespace, so nothing else on the machine sees it): one stderr line that says so, exit 1, no
    pool warnings, no namespace; with room made, the same command succeeds on the same server data."""
    import os
    import random

    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("fallocate"):
        if os.environ.get("CI"):
            raise RuntimeError("CI runs the full-disk test as root, with unshare and fallocate (util-linux)")
        pytest.skip("a private tmpfs needs root and util-linux's unshare")
    corpus, out, home = tmp_path / "corpus", tmp_path / "out", tmp_path / "home"
    for folder in (corpus, out, home):
        folder.mkdir()
    rnd = random.Random(7)
    words = "storm surge harbour tide river council funding engineer survey model data coast".split()
    for i in range(40):  # 1.3 MB: far more than 3 MB of tables, chunks and vectors once indexed
        paragraphs = (" ".join(rnd.choice(words) for _ in range(120)) + "." for _ in range(40))
        (corpus / f"doc{i}.txt").write_text(f"Report {i} of the Corran Sound survey.\n\n" + "\n\n".join(paragraphs))
    env = dict(cli_env, HOME_DIR=str(home), OUT=str(out), CORPUS=str(corpus), PYTHON=sys.executable)
    subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", _FULL_DISK_SCRIPT], env=env,
                   cwd=PROJECT_ROOT, timeout=300, check=True)
    result = {p.stem: p.read_text().strip() for p in out.glob("*.rc")}
    err = lambda name: (out / f"{name}.err").read_text()  # noqa: E731
    assert result["init"] == "0", err("init")
    assert result["full"] == "1", err("full")
    lines = [ln for ln in err("full").splitlines() if ln.strip() and not ln.startswith("[graphrag-dag]")]
    assert len(lines) == 1 and "Traceback" not in err("full"), err("full")
    assert lines[0].startswith("graphrag-dag: error: PostgreSQL at ") and "ran out of room" in lines[0], lines[0]
    assert "No space left on device" in lines[0] and "nothing of this work was kept" in lines[0]
    assert result["after"] == "0" and "full" not in (out / "after.out").read_text().split(), err("after")
    assert result["again"] == "0", err("again")
    assert json.loads((out / "again.out").read_text())["documents"] == 40
    assert (out / "last.out").read_text().split()[0] == "full"
    # The last user to leave asked for a checkpoint before stopping the server, so the stop (under
    # the server's locks) had next to nothing left to write.
    log = (out / "server.log").read_text()
    checkpoints = list(zip(re.findall(r"checkpoint starting: ([a-z ]+)", log),
                           (int(n) for n in re.findall(r"checkpoint complete: wrote (\d+) buffers", log))))
    ours = max(range(len(checkpoints)), key=lambda i: checkpoints[i][1] if checkpoints[i][0].startswith("immediate") else -1)
    assert checkpoints[ours][0].startswith("immediate") and checkpoints[ours][1] >= 100, checkpoints
    assert checkpoints[ours + 1][0].startswith("shutdown") and checkpoints[ours + 1][1] * 10 < checkpoints[ours][1], checkpoints


# Quick replies for the calls before the stage a Ctrl-C test stalls.
_QUICK = {
    "primer": json.dumps({"intermediate_answer": "Stormwatch warns of surges.",
                          "follow_up_questions": ["Who funds the Stormwatch Project?", "Who is Mara Quill?"]}),
    "parse": json.dumps({"entities": [], "keywords": [], "themes": []}),
    "select": json.dumps({"community_ids": []}),
    "map": json.dumps({"answer": "x", "usefulness": 10}),
}
_DEMO_DOCS = resources.files("graphrag_dag.drivers.ingest.demo") / "documents"


@pytest.mark.parametrize(("args", "stalled"), [
    (("query", "What are the main themes?", "--namespace", "demo", "--method", "global", "--json"), "map"),
    # the follow-ups' local searches run on DRIFT's pool; their answers stall
    (("query", "Who funds the Stormwatch Project?", "--namespace", "demo", "--method", "drift", "--json"), "answer"),
    (("index", str(_DEMO_DOCS), "--namespace", "ctrl-c-index", "--extraction-concurrency", "2", "--json"), "extract"),
], ids=["global-map", "drift-follow-ups", "index-extraction"])
def test_ctrl_c_exits_130(cli_env, llm_server, interruptible, rag, args, stalled):
    """Ctrl-C while a pool of LLM calls is in flight: exit 130 at once, not after the calls (a
    pool's exit used to wait for them, and for the queued ones after), and nothing written."""
    llm_server.responder = lambda rec: Reply(_QUICK.get(rec.stage, "{}"), delay=20 if rec.stage == stalled else 0)
    before = {n["namespace"] for n in rag.store.namespaces()}
    # With the fault handler on, a process that does not exit is made to show where each of its
    # threads waits.
    proc = _popen(dict(_cli_env(cli_env, llm_server), PYTHONFAULTHANDLER="1"), *args)

    def stalled_calls() -> int:
        return sum(r.stage == stalled for r in llm_server.chat_requests())

    deadline = time.monotonic() + 60
    while not stalled_calls() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert stalled_calls(), f"no {stalled} call was made: {proc.poll()} {[r.stage for r in llm_server.chat_requests()]}"
    time.sleep(0.3)  # the other calls of the pool are in flight too
    proc.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    try:
        out, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # the fault handler prints every thread's stack
        _, err = proc.communicate(timeout=15)
        pytest.fail(f"the command did not exit within 15 s of Ctrl-C; its threads:\n{err}")
    assert proc.returncode == 130, err
    assert time.monotonic() - t0 < 5
    assert "interrupted" in _one_line(err)
    assert {n["namespace"] for n in rag.store.namespaces()} == before


def _main_thread_wait():
    """A future a worker completes, and the main thread's wait for it (the map stage's pool)."""
    from concurrent.futures import Future

    from graphrag_dag.dataflows.common import waiting

    future: Future = Future()
    return future, lambda: waiting.result(future)


def test_ctrl_c_that_reaches_a_worker_thread_still_interrupts_the_main_thread(interruptible):
    """The kernel may hand SIGINT to any thread; CPython raises KeyboardInterrupt in the main thread
    only when it runs Python code. Here the signal goes to the worker (as the kernel may choose),
    and the main thread, waiting for that worker, must be interrupted before the worker's own
    wait (10 s) gives up (dataflows/common/waiting.py)."""
    waiting_now, released = threading.Event(), threading.Event()
    gave_up = []

    def work() -> int:
        waiting_now.wait(10)
        time.sleep(0.5)  # the main thread is in its wait by now
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        gave_up.append(not released.wait(10))
        return 1

    future, wait = _main_thread_wait()
    try:
        with pytest.raises(KeyboardInterrupt):
            threading.Thread(target=lambda: future.set_result(work()), daemon=True).start()
            waiting_now.set()
            wait()
    finally:
        released.set()
    deadline = time.monotonic() + 10
    while not gave_up and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gave_up == [False], "the main thread slept through the interrupt until the work ended"


def test_timeout_ends_with_a_clear_message(cli_env, llm_server):
    llm_server.responder = lambda rec: Reply("{}", delay=20)
    t0 = time.monotonic()
    proc = _popen(_cli_env(cli_env, llm_server), "query", "Who is Mara Quill?", "--namespace", "demo",
                  "--timeout", "1.5", "--json")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "timed out" in _one_line(err)
    assert time.monotonic() - t0 < 15


def test_llm_call_cap_from_the_cli(cli_env, llm_server):
    llm_server.responder = lambda rec: Reply(json.dumps({"entities": [], "keywords": ["quill"], "themes": []}))
    proc = _popen(_cli_env(cli_env, llm_server), "query", "Who is Mara Quill?", "--namespace", "demo",
                  "--max-llm-calls", "1", "--json")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    res = json.loads(out)
    assert res["llm"]["calls"] == 1 and len(llm_server.chat_requests()) == 1
    assert any("cap" in w or "LlmBudgetExceeded" in w for w in res["warnings"])


@pytest.mark.parametrize("text", ["Mara\x00Quill", "\u202eQuill\u202c", "'; DROP TABLE entities; --", "100% _Quill_ \\",
                                  "🙂 Mara Quill 🙂", "奎尔博士\t\x07"])
def test_hostile_text_is_answered_normally(rag, text):
    res = rag.local_search(text, "demo")
    assert res["status"] in ("completed", "no_results")
    assert rag.store.stats("demo")["entities"] > 0
