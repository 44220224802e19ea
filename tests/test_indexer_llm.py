"""The indexer with an LLM: the real openai client against the loopback OpenAI-compatible server.
One extraction call per text unit and one report call per community; a rerun makes no
extraction call (the cache); a malformed reply is retried once, then the unit is skipped with a
warning."""

from __future__ import annotations

import pytest

import json
import re
from importlib import resources

from llm_server import Recorded, Reply

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes


DEMO_DOCS = resources.files("graphrag_dag.drivers.ingest.demo") / "documents"
NAME_RE = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)+\b")
BAD_UNIT_MARK = "Storm Orla"  # the unit whose passage mentions this gets malformed replies


def _passage(rec: Recorded) -> str:
    return rec.prompt.split("Passage:\n", 1)[-1]


def extraction_reply(rec: Recorded) -> Reply:
    """A model that names the passage's two-word capitalised names, relates neighbours and quotes
    one sentence of the passage as a claim about the first name."""
    passage = _passage(rec)
    names = list(dict.fromkeys(NAME_RE.findall(passage)))
    sentence = next((s for s in re.split(r"(?<=[.!?])\s+", passage) if names and names[0] in s), "")
    return Reply(json.dumps({
        "entities": [{"name": n, "type": "PERSON", "description": f"{n} appears in: {passage[:30]!r}.",
                      "aliases": [n.split()[-1]] if n == "Mara Quill" else []} for n in names],
        "relationships": [{"source": a, "target": b, "description": f"{a} and {b}", "strength": 8}
                          for a, b in zip(names, names[1:], strict=False)],
        "claims": [{"subject": names[0], "object": None, "type": "fact", "status": "TRUE", "start_date": None,
                    "end_date": None, "description": f"About {names[0]}.", "quote": sentence.strip()}]
        if names and sentence else [],
    }))


def responder(rec: Recorded) -> Reply:
    if rec.stage == "extract":
        if BAD_UNIT_MARK in _passage(rec):
            return Reply("this is not JSON")
        return extraction_reply(rec)
    if rec.stage == "describe":
        name = re.search(r"entity, (.+?)\. Write", rec.prompt.replace("\n", " "))
        return Reply(f"One description of {name.group(1) if name else 'it'}.")
    if rec.stage == "report":
        return Reply(json.dumps({"title": "A community", "summary": "Members of the harbour story.", "rating": 7,
                                 "findings": [{"summary": "Finding", "explanation": "Explained."}]}))
    return Reply("unexpected stage")


def _calls(server, stage: str) -> int:
    return sum(1 for r in server.chat_requests() if r.stage == stage)


def test_llm_indexing_calls_once_per_unit_and_community_and_caches(rag, llm_server, chat_config):
    from graphrag_dag.drivers.ingest.indexer import index_corpus

    llm_server.responder = responder
    first = index_corpus(rag, [str(DEMO_DOCS)], "idx-llm", replace=True, chat=chat_config)
    units = first["chunks"] - len(rag.store.scoped("idx-llm").rows(
        "SELECT id FROM chunks WHERE namespace = %(ns)s AND kind = 'evidence'", {"ns": "idx-llm"}))
    bad = [r for r in llm_server.chat_requests() if r.stage == "extract" and BAD_UNIT_MARK in _passage(r)]
    assert len(bad) == 2  # the malformed reply was retried once
    assert _calls(llm_server, "extract") == units + 1  # one call per unit, plus that retry
    assert _calls(llm_server, "report") == first["communities"] > 0
    assert any("skipped: extraction by LLM" in w for w in first["warnings"])
    assert first["offline"] is False and first["llm"]["by_stage"]["extract"]["calls"] == units + 1

    db = rag.store.scoped("idx-llm")
    names = {r[0] for r in db.rows("SELECT name FROM entities WHERE namespace = %(ns)s", {"ns": "idx-llm"})}
    assert {"Mara Quill", "Corran Sound"} <= names and "Storm Orla" not in names
    titles = {r[0] for r in db.rows("SELECT title FROM community_summaries WHERE namespace = %(ns)s",
                                    {"ns": "idx-llm"})}
    assert titles == {"A community"}
    docs = dict(db.rows("SELECT id, text FROM documents WHERE namespace = %(ns)s", {"ns": "idx-llm"}))
    quotes = db.rows("SELECT document_id, start_char, end_char, quote FROM claims WHERE namespace = %(ns)s"
                     " AND quote IS NOT NULL", {"ns": "idx-llm"})
    assert quotes and all(docs[d][s:e] == q for d, s, e, q in quotes)
    described = dict(db.rows("SELECT name, description FROM entities WHERE namespace = %(ns)s", {"ns": "idx-llm"}))
    # An entity that several text units describe gets one description, written by one call.
    rewritten = {n for n, d in described.items() if d == f"One description of {n}."}
    assert rewritten and _calls(llm_server, "describe") == len(rewritten)
    once = [n for n, d in described.items() if n not in rewritten]
    assert once and all(" appears in: " in described[n] for n in once)  # described once: as the model said
    weights = {r[0] for r in db.rows("SELECT weight FROM edges WHERE namespace = %(ns)s", {"ns": "idx-llm"})}
    assert weights and all(w > 0 and (w * 10) % 8 == 0 for w in weights)  # Σ strength/10 per instance

    llm_server.reset()
    again = index_corpus(rag, [str(DEMO_DOCS)], "idx-llm", replace=True, chat=chat_config)
    assert _calls(llm_server, "extract") == 2  # only the unit that never succeeded is asked again
    assert _calls(llm_server, "describe") == 0  # descriptions were kept too
    assert again["extraction_cache_hits"] == units - 1
    assert again["entities"] == first["entities"] and again["edges"] == first["edges"]

    res = rag.local_search("What did Mara Quill study?", "idx-llm")
    assert "Mara Quill" in [m["name"] for m in res["matched_entities"]]
    rag.store.drop("idx-llm")


def test_offline_flag_makes_no_call(cli_env, llm_server, rag):
    import subprocess
    import sys

    from shared_data import PROJECT_ROOT

    env = {**cli_env, "OPENAI_BASE_URL": llm_server.base_url, "OPENAI_API_KEY": "test"}
    proc = subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", "index", str(DEMO_DOCS), "--namespace",
                           "idx-offline", "--replace", "--offline", "--json"], env=env, capture_output=True, text=True,
                          cwd=PROJECT_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["offline"] is True and llm_server.chat_requests() == []
    rag.store.drop("idx-offline")


def test_kill_9_leaves_the_namespace_as_it_was_and_the_rerun_uses_the_cache(cli_env, llm_server, rag, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from shared_data import PROJECT_ROOT

    for n in range(12):
        (tmp_path / f"note{n:02d}.txt").write_text(f"Harbour note {n}. Mara Quill met Tobias Wren at Gannet Bank "
                                                   f"on visit {n}. Alice Tern logged the tide.", encoding="utf-8")
    calls_done: list[float] = []

    def slow(rec: Recorded) -> Reply:
        if rec.stage == "extract":
            calls_done.append(time.monotonic())
            reply = extraction_reply(rec)
            reply.delay = 0.25
            return reply
        return responder(rec)

    llm_server.responder = slow
    env = {**cli_env, "OPENAI_BASE_URL": llm_server.base_url, "OPENAI_API_KEY": "test",
           "GRAPHRAG_DAG_CHAT_MODEL": "test-model"}
    args = [sys.executable, "-m", "graphrag_dag.drivers.cli", "index", str(tmp_path), "--namespace", "idx-kill",
            "--extraction-concurrency", "1", "--json"]
    before = {n["namespace"] for n in rag.store.namespaces()}
    proc = subprocess.Popen(args, env=env, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(calls_done) < 5 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    assert {n["namespace"] for n in rag.store.namespaces()} == before  # nothing half-written
    cached = rag.store.pool  # the cache rows committed as each reply arrived
    with cached.connection() as conn:
        kept = conn.execute("SELECT count(*) FROM extraction_cache WHERE namespace = 'idx-kill'").fetchone()[0]
    assert 3 <= kept < 12
    llm_server.reset()
    llm_server.responder = responder
    again = subprocess.run(args, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["extraction_cache_hits"] == kept
    assert _calls(llm_server, "extract") == 12 - kept
    assert report["documents"] == 12 and "idx-kill" in {n["namespace"] for n in rag.store.namespaces()}
    rag.store.drop("idx-kill")
    with cached.connection() as conn:  # a drop forgets the cache too
        assert conn.execute("SELECT count(*) FROM extraction_cache WHERE namespace = 'idx-kill'").fetchone()[0] == 0


def test_update_extracts_only_new_text_and_drops_what_is_gone(rag, llm_server, chat_config, tmp_path):
    import shutil

    from graphrag_dag.dataflows.common.errors import BadInput
    from graphrag_dag.drivers.ingest.indexer import index_corpus

    corpus = tmp_path / "corpus"
    shutil.copytree(str(DEMO_DOCS), corpus)
    llm_server.responder = responder
    with __import__("pytest").raises(BadInput, match="does not exist"):
        index_corpus(rag, [corpus], "idx-upd", update=True, chat=chat_config)
    first = index_corpus(rag, [corpus], "idx-upd", chat=chat_config)
    reports_before = _calls(llm_server, "report")
    assert reports_before == first["communities"]

    (corpus / "d5.md").write_text("# Ferry Log\n\nCaptain Ines Varga ran the Skerry Ferry Company from Old Quay "
                                  "for twenty years.", encoding="utf-8")
    llm_server.reset()
    added = index_corpus(rag, [corpus], "idx-upd", update=True, chat=chat_config)
    extracts = [r for r in llm_server.chat_requests() if r.stage == "extract"]
    assert len(extracts) == 1 + 2 and all("Ines Varga" in _passage(r) or BAD_UNIT_MARK in _passage(r)
                                          for r in extracts)  # the new document, and the unit that never parsed
    assert added["documents"] == first["documents"] + 1
    assert _calls(llm_server, "report") < added["communities"]  # unchanged communities kept their reports
    names = lambda: {r[0] for r in rag.store.scoped("idx-upd").rows(  # noqa: E731
        "SELECT name FROM entities WHERE namespace = %(ns)s", {"ns": "idx-upd"})}
    assert "Captain Ines Varga" in names()  # as the test model names it

    (corpus / "d5.md").unlink()
    synced = index_corpus(rag, [corpus], "idx-upd", update=True, chat=chat_config)
    assert synced["documents"] == first["documents"] and "Captain Ines Varga" not in names()
    assert synced["entities"] == first["entities"]
    with __import__("pytest").raises(BadInput, match="do not go together"):
        index_corpus(rag, [corpus], "idx-upd", update=True, replace=True, chat=chat_config)
    rag.store.drop("idx-upd")


def test_gleaning_asks_for_what_was_missed_and_merges_it(rag, llm_server, chat_config, tmp_path):
    from graphrag_dag.drivers.ingest.indexer import IndexOptions, index_corpus

    (tmp_path / "a.txt").write_text("Mara Quill met Tobias Wren at Gannet Bank. The ferry Skerry Star waited.",
                                    encoding="utf-8")

    def gleaner(rec: Recorded) -> Reply:
        if rec.stage == "glean":
            assert "Found so far:" in rec.prompt and "Mara Quill" in rec.prompt
            return Reply(json.dumps({"entities": [{"name": "Skerry Star", "type": "OTHER", "description": "A ferry.",
                                                   "aliases": []}], "relationships": [], "claims": []}))
        return responder(rec)

    llm_server.responder = gleaner
    report = index_corpus(rag, [tmp_path], "idx-glean", replace=True, chat=chat_config,
                          options=IndexOptions(gleanings=1))
    assert _calls(llm_server, "extract") == 1 and _calls(llm_server, "glean") == 1
    assert report["llm"]["by_stage"]["glean"]["calls"] == 1
    names = {r[0] for r in rag.store.scoped("idx-glean").rows("SELECT name FROM entities WHERE namespace = %(ns)s",
                                                              {"ns": "idx-glean"})}
    assert {"Mara Quill", "Skerry Star"} <= names
    llm_server.reset()
    index_corpus(rag, [tmp_path], "idx-glean", update=True, chat=chat_config, options=IndexOptions(gleanings=1))
    assert _calls(llm_server, "extract") == _calls(llm_server, "glean") == 0  # the merged reading was cached
    rag.store.drop("idx-glean")


def test_reports_are_written_bottom_up_when_a_parent_does_not_fit(rag, llm_server, chat_config):
    from graphrag_dag.drivers.ingest.indexer import IndexOptions, index_corpus

    llm_server.responder = responder
    index_corpus(rag, [str(DEMO_DOCS)], "idx-bottom-up", replace=True, chat=chat_config,
                 options=IndexOptions(report_budget=40, max_cluster_size=4))
    db = rag.store.scoped("idx-bottom-up")
    parents = db.rows("SELECT DISTINCT parent_id FROM communities WHERE namespace = %(ns)s AND parent_id IS NOT NULL",
                      {"ns": "idx-bottom-up"})
    assert parents, "the hierarchy has at least two levels"
    reports = [r for r in llm_server.chat_requests() if r.stage == "report"]
    from_children = [r for r in reports if "Sub-community report: A community: Members of the harbour story." in r.prompt]
    assert len(from_children) >= 1
    order = [r.started for r in reports]
    first_parent = min(r.started for r in from_children)
    assert any(t < first_parent for t in order)  # children were written before their parents
    rag.store.drop("idx-bottom-up")
