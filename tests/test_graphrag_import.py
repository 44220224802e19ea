"""The GraphRAG importer's read/normalise/derive stage against real GraphRAG outputs.

No database: these tests pin what `drivers.importer.read_graphrag` makes of every schema
generation in ../shared/data/graphrag-outputs (counts, offsets, references, hierarchy), and how
it fails on bad input. Each folder is read once per session (reads take ~0.1 s).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphrag_dag.dataflows.index import spans as gi
from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.records import IndexRecords
from graphrag_dag.drivers.ingest.importer import import_driver, read_graphrag
from shared_data import graphrag_output

FOLDERS = [
    "christmas-carol-0.5.0",
    "christmas-carol-1.2.0",
    "christmas-carol-2.7.0",
    "christmas-carol-3.1.2",
    "huawei-zh-3.x",
    "microsoft-wiki-2.3.0",
    "operation-dulce-3.1.2",
]
CAROLS = [f for f in FOLDERS if f.startswith("christmas-carol")]


class FakeEmbedder:
    """Stands in for an embedder; only `.model` and `.dim` matter to the importer."""

    def __init__(self, model: str, dim: int) -> None:
        self.model = model
        self.dim = dim

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.zeros((len(texts), self.dim), dtype=np.float32)


@lru_cache(maxsize=None)
def _read(folder: Path) -> IndexRecords:
    return read_graphrag(folder, embeddings="recompute")


def records(name: str) -> IndexRecords:
    return _read(graphrag_output(name))


def source_rows(name: str, table: str) -> int:
    folder = graphrag_output(name)
    for candidate in (folder / f"{table}.parquet", folder / f"create_final_{table}.parquet"):
        if candidate.exists():
            return pq.read_metadata(candidate).num_rows
    return 0


def source_table(name: str, table: str) -> list[dict]:
    folder = graphrag_output(name)
    for candidate in (folder / f"{table}.parquet", folder / f"create_final_{table}.parquet"):
        if candidate.exists():
            return pq.read_table(candidate).to_pylist()
    return []


def writable_copy(src: Path, dst: Path, skip: tuple[str, ...] = ()) -> Path:
    """Copy a (read-only) folder so the test may damage the copy."""
    for path in src.rglob("*"):
        rel = path.relative_to(src)
        if rel.parts[0] in skip:
            continue
        if path.is_dir():
            (dst / rel).mkdir(parents=True, exist_ok=True)
        else:
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dst / rel)
    return dst


# --------------------------------------------------------------------------------------------
# every folder


@pytest.mark.parametrize("name", FOLDERS)
def test_counts_match_source_rows(name: str) -> None:
    counts = records(name).counts()
    assert counts["edges"] == source_rows(name, "relationships")
    assert counts["communities"] == source_rows(name, "communities")
    assert counts["community_summaries"] == source_rows(name, "community_reports")
    assert counts["claims"] == source_rows(name, "covariates")
    assert counts["documents"] == source_rows(name, "documents")
    assert counts["entities"] >= source_rows(name, "entities")
    assert counts["chunks"] >= source_rows(name, "text_units")
    assert counts["aliases"] == 0
    kinds = Counter(c.kind for c in records(name).chunks)
    assert kinds["text_unit"] == source_rows(name, "text_units")
    # Every word of every text unit stands in an evidence chunk (placed units: by span).
    rec = records(name)
    docs = {d.id: d.text for d in rec.documents}
    covered = {d: bytearray(len(text)) for d, text in docs.items()}
    for c in rec.chunks:
        if c.kind == "evidence" and c.start is not None:
            covered[c.document_id][c.start:c.end] = b"\x01" * (c.end - c.start)
    for u in (c for c in rec.chunks if c.kind == "text_unit" and c.start is not None):
        mask, text = covered[u.document_id], docs[u.document_id]
        missing = [p for p in range(u.start, u.end) if not mask[p] and not text[p].isspace()]
        assert missing == [], (u.id, missing[:5])
    assert kinds["evidence"] > 0


@pytest.mark.parametrize("name", FOLDERS)
def test_ids_are_unique_and_references_resolve(name: str) -> None:
    rec = records(name)
    entity_ids = [e.id for e in rec.entities]
    assert len(entity_ids) == len(set(entity_ids))
    chunk_ids = [c.id for c in rec.chunks]
    assert len(chunk_ids) == len(set(chunk_ids))
    assert len({c.id for c in rec.communities}) == len(rec.communities)
    known, docs, chunks = set(entity_ids), {d.id for d in rec.documents}, set(chunk_ids)
    for edge in rec.edges:
        assert edge.source_id in known and edge.target_id in known
    for community in rec.communities:
        assert set(community.member_ids) <= known
    for chunk in rec.chunks:
        assert chunk.document_id is None or chunk.document_id in docs
        assert chunk.parent_id is None or chunk.parent_id in chunks
    # Source entities keep their GraphRAG id.
    assert {r["id"] for r in source_table(name, "entities")} <= known


@pytest.mark.parametrize("name", FOLDERS)
def test_evidence_spans_match_document_text(name: str) -> None:
    rec = records(name)
    docs = {d.id: d.text for d in rec.documents}
    with_span = 0
    for chunk in rec.chunks:
        assert chunk.text.strip(), chunk.id
        if chunk.start is not None:
            with_span += 1
            assert docs[chunk.document_id][chunk.start : chunk.end] == chunk.text, chunk.id
    assert with_span > 0
    evidence = [c for c in rec.chunks if c.kind == "evidence"]
    assert all(c.id.startswith(f"{c.parent_id}:ev") for c in evidence)
    assert max(len(c.text) for c in evidence) <= gi.EVIDENCE_MAX * gi.EVIDENCE_SLACK


@pytest.mark.parametrize("name", CAROLS)
def test_christmas_carol_evidence_is_all_placed(name: str) -> None:
    evidence = [c for c in records(name).chunks if c.kind == "evidence"]
    assert evidence and all(c.start is not None and c.end is not None for c in evidence)
    assert all(c.document_id is not None for c in evidence)


@pytest.mark.parametrize("name", FOLDERS)
def test_claims_resolve_to_entities(name: str) -> None:
    rec = records(name)
    known = {e.id for e in rec.entities}
    chunks = {c.id: c for c in rec.chunks}
    docs = {d.id: d.text for d in rec.documents}
    for claim in rec.claims:
        assert claim.subject_id in known
        assert claim.object_id is None or claim.object_id in known
        assert claim.chunk_id in chunks
        if claim.start is not None:
            assert 0 <= claim.start < claim.end <= len(docs[claim.document_id])
            chunk = chunks[claim.chunk_id]
            if chunk.start is not None:  # the cited chunk overlaps the claim's span
                assert chunk.start < claim.end and claim.start < chunk.end


def test_claims_point_to_evidence_when_the_quote_is_found() -> None:
    claims = records("christmas-carol-3.1.2").claims
    placed = [c for c in claims if c.start is not None]
    assert len(placed) >= len(claims) // 2
    assert all(":ev" in c.chunk_id for c in placed)


@pytest.mark.parametrize("name", FOLDERS)
def test_community_hierarchy_is_consistent(name: str) -> None:
    rec = records(name)
    by_id = {c.id: c for c in rec.communities}
    for community in rec.communities:
        if community.parent_id is not None:
            parent = by_id[community.parent_id]
            assert community.level == parent.level + 1
        else:
            assert community.level == 0 or name == "christmas-carol-0.5.0"


@pytest.mark.parametrize("name", FOLDERS)
def test_community_titles_come_from_their_reports(name: str) -> None:
    rec = records(name)
    reports = {s.community_id: s.title for s in rec.summaries if s.title.strip()}
    assert reports, "every output here has titled reports"
    titles = {c.id: c.title for c in rec.communities}
    assert all(titles[cid] == title for cid, title in reports.items() if cid in titles)
    assert not any(re.fullmatch(r"Community \d+", titles[cid]) for cid in reports if cid in titles)


@pytest.mark.parametrize("name", [f for f in FOLDERS if f != "christmas-carol-0.5.0"])
def test_community_parents_come_from_the_source(name: str) -> None:
    expected = {
        str(r["community"]): (None if r["parent"] in (None, -1) else str(r["parent"]))
        for r in source_table(name, "communities")
    }
    assert {c.id: c.parent_id for c in records(name).communities} == expected


def test_v0_hierarchy_is_derived_from_membership() -> None:
    rec = records("christmas-carol-0.5.0")
    by_id = {c.id: c for c in rec.communities}
    assert all(c.parent_id is not None for c in rec.communities if c.level > 0)
    for community in rec.communities:
        if community.parent_id is not None:
            assert set(community.member_ids) <= set(by_id[community.parent_id].member_ids)


def test_v0_stray_report_is_kept_and_reported() -> None:
    rec = records("christmas-carol-0.5.0")
    known = {c.id for c in rec.communities}
    assert {s.community_id for s in rec.summaries} - known == {"-1"}
    assert any("not in communities: -1" in w for w in rec.warnings)
    for name in FOLDERS[1:]:
        other = records(name)
        assert {s.community_id for s in other.summaries} <= {c.id for c in other.communities}


def test_christmas_carol_312_synthesizes_missing_relationship_endpoints() -> None:
    name = "christmas-carol-3.1.2"
    rec = records(name)
    titles = {r["title"] for r in source_table(name, "entities")}
    rels = source_table(name, "relationships")
    dangling = [r for r in rels if r["source"] not in titles or r["target"] not in titles]
    missing = {t for r in dangling for t in (r["source"], r["target"]) if t not in titles}
    assert len(dangling) == 84  # the README's figure
    synthesized = {e.name for e in rec.entities if e.synthesized}
    assert missing <= synthesized
    assert not synthesized & titles
    assert any(f"84 relationships referenced {len(missing)} endpoints missing" in w for w in rec.warnings)
    # Claim subjects missing from entities are synthesized too.
    subjects = {(r["subject_id"] or "").strip() or "UNKNOWN" for r in source_table(name, "covariates")}
    assert subjects - titles <= synthesized


def test_v3_text_units_are_placed_despite_prepended_metadata() -> None:
    units = [c for c in records("christmas-carol-3.1.2").chunks if c.kind == "text_unit"]
    raw = {r["id"]: r["text"] for r in source_table("christmas-carol-3.1.2", "text_units")}
    assert all(u.start is not None for u in units)
    assert all(raw[u.id].endswith(u.text) and raw[u.id].startswith("title: ") for u in units)


def test_stale_documents_table_still_yields_placed_text_units() -> None:
    units = [c for c in records("operation-dulce-3.1.2").chunks if c.kind == "text_unit"]
    assert units and all(u.document_id is not None and u.start is not None for u in units)


def test_progress_reports_each_table(tmp_path: Path) -> None:
    messages: list[str] = []
    read_graphrag(graphrag_output("microsoft-wiki-2.3.0"), embeddings="recompute", progress=messages.append)
    assert "read entities: 9 rows" in messages
    assert sum(m.startswith("read ") for m in messages) == 6


def test_table_rows_convert_only_the_columns_a_node_reads() -> None:
    from graphrag_dag.dataflows.index.graphrag_values import table_rows

    table = pa.table({"source": ["a", "b"], "target": ["b", "c"], "text_unit_ids": [["u1", "u2"], ["u3"]]})
    tables = {"relationships": table}
    assert table_rows(tables, "relationships", ("source", "target", "weight")) == [
        {"source": "a", "target": "b"}, {"source": "b", "target": "c"}]
    assert table_rows(tables, "relationships", ("weight",)) == [{}, {}]  # rows still count
    assert table_rows(tables, "relationships") == table.to_pylist()
    assert table_rows(tables, "nodes", ("id",)) == []


@pytest.mark.parametrize("name", FOLDERS)
def test_the_columns_left_unread_change_nothing(name: str) -> None:
    """`source_tables` skips the cross-reference lists no stage reads (UNREAD_COLUMNS): the records
    are those of every column read, and the skipped columns were there to skip."""
    from graphrag_dag.dataflows.index import IMPORT_FINAL
    from graphrag_dag.dataflows.index.graphrag_source import UNREAD_COLUMNS, source_files, source_tables

    files = source_files(str(graphrag_output(name)))
    whole = {t: pq.read_table(path) for t, path in files.items()}
    whole = {t: table.drop_columns([c for c in table.column_names if c.startswith("__index_level_")])
             for t, table in whole.items()}
    read = source_tables(files, None)
    skipped = {t: set(whole[t].column_names) - set(read[t].column_names) for t in whole}
    assert all(skipped[t] <= UNREAD_COLUMNS.get(t, set()) for t in whole), skipped
    if not name.startswith("christmas-carol-0"):
        assert skipped["communities"] and skipped["text_units"], skipped
    inputs = {"source_path": str(graphrag_output(name)), "embeddings_mode": "recompute",
              "source_embedding_model": None, "embedder": None, "progress": None}
    full = import_driver().execute([IMPORT_FINAL], inputs=inputs, overrides={"source_tables": whole})[IMPORT_FINAL]
    assert full == records(name)


@pytest.mark.parametrize("name", ["operation-dulce-3.1.2", "christmas-carol-1.2.0"])
def test_repeated_ids_are_one_string_each(name: str) -> None:
    """A unit's document id and an entity's unit ids are the very strings of the documents' and
    units' own ids, not copies per cell (graphrag_values.SHARED_VALUE_COLUMNS)."""
    rec = records(name)
    documents = {d.id: d.id for d in rec.documents}
    units = {c.id: c.id for c in rec.chunks if c.kind == "text_unit"}
    placed = [c for c in rec.chunks if c.kind == "text_unit" and c.document_id in documents]
    assert placed and all(documents[c.document_id] is c.document_id for c in placed)
    listed = [u for e in rec.entities for u in e.unit_ids if u in units]
    assert listed and all(units[u] is u for u in listed)


def test_reading_leaves_no_source_table_behind() -> None:
    """The decoded tables are freed before the caller embeds and writes (drivers/ingest/importer.py)."""
    folder = graphrag_output("operation-dulce-3.1.2")
    read_graphrag(folder, embeddings="recompute")  # pyarrow's own first-use allocations
    before = pa.total_allocated_bytes()
    rec = read_graphrag(folder, embeddings="recompute")
    assert rec.entities and rec.chunks
    assert pa.total_allocated_bytes() <= before


# --------------------------------------------------------------------------------------------
# bad input


def test_missing_path_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="does not exist"):
        read_graphrag(tmp_path / "nope")


def test_non_graphrag_folder_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(BadInput, match="not a GraphRAG output folder"):
        read_graphrag(tmp_path)


def test_truncated_parquet_is_bad_input_naming_the_file(tmp_path: Path) -> None:
    folder = writable_copy(graphrag_output("christmas-carol-3.1.2"), tmp_path / "cc")
    target = folder / "entities.parquet"
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    with pytest.raises(BadInput, match="entities.parquet"):
        read_graphrag(folder)


def test_missing_optional_tables_are_fine(tmp_path: Path) -> None:
    src = graphrag_output("christmas-carol-3.1.2")
    folder = tmp_path / "cc"
    folder.mkdir()
    for table in ("entities", "relationships", "communities"):
        shutil.copyfile(src / f"{table}.parquet", folder / f"{table}.parquet")
    rec = read_graphrag(folder, embeddings="recompute")
    assert rec.claims == [] and rec.documents == [] and rec.chunks == [] and rec.summaries == []
    assert rec.counts()["edges"] == 978


def test_unknown_embeddings_mode_is_bad_input() -> None:
    with pytest.raises(BadInput, match="embeddings mode"):
        read_graphrag(graphrag_output("microsoft-wiki-2.3.0"), embeddings="sometimes")


def test_oldest_layout_without_parent_or_entity_ids(tmp_path: Path) -> None:
    """v0 quirks in one synthetic folder: `name`, `raw_content`, no `parent`, no `entity_ids`
    (members from create_final_nodes), int32 and list<null> columns, pandas index columns."""
    doc = "Scrooge met Marley. Marley was dead! Bob worked hard.\n\nThe end."
    tables = {
        "entities": {
            "id": ["e1", "e2", "e3"],
            "name": ["SCROOGE", "MARLEY", "BOB"],
            "type": ["PERSON"] * 3,
            "description": ["miser", "ghost", "clerk"],
            "__index_level_0__": [0, 1, 2],
        },
        "relationships": {
            "id": ["r1", "r2"],
            "source": ["SCROOGE", "BOB"],
            "target": ["MARLEY", "TINY TIM"],
            "weight": pa.array([2, 1], pa.int32()),
            "description": ["partners", "father"],
        },
        "documents": {"id": ["d1"], "title": ["carol.txt"], "raw_content": [doc]},
        "text_units": {
            "id": ["t1", "t2"],
            "text": [doc[:36], doc[20:]],
            "document_ids": [["d1"], ["d1"]],
            "covariate_ids": pa.array([[], []], pa.list_(pa.null())),
        },
        "communities": {
            "id": ["c0", "c1", "c2"],
            "community": pa.array([0, 1, 2], pa.int32()),
            "level": pa.array([0, 1, 1], pa.int32()),
            "title": ["Community 0", "Community 1", "Community 2"],
        },
        "nodes": {
            "id": ["e1", "e2", "e3", "e1", "e2", "e3"],
            "title": ["SCROOGE", "MARLEY", "BOB"] * 2,
            "community": [0, 0, 0, 1, 1, 2],
            "level": [0, 0, 0, 1, 1, 1],
        },
        "community_reports": {
            "community": pa.array([0, 1], pa.int32()),
            "title": ["All", "Partners"],
            "summary": ["s0", "s1"],
            "full_content": ["f0", "f1"],
            "rank": [1.0, None],
            "findings": [[{"summary": "x", "explanation": "y"}], []],
        },
    }
    for name, columns in tables.items():
        pq.write_table(pa.table(columns), tmp_path / f"create_final_{name}.parquet")
    rec = read_graphrag(tmp_path, embeddings="recompute")

    assert [d.text for d in rec.documents] == [doc]
    assert [(e.name, e.degree, e.synthesized) for e in rec.entities] == [
        ("SCROOGE", 1, False),
        ("MARLEY", 1, False),
        ("BOB", 1, False),
        ("TINY TIM", 1, True),
    ]
    assert rec.edges[0].weight == 2.0 and rec.edges[1].target_id == rec.entities[3].id
    by_id = {c.id: c for c in rec.communities}
    assert by_id["0"].member_ids == ["e1", "e2", "e3"] and by_id["0"].parent_id is None
    assert by_id["1"].member_ids == ["e1", "e2"] and by_id["1"].parent_id == "0"
    assert by_id["2"].member_ids == ["e3"] and by_id["2"].parent_id == "0"
    assert [s.rank for s in rec.summaries] == [1.0, None]
    assert rec.summaries[0].findings == [{"summary": "x", "explanation": "y"}]
    units = [c for c in rec.chunks if c.kind == "text_unit"]
    assert [(u.start, u.end) for u in units] == [(0, 36), (20, len(doc))]
    for chunk in rec.chunks:
        assert doc[chunk.start : chunk.end] == chunk.text
    # The two units overlap ("Marley was dead!"): the document they cover is cut once, and the
    # one chunk belongs to the unit where it starts.
    assert [(c.text, c.parent_id) for c in rec.chunks if c.kind == "evidence"] == [(doc, "t1")]
    assert any("1 relationships referenced 1 endpoints" in w for w in rec.warnings)


# --------------------------------------------------------------------------------------------
# embeddings


@pytest.mark.slow
def test_auto_with_another_embedder_recomputes() -> None:
    rec = read_graphrag(
        graphrag_output("operation-dulce-3.1.2"), "auto", FakeEmbedder("wordllama-l2-256", 256)
    )
    assert rec.embedding_model is None
    assert all(s.embedding is None for s in rec.summaries)
    assert all(e.embedding is None for e in rec.entities)
    assert any("(3072-d) not reusable with wordllama" in w and "recomputing" in w for w in rec.warnings)


def test_keep_with_another_embedder_is_bad_input() -> None:
    with pytest.raises(BadInput, match="not made by the configured embedder"):
        read_graphrag(graphrag_output("operation-dulce-3.1.2"), "keep", FakeEmbedder("wordllama-l2-256", 256))


def test_keep_without_source_vectors_is_bad_input() -> None:
    with pytest.raises(BadInput, match="no usable source embeddings"):
        read_graphrag(graphrag_output("christmas-carol-2.7.0"), "keep", FakeEmbedder("wordllama-l2-256", 256))


def test_recompute_reads_no_vectors() -> None:
    rec = read_graphrag(graphrag_output("operation-dulce-3.1.2"), "recompute", FakeEmbedder("x", 3))
    assert rec.embedding_model is None and not any("embeddings" in w for w in rec.warnings)


def test_keep_with_the_source_model_attaches_vectors_from_parquet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "lancedb", None)  # parquet vectors only
    rec = read_graphrag(
        graphrag_output("operation-dulce-3.1.2"), "keep", FakeEmbedder("graphrag-source:3072d", 3072)
    )
    assert rec.embedding_model == "graphrag-source:3072d"
    assert all(s.embedding is not None and len(s.embedding) == 3072 for s in rec.summaries)
    assert any("lancedb not installed" in w for w in rec.warnings)


def test_keep_with_the_source_model_attaches_vectors_from_lancedb() -> None:
    pytest.importorskip("lancedb")
    rec = read_graphrag(graphrag_output("huawei-zh-3.x"), "keep", FakeEmbedder("graphrag-source:1024d", 1024))
    assert rec.embedding_model == "graphrag-source:1024d"
    assert all(e.embedding is not None and len(e.embedding) == 1024 for e in rec.entities)
    assert all(s.embedding is not None for s in rec.summaries)
    units = [c for c in rec.chunks if c.kind == "text_unit"]
    assert all(u.embedding is not None for u in units)
    assert all(c.embedding is None for c in rec.chunks if c.kind == "evidence")


def test_incomplete_lancedb_folder_is_a_warning(tmp_path: Path) -> None:
    pytest.importorskip("lancedb")
    folder = writable_copy(graphrag_output("huawei-zh-3.x"), tmp_path / "hw")
    for data in (folder / "lancedb").rglob("data"):
        shutil.rmtree(data)
    rec = read_graphrag(folder, "auto", FakeEmbedder("wordllama-l2-256", 256))
    assert rec.counts()["entities"] == 29
    assert any("lancedb" in w for w in rec.warnings)


def test_keep_with_an_unreadable_lancedb_folder_says_so(tmp_path: Path) -> None:
    pytest.importorskip("lancedb")
    folder = writable_copy(graphrag_output("huawei-zh-3.x"), tmp_path / "hw")
    for versions in (folder / "lancedb").rglob("_versions"):
        shutil.rmtree(versions)
    with pytest.raises(BadInput) as refused:
        read_graphrag(folder, "keep", FakeEmbedder("graphrag-source:1024d", 1024))
    message = str(refused.value)
    assert "cannot be read" in message and "lancedb/" in message and "no lancedb/ or" not in message


def test_empty_lancedb_folder_is_a_warning(tmp_path: Path) -> None:
    folder = writable_copy(graphrag_output("huawei-zh-3.x"), tmp_path / "hw", skip=("lancedb",))
    (folder / "lancedb").mkdir()
    rec = read_graphrag(folder, "auto", FakeEmbedder("wordllama-l2-256", 256))
    assert rec.embedding_model is None
    assert any("no .lance tables" in w for w in rec.warnings)


# --------------------------------------------------------------------------------------------
# the DAG and the pure helpers (no shared data needed)


def test_dag_nodes() -> None:
    names = {v.name for v in import_driver().list_available_variables()}
    expected = {
        "source_path", "embeddings_mode", "source_embedding_model", "embedder", "progress",
        "source_files", "source_tables", "schema_version", "documents", "text_units",
        "evidence_chunks", "source_entities", "synthesized_entities", "entities",
        "entity_ids_by_title", "edges", "communities", "community_summaries", "claims", "aliases",
        "embeddings_from_source", "embedding_choice", "import_warnings", "index_records",
    }  # fmt: skip
    assert names == expected


def test_split_sentences_english_and_cjk() -> None:
    text = "  Hello there. How are you?\nFine!  华为成立于1987年。它很大！真的吗？Yes  "
    parts = [text[s:e] for s, e in gi.split_sentence_spans(text)]
    assert parts == [
        "Hello there.",
        "How are you?",
        "Fine!",
        "华为成立于1987年。",
        "它很大！",
        "真的吗？",
        "Yes",
    ]


def test_split_sentences_keeps_decimals_and_closing_quotes() -> None:
    text = "It cost 3.50 pounds. 'Bah!' said Scrooge. “Humbug.” Then\n\nnew paragraph"
    parts = [text[s:e] for s, e in gi.split_sentence_spans(text)]
    assert parts == ["It cost 3.50 pounds.", "'Bah!'", "said Scrooge.", "“Humbug.”", "Then", "new paragraph"]


def test_split_sentences_empty() -> None:
    assert gi.split_sentence_spans("") == []
    assert gi.split_sentence_spans(" \n\t ") == []


def _check_spans(text: str, spans: list[tuple[int, int]]) -> None:
    last = 0
    for s, e in spans:
        assert last <= s < e <= len(text)
        assert not text[s].isspace() and not text[e - 1].isspace()
        assert text[last:s].strip() == ""  # nothing but whitespace is skipped
        last = e
    assert text[last:].strip() == ""


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab .!?。！？\n \t'\"”華")), max_size=300))
def test_sentence_spans_cover_the_text(text: str) -> None:
    _check_spans(text, gi.split_sentence_spans(text))


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abc .!?。\n ")), max_size=3000), st.integers(20, 700))
def test_evidence_spans_cover_the_text_within_the_limit(text: str, limit: int) -> None:
    spans = gi.evidence_spans(text, limit)
    _check_spans(text, spans)
    assert all(e - s <= limit * gi.EVIDENCE_SLACK for s, e in spans)


def test_evidence_spans_cut_an_overlong_sentence_at_whitespace() -> None:
    text = " ".join(["word"] * 400)  # 1999 characters, no sentence end
    spans = gi.evidence_spans(text)
    assert len(spans) >= 4
    assert all(text[s:e].startswith("word") and text[s:e].endswith("word") for s, e in spans)


def test_find_quote_tolerates_reflowed_whitespace_and_quote_marks() -> None:
    text = "He said, ‘Bah!\n    Humbug!’ and left."
    assert gi.find_quote(text, "'Bah! Humbug!'") == (9, 27)
    assert gi.find_quote(text, "nothing like it") is None


def test_locate_skips_prepended_metadata() -> None:
    doc = "Once upon a time there was a text."
    assert gi.locate(doc, "title: x.txt.\nupon a time", 0) == (5, 14)
    assert gi.locate(doc, "not in the document", 0) is None
    assert gi.locate("", "anything", 0) is None


def _token_cut(doc: str, start_byte: int, end_byte: int) -> str:
    """A unit as GraphRAG's token chunker makes it: a byte range decoded with replacement."""
    return doc.encode("utf-8")[start_byte:end_byte].decode("utf-8", errors="replace")


@pytest.mark.parametrize("cut", [(0, 13), (5, 30), (4, 31), (7, 23), (3, 40)])
def test_a_unit_cut_inside_a_character_is_placed_whole(cut: tuple[int, int]) -> None:
    from graphrag_dag.dataflows.common.records import Document
    from graphrag_dag.dataflows.index.graphrag_text import text_units

    doc = "青岚茶社 opened in 1998. 林晓雨 runs it — with ünïcode."
    unit = _token_cut(doc, *cut)
    where = gi.place(doc, unit, 0)
    assert where is not None, unit
    start, end = where
    # The span covers the unit's bytes and at most the one cut character more on each side.
    first, last = len(doc[:start].encode("utf-8")), len(doc[:end].encode("utf-8"))
    assert first <= cut[0] < first + 4 and last - 4 < cut[1] <= last
    assert unit.strip("\ufffd") in doc[start:end] and "\ufffd" not in doc[start:end]
    table = pa.table({"id": ["u1"], "text": [unit], "document_id": ["d1"], "human_readable_id": [0]})
    [chunk] = text_units({"text_units": table}, [Document(id="d1", title="t", text=doc)])
    assert (chunk.start, chunk.end) == (start, end) and chunk.text == doc[start:end]


def test_a_unit_of_replacement_characters_only_is_not_placed() -> None:
    assert gi.place("abc", "\ufffd\ufffd", 0) is None
    assert gi.place("abc 青", "zzz\ufffd", 0) is None


def test_require_shared_flag_turns_skip_into_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import shared_data

    monkeypatch.setattr(shared_data, "SHARED_DATA", tmp_path / "absent")
    monkeypatch.delenv("GRAPHRAG_DAG_REQUIRE_SHARED", raising=False)
    with pytest.raises(pytest.skip.Exception):
        shared_data.shared_outputs()
    monkeypatch.setenv("GRAPHRAG_DAG_REQUIRE_SHARED", "1")
    with pytest.raises(pytest.fail.Exception):
        shared_data.shared_outputs()
    assert os.environ["GRAPHRAG_DAG_REQUIRE_SHARED"] == "1"


def test_overlapping_text_units_share_their_evidence() -> None:
    """GraphRAG's text units overlap; the sentences two units share are one evidence chunk, so
    no passage is cited twice."""
    rec = records("christmas-carol-3.1.2")
    evidence = [c for c in rec.chunks if c.kind == "evidence" and c.start is not None]
    spans = [(c.document_id, c.start, c.end) for c in evidence]
    assert len(spans) == len(set(spans))
    by_doc: dict = {}
    for c in sorted(evidence, key=lambda c: (c.document_id, c.start)):
        by_doc.setdefault(c.document_id, []).append(c)
    for chunks in by_doc.values():
        assert all(a.end <= b.start for a, b in zip(chunks, chunks[1:]))  # no two chunks overlap
    units = {u.id: u for u in rec.chunks if u.kind == "text_unit"}
    assert all(units[c.parent_id].start <= c.start < units[c.parent_id].end for c in evidence)
