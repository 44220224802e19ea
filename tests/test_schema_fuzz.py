"""The live service against its own OpenAPI document: schemathesis generates requests for every
route (valid, invalid and edge-case values, with a query key for the demo namespace) and fails on
any 5xx or any status the document does not list. Bounded by examples and time."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from served import Served

pytestmark = pytest.mark.slow  # a live server and a few hundred requests

MAX_EXAMPLES = 25
MAX_SECONDS = 15


def test_no_route_answers_5xx_or_an_undocumented_status(rag, tmp_path):
    from graphrag_dag.drivers.service.app import ServiceSettings, create_app
    from graphrag_dag.drivers.service.keys import KeyStore

    st = shutil.which("st", path=str(Path(sys.executable).parent)) or shutil.which("st")
    assert st, "schemathesis is part of the test extras"
    key = KeyStore(rag.store).create(["demo"], "query", "schema fuzz")
    settings = ServiceSettings(max_concurrent=4, request_timeout=30, mcp=False)
    try:
        with Served(create_app(rag, settings)) as srv:
            done = subprocess.run(
                [st, "run", f"{srv.url}/openapi.json", "--checks", "not_a_server_error,status_code_conformance",
                 "--max-examples", str(MAX_EXAMPLES), "--max-time", str(MAX_SECONDS), "--seed", "7",
                 "--workers", "2", "--request-timeout", "30", "--no-color",
                 "--header", f"Authorization: Bearer {key['key']}",
                 "--generation-database", "none", "--report-dir", str(tmp_path)],
                capture_output=True, text=True, timeout=MAX_SECONDS + 240, cwd=tmp_path)  # its cache stays there
    finally:
        KeyStore(rag.store).revoke(key["id"])
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    tested = re.search(r"Tested: (\d+)", done.stdout)
    cases = re.search(r"(\d+) generated", done.stdout)
    assert tested and int(tested.group(1)) >= 15 and cases and int(cases.group(1)) >= 100, done.stdout[-3000:]
