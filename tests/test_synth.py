"""`graphrag-dag synth`: a synthetic index in Microsoft GraphRAG v3 parquet format.

A 300-entity index is generated once per module; the checks pin the shape the benchmarks rely
on (ratios, hierarchy, degree skew, text that mentions its entities), the v3 schema, that our
importer reads it completely, reproducibility per seed, and the command line.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag_tools.synth import MARKER, TABLES, write_synthetic_index
from shared_data import PROJECT_ROOT, graphrag_output

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes


N = 300


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> tuple[Path, dict[str, int]]:
    out = tmp_path_factory.mktemp("synth") / "index"
    counts = write_synthetic_index(out, N, seed=7)
    return out, counts


@pytest.fixture(scope="module")
def tables(index) -> dict[str, list[dict]]:
    out, _ = index
    return {name: pq.read_table(out / f"{name}.parquet").to_pylist() for name in TABLES}


def table_digest(folder: Path) -> dict[str, str]:
    """A content hash per table (values, not file bytes)."""
    digests = {}
    for name in TABLES:
        table = pq.read_table(folder / f"{name}.parquet")
        digests[name] = hashlib.sha256(json.dumps(table.to_pylist(), sort_keys=True).encode()).hexdigest()
    return digests


def test_writes_the_v3_files_and_reports_their_row_counts(index):
    out, counts = index
    assert sorted(p.name for p in out.iterdir()) == sorted([f"{t}.parquet" for t in TABLES] + [MARKER])
    assert set(counts) == set(TABLES)
    for name in TABLES:
        assert pq.read_metadata(out / f"{name}.parquet").num_rows == counts[name]
    marker = json.loads((out / MARKER).read_text())
    assert marker["entities"] == N and marker["seed"] == 7 and marker["counts"] == counts


def test_schemas_match_real_graphrag_3_output(index):
    out, _ = index
    real = graphrag_output("christmas-carol-3.1.2")
    for name in TABLES:
        ours = pq.read_schema(out / f"{name}.parquet").remove_metadata()
        theirs = pq.read_schema(real / f"{name}.parquet").remove_metadata()
        assert ours.equals(theirs), f"{name}: {ours} != {theirs}"


def test_scale_ratios(index):
    _, c = index
    assert c["entities"] == N
    assert 2.5 * N <= c["relationships"] <= 3.5 * N
    assert 1.8 * N <= c["text_units"] <= 2.2 * N
    assert 0.8 * N <= c["covariates"] <= 1.2 * N
    assert N / 10 <= c["communities"] <= N / 5
    assert c["community_reports"] == c["communities"]
    assert 1 <= c["documents"] < c["text_units"]


def test_entity_titles_are_unique_upper_case_names(tables):
    titles = [e["title"] for e in tables["entities"]]
    assert len(set(titles)) == N
    assert all(re.fullmatch(r"[A-Z]+( [A-Z]+)*", t) for t in titles)
    assert {e["type"] for e in tables["entities"]} <= {"PERSON", "ORGANIZATION", "GEO", "EVENT"}
    assert len({e["id"] for e in tables["entities"]}) == N


def test_relationships_are_distinct_weighted_and_degree_skewed(tables):
    titles = {e["title"] for e in tables["entities"]}
    rels = tables["relationships"]
    assert all(r["source"] in titles and r["target"] in titles for r in rels)
    assert all(r["source"] != r["target"] for r in rels)
    assert len({frozenset((r["source"], r["target"])) for r in rels}) == len(rels)
    weights = np.array([r["weight"] for r in rels])
    assert weights.min() >= 1.0 and weights.max() <= 10.0
    assert np.median(weights) < 5.5  # skewed low
    degree = Counter(r["source"] for r in rels) + Counter(r["target"] for r in rels)
    assert all(e["degree"] == degree.get(e["title"], 0) for e in tables["entities"])
    values = np.array([degree.get(t, 0) for t in titles])
    assert values.max() >= 5 * np.median(values)
    by_title = {e["title"]: e["degree"] for e in tables["entities"]}
    assert all(r["combined_degree"] == by_title[r["source"]] + by_title[r["target"]] for r in rels)


def test_community_hierarchy_is_consistent(tables):
    comms = {c["community"]: c for c in tables["communities"]}
    all_ids = {e["id"] for e in tables["entities"]}
    assert len({c["level"] for c in comms.values()}) in (3, 4)
    assert min(c["level"] for c in comms.values()) == 0
    roots = [c for c in comms.values() if c["level"] == 0]
    assert all(c["parent"] == -1 for c in roots)
    root_members = [m for c in roots for m in c["entity_ids"]]
    assert len(root_members) == len(set(root_members)) and set(root_members) == all_ids  # a partition
    for c in comms.values():
        assert c["size"] == len(c["entity_ids"]) == len(set(c["entity_ids"])) > 0
        if c["parent"] != -1:
            parent = comms[c["parent"]]
            assert parent["level"] == c["level"] - 1 and c["community"] in parent["children"]
        if c["children"]:
            kids = [comms[k] for k in c["children"]]
            assert all(k["parent"] == c["community"] for k in kids)
            union = [m for k in kids for m in k["entity_ids"]]
            assert len(union) == len(set(union)) and set(union) == set(c["entity_ids"])
    # relationship_ids are the community's internal relationships
    members_title = {e["id"]: e["title"] for e in tables["entities"]}
    rels = {r["id"]: r for r in tables["relationships"]}
    for c in comms.values():
        names = {members_title[m] for m in c["entity_ids"]}
        assert all(rels[r]["source"] in names and rels[r]["target"] in names for r in c["relationship_ids"])


def test_reports_cover_every_community(tables):
    comms = {c["community"]: c for c in tables["communities"]}
    reports = tables["community_reports"]
    assert sorted(r["community"] for r in reports) == sorted(comms)
    for r in reports:
        c = comms[r["community"]]
        assert (r["level"], r["parent"], r["children"], r["size"]) == (c["level"], c["parent"], c["children"], c["size"])
        assert r["title"] and r["summary"] and 1.0 <= r["rank"] <= 10.0
        assert r["findings"] and all(f["summary"] and f["explanation"] for f in r["findings"])
        assert r["full_content"].startswith(f"# {r['title']}\n\n{r['summary']}")
        assert json.loads(r["full_content_json"])["title"] == r["title"]


def test_text_units_mention_their_entities_and_tile_their_documents(tables):
    titles = {e["id"]: e["title"] for e in tables["entities"]}
    units = sorted(tables["text_units"], key=lambda u: u["human_readable_id"])
    by_id = {u["id"]: u for u in units}
    assert len(by_id) == len(units)
    for u in units:
        assert u["entity_ids"] and all(titles[e] in u["text"] for e in u["entity_ids"])
    for e in tables["entities"]:
        assert e["text_unit_ids"] and all(e["title"] in by_id[t]["text"] for t in e["text_unit_ids"])
        assert e["frequency"] == len(e["text_unit_ids"])
    for r in tables["relationships"]:
        assert all(r["source"] in by_id[t]["text"] and r["target"] in by_id[t]["text"] for t in r["text_unit_ids"])
    docs = tables["documents"]
    assert sum(len(d["text_unit_ids"]) for d in docs) == len(units)
    for d in docs:
        assert d["text"] == "\n\n".join(by_id[t]["text"] for t in d["text_unit_ids"])
        assert all(by_id[t]["document_id"] == d["id"] for t in d["text_unit_ids"])


def test_claims_quote_their_text_unit(tables):
    titles = {e["title"] for e in tables["entities"]}
    units = {u["id"]: u for u in tables["text_units"]}
    claims = tables["covariates"]
    for c in claims:
        assert c["covariate_type"] == "claim" and c["type"] and c["description"]
        assert c["subject_id"] in titles and (c["object_id"] == "NONE" or c["object_id"] in titles)
        assert c["source_text"] in units[c["text_unit_id"]]["text"]
        assert c["id"] in units[c["text_unit_id"]]["covariate_ids"]
        assert c["status"] in ("TRUE", "FALSE", "SUSPECTED")
    assert any(c["object_id"] != "NONE" for c in claims) and any(c["object_id"] == "NONE" for c in claims)


def test_our_importer_reads_all_of_it(index):
    from graphrag_dag.drivers.ingest.importer import read_graphrag

    out, counts = index
    records = read_graphrag(out, embeddings="recompute")
    assert records.warnings == []
    got = records.counts()
    assert got["entities"] == counts["entities"]  # nothing synthesized: every title resolves
    assert got["edges"] == counts["relationships"]
    assert got["communities"] == counts["communities"]
    assert got["community_summaries"] == counts["community_reports"]
    assert got["claims"] == counts["covariates"]
    assert got["documents"] == counts["documents"]
    docs = {d.id: d for d in records.documents}
    units = [c for c in records.chunks if c.kind == "text_unit"]
    evidence = [c for c in records.chunks if c.kind == "evidence"]
    assert len(units) == counts["text_units"] and evidence
    for chunk in units + evidence:  # every chunk is placed in its document
        assert chunk.start is not None and docs[chunk.document_id].text[chunk.start : chunk.end] == chunk.text
    for claim in records.claims:  # and every claim quote is found
        assert claim.start is not None and docs[claim.document_id].text[claim.start : claim.end] == claim.source_text
    assert all(c.parent_id is not None for c in records.communities if c.level > 0)


def test_same_seed_same_data_different_seed_different_data(index, tmp_path):
    out, _ = index
    again = tmp_path / "again"
    other = tmp_path / "other"
    write_synthetic_index(again, N, seed=7)
    write_synthetic_index(other, N, seed=8)
    assert table_digest(again) == table_digest(out)
    for name in TABLES:  # byte-identical files with the same pyarrow
        assert (again / f"{name}.parquet").read_bytes() == (out / f"{name}.parquet").read_bytes()
    theirs = table_digest(other)
    assert all(theirs[name] != digest for name, digest in table_digest(out).items())
    titles = set(pq.read_table(out / "entities.parquet").column("title").to_pylist())
    assert len(titles & set(pq.read_table(other / "entities.parquet").column("title").to_pylist())) < N // 10


def test_refuses_bad_output_folders_and_counts(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(BadInput, match="not written by synth"):
        write_synthetic_index(tmp_path, 10)
    with pytest.raises(BadInput, match="not a folder"):
        write_synthetic_index(tmp_path / "notes.txt", 10)
    with pytest.raises(BadInput):
        write_synthetic_index(tmp_path / "new", 0)
    with pytest.raises(BadInput, match="seed"):
        write_synthetic_index(tmp_path / "new", 10, seed=-1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_overwrites_an_earlier_synth_output(tmp_path):
    out = tmp_path / "idx"
    write_synthetic_index(out, 50, seed=1)
    counts = write_synthetic_index(out, 20, seed=2)
    assert pq.read_metadata(out / "entities.parquet").num_rows == counts["entities"] == 20


@pytest.mark.parametrize("n", [1, 2, 5, 40])
def test_tiny_indexes_are_still_valid(tmp_path, n):
    from graphrag_dag.drivers.ingest.importer import read_graphrag

    counts = write_synthetic_index(tmp_path / "idx", n)
    assert counts["entities"] == n
    assert read_graphrag(tmp_path / "idx", embeddings="recompute").counts()["entities"] == n


def test_cli_synth_json(tmp_path):
    out = tmp_path / "cli"
    cmd = [sys.executable, "-m", "graphrag_dag.drivers.cli", "synth", "--entities", "200", "--out", str(out), "--json"]
    proc = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["counts"]["entities"] == 200 and report["seed"] == 0 and Path(report["out"]) == out
    assert report["counts"] == {t: pq.read_metadata(out / f"{t}.parquet").num_rows for t in TABLES}
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("x")
    bad = [sys.executable, "-m", "graphrag_dag.drivers.cli", "synth", "--entities", "5", "--out", str(tmp_path / "taken")]
    proc = subprocess.run(bad, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "not written by synth" in proc.stderr
