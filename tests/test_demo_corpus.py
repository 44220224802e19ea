"""Integrity checks for the built-in demo corpus (drivers/ingest/demo/corpus.json).

Pure: reads the JSON file only; no database, no network, no embedder.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from graphrag_dag.dataflows.common import records  # noqa: E402

CORPUS_PATH = ROOT / "drivers" / "ingest" / "demo" / "corpus.json"

TABLES = {
    "documents": records.Document,
    "chunks": records.Chunk,
    "entities": records.Entity,
    "aliases": records.Alias,
    "edges": records.Edge,
    "communities": records.Community,
    "summaries": records.CommunitySummary,
    "claims": records.Claim,
}
# Fields the JSON deliberately leaves out (filled in by the loader / embedder, or the indexer alone sets).
OMITTED = {"embedding", "synthesized", "record_title"}
ENTITY_TYPES = {"PERSON", "ORGANIZATION", "PLACE", "EVENT", "PROJECT"}
CLAIM_STATUSES = {"TRUE", "FALSE", "SUSPECTED"}
CJK = re.compile(r"[\u4e00-\u9fff]")
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


@pytest.fixture(scope="module")
def corpus() -> dict:
    with CORPUS_PATH.open(encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def docs(corpus) -> dict[str, str]:
    return {d["id"]: d["text"] for d in corpus["documents"]}


@pytest.fixture(scope="module")
def chunks(corpus) -> dict[str, dict]:
    return {c["id"]: c for c in corpus["chunks"]}


@pytest.fixture(scope="module")
def entity_ids(corpus) -> set[str]:
    return {e["id"] for e in corpus["entities"]}


@pytest.fixture(scope="module")
def communities(corpus) -> dict[str, dict]:
    return {c["id"]: c for c in corpus["communities"]}


# --------------------------------------------------------------------------- shape


def test_top_level_keys(corpus):
    assert set(TABLES) | {"queries"} == set(corpus)
    for table in TABLES:
        assert isinstance(corpus[table], list) and corpus[table], table
    q = corpus["queries"]
    assert set(q) == {"local", "global"}
    assert q["local"].strip() and q["global"].strip()


@pytest.mark.parametrize("table", list(TABLES))
def test_record_keys_mirror_dataclasses(corpus, table):
    expected = {f.name for f in dataclasses.fields(TABLES[table])} - OMITTED
    for row in corpus[table]:
        assert set(row) == expected, (table, row.get("id", row))


@pytest.mark.parametrize("table", list(TABLES))
def test_records_construct_dataclasses(corpus, table):
    for row in corpus[table]:
        TABLES[table](**row)


@pytest.mark.parametrize("table", ["documents", "chunks", "entities", "edges", "communities", "claims"])
def test_ids_unique(corpus, table):
    counts = Counter(row["id"] for row in corpus[table])
    assert not [k for k, n in counts.items() if n > 1]


def test_summary_and_alias_keys_unique(corpus):
    assert len({s["community_id"] for s in corpus["summaries"]}) == len(corpus["summaries"])
    pairs = [(a["entity_id"], a["alias"]) for a in corpus["aliases"]]
    assert len(set(pairs)) == len(pairs)


def test_counts_in_range(corpus):
    ranges = {
        "documents": (3, 5),
        "entities": (50, 70),
        "aliases": (20, 40),
        "edges": (100, 160),
        "claims": (40, 60),
    }
    for table, (lo, hi) in ranges.items():
        assert lo <= len(corpus[table]) <= hi, table
    per_level = Counter(c["level"] for c in corpus["communities"])
    assert set(per_level) == {0, 1, 2}
    assert 2 <= per_level[0] <= 3
    assert 5 <= per_level[1] <= 8
    assert 12 <= per_level[2] <= 20
    assert len(corpus["summaries"]) == len(corpus["communities"])


# --------------------------------------------------------------------------- documents and chunks


def test_documents_sizes_and_languages(corpus):
    for d in corpus["documents"]:
        assert 1500 <= len(d["text"]) <= 4000, d["id"]
        assert d["title"].strip()
    cjk_docs = [d for d in corpus["documents"] if len(CJK.findall(d["text"])) > len(d["text"]) // 2]
    assert 1 <= len(cjk_docs) <= 2
    assert 2 <= len(corpus["documents"]) - len(cjk_docs) <= 4


def test_chunk_references_and_kinds(corpus, docs, chunks):
    for c in corpus["chunks"]:
        assert c["document_id"] in docs, c["id"]
        assert c["kind"] in {"text_unit", "evidence"}, c["id"]
        if c["kind"] == "text_unit":
            assert c["parent_id"] is None, c["id"]
        else:
            parent = chunks.get(c["parent_id"])
            assert parent is not None and parent["kind"] == "text_unit", c["id"]
            assert parent["document_id"] == c["document_id"], c["id"]


def test_chunk_offsets_exact(corpus, docs):
    for c in corpus["chunks"]:
        assert isinstance(c["start"], int) and isinstance(c["end"], int), c["id"]
        assert 0 <= c["start"] < c["end"] <= len(docs[c["document_id"]]), c["id"]
        assert docs[c["document_id"]][c["start"] : c["end"]] == c["text"], c["id"]


def test_every_document_has_text_units(corpus, docs):
    for doc_id in docs:
        units = [c for c in corpus["chunks"] if c["document_id"] == doc_id and c["kind"] == "text_unit"]
        assert units, doc_id


def test_evidence_tiles_each_text_unit(corpus, docs):
    units = [c for c in corpus["chunks"] if c["kind"] == "text_unit"]
    for tu in units:
        text = docs[tu["document_id"]]
        evs = sorted((c for c in corpus["chunks"] if c["parent_id"] == tu["id"]), key=lambda c: c["start"])
        assert evs, tu["id"]
        assert text[tu["start"] : evs[0]["start"]].strip() == "", tu["id"]
        assert text[evs[-1]["end"] : tu["end"]].strip() == "", tu["id"]
        for a, b in zip(evs, evs[1:]):
            assert a["end"] <= b["start"], (a["id"], b["id"])
            assert text[a["end"] : b["start"]].strip() == "", (a["id"], b["id"])
        for e in evs:
            assert tu["start"] <= e["start"] and e["end"] <= tu["end"], e["id"]


# --------------------------------------------------------------------------- entities, aliases, edges


def test_entity_fields(corpus):
    for e in corpus["entities"]:
        assert e["type"] in ENTITY_TYPES, e["id"]
        assert e["name"].strip() and e["description"].strip(), e["id"]
    names = [e["name"] for e in corpus["entities"]]
    assert len(set(names)) == len(names)


def test_has_cjk_entity_names(corpus):
    assert any(CJK.search(e["name"]) for e in corpus["entities"])


def test_has_short_name_inside_longer_name(corpus):
    """A short name (e.g. "Al") that is a prefix of a longer entity name without being a word of it."""
    names = [e["name"] for e in corpus["entities"]]
    short = [n for n in names if n.isascii() and len(n) <= 3]
    assert any(
        other != s and s in other and not re.search(rf"\b{re.escape(s)}\b", other)
        for s in short
        for other in names
    )


def test_alias_references(corpus, entity_ids):
    for a in corpus["aliases"]:
        assert a["entity_id"] in entity_ids, a
        assert a["alias"].strip(), a
    assert any(CJK.search(a["alias"]) for a in corpus["aliases"])


def test_edge_endpoints_and_weights(corpus, entity_ids):
    for e in corpus["edges"]:
        assert e["source_id"] in entity_ids and e["target_id"] in entity_ids, e["id"]
        assert e["source_id"] != e["target_id"], e["id"]
        assert 1.0 <= e["weight"] <= 10.0, e["id"]
        assert e["description"].strip(), e["id"]


def test_degree_equals_edge_count(corpus):
    degree = Counter()
    for e in corpus["edges"]:
        degree[e["source_id"]] += 1
        degree[e["target_id"]] += 1
    for ent in corpus["entities"]:
        assert ent["degree"] == degree[ent["id"]], ent["id"]


# --------------------------------------------------------------------------- communities and summaries


def test_community_levels_and_parents(corpus, communities, entity_ids):
    for c in corpus["communities"]:
        assert c["level"] in (0, 1, 2), c["id"]
        assert c["title"].strip(), c["id"]
        assert c["member_ids"], c["id"]
        assert set(c["member_ids"]) <= entity_ids, c["id"]
        assert len(set(c["member_ids"])) == len(c["member_ids"]), c["id"]
        if c["level"] == 0:
            assert c["parent_id"] is None, c["id"]
        else:
            parent = communities.get(c["parent_id"])
            assert parent is not None and parent["level"] == c["level"] - 1, c["id"]


def test_each_entity_in_exactly_one_leaf(corpus, entity_ids):
    counts = Counter(m for c in corpus["communities"] if c["level"] == 2 for m in c["member_ids"])
    assert set(counts) == entity_ids
    assert all(n == 1 for n in counts.values())


def test_parent_members_are_union_of_children(corpus, communities):
    for c in corpus["communities"]:
        if c["level"] == 2:
            continue
        children = [k for k in corpus["communities"] if k["parent_id"] == c["id"]]
        assert children, c["id"]
        union = set().union(*(set(k["member_ids"]) for k in children))
        assert set(c["member_ids"]) == union, c["id"]


def test_summaries(corpus, communities):
    for s in corpus["summaries"]:
        assert s["community_id"] in communities, s["community_id"]
        assert s["title"].strip() and s["summary"].strip() and s["full_content"].strip()
        assert 1 <= s["rank"] <= 10
        assert 2 <= len(s["findings"]) <= 3
        for f in s["findings"]:
            assert set(f) == {"summary", "explanation"}
            assert f["summary"].strip() and f["explanation"].strip()
    assert {s["community_id"] for s in corpus["summaries"]} == set(communities)


# --------------------------------------------------------------------------- claims


def test_claim_references(corpus, docs, chunks, entity_ids):
    for c in corpus["claims"]:
        assert c["subject_id"] in entity_ids, c["id"]
        assert c["object_id"] is None or c["object_id"] in entity_ids, c["id"]
        assert c["document_id"] in docs, c["id"]
        chunk = chunks.get(c["chunk_id"])
        assert chunk is not None and chunk["kind"] == "evidence", c["id"]
        assert chunk["document_id"] == c["document_id"], c["id"]
        assert c["status"] in CLAIM_STATUSES, c["id"]
        assert c["type"].strip() and c["description"].strip(), c["id"]
        for key in ("start_date", "end_date"):
            assert c[key] is None or ISO_DATE.match(c[key]), c["id"]


def test_claim_source_spans_exact(corpus, docs, chunks):
    for c in corpus["claims"]:
        text = docs[c["document_id"]]
        assert c["source_text"], c["id"]
        assert text[c["start"] : c["end"]] == c["source_text"], c["id"]
        chunk = chunks[c["chunk_id"]]
        assert chunk["start"] <= c["start"] and c["end"] <= chunk["end"], c["id"]


def test_some_claims_in_chinese(corpus):
    assert any(CJK.search(c["source_text"]) for c in corpus["claims"])


# --------------------------------------------------------------------------- queries


def test_local_query_names_an_entity(corpus):
    q = corpus["queries"]["local"]
    labels = [e["name"] for e in corpus["entities"]] + [a["alias"] for a in corpus["aliases"]]
    assert any(len(label) > 3 and label in q for label in labels)
