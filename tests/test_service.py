"""`graphrag-dag serve` over real HTTP: uvicorn on 127.0.0.1 against the embedded store, the real
openai client streaming from the loopback LLM server, and API keys from the key table."""

from __future__ import annotations

import io
import json
import re
import random
import subprocess
import sys
import threading
import time
import zipfile

import httpx2
import pytest
from llm_server import LlmServer, Reply
from served import Served
from test_isolation import _tenant

from graphrag_dag.drivers.api.options import MAX_QUERY_CHARS

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes


QUESTION = "What did Dr. Mara Quill discover about the storm surge in Corran Sound, and who funded the work?"
ANSWER = "Mara Quill found the rising-tide trap, and the Meridian Coastal Trust funded it"
REQUESTS = 6_000  # with the schema fuzz beside it, the suite stays within its time
PARSE = json.dumps({"entities": ["Mara Quill"], "keywords": ["storm", "surge"], "themes": []})


def _first_label(prompt: str, after: str = "") -> str:
    """An id the prompt labels (after the marker `after`), so the stand-in cites what it was shown."""
    return re.findall(r"\[((?:community )?[\w:.-]*\d[\w:.-]*)\]", prompt.split(after, 1)[-1])[0]


def _responder(req):
    if req.stage == "parse":
        return Reply(PARSE, delay=3.0 if "SLOW" in req.prompt else 0.0)
    if req.stage == "answer":
        return Reply(f"{ANSWER} [{_first_label(req.prompt, '[Evidence]')}].")
    if req.stage == "map":
        return Reply(json.dumps({"answer": f"Storm science dominates [{_first_label(req.prompt, 'Reports:')}].",
                                 "usefulness": 80}))
    return Reply(f"The main theme is storm science [{_first_label(req.prompt, 'Intermediate answers:')}].")


@pytest.fixture(scope="module")
def service(rag, home):
    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.llm.chat import ChatConfig
    from graphrag_dag.drivers.service.app import ServiceSettings, create_app
    from graphrag_dag.drivers.service.keys import KeyStore

    rag.write("tenant-a", _tenant("a-", "FACT-A"), replace=True)
    rag.write("tenant-b", _tenant("b-", "FACT-B"), replace=True)
    llm = LlmServer(_responder).start()
    chat = ChatConfig(model="test-model", base_url=llm.base_url, api_key="test", timeout=20, max_retries=0)
    served_rag = GraphRag(rag.dsn, home=home, chat=chat, pool_size=12)
    app = create_app(served_rag, ServiceSettings(max_body_bytes=20_000, max_concurrent=2, request_timeout=30))
    store = KeyStore(rag.store)
    keys = {"demo": store.create(["demo"], "query")["key"], "write": store.create(["demo", "svc-up"], "write")["key"],
            "a": store.create(["tenant-a"], "query")["key"], "b": store.create(["tenant-b"], "query")["key"]}
    revoked = store.create(["demo"], "admin")
    store.revoke(revoked["id"])
    keys["revoked"] = revoked["key"]
    with Served(app) as srv:
        srv.keys, srv.llm, srv.rag = keys, llm, served_rag
        yield srv
    llm.stop()
    served_rag.close()
    for ns in ("tenant-a", "tenant-b", "svc-up", "svc-docs"):
        rag.store.drop(ns)


def _h(service, who):
    return {"Authorization": f"Bearer {service.keys[who]}"}


def _post(service, path, body, who="demo", timeout=60, **kw):
    return httpx2.post(service.url + path, json=body, headers=_h(service, who), timeout=timeout, **kw)


def test_search_returns_the_query_contract(service, rag):
    r = _post(service, "/v1/search/local", {"query": QUESTION, "namespace": "demo", "offline": True})
    assert r.status_code == 200, r.text
    got, want = r.json(), rag.local_search(QUESTION, "demo")
    assert set(got) == set(want) and got["status"] == "completed"
    assert [e["id"] for e in got["evidence"]] == [e["id"] for e in want["evidence"]]
    assert [s["text_unit_id"] for s in got["sources"]] == [s["text_unit_id"] for s in want["sources"]]
    r = _post(service, "/v1/search/global", {"query": "What are the main themes?", "namespace": "demo",
                                             "offline": True, "options": {"level": 1}})
    assert r.status_code == 200 and r.json()["status"] in ("completed", "partial") and r.json()["level"] == 1
    bad = _post(service, "/v1/search/local", {"query": QUESTION, "namespace": "demo", "options": {"top_kk": 3}})
    assert bad.status_code == 400 and "top_kk" in bad.json()["detail"]
    assert _post(service, "/v1/search/local", {"query": "", "namespace": "demo"}).status_code == 400
    spec = httpx2.get(service.url + "/openapi.json").json()
    assert {"/v1/search/local", "/v1/search/global", "/v1/namespaces/{namespace}/sources/{evidence_id}"} <= set(spec["paths"])


def _events(response) -> list[tuple[str, dict]]:
    out, name = [], None
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            out.append((name, json.loads(line[6:])))
    return out


def test_stream_sends_stages_then_answer_tokens_then_the_result(service):
    body = {"query": QUESTION, "namespace": "demo", "stream": True, "config": {"selector": "score"}}
    with httpx2.stream("POST", service.url + "/v1/search/local", json=body, headers=_h(service, "demo"),
                       timeout=60) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = _events(r)
    kinds = [k for k, _ in events]
    assert kinds[-1] == "result" and kinds.count("result") == 1 and "error" not in kinds
    first_token, last_stage = kinds.index("token"), len(kinds) - 1 - kinds[::-1].index("stage")
    assert kinds.count("token") > 3  # streamed piece by piece by the LLM, not sent whole
    stages = [d["node"] for k, d in events if k == "stage"]
    assert {"parsed_query", "matched_entities", "ranked_communities", "local_context"} <= set(stages)
    assert stages.index("local_context") < first_token  # retrieval is done before the answer streams
    assert all(k == "token" for k in kinds[first_token:last_stage + 1] if k != "stage")
    result = events[-1][1]
    assert "".join(d["text"] for k, d in events if k == "token") == result["answer"]
    assert result["answer"].startswith(ANSWER) and result["answer_method"] == "llm" and not result["warnings"]
    assert all(d["ms"] >= 0 and d["cached"] is False for k, d in events if k == "stage")
    offline = {**body, "offline": True}
    with httpx2.stream("POST", service.url + "/v1/search/local", json=offline, headers=_h(service, "demo"),
                       timeout=60) as r:
        events = _events(r)
    tokens = [d["text"] for k, d in events if k == "token"]
    assert len(tokens) == 1 and tokens[0] == events[-1][1]["answer"]  # offline: the answer as one chunk


def test_auth_matrix(service):
    url = service.url
    body = {"query": QUESTION, "namespace": "demo", "offline": True}
    assert httpx2.post(url + "/v1/search/local", json=body).status_code == 401
    assert httpx2.post(url + "/v1/search/local", json=body, headers={"Authorization": "Bearer grd_x_y"}).status_code == 401
    assert httpx2.get(url + "/v1/namespaces", headers=_h(service, "revoked")).status_code == 401
    assert httpx2.get(url + "/v1/namespaces").status_code == 401
    for path in ("/v1/namespaces/tenant-a/stats", "/v1/namespaces/tenant-a/communities/a-c2-1",
                 "/v1/namespaces/tenant-a/entities/Mara%20Quill/neighbors", "/v1/namespaces/tenant-a/sources/a-cl-3"):
        assert httpx2.get(url + path, headers=_h(service, "demo")).status_code == 403, path
        assert httpx2.get(url + path, headers=_h(service, "a")).status_code == 200, path
    assert _post(service, "/v1/search/local", {**body, "namespace": "tenant-a"}).status_code == 403
    assert _post(service, "/v1/search/global", {**body, "namespace": "no-such-ns"}).status_code == 403
    names = httpx2.get(url + "/v1/namespaces", headers=_h(service, "a")).json()
    assert [n["namespace"] for n in names] == ["tenant-a"]
    # write role versus query role: a query key cannot start an import, a write key can
    zipped = _demo_zip(service)
    up = {"file": ("graphrag.zip", zipped, "application/zip")}
    assert httpx2.post(url + "/v1/namespaces/demo/imports", files=up, headers=_h(service, "demo")).status_code == 403
    r = httpx2.post(url + "/v1/namespaces/svc-up/imports", files=up, headers=_h(service, "write"), timeout=60)
    assert r.status_code == 202, r.text
    job = _wait_job(service, r.json()["id"], "write")
    assert job["status"] == "completed", job
    assert job["result"]["entities"] == service.rag.store.stats("demo")["entities"]
    assert httpx2.get(url + f"/v1/jobs/{job['id']}", headers=_h(service, "a")).status_code == 404
    assert httpx2.delete(url + "/v1/namespaces/svc-up", headers=_h(service, "write")).status_code == 403  # admin only


def _demo_zip(service) -> bytes:
    import tempfile
    from pathlib import Path

    from graphrag_dag.drivers.ingest.exporter import export_graphrag

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "output"
        export_graphrag(service.rag, "demo", out)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            for f in out.iterdir():
                zf.write(f, f"output/{f.name}")
        return buf.getvalue()


def _wait_job(service, job_id, who, timeout=120):
    deadline = time.monotonic() + timeout
    while True:
        job = httpx2.get(f"{service.url}/v1/jobs/{job_id}", headers=_h(service, who)).json()
        if job["status"] not in ("queued", "running") or time.monotonic() > deadline:
            return job
        time.sleep(0.1)


def test_uploaded_documents_are_indexed_and_a_job_can_be_cancelled(service):
    files = [("files", ("lark.md", b"# Lark Fenwick\n\nLark Fenwick is a glassblower in Port Ilse. "
                                  b"She trained with Odo Brand at the Ilse Glassworks.\n", "text/markdown")),
             ("files", ("odo.txt", b"Odo Brand founded the Ilse Glassworks in 1990 in Port Ilse.\n", "text/plain"))]
    r = httpx2.post(service.url + "/v1/namespaces/svc-up/documents", files=files, data={"offline": "true", "replace": "true"},
                    headers=_h(service, "write"), timeout=60)
    assert r.status_code == 202, r.text
    job = _wait_job(service, r.json()["id"], "write")
    assert job["status"] == "completed" and job["result"]["documents"] == 2 and job["progress"], job
    res = _post(service, "/v1/search/local", {"query": "Who founded the Ilse Glassworks?", "namespace": "svc-up",
                                              "offline": True}, who="write").json()
    assert any(e["document_id"] for e in res["evidence"]) and "Odo Brand" in json.dumps(res)
    # the documents, and removing one: refused at once for an unknown name or a key that may not write
    listed = httpx2.get(service.url + "/v1/namespaces/svc-up/documents", headers=_h(service, "write")).json()
    assert sorted(d["title"] for d in listed) == ["Lark Fenwick", "odo"]
    deletions = service.url + "/v1/namespaces/svc-up/document-deletions"
    r = httpx2.post(deletions, json={"documents": ["nowhere.txt"]}, headers=_h(service, "write"))
    assert r.status_code == 400 and "no such document" in r.json()["detail"]
    assert httpx2.post(deletions, json={"documents": []}, headers=_h(service, "write")).status_code == 422
    assert httpx2.post(service.url + "/v1/namespaces/demo/document-deletions", json={"documents": ["x"]},
                       headers=_h(service, "demo")).status_code == 403
    r = httpx2.post(deletions, json={"documents": ["odo.txt"]}, headers=_h(service, "write"))
    assert r.status_code == 202, r.text
    job = _wait_job(service, r.json()["id"], "write")
    assert job["status"] == "completed" and job["result"]["deleted_documents"] == [
        d["id"] for d in listed if d["title"] == "odo"], job
    left = httpx2.get(service.url + "/v1/namespaces/svc-up/documents", headers=_h(service, "write")).json()
    assert [d["title"] for d in left] == ["Lark Fenwick"]
    # with the LLM answering every extraction call after 30 s, a cancelled job ends within seconds
    before = service.rag.store.stats("demo")
    service.llm.responder = lambda req: Reply("{}", delay=30)
    try:
        r = httpx2.post(service.url + "/v1/namespaces/svc-docs/documents", files=files,
                        headers=_h(service, "write"), timeout=60)
        assert r.status_code == 403  # svc-docs is not one of the write key's namespaces
        r = httpx2.post(service.url + "/v1/namespaces/demo/documents", files=files, data={"update": "true"},
                        headers=_h(service, "write"), timeout=60)
        job_id = r.json()["id"]
        time.sleep(0.5)
        assert httpx2.delete(f"{service.url}/v1/jobs/{job_id}", headers=_h(service, "write")).status_code == 200
        job = _wait_job(service, job_id, "write", timeout=10)
        assert job["status"] == "cancelled", job
        assert service.rag.store.stats("demo") == before  # nothing was written
    finally:
        service.llm.responder = _responder


def test_size_limits_answer_413_and_a_full_service_429(service):
    huge = {"query": "x" * 30_000, "namespace": "demo"}
    assert _post(service, "/v1/search/local", huge).status_code == 413
    long = {"query": "storm " * (MAX_QUERY_CHARS // 6 + 10), "namespace": "demo"}
    r = _post(service, "/v1/search/local", long)
    assert r.status_code == 413 and "limit" in r.json()["detail"]
    slow = {"query": "SLOW " + QUESTION, "namespace": "demo", "config": {"selector": "score"}}
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(_post(service, "/v1/search/local", slow).status_code))
               for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # both slots now wait on the slow parse call
    r = _post(service, "/v1/search/local", {"query": QUESTION, "namespace": "demo", "offline": True})
    assert r.status_code == 429 and r.headers["retry-after"] == "1"
    for t in threads:
        t.join()
    assert results == [200, 200]
    assert _post(service, "/v1/search/local", {"query": QUESTION, "namespace": "demo", "offline": True}).status_code == 200


def test_disconnect_mid_stream_cancels_the_run(service, rag):
    service.llm.stream_delay = 0.3  # the answer streams over several seconds
    baseline = service.llm._in_flight  # calls of earlier tests that may still be winding down
    runner = service.server.config.app.state.services.runner
    try:
        body = {"query": QUESTION, "namespace": "demo", "stream": True, "config": {"selector": "score"}}
        with httpx2.stream("POST", service.url + "/v1/search/local", json=body, headers=_h(service, "demo"),
                           timeout=60) as r:
            for line in r.iter_lines():
                if line == "event: token":
                    break
        closed = time.monotonic()
        open_sql = llm_open = None
        while time.monotonic() - closed < 1.0:
            open_sql = rag.store.admin_rows(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND backend_type = 'client backend' AND (state = 'active' OR state LIKE 'idle in transaction%%')")[0][0]
            llm_open = service.llm._in_flight - baseline
            if open_sql == 0 and llm_open <= 0 and not runner.active:
                break
            time.sleep(0.05)
        assert open_sql == 0, "a query or snapshot was still open 1 s after the client left"
        assert llm_open <= 0, "the LLM stream was still being read 1 s after the client left"
        assert not runner.active, "the run was still going 1 s after the client left"
        answer = [q for q in service.llm.requests if q.stage == "answer"][-1]
        assert answer.finished is None  # the stream was cut off, not read to its end
    finally:
        service.llm.stream_delay = 0.0


def test_health_and_metrics(service):
    assert httpx2.get(service.url + "/healthz").json() == {"status": "ok"}
    _post(service, "/v1/search/local", {"query": QUESTION, "namespace": "demo", "offline": True})
    text = httpx2.get(service.url + "/metrics").text
    assert 'graphrag_stage_seconds_count{flow="local",node="matched_entities"}' in text
    assert 'graphrag_requests_total{method="POST",route="/v1/search/local",status="200"}' in text
    assert "tenant-a" not in text  # routes are templates, never namespaces


def _serve(env: dict[str, str], *flags: str) -> tuple[subprocess.Popen, str]:
    """`graphrag-dag serve` as its own process on a free port, once it answers /healthz."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "graphrag_dag.drivers.cli", "serve", "--port", str(port),
                             "--no-mcp", *flags], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx2.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx2.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"serve did not start: {proc.stderr.read()}")
        time.sleep(0.1)


@pytest.fixture()
def served_process(service, cli_env):
    """`graphrag-dag serve` as its own process (client and server then do not share one GIL)."""
    proc, url = _serve(cli_env, "--max-concurrent", "4")
    yield url
    proc.terminate()
    proc.wait(timeout=20)


def test_random_cross_namespace_requests_leak_nothing(service, served_process):
    """6,000 random requests, each with one of two tenants' keys against either tenant, on every
    read route and local search: the other tenant's namespace is always 403, and the own tenant's
    answers never carry the other tenant's ids or text."""
    rng = random.Random(14)
    marker = {"a": ("FACT-B", '"b-'), "b": ("FACT-A", '"a-')}
    # every read route, the cheap ones more often (the suite's time), and ids of both tenants
    routes = ["/stats", "/communities/{p}c2-1", "/entities/Mara%20Quill/neighbors?depth=2", "/communities/{q}c2-1",
              *["/sources/{p}cl-3", "/sources/{p}d1-ev4", "/sources/{q}cl-2", "/sources/{p}cl-9"] * 3]
    plan = [(rng.choice("ab"), rng.choice("ab"), rng.choice(routes)) for _ in range(REQUESTS)]
    search_every = 250
    failures: list[str] = []
    lock = threading.Lock()

    def run(part: list[tuple[int, tuple[str, str, str]]]) -> None:
        with httpx2.Client(base_url=served_process + "/v1/namespaces/", timeout=60) as client:
            for i, (who, ns, route) in part:
                other = "b" if who == "a" else "a"
                path = f"tenant-{ns}" + route.format(p=f"{ns}-", q=f"{other if ns == who else who}-")
                if i % search_every == 0:
                    r = client.post(served_process + "/v1/search/local", headers=_h(service, who),
                                    json={"query": QUESTION, "namespace": f"tenant-{ns}", "offline": True})
                else:
                    r = client.get(path, headers=_h(service, who))
                bad = None
                if ns != who:
                    bad = None if r.status_code == 403 else f"{path} with key {who}: {r.status_code}"
                elif r.status_code not in (200, 404):
                    bad = f"{path} with key {who}: {r.status_code} {r.text[:200]}"
                elif any(m in r.text for m in marker[who]):
                    bad = f"{path} with key {who} leaked the other tenant: {r.text[:200]}"
                if bad:
                    with lock:
                        failures.append(bad)

    indexed = list(enumerate(plan))
    threads = [threading.Thread(target=run, args=(indexed[k::3],)) for k in range(3)]  # fewer than the slots
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:5]
    assert len(plan) == REQUESTS


def test_no_auth_only_on_loopback(cli_env):
    r = subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", "serve", "--no-auth", "--host", "0.0.0.0"],
                       env=cli_env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "loopback" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_keys_command_prints_a_key_once_and_revokes_it(service, cli_env):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", "keys", *args], env=cli_env,
                              capture_output=True, text=True, timeout=60)

    made = json.loads(cli("create", "--namespace", "tenant-a", "--role", "query", "--json").stdout)
    assert made["key"].startswith(f"grd_{made['id']}_")
    listed = cli("list", "--json")
    assert made["id"] in listed.stdout and made["key"] not in listed.stdout  # never shown again
    ok = httpx2.get(service.url + "/v1/namespaces/tenant-a/stats", headers={"Authorization": f"Bearer {made['key']}"})
    assert ok.status_code == 200
    assert cli("revoke", made["id"]).returncode == 0
    gone = httpx2.get(service.url + "/v1/namespaces/tenant-a/stats", headers={"Authorization": f"Bearer {made['key']}"})
    assert gone.status_code == 401
    again = cli("revoke", made["id"])
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1
    bad = cli("create", "--namespace", "Bad NS")
    assert bad.returncode == 2 and bad.stdout == ""
    mixed = cli("create", "--namespace", "*,x")
    assert mixed.returncode == 2 and mixed.stdout == "" and "give it alone" in mixed.stderr
    escape = cli("create", "--namespace", "x", "--label", "\x1b[31mred")
    assert escape.returncode == 2 and "--label must be printable" in escape.stderr


def test_keys_list_escapes_control_characters_of_labels_stored_earlier(rag, cli_env):
    from graphrag_dag.drivers.service.keys import INSERT

    with rag.store.pool.connection() as conn:  # a label from before labels were checked
        conn.execute(INSERT, ("escape01", "0" * 64, ["x"], "query", "\x1b]0;owned\x07\x1b[2Jlabel"))
    try:
        listed = subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", "keys", "list"], env=cli_env,
                                capture_output=True, text=True, timeout=60)
        line = next(x for x in listed.stdout.splitlines() if x.startswith("escape01"))
        assert "\x1b" not in line and line.endswith("\\x1b]0;owned\\x07\\x1b[2Jlabel"), line
    finally:
        with rag.store.pool.connection() as conn:
            conn.execute("DELETE FROM api_keys WHERE id = 'escape01'")


def test_a_job_is_seen_and_cancelled_through_another_server_process(service, served_process):
    """Jobs live in the database: a second `serve` process (as with --workers) reports on a job the
    first one runs, and a cancel sent to it stops the job in the first."""
    files = [("files", ("note.md", b"# Wren Ashby\n\nWren Ashby keeps bees in Hollin Vale.\n", "text/markdown"))]
    service.llm.responder = lambda req: Reply("{}", delay=30)
    try:
        r = httpx2.post(service.url + "/v1/namespaces/svc-up/documents", files=files, data={"replace": "true"},
                        headers=_h(service, "write"), timeout=60)
        job_id = r.json()["id"]
        seen = httpx2.get(f"{served_process}/v1/jobs/{job_id}", headers=_h(service, "write")).json()
        assert seen["status"] == "running" and seen["namespace"] == "svc-up" and "owner" not in seen
        assert httpx2.get(f"{served_process}/v1/jobs/{job_id}", headers=_h(service, "demo")).status_code == 404
        assert httpx2.delete(f"{served_process}/v1/jobs/{job_id}", headers=_h(service, "write")).status_code == 200
        job = _wait_job(service, job_id, "write", timeout=10)
        assert job["status"] == "cancelled", job
    finally:
        service.llm.responder = _responder


def test_servebench_reports_every_level(rag, cli_env):
    r = subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", "servebench", "--namespace", "demo",
                        "--queries", "6", "--clients", "1,3", "--workers", "2", "--json"],
                       env=cli_env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert [lv["clients"] for lv in report["levels"]] == [1, 3] and report["workers"] == 2
    assert all(lv["requests"] == 6 and lv["errors"] == 0 and lv["rps"] > 0 for lv in report["levels"])
    assert report["library_ms"]["p50"] > 0 and len(report["load_avg"]) == 3


def test_disconnect_during_an_llm_call_aborts_the_call(service):
    """A plain (not streamed) search whose client gives up while the LLM is still thinking: the
    service cancels the run and the LLM request itself is cut, within a second."""
    service.llm.responder = lambda req: Reply(PARSE, delay=20) if req.stage == "parse" else _responder(req)
    runner = service.server.config.app.state.services.runner
    try:
        baseline = service.llm._in_flight
        with pytest.raises(httpx2.TimeoutException):
            _post(service, "/v1/search/local", {"query": QUESTION, "namespace": "demo"}, timeout=1.0)
        gave_up = time.monotonic()
        while time.monotonic() - gave_up < 1.0 and (service.llm._in_flight > baseline or runner.active):
            time.sleep(0.05)
        assert service.llm._in_flight <= baseline, "the LLM call was still open 1 s after the client left"
        assert not runner.active
        parse = [q for q in service.llm.requests if q.stage == "parse"][-1]
        assert parse.finished is None  # cut off, never answered
    finally:
        service.llm.responder = _responder


def test_global_stream_and_the_request_timeout(service):
    body = {"query": "What are the main themes?", "namespace": "demo", "stream": True, "options": {"level": 0}}
    with httpx2.stream("POST", service.url + "/v1/search/global", json=body, headers=_h(service, "demo"),
                       timeout=60) as r:
        events = _events(r)
    kinds = [k for k, _ in events]
    assert kinds[-1] == "result" and kinds.count("token") > 3 and "summary_batches" in [d.get("node") for _, d in events]
    assert "".join(d["text"] for k, d in events if k == "token") == events[-1][1]["answer"]
    slow = {"query": "SLOW " + QUESTION, "namespace": "demo", "timeout": 0.5, "config": {"selector": "score"}}
    started = time.monotonic()
    r = _post(service, "/v1/search/local", slow)
    assert r.status_code == 504 and "timed out" in r.json()["detail"] and time.monotonic() - started < 2.5


def test_run_returns_node_values_and_takes_overrides_of_any_node(service):
    base = {"query": QUESTION, "namespace": "demo", "offline": True}
    first = _post(service, "/v1/run", base).json()
    graph = httpx2.get(service.url + "/v1/dag/local", headers=_h(service, "demo")).json()
    computed = {n["name"] for n in graph["nodes"] if not n["input"]}
    assert set(first["values"]) == computed and first["result"]["status"] == "completed"
    assert {t["node"] for t in first["trace"]} == computed
    assert first["values"]["query_embedding"]["array"] == [256]  # vectors are shown by shape and head
    # every value reads back as its node's type: feeding a run's values back changes nothing
    matched = first["values"]["matched_entities"]
    same = _post(service, "/v1/run", {**base, "overrides": {"matched_entities": matched}}).json()
    assert same["overridden"] == ["matched_entities"]
    assert same["result"]["communities"] == first["result"]["communities"]
    assert "matched_entities" not in {t["node"] for t in same["trace"]}  # an override is not computed
    # dropping the top entity changes what depends on it
    dropped = _post(service, "/v1/run", {**base, "overrides": {"matched_entities": matched[1:]},
                                         "final_vars": ["ranked_communities", "sources"]}).json()
    assert set(dropped["values"]) == {"ranked_communities", "sources"} and "result" not in dropped
    assert matched[0]["name"] not in json.dumps([c["matched_entities"] for c in dropped["values"]["ranked_communities"]])
    for bad, word in (({"overrides": {"matched_entities": [{"id": "x"}]}}, "matched_entities[0]"),
                      ({"overrides": {"matched_entities": "nope"}}, "must be a list"),
                      ({"overrides": {"no_such_node": []}}, "no_such_node"),
                      ({"final_vars": ["db"]}, "db"), ({"flow": "index"}, "unknown flow")):
        r = _post(service, "/v1/run", {**base, **bad})
        assert r.status_code == 400 and word in r.json()["detail"], (bad, r.text)
    assert _post(service, "/v1/run", {**base, "namespace": "tenant-a"}).status_code == 403
    page = httpx2.get(service.url + "/")
    assert page.status_code == 200 and "/static/page.js" in page.text
    assert httpx2.get(service.url + "/static/page.js").headers["content-type"].startswith("text/javascript")
    assert httpx2.get(service.url + "/static/secret.py").status_code == 404


def test_run_streams_stage_events_then_the_node_values(service):
    body = {"query": QUESTION, "namespace": "demo", "offline": True, "stream": True}
    with httpx2.stream("POST", service.url + "/v1/run", json=body, headers=_h(service, "demo"), timeout=60) as r:
        events = _events(r)
    kinds = [k for k, _ in events]
    assert kinds[-1] == "result" and kinds.count("stage") >= 10 and kinds.index("stage") < kinds.index("token")
    result = events[-1][1]
    assert {d["node"] for k, d in events if k == "stage"} == {t["node"] for t in result["trace"]}
    assert result["values"]["matched_entities"] and result["result"]["status"] == "completed"
    bad = _post(service, "/v1/run", {**body, "config": {"channels": "exact,telepathy"}})
    assert bad.status_code == 400  # refused before any stream starts


def test_strategy_switches_over_http(service):
    """Issue 17's switches reach the DAG through the search body, the picture and /v1/run."""
    comparison = "Which came first, the Saltmarrow Lantern or the Meridian Coastal Trust?"
    r = _post(service, "/v1/search/local", {"query": comparison, "namespace": "demo", "offline": True,
                                            "config": {"decompose": "on", "ranking": "weighted"}})
    assert r.status_code == 200, r.text
    assert len(r.json()["parsed_query"]["sub_questions"]) == 2
    r = _post(service, "/v1/search/global", {"query": "What are the main themes?", "namespace": "demo",
                                             "offline": True, "config": {"global_selection": "dynamic"}})
    assert r.status_code == 200 and r.json()["selection"]["rated_by"] == "similarity"
    names = lambda flow, query: {n["name"] for n in httpx2.get(  # noqa: E731
        f"{service.url}/v1/dag/{flow}?{query}", headers=_h(service, "demo")).json()["nodes"]}
    assert "community_ratings" in names("global", "global_selection=dynamic")
    assert "community_ratings" not in names("global", "")
    assert {"sub_question_matches", "sub_question_embeddings"} <= names("local", "decompose=on")
    bad = httpx2.get(f"{service.url}/v1/dag/local?ranking=best", headers=_h(service, "demo"))
    assert bad.status_code == 400 and "unknown ranking" in bad.json()["detail"]
    run = _post(service, "/v1/run", {"flow": "global", "query": "What are the main themes?", "namespace": "demo",
                                     "offline": True, "config": {"global_selection": "dynamic"},
                                     "final_vars": ["community_ratings"]})
    assert run.status_code == 200, run.text
    assert run.json()["values"]["community_ratings"]["method"] == "similarity"


def _served_log(cli_env, log, port: int, *args: str, until=lambda text: True) -> list[str]:
    """Start `serve` with `args`, wait until it answers and `until` holds of its stderr, stop it;
    its stderr lines."""
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "graphrag_dag.drivers.cli", "serve", "--no-auth", "--no-mcp",
                                 "--port", str(port), *args], env=cli_env, stdout=subprocess.DEVNULL,
                                stderr=err, text=True)
        try:
            deadline = time.monotonic() + 90
            while True:
                try:
                    if (httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
                            and until(log.read_text())):
                        break
                except httpx2.TransportError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    return log.read_text().splitlines()


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_serve_with_workers_builds_the_indexes_in_each_worker(cli_env, tmp_path):
    lines = _served_log(cli_env, tmp_path / "serve.log", _free_port(), "--workers", "2", "--warm", "demo",
                        until=lambda text: text.count(" built the in-memory indexes of demo in ") >= 2)
    warmed = [i for i, line in enumerate(lines) if line.startswith("[graphrag-dag] warmed demo: ")]
    built = {line.split()[2] for line in lines
             if line.startswith("[graphrag-dag] worker ") and " built the in-memory indexes of demo in " in line}
    assert len(warmed) == 1 and len(built) == 2, lines  # the server once, each worker's own indexes


def test_serve_warms_its_namespaces_before_listening(cli_env, tmp_path):
    port = _free_port()
    bad = subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", "serve", "--no-auth", "--port", str(port),
                          "--warm", "demo,no-such-namespace"], env=cli_env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no-such-namespace" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    assert "warmed" not in bad.stderr  # every name is checked before any warming
    lines = _served_log(cli_env, tmp_path / "serve.log", port, "--warm", "demo")
    warmed = [i for i, line in enumerate(lines) if line.startswith("[graphrag-dag] warmed demo: ")]
    built = [i for i, line in enumerate(lines) if line.startswith("[graphrag-dag] built the in-memory indexes of demo in ")]
    serving = [i for i, line in enumerate(lines) if line.startswith("[graphrag-dag] serving on ")]
    assert warmed and built and serving and built[0] < warmed[0] < serving[0], lines


def test_warm_route_needs_a_write_key_of_the_namespace(service):
    url = service.url + "/v1/namespaces/demo/warm"
    assert httpx2.post(url, headers=_h(service, "demo"), timeout=60).status_code == 403  # a query key
    assert httpx2.post(service.url + "/v1/namespaces/tenant-a/warm", headers=_h(service, "write"),
                       timeout=60).status_code == 403  # not the key's namespace
    r = httpx2.post(url, headers=_h(service, "write"), timeout=60)
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["namespace"] == "demo" and {x["kind"] for x in report["relations"]} == {"table", "btree", "hnsw"}
    assert all(x["rows"] > 0 for x in report["relations"] if x["kind"] == "hnsw")
    assert isinstance(report["indexes_seconds"], float) and report["indexes_seconds"] >= 0


def test_a_job_whose_server_was_killed_is_failed_and_cannot_be_cancelled(service, rag, cli_env):
    """kill -9 of the server running a job: once the job's lease has run out, the next process to
    look marks it failed (here with a 1 s lease; servers use 30 s), and DELETE answers 409."""
    import os
    import signal

    from graphrag_dag.drivers.service.jobs import DIED, Jobs

    env = {**cli_env, "OPENAI_BASE_URL": service.llm.base_url, "OPENAI_API_KEY": "test",
           "GRAPHRAG_DAG_CHAT_MODEL": "test-model"}
    proc, url = _serve(env)
    service.llm.responder = lambda req: Reply("{}", delay=30)
    try:
        files = [("files", ("note.md", b"# Wren Ashby\n\nWren Ashby keeps bees in Hollin Vale.\n", "text/markdown"))]
        r = httpx2.post(url + "/v1/namespaces/svc-up/documents", files=files, data={"replace": "true"},
                        headers=_h(service, "write"), timeout=60)
        job_id = r.json()["id"]
        assert r.status_code == 202 and r.json()["status"] == "running", r.text
        time.sleep(0.5)  # the job is now waiting on the LLM
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert Jobs(rag.store).get(job_id)["status"] == "running"  # within the 30 s lease: not yet known dead
        time.sleep(1.5)
        job = Jobs(rag.store, lease=1.0).get(job_id)
        assert job["status"] == "failed" and job["error"] == DIED and job["finished"], job
        gone = httpx2.delete(f"{service.url}/v1/jobs/{job_id}", headers=_h(service, "write"))
        assert gone.status_code == 409 and "not running: it is failed" in gone.json()["detail"], gone.text
    finally:
        service.llm.responder = _responder
        if proc.poll() is None:
            proc.kill()
