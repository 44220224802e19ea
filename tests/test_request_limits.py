"""Requests that try to hurt the server: zip bombs, lying or odd import fields, odd names, paths
and bodies. Each gets its documented 4xx, nothing is written, no upload folder is left behind, and
the server keeps answering others meanwhile."""

from __future__ import annotations

import io
import re
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import httpx2
import pytest
from served import Served

pytestmark = pytest.mark.slow  # a live server


@pytest.fixture(scope="module")
def upload_dir():
    """The temp folder the server makes its upload folders in: ours, so a leak can be counted."""
    folder = Path(tempfile.mkdtemp(prefix="graphrag-upload-test-"))
    before, tempfile.tempdir = tempfile.tempdir, str(folder)
    yield folder
    tempfile.tempdir = before


@pytest.fixture(scope="module")
def server(rag, upload_dir, tmp_path_factory):
    from graphrag_dag.drivers.service.app import ServiceSettings, create_app
    from graphrag_dag.drivers.service.keys import KeyStore

    root = tmp_path_factory.mktemp("import-root")
    (root / "out").mkdir()
    settings = ServiceSettings(max_body_bytes=20_000, import_root=root, mcp=False)
    with Served(create_app(rag, settings)) as srv:
        srv.key = KeyStore(rag.store).create(["demo", "up-x"], "write")["key"]
        yield srv


def _h(server) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.key}"}


def _leftovers(upload_dir: Path) -> list[str]:
    return sorted(p.name for p in upload_dir.iterdir() if p.name.startswith("graphrag-"))


def _zip(members: dict[str, bytes] | None = None, *, count: int = 0, zeros: int = 0) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for name, data in (members or {}).items():
            zf.writestr(name, data)
        for i in range(count):
            zf.writestr(f"m{i}.txt", b"")
        if zeros:
            with zf.open("zeros.bin", "w", force_zip64=True) as out:
                block = bytes(1 << 20)
                for _ in range(zeros >> 20):
                    out.write(block)
    return buf.getvalue()


def _post_zip(server, data: bytes, **fields) -> httpx2.Response:
    return httpx2.post(server.url + "/v1/namespaces/up-x/imports", files={"file": ("g.zip", data, "application/zip")},
                       data=fields, headers=_h(server), timeout=120)


def test_zip_bombs_get_413_and_health_answers_meanwhile(server, upload_dir):
    bombs = {"ratio": _zip(zeros=100 << 20), "members": _zip(count=12_000)}
    slowest: list[float] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            started = time.monotonic()
            assert httpx2.get(server.url + "/healthz", timeout=10).status_code == 200
            slowest.append(time.monotonic() - started)
            time.sleep(0.05)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        ratio, members = _post_zip(server, bombs["ratio"]), _post_zip(server, bombs["members"])
    finally:
        stop.set()
        poller.join()
    assert ratio.status_code == 413 and "expands" in ratio.json()["detail"], ratio.text
    assert members.status_code == 413 and "12,000 members" in members.json()["detail"], members.text
    assert slowest and max(slowest) < 1.0, max(slowest)
    assert _leftovers(upload_dir) == []


def test_a_zip_whose_directory_understates_its_sizes_is_refused(server, upload_dir):
    data = bytearray(_zip({"a.txt": b"x" * 50_000}))
    # the central directory's uncompressed size of the one member (offset 24 of its record)
    at = data.rfind(b"PK\x01\x02") + 24
    data[at:at + 4] = (10).to_bytes(4, "little")
    r = _post_zip(server, bytes(data))
    assert r.status_code in (400, 413), r.text
    assert _leftovers(upload_dir) == []


def test_limits_are_the_servers_settings(rag, upload_dir):
    from graphrag_dag.drivers.service.app import ServiceSettings, create_app
    from graphrag_dag.drivers.service.keys import KeyStore

    with Served(create_app(rag, ServiceSettings(max_zip_members=3, mcp=False))) as srv:
        srv.key = KeyStore(rag.store).create(["up-x"], "write")["key"]
        r = _post_zip(srv, _zip(count=4))
    assert r.status_code == 413 and "the limit is 3" in r.json()["detail"]


@pytest.mark.parametrize("field,value,message", [
    ("replace", "no", "replace must be true or false"),  # JSON: only a boolean; a form says "no" for false
    ("replace", "maybe", "replace must be true or false"),
    ("embeddings", "sometimes", "embeddings must be auto, keep, recompute"),
])
def test_import_fields_are_checked_before_the_job(server, rag, field, value, message):
    before = rag.store.stats("demo")
    body = {"path": "out", field: value}
    r = httpx2.post(server.url + "/v1/namespaces/demo/imports", json=body, headers=_h(server), timeout=30)
    assert r.status_code == 400 and message in r.json()["detail"], r.text
    if value != "no":
        m = _post_zip(server, _zip({"a.txt": b"x"}), **{field: value})
        assert m.status_code == 400 and message in m.json()["detail"], m.text
    assert rag.store.stats("demo") == before


def test_form_flags_read_the_usual_words():
    from graphrag_dag.drivers.service.uploads import form_flag

    assert [form_flag(v, "replace") for v in ("yes", "TRUE", "1", "on", True)] == [True] * 5
    assert [form_flag(v, "replace") for v in ("no", "false", "0", "off", "", None, False)] == [False] * 7
    with pytest.raises(Exception, match="replace must be true or false"):
        form_flag("nope", "replace")


def test_deeply_nested_import_body_is_a_400(server):
    r = httpx2.post(server.url + "/v1/namespaces/demo/imports", content=b"[" * 50_000,
                    headers={**_h(server), "Content-Type": "application/json"}, timeout=30)
    assert r.status_code == 400 and "not JSON" in r.json()["detail"], r.text


def test_upload_names_too_long_or_odd_are_400_and_leave_nothing(server, upload_dir):
    for name in ("a" * 300 + ".txt", ".hidden"):
        r = httpx2.post(server.url + "/v1/namespaces/up-x/documents", files=[("files", (name, b"text", "text/plain"))],
                        headers=_h(server), timeout=30)
        assert r.status_code == 400 and "upload file name" in r.json()["detail"], r.text
    assert _leftovers(upload_dir) == []


@pytest.mark.parametrize("path", ["/v1/namespaces/demo/communities/a%00b", "/v1/namespaces/demo/sources/a%00b",
                                  "/v1/jobs/a%00", "/v1/namespaces/demo/entities/a%00/neighbors"])
def test_nul_in_a_path_is_a_400(server, path):
    r = httpx2.get(server.url + path, headers=_h(server), timeout=30)
    assert r.status_code == 400 and "NUL" in r.json()["detail"], r.text


def test_nul_in_an_import_path_is_a_400(server):
    r = httpx2.post(server.url + "/v1/namespaces/up-x/imports", json={"path": "out\x00x"}, headers=_h(server),
                    timeout=30)
    assert r.status_code == 400 and "NUL" in r.json()["detail"], r.text


def test_a_chunked_body_over_the_limit_is_a_413(server):
    def chunks():
        for _ in range(30):
            yield b" " * 1000

    r = httpx2.post(server.url + "/v1/search/local", content=chunks(),
                    headers={**_h(server), "Content-Type": "application/json"}, timeout=30)
    assert r.status_code == 413 and "20000-byte limit" in r.json()["detail"], r.text


def test_a_name_or_id_with_a_slash_reaches_its_lookup(server):
    r = httpx2.get(server.url + "/v1/namespaces/demo/entities/Mara%20Quill%2Fx/neighbors", headers=_h(server), timeout=30)
    assert r.status_code == 200 and r.json()["entity"]["name"] == "Mara Quill", r.text
    r = httpx2.get(server.url + "/v1/namespaces/demo/sources/no%2Fsuch", headers=_h(server), timeout=30)
    assert r.status_code == 404 and "no/such" in r.json()["detail"], r.text


def test_docs_work_offline_and_responses_carry_security_headers(server):
    docs = httpx2.get(server.url + "/docs", timeout=30)
    assert docs.status_code == 200 and "cdn" not in docs.text.lower()
    script = re.search(r'src="([^"]+swagger-ui-bundle\.js)"', docs.text).group(1)
    assert httpx2.get(server.url + script, timeout=30).status_code == 200  # served from the wheel
    for path in ("/", "/healthz", "/v1/namespaces"):
        r = httpx2.get(server.url + path, headers=_h(server), timeout=30)
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY", path
        assert "default-src 'self'" in r.headers["content-security-policy"] and "frame-ancestors 'none'" in \
            r.headers["content-security-policy"], path
    assert "unsafe-inline" not in httpx2.get(server.url + "/", timeout=30).headers["content-security-policy"]
    metrics = httpx2.get(server.url + "/metrics", timeout=30)
    assert metrics.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"


def test_openapi_documents_the_error_answers_and_the_namespace_pattern(server):
    spec = httpx2.get(server.url + "/openapi.json", timeout=30).json()
    local = spec["paths"]["/v1/search/local"]["post"]["responses"]
    assert {"200", "400", "401", "403", "413", "429", "503", "504"} <= set(local)
    stats = spec["paths"]["/v1/namespaces/{namespace}/stats"]["get"]
    assert {"400", "403", "404"} <= set(stats["responses"])
    (param,) = [p for p in stats["parameters"] if p["name"] == "namespace"]
    assert param["schema"]["pattern"] == "^[a-z0-9][a-z0-9_-]{0,62}$"
    assert "409" in spec["paths"]["/v1/jobs/{job_id}"]["delete"]["responses"]
