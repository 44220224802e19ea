"""The README's first command on a fresh home: `graphrag-dag demo` loads the demo index and prints
a local answer with communities and evidence, offline; `--json` gives both flows in the contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from shared_data import PROJECT_ROOT

LOCAL_KEYS = {"method", "namespace", "query", "status", "offline", "answer", "warnings", "parsed_query",
              "matched_entities", "communities", "evidence", "timings_ms", "llm", "trace"}
GLOBAL_KEYS = {"method", "namespace", "query", "status", "offline", "answer", "warnings", "level", "map_answers",
               "failed_batches", "timings_ms", "llm", "trace"}


def _run(home: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GRAPHRAG_DAG_CHAT_MODEL", "GRAPHRAG_DAG_DSN")}
    env["GRAPHRAG_DAG_HOME"] = home
    return subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", *args], capture_output=True, text=True, env=env,
                          cwd=PROJECT_ROOT, timeout=300)


def test_demo_on_a_fresh_home_prints_answer_communities_and_evidence():
    home = tempfile.mkdtemp(prefix="graphrag-dag-demo-")
    proc = _run(home, "demo")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Answer (offline):" in out and "Communities:" in out and "Evidence:" in out
    evidence_lines = [ln for ln in out.split("Evidence:")[1].splitlines() if " doc=" in ln and " chunk=" in ln]
    assert evidence_lines, out
    assert "Stage timings (ms):" in out and "matched_entities" in out
    assert "loaded the demo index" in proc.stderr

    again = _run(home, "demo", "--json")  # idempotent: the namespace is already there
    assert again.returncode == 0, again.stderr
    data = json.loads(again.stdout)
    assert set(data) == {"local", "global"}
    assert set(data["local"]) == LOCAL_KEYS and set(data["global"]) == GLOBAL_KEYS
    assert data["local"]["communities"] and data["local"]["evidence"][0]["chunk_id"]
    assert data["global"]["status"] == "completed" and data["local"]["offline"] is True
