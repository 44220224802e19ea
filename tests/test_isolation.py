"""Tenant isolation: two namespaces with the same entity names and different facts never leak
into each other's results, whatever the query."""

from __future__ import annotations

import copy
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

NAMES = ["Mara Quill", "Alice Tern", "Al", "Stormwatch Project", "Corran Sound", "Ida Marsh", "青岚茶社", "林晓雨",
         "Dr. Quill", "Greywick Lighthouse Institute"]


def _tenant(prefix: str, marker: str):
    from graphrag_dag.drivers.ingest.demo import demo_records

    rec = copy.deepcopy(demo_records())
    p = lambda i: None if i is None else f"{prefix}{i}"  # noqa: E731
    for d in rec.documents:
        d.id = p(d.id)
    for c in rec.chunks:
        c.id, c.document_id, c.parent_id = p(c.id), p(c.document_id), p(c.parent_id)
    for e in rec.entities:
        e.id, e.description = p(e.id), f"{marker} {e.description}"
    for a in rec.aliases:
        a.entity_id = p(a.entity_id)
    for e in rec.edges:
        e.id, e.source_id, e.target_id = p(e.id), p(e.source_id), p(e.target_id)
    for c in rec.communities:
        c.id, c.parent_id, c.member_ids = p(c.id), p(c.parent_id), [p(m) for m in c.member_ids]
    for s in rec.summaries:
        s.community_id, s.summary = p(s.community_id), f"{marker} {s.summary}"
    for c in rec.claims:
        c.id, c.subject_id, c.object_id = p(c.id), p(c.subject_id), p(c.object_id)
        c.document_id, c.chunk_id, c.description = p(c.document_id), p(c.chunk_id), f"{marker} {c.description}"
    return rec


@pytest.fixture(scope="module")
def tenants(rag):
    rag.write("tenant-a", _tenant("a-", "FACT-A"), replace=True)
    rag.write("tenant-b", _tenant("b-", "FACT-B"), replace=True)
    yield rag
    rag.store.drop("tenant-a")
    rag.store.drop("tenant-b")


def _ids(res: dict) -> list[str]:
    ids = [m["id"] for m in res["matched_entities"]] + [c["id"] for c in res["communities"]]
    for e in res["evidence"]:
        ids += [e["id"], e["document_id"], e["chunk_id"]]
    return [i for i in ids if i is not None]


queries = st.one_of(
    st.sampled_from(NAMES).map(lambda n: f"What about {n}?"),
    # Queries of control characters only are refused as empty (tests/test_cli.py); any other text runs.
    st.text(min_size=1, max_size=80).filter(lambda s: re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", " ", s).strip()),
    st.lists(st.sampled_from(NAMES + ["%", "_", "\\", "'", '"', ";--", "🙂", "\u202e"]), min_size=1, max_size=5)
    .map(" ".join),
)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=queries, tenant=st.sampled_from(["a", "b"]))
def test_results_never_cross_namespaces(tenants, query, tenant):
    res = tenants.local_search(query, f"tenant-{tenant}")
    other = "b" if tenant == "a" else "a"
    assert all(i.startswith(f"{tenant}-") for i in _ids(res)), _ids(res)
    assert f"FACT-{other.upper()}" not in " ".join(c["summary"] for c in res["communities"])
    assert f"FACT-{other.upper()}" not in " ".join(str(e.get("statement", "")) for e in res["evidence"])


def test_global_search_stays_in_its_namespace(tenants):
    res = tenants.global_search("What are the main themes?", "tenant-a")
    assert res["status"] == "completed"
    assert all(c.startswith("a-") for m in res["map_answers"] for c in m["community_ids"])
    assert "FACT-B" not in res["answer"]


def test_unscoped_select_through_the_query_role_sees_one_namespace(tenants):
    db = tenants.store.scoped("tenant-a")
    for table in ("entities", "claims", "chunks", "community_summaries"):
        assert {r[0] for r in db.rows(f"SELECT namespace FROM {table}")} == {"tenant-a"}, table
    facts = [r[0] for r in db.rows("SELECT description FROM claims")]
    assert facts and all(f.startswith("FACT-A") for f in facts)
