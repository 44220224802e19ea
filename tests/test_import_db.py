"""Importing every real GraphRAG output into PostgreSQL: counts, queries, spans, atomicity."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from shared_data import PROJECT_ROOT

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes


FOLDERS = ["christmas-carol-0.5.0", "christmas-carol-1.2.0", "christmas-carol-2.7.0", "christmas-carol-3.1.2",
           "huawei-zh-3.x", "microsoft-wiki-2.3.0", "operation-dulce-3.1.2"]


def _folder(name: str) -> Path:
    from shared_data import graphrag_output

    return graphrag_output(name)


def _rows(folder: Path, *names: str) -> int:
    for n in names:
        for candidate in (folder / f"{n}.parquet", folder / f"create_final_{n}.parquet"):
            if candidate.exists():
                return pq.read_metadata(candidate).num_rows
    return 0


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", *args], capture_output=True, text=True, env=env,
                          cwd=PROJECT_ROOT, timeout=300)


def _ns(name: str) -> str:
    return "imp-" + name.replace(".", "-")


@pytest.fixture(scope="module")
def imported(rag) -> dict[str, dict]:
    from graphrag_dag.drivers.ingest.importer import import_graphrag

    out = {}
    for name in FOLDERS:
        out[name] = import_graphrag(rag, _folder(name), _ns(name), replace=True)
    return out


@pytest.mark.parametrize("name", FOLDERS)
def test_stats_equal_source(rag, imported, name):
    folder = _folder(name)
    stats = rag.store.stats(_ns(name))
    assert stats["edges"] == _rows(folder, "relationships")
    assert stats["communities"] == _rows(folder, "communities")
    assert stats["community_summaries"] == _rows(folder, "community_reports")
    assert stats["claims"] == _rows(folder, "covariates")
    assert stats["documents"] == _rows(folder, "documents")
    assert stats["entities"] >= _rows(folder, "entities")
    assert stats["chunks"] >= _rows(folder, "text_units")
    assert {k: v for k, v in imported[name].items() if k != "warnings"} == stats


@pytest.mark.parametrize("name", FOLDERS)
def test_queries_on_imported_folder(rag, imported, name):
    ns = _ns(name)
    top = rag.store.admin_rows("SELECT name FROM entities WHERE namespace = %s ORDER BY degree DESC, name LIMIT 1",
                               (ns,))[0][0]
    local = rag.local_search(f"What is known about {top}?", ns)
    assert local["communities"], name
    assert local["evidence"], name
    assert top in [m["name"] for m in local["matched_entities"]]
    assert rag.global_search("What are the main themes?", ns)["status"] == "completed"


def test_human_output_shows_short_ids_and_titles(rag, imported, cli_env):
    """GraphRAG's ids are 36 to 128 characters; a person reads them shortened, with the document's
    title, in lines that fit a terminal. The JSON keeps them whole."""
    ns = _ns("christmas-carol-3.1.2")
    proc = _cli(cli_env, "query", "Who is Scrooge's nephew?", "--namespace", ns)
    assert proc.returncode == 0, proc.stderr
    evidence = proc.stdout.split("Evidence:")[1].split("Sources:")[0].splitlines()[1:]
    assert evidence and all(len(line) <= 120 for line in evidence), evidence
    assert not re.search(r"[0-9a-f-]{30,}", proc.stdout), proc.stdout
    assert "…" in proc.stdout and "a-christmas-carol" in proc.stdout.split("Evidence:")[1]
    as_json = json.loads(_cli(cli_env, "query", "Who is Scrooge's nephew?", "--namespace", ns, "--json").stdout)
    assert any(len(e["id"]) > 30 for e in as_json["evidence"])


def test_offline_global_answer_is_whole_informative_sentences(rag, imported):
    """The offline answer about a novel is built from the reports and their claims, not from
    dialogue: every sentence is whole, states something, and cites its community; some cite the
    claim they came from."""
    from graphrag_dag.dataflows.common.citations import citable_ids

    ns = _ns("christmas-carol-3.1.2")
    res = rag.global_search("How does Scrooge change over the course of the story?", ns)
    assert res["status"] == "completed" and res["answer_method"] == "extractive"
    claims = {r[0] for r in rag.store.admin_rows("SELECT id FROM claims WHERE namespace = %s", (ns,))}
    sentences = [s.strip() for s in re.split(r"\s*\[[^\]]+\]", res["answer"].split("\n", 1)[1]) if s.strip("- \n")]
    assert len(sentences) >= 6
    for sentence in sentences:
        text = sentence.lstrip("- ").strip()
        assert len(text.split()) >= 6 and text[0] not in "'\"‘“" and not text[0].islower(), text
    cited = citable_ids(res["answer"])
    assert any(c.startswith("community ") for c in cited) and cited & claims
    assert "said Scrooge" not in res["answer"]


@pytest.mark.parametrize("name", [f for f in FOLDERS if f.startswith("christmas")])
def test_evidence_spans_match_document_text(rag, imported, name):
    ns = _ns(name)
    docs = dict(rag.store.admin_rows("SELECT id, text FROM documents WHERE namespace = %s", (ns,)))
    res = rag.local_search("What happens to Scrooge and Marley on Christmas Eve?", ns)
    assert res["evidence"]
    for item in res["evidence"]:
        assert item["document_id"] in docs
        assert item["start"] is not None, item["id"]
        assert docs[item["document_id"]][item["start"]:item["end"]] == item["text"], item["id"]


def test_reimport_with_replace_is_identical(rag, imported):
    from graphrag_dag.drivers.ingest.importer import import_graphrag

    name = "christmas-carol-3.1.2"
    ns = _ns(name)
    question = "Who is Bob Cratchit?"
    before_version = rag.store.namespace_info(ns).index_version
    first = rag.local_search(question, ns)
    report = import_graphrag(rag, _folder(name), ns, replace=True)
    assert rag.store.namespace_info(ns).index_version != before_version
    second = rag.local_search(question, ns)
    assert {k: v for k, v in report.items() if k != "warnings"} == rag.store.stats(ns)
    for key in ("answer", "communities", "evidence", "matched_entities", "parsed_query"):
        assert first[key] == second[key], key


def test_existing_namespace_needs_replace(rag, imported):
    from graphrag_dag.dataflows.common.errors import BadInput
    from graphrag_dag.drivers.ingest.importer import import_graphrag

    with pytest.raises(BadInput, match="--replace"):
        import_graphrag(rag, _folder("microsoft-wiki-2.3.0"), _ns("microsoft-wiki-2.3.0"))


@pytest.mark.parametrize("case", ["truncated", "not-graphrag", "missing"])
def test_bad_source_exits_2_and_leaves_namespace_unchanged(rag, imported, cli_env, tmp_path, case):
    ns = _ns("christmas-carol-2.7.0")
    before = rag.store.stats(ns)
    version = rag.store.namespace_info(ns).index_version
    if case == "truncated":
        src = tmp_path / "cc"
        shutil.copytree(_folder("christmas-carol-2.7.0"), src)
        data = (src / "relationships.parquet").read_bytes()
        (src / "relationships.parquet").write_bytes(data[: len(data) // 2])
    elif case == "not-graphrag":
        src = tmp_path / "plain"
        src.mkdir()
        (src / "notes.txt").write_text("hello")
    else:
        src = tmp_path / "does-not-exist"
    proc = _cli(cli_env, "import-graphrag", str(src), "--namespace", ns, "--replace", "--json")
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("[graphrag-dag]")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert rag.store.stats(ns) == before
    assert rag.store.namespace_info(ns).index_version == version


def test_cli_import_json_and_stats(rag, cli_env):
    name = "microsoft-wiki-2.3.0"
    proc = _cli(cli_env, "import-graphrag", str(_folder(name)), "--namespace", "cli-wiki", "--replace", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert set(report) == {"documents", "chunks", "entities", "aliases", "edges", "communities",
                           "community_summaries", "claims", "warnings"}
    stats = json.loads(_cli(cli_env, "stats", "--namespace", "cli-wiki", "--json").stdout)
    assert {k: v for k, v in report.items() if k != "warnings"} == stats
    assert "read" in proc.stderr  # progress per table on stderr


def test_declared_source_embedding_model_keeps_the_vectors_and_embeds_queries_with_it(rag, cli_env, llm_server):
    """GraphRAG does not record which model made its vectors; declared, they are kept, the
    namespace records the model, and queries are embedded with it at the configured endpoint."""
    pytest.importorskip("lancedb")
    folder = _folder("operation-dulce-3.1.2")  # 3,072-d vectors in lancedb/
    endpoint = {**cli_env, "OPENAI_BASE_URL": llm_server.base_url, "OPENAI_API_KEY": "test"}
    args = ("import-graphrag", str(folder), "--namespace", "declared", "--embeddings", "keep",
            "--source-embedding-model", "text-embedding-3-large", "--json")
    without = _cli(cli_env, *args)
    assert without.returncode == 2 and without.stderr.count("\n") == 1
    assert "needs an OpenAI-compatible endpoint" in without.stderr
    assert not any(n["namespace"] == "declared" for n in rag.store.namespaces())
    done = _cli(endpoint, *args)
    assert done.returncode == 0, done.stderr
    assert not any("recomput" in w for w in json.loads(done.stdout)["warnings"])
    try:
        info = rag.store.namespace_info("declared")
        assert (info.embed_model, info.embed_dim) == ("text-embedding-3-large", 3072)
        embedded = {r.body["model"] for r in llm_server.requests if r.path == "/embeddings"}
        assert embedded == {"text-embedding-3-large"}  # the evidence chunks GraphRAG never embedded
        before = len(llm_server.requests)
        query = _cli(endpoint, "query", "Who is Alex Mercer?", "--namespace", "declared", "--offline", "--json")
        assert query.returncode == 0, query.stderr
        assert json.loads(query.stdout)["communities"]
        assert any(r.path == "/embeddings" and r.body["model"] == "text-embedding-3-large"
                   for r in llm_server.requests[before:])
        refused = _cli(cli_env, "query", "Who is Alex Mercer?", "--namespace", "declared")
        assert refused.returncode == 2 and "text-embedding-3-large" in refused.stderr
        assert "needs an OpenAI-compatible endpoint" in refused.stderr
    finally:
        rag.store.drop("declared")
