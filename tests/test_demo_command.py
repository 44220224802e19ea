"""The README's first command on a fresh home: `graphrag-dag demo` loads the demo index and prints
a local answer with communities and evidence, offline; `--json` gives both flows in the contract."""

from __future__ import annotations

import pytest

import json
import os
import re
import subprocess
import sys
import tempfile

from shared_data import PROJECT_ROOT

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes


LOCAL_KEYS = {"method", "namespace", "query", "status", "offline", "answer", "answer_method", "warnings",
              "parsed_query", "matched_entities", "communities", "evidence", "sources", "timings_ms", "llm", "trace"}
GLOBAL_KEYS = {"method", "namespace", "query", "status", "offline", "answer", "answer_method", "warnings", "level",
               "map_answers", "failed_batches", "error", "timings_ms", "llm", "trace"}


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
    evidence_lines = [ln for ln in out.split("Evidence:")[1].split("Sources:")[0].splitlines()
                      if re.match(r"  \S+ \((claim|chunk)\) .+ \[\d+:\d+\]: ", ln)]
    assert len(evidence_lines) >= 5 and all(len(ln) <= 120 for ln in evidence_lines), out
    # The demo asks two things; the offline answer says both: what was found, and who paid.
    answer = out.split("Answer (offline):")[1].split("Communities:")[0]
    assert "Meridian Coastal Trust" in answer and "Corran Sound" in answer, answer
    assert "Stage timings (ms):" in out and "matched_entities" in out
    assert "loaded the demo index" in proc.stderr

    again = _run(home, "demo", "--json")  # idempotent: the namespace is already there
    assert again.returncode == 0, again.stderr
    data = json.loads(again.stdout)
    assert set(data) == {"local", "global"}
    assert set(data["local"]) == LOCAL_KEYS and set(data["global"]) == GLOBAL_KEYS
    assert data["local"]["communities"] and data["local"]["evidence"][0]["chunk_id"]
    assert data["global"]["status"] == "completed" and data["local"]["offline"] is True


def test_indexing_the_shipped_documents_on_a_fresh_home_answers_with_exact_spans():
    """The indexer's offline acceptance on a home that has never seen the demo index: nothing but
    the documents shipped in the package goes in, and both flows answer from what it built."""
    from importlib import resources

    docs = resources.files("graphrag_dag.drivers.ingest.demo") / "documents"
    texts = {p.name: p.read_text(encoding="utf-8") for p in docs.iterdir() if p.name.endswith(".md")}
    home = tempfile.mkdtemp(prefix="graphrag-dag-index-")
    proc = _run(home, "index", str(docs), "--namespace", "mine", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["offline"] is True and report["documents"] == len(texts) and report["communities"] > 0
    listed = json.loads(_run(home, "namespaces", "--json").stdout)
    assert [n["namespace"] for n in listed] == ["mine"]  # the demo index was never loaded

    local = _run(home, "query", "What did Mara Quill discover about storm surges?", "--namespace", "mine", "--json")
    assert local.returncode == 0, local.stderr
    data = json.loads(local.stdout)
    assert data["status"] == "completed" and data["communities"]
    assert "Mara Quill" in [m["name"] for m in data["matched_entities"]]
    placed = [e for e in data["evidence"] if e["start"] is not None]
    assert placed
    for e in placed:  # a document id is its file name plus a content hash
        assert texts[e["document_id"].split("#")[0]][e["start"]:e["end"]] == e["text"], e
    glob = _run(home, "query", "What are the main themes?", "--namespace", "mine", "--method", "global", "--json")
    assert glob.returncode == 0, glob.stderr
    assert json.loads(glob.stdout)["status"] == "completed"
