"""`graphrag-dag export --format graphrag`: Microsoft GraphRAG v3 parquet with the shared outputs'
column names and types, which our importer reads back to the same counts."""

from __future__ import annotations

import pytest

import json
import subprocess
import sys
from importlib import resources

import pyarrow.parquet as pq

from shared_data import PROJECT_ROOT, graphrag_output

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes


DEMO_DOCS = resources.files("graphrag_dag.drivers.ingest.demo") / "documents"


def cli(env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", *args], env=env, capture_output=True,
                          text=True, cwd=PROJECT_ROOT, timeout=300)


def test_export_then_import_gives_the_same_counts(cli_env, rag, tmp_path):
    assert cli(cli_env, "index", str(DEMO_DOCS), "--namespace", "exp-src", "--replace").returncode == 0
    out = tmp_path / "v3"
    proc = cli(cli_env, "export", "--namespace", "exp-src", "--format", "graphrag", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    written = json.loads(proc.stdout)
    proc = cli(cli_env, "import-graphrag", str(out), "--namespace", "exp-back", "--replace", "--json")
    assert proc.returncode == 0, proc.stderr
    back = json.loads(proc.stdout)
    source = rag.store.stats("exp-src")
    assert {k: v for k, v in back.items() if k != "warnings"} == source  # evidence re-cut the same way
    count = "SELECT count(*) FROM chunks WHERE namespace = %(ns)s AND kind = 'text_unit'"
    assert rag.store.scoped("exp-src").rows(count, {"ns": "exp-src"}) == \
        rag.store.scoped("exp-back").rows(count, {"ns": "exp-back"}) == [(written["text_units"],)]
    assert back["warnings"] == []
    pairs = "SELECT e.name, u.unit_id FROM entity_units u JOIN entities e ON e.namespace = u.namespace " \
            "AND e.id = u.entity_id WHERE u.namespace = %(ns)s ORDER BY 1, 2"
    src_pairs = rag.store.scoped("exp-src").rows(pairs, {"ns": "exp-src"})
    assert src_pairs and src_pairs == rag.store.scoped("exp-back").rows(pairs, {"ns": "exp-back"})  # text_unit_ids
    res = rag.local_search("Who is Mara Quill?", "exp-back")
    assert "Mara Quill" in [m["name"] for m in res["matched_entities"]]
    for ns in ("exp-src", "exp-back"):
        rag.store.drop(ns)


def test_export_schema_matches_graphrag_v3(cli_env, rag, tmp_path):
    out = tmp_path / "v3"
    proc = cli(cli_env, "export", "--namespace", "demo", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    reference = graphrag_output("christmas-carol-3.1.2")
    for ref in sorted(reference.glob("*.parquet")):
        ours = pq.read_schema(out / ref.name)
        theirs = pq.read_schema(ref)
        extra = {"aliases"} if ref.name == "entities.parquet" else set()
        assert set(ours.names) == set(theirs.names) | extra, ref.name
        for name in theirs.names:
            assert str(ours.field(name).type) == str(theirs.field(name).type), (ref.name, name)


def test_export_refuses_a_folder_in_use_and_an_unknown_namespace(cli_env, tmp_path):
    (tmp_path / "keep.txt").write_text("mine", encoding="utf-8")
    proc = cli(cli_env, "export", "--namespace", "demo", "--out", str(tmp_path))
    assert proc.returncode == 2 and "new or empty folder" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
    proc = cli(cli_env, "export", "--namespace", "no-such-ns", "--out", str(tmp_path / "x"))
    assert proc.returncode == 2 and "unknown namespace" in proc.stderr
