"""The query worker: with the embedded server waiting idle, `graphrag-dag query` is answered by the
keeper's warm process, with the same output and exit codes as in-process; a client whose settings
differ is declined and runs the query itself; Ctrl-C on the client interrupts the query in the
worker (its LLM call is abandoned) and leaves the worker serving."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llm_server import Reply
from processes import alive, wait_for
from shared_data import PROJECT_ROOT

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes

QUESTION = "Who funded the Stormwatch Project?"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GRAPHRAG_DAG_"))}
    return {**env, "GRAPHRAG_DAG_HOME": str(home), "GRAPHRAG_DAG_SERVER_IDLE": "120", "GRAPHRAG_DAG_CONFIG": "",
            **extra}


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", *args], env=env, cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=120)


def _served(home: Path) -> int:
    return json.loads((home / ".query-worker.json").read_text())["served"]


def _with_worker(env: dict[str, str], home: Path) -> None:
    proc = _cli(env, "demo", "--offline")
    assert proc.returncode == 0, proc.stderr
    wait_for(lambda: (home / ".query-worker.json").exists(), 60)  # the keeper has loaded what a query loads


def test_the_worker_answers_as_the_command_would_and_declines_other_settings(tmp_path):
    home = tmp_path / "home"
    env = _env(home)
    _with_worker(env, home)
    try:
        served = _cli(env, "query", QUESTION, "--namespace", "demo", "--json")
        assert served.returncode == 0 and served.stderr == "", served.stderr
        assert _served(home) == 1
        # another chat model is another setting: declined, so this one ran in its own process
        here = _cli({**env, "GRAPHRAG_DAG_CHAT_MODEL": "another-model"}, "query", QUESTION, "--namespace", "demo",
                    "--json", "--offline")
        assert here.returncode == 0 and _served(home) == 1, here.stderr
        a, b = json.loads(served.stdout), json.loads(here.stdout)
        for key in ("answer", "status", "answer_method", "matched_entities", "communities", "sources"):
            assert a[key] == b[key], key
        assert [e["id"] for e in a["evidence"]] == [e["id"] for e in b["evidence"]]
        # bad input: the same one line and exit 2, from the worker
        for args, line in [(("query", " ", "--namespace", "demo"), "graphrag-dag: error: the query is empty"),
                           (("query", QUESTION, "--namespace", "Bad Name"), "graphrag-dag: error: invalid namespace")]:
            proc = _cli(env, *args)
            assert proc.returncode == 2 and proc.stdout == "", proc.stderr
            assert proc.stderr.startswith(line) and len(proc.stderr.splitlines()) == 1, proc.stderr
        assert _served(home) == 3
        # the text output, and a setting given as a flag, come back whole
        proc = _cli(env, "query", QUESTION, "--namespace", "demo", "--top-k", "2")
        assert proc.returncode == 0 and "Mara Quill" in proc.stdout and _served(home) == 4
    finally:
        _cli(env, "server", "stop")


def test_ctrl_c_on_the_client_interrupts_the_query_in_the_worker(tmp_path, llm_server, interruptible):
    home = tmp_path / "home"
    env = _env(home, OPENAI_BASE_URL=llm_server.base_url, OPENAI_API_KEY="test", GRAPHRAG_DAG_CHAT_MODEL="test-model")
    quick = {"parse": json.dumps({"entities": ["Stormwatch Project"], "keywords": [], "themes": []}),
             "select": json.dumps({"community_ids": []})}
    llm_server.responder = lambda rec: Reply(quick.get(rec.stage, "{}"), delay=30 if rec.stage == "answer" else 0)
    _with_worker(env, home)
    worker = json.loads((home / ".query-worker.json").read_text())["pid"]
    try:
        client = subprocess.Popen([sys.executable, "-m", "graphrag_dag.drivers.cli", "query", QUESTION, "--namespace",
                                   "demo"], env=env, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        wait_for(lambda: any(r.stage == "answer" for r in llm_server.chat_requests()), 60)
        client.send_signal(signal.SIGINT)
        out, err = client.communicate(timeout=15)
        assert client.returncode == 130 and err.strip() == "graphrag-dag: interrupted" and out == "", err
        started = time.monotonic()
        wait_for(lambda: _served(home) == 1, 15)  # the worker's query ended too, long before its 30 s reply
        assert time.monotonic() - started < 10 and alive(worker)
        proc = _cli(env, "query", QUESTION, "--namespace", "demo", "--offline", "--json")
        assert proc.returncode == 0 and json.loads(proc.stdout)["answer"] and _served(home) == 2
    finally:
        _cli(env, "server", "stop")


def test_a_worker_that_dies_mid_query_leaves_the_client_to_run_it(tmp_path, llm_server):
    """kill -9 of the keeper while it answers: the client reads nothing back and runs the query in
    its own process, which gets its answer (the LLM's first answer call stalls, the next does not)."""
    home = tmp_path / "home"
    env = _env(home, OPENAI_BASE_URL=llm_server.base_url, OPENAI_API_KEY="test", GRAPHRAG_DAG_CHAT_MODEL="test-model")
    quick = {"parse": json.dumps({"entities": ["Stormwatch Project"], "keywords": [], "themes": []}),
             "select": json.dumps({"community_ids": []})}
    answers = []

    def respond(rec):
        if rec.stage == "answer":
            answers.append(rec)
            evidence = rec.prompt.split("[Evidence]", 1)[-1]
            cited = re.search(r"^\[([^\[\]]+)\]", evidence, re.M)  # the label of a line of its context
            return Reply(f"The Meridian Coastal Trust funded it [{cited.group(1) if cited else ''}].",
                         delay=30 if len(answers) == 1 else 0)
        return Reply(quick.get(rec.stage, "{}"))

    llm_server.responder = respond
    _with_worker(env, home)
    worker = json.loads((home / ".query-worker.json").read_text())["pid"]
    try:
        client = subprocess.Popen([sys.executable, "-m", "graphrag_dag.drivers.cli", "query", QUESTION, "--namespace",
                                   "demo", "--json"], env=env, cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        wait_for(lambda: len(answers) == 1, 60)  # the worker's query waits on the model
        os.kill(worker, signal.SIGKILL)
        out, err = client.communicate(timeout=60)
        assert client.returncode == 0, err
        result = json.loads(out)
        assert result["answer_method"] == "llm" and "Meridian Coastal Trust" in result["answer"], result["warnings"]
        assert len(answers) == 2  # asked again, from the client's own process
    finally:
        _cli(env, "server", "stop")
