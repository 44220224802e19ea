"""Updates that grow with the change: an unchanged rerun computes and writes nothing, a changed file
costs the LLM only its own units and the reports of the communities it touches, a removed file
leaves no trace, and a search during an update sees the namespace old or new, never both. The LLM
is the loopback OpenAI-compatible server; rows are counted in the database."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from test_indexer_llm import _calls, responder

pytestmark = pytest.mark.slow  # several index runs each

NOTES = {
    "harbour.md": "# Harbour\n\nMara Quill met Tobias Wren at Gannet Bank. Tobias Wren sailed the Skerry Star to "
                  "Corran Sound. Mara Quill kept the tide tables of Gannet Bank.",
    "school.md": "# School\n\nAlice Tern taught Mara Quill at Old Quay School. Alice Tern wrote the almanac of "
                 "Old Quay School. Hector Vane mended the roof of Old Quay School.",
    "mill.md": "# Mill\n\nHector Vane ran the Windmill Company. Peder Holm bought flour from the Windmill Company. "
               "Peder Holm and Hector Vane argued about Gannet Bank.",
    "lighthouse.md": "# Lighthouse\n\nIsla Fenn kept the Corran Light. Isla Fenn warned Tobias Wren about Storm "
                     "Cullen. The Corran Light stands above Corran Sound.",
    "market.md": "# Market\n\nRuth Amsel sold nets at Fisher Market. Ruth Amsel bought rope from Peder Holm. "
                 "Fisher Market opens beside Old Quay School.",
}


def _corpus(folder: Path) -> Path:
    folder.mkdir()
    for name, text in NOTES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _row_versions(rag: Any, namespace: str) -> set[tuple[str, str, str]]:
    """Every row of the namespace by where it is and which transaction wrote it: a row written,
    rewritten or deleted changes this set."""
    from graphrag_dag.drivers.store.writer import NS_TABLES

    out: set[tuple[str, str, str]] = set()
    with rag.store.pool.connection() as conn:
        for table in [*NS_TABLES, "namespaces"]:
            for ctid, xmin in conn.execute(f"SELECT ctid::text, xmin::text FROM {table} WHERE namespace = %s",
                                           (namespace,)).fetchall():
                out.add((table, ctid, xmin))
    return out


def _units_of(rag: Any, namespace: str, document_id: str) -> int:
    with rag.store.pool.connection() as conn:
        return conn.execute("SELECT count(*) FROM chunks WHERE namespace = %s AND document_id = %s "
                            "AND kind = 'text_unit'", (namespace, document_id)).fetchone()[0]


def _communities(rag: Any, namespace: str) -> dict[str, frozenset[str]]:
    with rag.store.pool.connection() as conn:
        rows = conn.execute("SELECT community_id, entity_id FROM community_members WHERE namespace = %s",
                            (namespace,)).fetchall()
    out: dict[str, set[str]] = {}
    for cid, eid in rows:
        out.setdefault(cid, set()).add(eid)
    return {cid: frozenset(m) for cid, m in out.items()}


def _entities_of(rag: Any, namespace: str, document_id: str) -> set[str]:
    with rag.store.pool.connection() as conn:
        return {r[0] for r in conn.execute(
            "SELECT DISTINCT u.entity_id FROM entity_units u JOIN chunks c ON c.namespace = u.namespace "
            "AND c.id = u.unit_id WHERE u.namespace = %s AND c.document_id = %s", (namespace, document_id)).fetchall()}


def _doc_id(rag: Any, namespace: str, name: str) -> str:
    return next(d["id"] for d in rag.documents(namespace) if d["id"].startswith(name + "#"))


def test_an_unchanged_update_makes_no_call_and_writes_no_row(rag, llm_server, chat_config, tmp_path):
    from graphrag_dag.drivers.ingest.indexer import index_corpus

    corpus = _corpus(tmp_path / "notes")
    llm_server.responder = responder
    first = index_corpus(rag, [corpus], "upd-same", replace=True, chat=chat_config)
    assert _calls(llm_server, "extract") == len(NOTES) and first["communities"] > 0
    before = _row_versions(rag, "upd-same")
    version = {n["namespace"]: n["index_version"] for n in rag.store.namespaces()}["upd-same"]
    llm_server.reset()
    report = index_corpus(rag, [corpus], "upd-same", update=True, chat=chat_config)
    assert llm_server.chat_requests() == []
    assert _row_versions(rag, "upd-same") == before  # not one row written, rewritten or deleted
    assert {n["namespace"]: n["index_version"] for n in rag.store.namespaces()}["upd-same"] == version
    assert report["update"]["documents"] == {"kept": len(NOTES), "added": 0, "removed": 0}
    assert report["update"]["rows"] == {"deleted": 0, "written": 0}
    assert report["entities"] == first["entities"] and report["documents"] == len(NOTES)

    # Another setting that changes results is not "unchanged": the whole namespace is redone.
    from graphrag_dag.drivers.api.options import IndexOptions

    redone = index_corpus(rag, [corpus], "upd-same", update=True, chat=chat_config,
                          options=IndexOptions(max_cluster_size=3))
    assert redone["update"]["rewritten"] is True
    rag.store.drop("upd-same")


def test_one_changed_file_costs_only_its_units_and_the_reports_it_touches(rag, llm_server, chat_config, tmp_path):
    from graphrag_dag.drivers.ingest.indexer import index_corpus

    corpus = _corpus(tmp_path / "notes")
    llm_server.responder = responder
    index_corpus(rag, [corpus], "upd-one", replace=True, chat=chat_config)
    old_doc = _doc_id(rag, "upd-one", "mill.md")
    old_communities = _communities(rag, "upd-one")
    touched = _entities_of(rag, "upd-one", old_doc)
    before = _row_versions(rag, "upd-one")

    (corpus / "mill.md").write_text(NOTES["mill.md"] + " Greta Lind carried the Windmill Company's ledgers.",
                                    encoding="utf-8")
    llm_server.reset()
    report = index_corpus(rag, [corpus], "upd-one", update=True, chat=chat_config)
    new_doc = _doc_id(rag, "upd-one", "mill.md")
    assert new_doc != old_doc
    extracts = [r for r in llm_server.chat_requests() if r.stage == "extract"]
    assert len(extracts) == _units_of(rag, "upd-one", new_doc) and all("Greta Lind" in r.prompt for r in extracts)
    # A report is written again only for a community whose members changed, or that holds an
    # entity the changed file mentions (its description, edges or claims may have changed).
    touched |= _entities_of(rag, "upd-one", new_doc)
    new_communities = _communities(rag, "upd-one")
    kept = set(old_communities.values())
    redo = [c for c, members in new_communities.items() if members not in kept or members & touched]
    assert 0 < _calls(llm_server, "report") <= len(redo) < len(new_communities)
    assert report["update"]["documents"] == {"kept": len(NOTES) - 1, "added": 1, "removed": 1}
    assert report["update"]["tables"]["documents"] == {"deleted": 1, "written": 1}
    vectors = report["update"]["vectors"]
    assert 0 < vectors["embedded"] < vectors["reused"]  # the namespace's vectors of unchanged texts are kept
    after = _row_versions(rag, "upd-one")
    assert len(before & after) > len(before) // 2  # most rows were left as they were
    assert report["update"]["rows"]["written"] == len({r for r in after - before if r[0] != "namespaces"})
    rag.store.drop("upd-one")


def _mentions(rag: Any, namespace: str, needles: set[str]) -> dict[str, int]:
    """How many rows of each namespace table hold any of `needles` anywhere in their text form."""
    from graphrag_dag.drivers.store.writer import NS_TABLES

    out: dict[str, int] = {}
    with rag.store.pool.connection() as conn:
        for table in NS_TABLES:
            n = conn.execute(f"SELECT count(*) FROM {table} t WHERE namespace = %s AND "
                             "EXISTS (SELECT 1 FROM unnest(%s::text[]) x WHERE strpos(t::text, x) > 0)",
                             (namespace, sorted(needles))).fetchone()[0]
            if n:
                out[table] = n
    return out


def test_a_removed_file_leaves_no_trace(rag, tmp_path):
    from graphrag_dag.dataflows.common.errors import BadInput
    from graphrag_dag.drivers.ingest.indexer import index_corpus

    corpus = _corpus(tmp_path / "notes")
    index_corpus(rag, [corpus], "upd-gone", replace=True, offline=True)
    doc = _doc_id(rag, "upd-gone", "market.md")
    with rag.store.pool.connection() as conn:
        chunks = {r[0] for r in conn.execute("SELECT id FROM chunks WHERE namespace = 'upd-gone' AND document_id = %s",
                                             (doc,)).fetchall()}
        claims = {r[0] for r in conn.execute("SELECT id FROM claims WHERE namespace = 'upd-gone' AND document_id = %s",
                                             (doc,)).fetchall()}
        only_there = {r[0] for r in conn.execute("SELECT id FROM entities WHERE namespace = 'upd-gone' AND name IN "
                                                 "('Ruth Amsel', 'Fisher Market')").fetchall()}
    assert chunks and claims and len(only_there) == 2
    assert _mentions(rag, "upd-gone", {doc})

    with pytest.raises(BadInput, match="no such document"):
        rag.delete_documents("upd-gone", ["market.md", "nowhere.md"])
    assert _doc_id(rag, "upd-gone", "market.md") == doc  # a refused deletion removes nothing

    report = rag.delete_documents("upd-gone", ["market.md"])
    assert report["deleted_documents"] == [doc] and report["documents"] == len(NOTES) - 1
    assert _mentions(rag, "upd-gone", {doc, *chunks, *claims, *only_there}) == {}
    assert "Peder Holm" in {e["name"] for e in rag.local_search("Who is Peder Holm?", "upd-gone",
                                                                offline=True)["matched_entities"]}

    # The same through an update of the folder: the file is gone, and so is all it said.
    (corpus / "lighthouse.md").unlink()
    light = _doc_id(rag, "upd-gone", "lighthouse.md")
    synced = index_corpus(rag, [corpus], "upd-gone", update=True, offline=True)
    assert synced["update"]["documents"]["removed"] == 1
    assert _mentions(rag, "upd-gone", {light, "Isla Fenn", "Corran Light"}) == {}
    with pytest.raises(BadInput, match="every document"):
        rag.delete_documents("upd-gone", [d["id"] for d in rag.documents("upd-gone")])
    rag.store.drop("upd-gone")


def test_a_search_during_an_update_sees_the_old_namespace_or_the_new(rag, tmp_path):
    from graphrag_dag.drivers.ingest.indexer import index_corpus

    corpus = _corpus(tmp_path / "notes")
    for n in range(40):  # enough text that the update's write takes a while
        (corpus / f"log{n:02d}.md").write_text(f"# Log {n}\n\n" + " ".join(
            f"Keeper {n} noted the tide at Gannet Bank on day {d}." for d in range(30)), encoding="utf-8")
    index_corpus(rag, [corpus], "upd-live", replace=True, offline=True)
    old = _doc_id(rag, "upd-live", "harbour.md")
    (corpus / "harbour.md").write_text(NOTES["harbour.md"].replace("Skerry Star", "Skerry Moon"), encoding="utf-8")
    done = threading.Event()
    failure: list[BaseException] = []

    def update() -> None:
        try:
            index_corpus(rag, [corpus], "upd-live", update=True, offline=True)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failure.append(exc)
        finally:
            done.set()

    worker = threading.Thread(target=update)
    worker.start()
    seen: list[frozenset[str]] = []
    while not done.is_set():
        result = rag.local_search("Where did Tobias Wren sail the Skerry Star or the Skerry Moon?", "upd-live",
                                  offline=True)
        docs = {e["document_id"] for e in result["evidence"] if e.get("document_id")}
        seen.append(frozenset(d for d in docs if d.startswith("harbour.md#")))
    worker.join()
    assert not failure, failure
    new = _doc_id(rag, "upd-live", "harbour.md")
    assert new != old and len(seen) >= 2
    assert all(len(s) <= 1 for s in seen)  # never the old and the new harbour note in one answer
    assert {old, new} >= set().union(*seen)
    final = rag.local_search("Where did Tobias Wren sail the Skerry Moon?", "upd-live", offline=True)
    assert new in {e["document_id"] for e in final["evidence"]}
    rag.store.drop("upd-live")


def test_delete_documents_on_the_command_line_refuses_bad_names_in_one_line(rag, cli_env, tmp_path):
    import json
    import subprocess
    import sys

    from graphrag_dag.drivers.ingest.indexer import index_corpus
    from shared_data import PROJECT_ROOT

    corpus = _corpus(tmp_path / "notes")
    index_corpus(rag, [corpus], "upd-cli", replace=True, offline=True)

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", *args], env=cli_env, cwd=PROJECT_ROOT,
                              capture_output=True, text=True, timeout=300)

    listed = cli("documents", "--namespace", "upd-cli")
    assert listed.returncode == 0 and sorted(line.split("\t")[0].split("#")[0] for line in
                                             listed.stdout.splitlines()) == sorted(NOTES)
    bad = cli("delete-documents", "nowhere.md", "--namespace", "upd-cli")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "graphrag-dag: error: no such document: nowhere.md (see `graphrag-dag documents`)"]
    missing = cli("delete-documents", "mill.md", "--namespace", "no-such-ns")
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert len(rag.documents("upd-cli")) == len(NOTES)  # nothing was removed
    done = cli("delete-documents", "mill.md", "--namespace", "upd-cli", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["documents"] == len(NOTES) - 1 and report["update"]["documents"]["removed"] == 1
    assert report["deleted_documents"][0].startswith("mill.md#")
    rag.store.drop("upd-cli")
