"""The indexer (issue 12, offline part): a user's own documents become a namespace that local and
global search answer from, with evidence whose spans slice the document text exactly.

Real parts throughout: the embedded PostgreSQL, the Hamilton index driver, jieba and janome with
the dictionaries in their wheels, graspologic-native's Leiden, and the CLI as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from graphrag_dag.dataflows.index import extract, units
from graphrag_dag.dataflows.index.relations import edges, sentences
from graphrag_dag.dataflows.index.names import resolution_key
from graphrag_dag.dataflows.index.resolution import entity_index
from shared_data import PROJECT_ROOT, graphrag_output

DEMO_DOCS = resources.files("graphrag_dag.drivers.ingest.demo") / "documents"
JAPANESE = """# 霧ヶ峰の灯台

山本花子は霧ヶ峰灯台の最後の灯台守だった。彼女は毎晩、北浜港に入る漁船のために灯りをともした。
一九八七年に灯台が自動化されると、山本花子は北浜港の漁業組合で記録係として働いた。
灯台の日誌は今も北浜港の資料館に保管されている。"""


def cli(env, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", *args], env=env, capture_output=True,
                          text=True, cwd=PROJECT_ROOT, timeout=timeout)


def _spans_slice_documents(rag, namespace: str, evidence: list[dict]) -> int:
    docs = dict(rag.store.scoped(namespace).rows("SELECT id, text FROM documents WHERE namespace = %(ns)s",
                                                 {"ns": namespace}))
    placed = [e for e in evidence if e["start"] is not None]
    for e in placed:
        assert docs[e["document_id"]][e["start"]:e["end"]] == e["text"], e
    return len(placed)


@pytest.fixture(scope="module")
def demo_index(cli_env):
    proc = cli(cli_env, "index", str(DEMO_DOCS), "--namespace", "idx-demo", "--replace", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_indexing_the_demo_documents_offline_makes_a_complete_namespace(demo_index, rag):
    report = demo_index
    assert report["documents"] == 4 and report["warnings"] == []
    for key in ("chunks", "entities", "edges", "communities", "community_summaries", "claims"):
        assert report[key] > 0, key
    assert report["community_summaries"] == report["communities"]
    assert {"corpus", "text_units", "chunk_mentions", "communities", "community_summaries", "vectors"} <= set(
        report["timings_ms"])
    assert rag.store.stats("idx-demo") == {k: report[k] for k in rag.store.stats("idx-demo")}


def test_local_and_global_search_answer_from_the_index_with_exact_spans(demo_index, rag):
    local = rag.local_search("What did Mara Quill discover about storm surges?", "idx-demo")
    assert local["status"] == "completed"
    assert "Mara Quill" in [m["name"] for m in local["matched_entities"]]
    assert local["communities"] and local["evidence"]
    assert _spans_slice_documents(rag, "idx-demo", local["evidence"]) >= 3
    assert "Quill" in local["answer"]
    glob = rag.global_search("What are the main themes?", "idx-demo")
    assert glob["status"] == "completed" and glob["map_answers"]


def test_names_resolve_to_one_entity_with_aliases(demo_index, rag):
    db = rag.store.scoped("idx-demo")
    names = {r[0] for r in db.rows("SELECT name FROM entities WHERE namespace = %(ns)s", {"ns": "idx-demo"})}
    assert {"Mara Quill", "Greywick Lighthouse Institute", "Corran Sound", "陈大山", "周明"} <= names
    assert "Quill" not in names  # "Quill" after "Mara Quill" in the same document is her
    aliases = {r[0]: r[1] for r in db.rows(
        "SELECT a.alias, e.name FROM entity_aliases a JOIN entities e ON e.namespace = a.namespace AND e.id = a.entity_id"
        " WHERE a.namespace = %(ns)s", {"ns": "idx-demo"})}
    assert aliases.get("Quill") == "Mara Quill"


@pytest.mark.slow
def test_an_existing_namespace_needs_replace_and_a_corpus_needs_text(cli_env, demo_index, rag, tmp_path):
    version = rag.store.namespace_info("idx-demo").index_version
    proc = cli(cli_env, "index", str(DEMO_DOCS), "--namespace", "idx-demo")
    assert proc.returncode == 2 and "--replace" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert rag.store.namespace_info("idx-demo").index_version == version
    (tmp_path / "empty.txt").write_text("   \n", encoding="utf-8")
    (tmp_path / "binary.txt").write_bytes(b"\xff\xfe\x00\x00\x01\x02garbage\x00")
    proc = cli(cli_env, "index", str(tmp_path), "--namespace", "idx-nothing")
    assert proc.returncode == 2 and "no readable text" in proc.stderr and "Traceback" not in proc.stderr
    assert "idx-nothing" not in {n["namespace"] for n in rag.store.namespaces()}
    proc = cli(cli_env, "index", str(tmp_path / "missing"), "--namespace", "idx-nothing")
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def _minimal_pdf(text: str) -> bytes:
    """A one-page PDF with one line of Helvetica text, offsets computed here."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_every_format_is_read_with_titles_and_warnings(rag, tmp_path):
    from graphrag_dag.drivers.ingest.indexer import index_corpus

    (tmp_path / "notes.txt").write_text("Ada Lovelace wrote the first program for the Analytical Engine.",
                                        encoding="utf-8")
    (tmp_path / "guide.md").write_text("# Harbour Guide\n\nThe Old Quay faces Skerry Point.", encoding="utf-8")
    (tmp_path / "page.html").write_text("<html><head><title>Lamp Page</title><script>var x = 1;</script></head>"
                                        "<body><p>Rosalind Brack kept the lamp.</p></body></html>", encoding="utf-8")
    (tmp_path / "report.pdf").write_bytes(_minimal_pdf("Tobias Wren sailed from Gannet Bank."))
    (tmp_path / "records.json").write_text(json.dumps([{"id": "r1", "title": "Teutberga", "text": "Teutberga was a "
                                                        "queen of Lotharingia."}, {"id": "r2", "text": ""}]),
                                           encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text(json.dumps({"body": "Corran Sound is narrow.", "name": "Sound"}) + "\n",
                                         encoding="utf-8")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    report = index_corpus(rag, [tmp_path], "idx-formats", replace=True)
    db = rag.store.scoped("idx-formats")
    docs = {r[0]: r[1] for r in db.rows("SELECT title, text FROM documents WHERE namespace = %(ns)s",
                                        {"ns": "idx-formats"})}
    assert docs["notes"].startswith("Ada Lovelace") and docs["Harbour Guide"].startswith("# Harbour Guide")
    assert docs["Lamp Page"] == "Rosalind Brack kept the lamp."  # no script text
    assert "Tobias Wren sailed from Gannet Bank." in docs["report"]
    assert docs["Teutberga"] == "Teutberga was a queen of Lotharingia."
    assert not any("Corran" in t for t in docs.values())  # rows.jsonl has no "text" field: nothing to read
    assert any("broken.pdf" in w for w in report["warnings"])
    assert any("empty" in w and "records.json" in w for w in report["warnings"])
    names = {r[0] for r in db.rows("SELECT name FROM entities WHERE namespace = %(ns)s", {"ns": "idx-formats"})}
    assert {"Ada Lovelace", "Rosalind Brack", "Tobias Wren", "Gannet Bank", "Teutberga"} <= names
    rag.store.drop("idx-formats")


@pytest.mark.slow
def test_text_and_title_fields_are_settable(cli_env, tmp_path, rag):
    (tmp_path / "rows.csv").write_text("name,body\nSound,Corran Sound lies between Skerry Point and the banks.\n",
                                       encoding="utf-8")
    proc = cli(cli_env, "index", str(tmp_path / "rows.csv"), "--namespace", "idx-csv", "--replace",
               "--text-field", "body", "--title-field", "name", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["documents"] == 1
    titles = [r[0] for r in rag.store.scoped("idx-csv").rows("SELECT title FROM documents WHERE namespace = %(ns)s",
                                                              {"ns": "idx-csv"})]
    assert titles == ["Sound"]
    rag.store.drop("idx-csv")


@pytest.mark.slow
def test_chinese_documents_find_chinese_entities(rag, tmp_path):
    from graphrag_dag.drivers.ingest.indexer import index_corpus

    rows = pq.read_table(graphrag_output("huawei-zh-3.x") / "documents.parquet").to_pylist()
    corpus = tmp_path / "zh.jsonl"
    corpus.write_text("\n".join(json.dumps({"id": r["id"], "title": r["title"], "text": r["text"]},
                                           ensure_ascii=False) for r in rows), encoding="utf-8")
    report = index_corpus(rag, [corpus], "idx-zh", replace=True)
    assert report["entities"] > 5
    names = {r[0] for r in rag.store.scoped("idx-zh").rows("SELECT name FROM entities WHERE namespace = %(ns)s",
                                                           {"ns": "idx-zh"})}
    assert {"华为", "深圳"} <= names, sorted(names)[:40]
    res = rag.local_search("华为的总部在哪里？", "idx-zh")
    assert "华为" in [m["name"] for m in res["matched_entities"]]
    assert _spans_slice_documents(rag, "idx-zh", res["evidence"]) >= 1
    rag.store.drop("idx-zh")


def test_japanese_text_gets_the_same_treatment(rag, tmp_path):
    from graphrag_dag.drivers.ingest.indexer import index_corpus

    (tmp_path / "kirigamine.md").write_text(JAPANESE, encoding="utf-8")
    index_corpus(rag, [tmp_path], "idx-ja", replace=True)
    db = rag.store.scoped("idx-ja")
    names = {r[0] for r in db.rows("SELECT name FROM entities WHERE namespace = %(ns)s", {"ns": "idx-ja"})}
    assert {"山本花子", "北浜港"} <= names, names
    res = rag.local_search("山本花子はどこで働いたか", "idx-ja")
    assert "山本花子" in [m["name"] for m in res["matched_entities"]]
    rag.store.drop("idx-ja")


@pytest.mark.parametrize(("package", "extra", "language"), [("janome", "ja", "Japanese"), ("jieba", "zh", "Chinese")])
def test_without_its_extra_cjk_text_is_one_line_naming_it_and_nothing_is_written(cli_env, rag, tmp_path, package, extra,
                                                                               language):
    """jieba and janome are extras: a Python where the segmenter cannot be imported (a package of
    that name that fails to import stands first on its path) refuses the corpus in one line."""
    blocked = tmp_path / "blocked" / package
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('not installed in this test')\n")
    (tmp_path / "docs").mkdir()
    text = JAPANESE if extra == "ja" else "陈大山在深圳港工作。他研究风暴潮。"
    (tmp_path / "docs" / "doc.md").write_text(text, encoding="utf-8")
    env = dict(cli_env, PYTHONPATH=str(tmp_path / "blocked"))
    proc = cli(env, "index", str(tmp_path / "docs"), "--namespace", f"idx-no-{extra}")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("[graphrag-dag]")]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0] == (f"graphrag-dag: error: this corpus has {language} text, whose names need {package}: "
                        f"pip install 'graphrag-dag[{extra}]' (or [cjk] for Chinese and Japanese)")
    assert f"idx-no-{extra}" not in {n["namespace"] for n in rag.store.namespaces()}


# ------------------------------------------------------------------------------- the rules


def _cases(*texts: str) -> extract.WordCases:
    from graphrag_dag.dataflows.common.records import Document
    from graphrag_dag.dataflows.index.extraction import word_cases

    return word_cases([Document(str(n), "", t) for n, t in enumerate(texts)])


def test_latin_rules():
    text = ("Today the Bank of England met Dr. Mara Quill's team. Storms were rising over Corran Sound. "
            "In March 2021 the storms reached the Saltmarrow Fishers' Cooperative. Alice Tern agreed.")
    cases = _cases(text, "the bank said today; storms")
    found = {(m.text, m.type) for m in extract.latin_mentions(text, 0, cases)}
    assert ("Bank of England", "ORGANIZATION") in found
    assert ("Mara Quill", "PERSON") in found  # honorific dropped and typed, possessive not part of the name
    assert ("Corran Sound", "GEO") in found
    assert ("Saltmarrow Fishers' Cooperative", "ORGANIZATION") in found  # the run stops at the sentence end
    assert ("Alice Tern", "ENTITY") in found
    texts = {t for t, _ in found}
    assert not texts & {"Today", "Storms", "March", "March 2021", "In"}
    for m in extract.latin_mentions(text, 100, cases):
        assert text[m.start - 100:m.end - 100] == m.text  # offsets shift with the passage


def test_resolution_merges_spellings():
    assert resolution_key("The Saltmarrow Lantern's") == resolution_key("saltmarrow  lantern") == "saltmarrow lantern"
    assert resolution_key("Zoë Ćirić") == resolution_key("Zoe Ciric")


def test_text_units_are_exact_overlapping_windows():
    from graphrag_dag.dataflows.common.records import Document
    from graphrag_dag.dataflows.index.corpus import Corpus
    from graphrag_dag.drivers.llm.tokens import token_counter

    text = " ".join(f"Sentence number {i} is about the harbour and its boats." for i in range(60))
    doc = Document("d", "d", text)
    made = units.text_units(Corpus([doc]), token_counter(), unit_tokens=60, unit_overlap=15)
    assert len(made) > 5
    for u in made:
        assert text[u.start:u.end] == u.text and token_counter().count(u.text) <= 60
    for a, b in zip(made, made[1:]):
        assert b.start < a.end  # they overlap
        assert token_counter().count(text[b.start:a.end]) <= 15
    assert made[0].start == 0 and made[-1].end == len(text)
    chunks = units.evidence_chunks([doc], made)
    assert all(text[c.start:c.end] == c.text for c in chunks)
    assert all(c.parent_id in {u.id for u in made} for c in chunks)


def test_edge_weight_is_the_number_of_co_occurring_passages():
    """weight(u, v) = Σ count(r) over relation instances: one instance per evidence chunk that
    mentions both, counted here by hand over three chunks."""
    from graphrag_dag.dataflows.common.records import Chunk
    from graphrag_dag.dataflows.index.extraction import ChunkMentions

    def cm(n: int, *names: str) -> ChunkMentions:
        text = " and ".join(names) + " met."
        spans, pos = [], 0
        for name in names:
            pos = text.index(name, pos)
            spans.append(extract.Mention(name, "PERSON", pos, pos + len(name)))
            pos += len(name)
        return ChunkMentions(Chunk(f"c{n}", "doc", text, "evidence", None, 0, len(text)), tuple(spans))

    from graphrag_dag.dataflows.index.llm_extraction import Extractions

    mentions = [cm(0, "Alice Tern", "Jonah Kell"), cm(1, "Alice Tern", "Jonah Kell", "Nell Cobb"),
                cm(2, "Nell Cobb", "Alice Tern")]
    offline = Extractions(False)
    index = entity_index(mentions, offline, {})
    made = edges(mentions, index, sentences(mentions, index), offline, [])
    by_names = {frozenset((index.names[k] for k in index.names if index.id_of(index.names[k], "doc") in (e.source_id,
                                                                                                     e.target_id))):
                e.weight for e in made}
    assert by_names == {frozenset({"Alice Tern", "Jonah Kell"}): 2.0, frozenset({"Alice Tern", "Nell Cobb"}): 2.0,
                        frozenset({"Jonah Kell", "Nell Cobb"}): 1.0}


def test_communities_are_deterministic(rag, demo_index):
    from graphrag_dag.drivers.ingest.indexer import index_corpus

    def communities(ns: str) -> list[tuple]:
        return sorted(tuple(r) for r in rag.store.scoped(ns).rows(
            "SELECT c.id, c.level, c.parent_id, array_agg(m.entity_id ORDER BY m.entity_id) FROM communities c"
            " JOIN community_members m ON m.namespace = c.namespace AND m.community_id = c.id"
            " WHERE c.namespace = %(ns)s GROUP BY c.id, c.level, c.parent_id", {"ns": ns}))

    index_corpus(rag, [Path(str(DEMO_DOCS))], "idx-demo-again", replace=True)
    assert communities("idx-demo-again") == communities("idx-demo") != []
    rag.store.drop("idx-demo-again")


@pytest.mark.slow
def test_dag_index_draws_every_stage(cli_env):
    proc = cli(cli_env, "dag", "index")
    assert proc.returncode == 0, proc.stderr
    for node in ("corpus_files", "corpus", "text_units", "evidence_chunks", "chunk_mentions", "entity_index",
                 "edges", "communities", "community_summaries", "index_records", "vectors", "write_set"):
        assert node in proc.stdout, node


@pytest.mark.slow
def test_office_documents_are_read_and_formats_no_reader_takes_are_reported(rag, tmp_path, cli_env):
    """A .docx is read as its paragraphs and tables (not its zip bytes), a .pptx as its slides' text
    and notes, and a sentence of each is found by a question; in a folder, files no
    reader takes are skipped with one warning naming their formats; given by name, a binary file
    of such a format is bad input (exit 2, one line, nothing written); a broken PDF is one warning
    and prints nothing else."""
    import docx

    from graphrag_dag.drivers.ingest.indexer import index_corpus

    folder = tmp_path / "docs"
    folder.mkdir()
    word = docx.Document()
    word.core_properties.title = "Harbour Minutes"
    word.add_paragraph("Jonah Kell opened the Herring Fair on Old Quay.")
    table = word.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "Ferryman", "Al"
    word.save(folder / "minutes.docx")
    from pptx import Presentation

    deck = Presentation()
    deck.core_properties.title = "Buoy Briefing"
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Sentinel Buoys"
    slide.placeholders[1].text = "Oren Pike designed the Sentinel Buoy Network."
    slide.notes_slide.notes_text_frame.text = "Ask about the pressure sensors."
    deck.save(folder / "briefing.pptx")
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (folder / "scan.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (folder / "notes.txt").write_text("Alice Tern chairs the cooperative.", encoding="utf-8")
    report = index_corpus(rag, [folder], "idx-docx", replace=True)
    try:
        docs = {r[0]: r[1] for r in rag.store.admin_rows(
            "SELECT title, text FROM documents WHERE namespace = 'idx-docx'")}
        assert docs["Harbour Minutes"] == "Jonah Kell opened the Herring Fair on Old Quay.\n\nFerryman | Al"
        assert docs["Buoy Briefing"] == ("Sentinel Buoys\nOren Pike designed the Sentinel Buoy Network.\n"
                                         "Ask about the pressure sensors.")
        for question, sentence in (("Who opened the Herring Fair?", "Jonah Kell opened the Herring Fair"),
                                   ("Who designed the Sentinel Buoy Network?", "Oren Pike designed the Sentinel Buoy")):
            found = rag.local_search(question, "idx-docx")["evidence"]
            assert any(sentence in e["text"] for e in found), (question, [e["text"] for e in found])
        assert any("2 file(s) in formats graphrag-dag does not read: .png (2)" in w for w in report["warnings"])
    finally:
        rag.store.drop("idx-docx")
    # a .docx named alone, in a Python where python-docx cannot be imported: one line that says why
    blocked = tmp_path / "blocked" / "docx"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('not installed in this test')\n")
    alone = cli(dict(cli_env, PYTHONPATH=str(tmp_path / "blocked")), "index", str(folder / "minutes.docx"),
                "--namespace", "idx-noreader", "--offline")
    assert alone.returncode == 2 and len(alone.stderr.strip().splitlines()) == 1, alone.stderr
    assert alone.stderr.strip() == ("graphrag-dag: error: no readable text in minutes.docx: skipped minutes.docx: "
                                    "python-docx, which reads Word files, is not installed (pip install python-docx)")
    given = cli(cli_env, "index", str(folder / "photo.png"), "--namespace", "idx-png", "--offline")
    assert given.returncode == 2 and len(given.stderr.strip().splitlines()) == 1, given.stderr
    assert "is not a format graphrag-dag reads" in given.stderr
    assert "idx-png" not in {n["namespace"] for n in rag.store.namespaces()}
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    (tmp_path / "ok.txt").write_text("Oren Pike designed the buoys.", encoding="utf-8")
    mixed = cli(cli_env, "index", str(tmp_path / "broken.pdf"), str(tmp_path / "ok.txt"), "--namespace", "idx-pdf",
                "--offline", "--replace")
    try:
        assert mixed.returncode == 0, mixed.stderr
        assert "EOF marker" not in mixed.stderr + mixed.stdout  # pypdf's own log line
        assert [ln for ln in mixed.stdout.splitlines() if "broken.pdf" in ln] == [
            "warning: skipped broken.pdf: not a readable PDF (PdfStreamError)"]
    finally:
        rag.store.drop("idx-pdf")
