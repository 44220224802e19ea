"""A chunk's or claim's evidence-line count, written with it, stands in for counting the line in every
local search (dataflows/common/line_tokens.py). The writer must store it for every evidence chunk
and every claim a context can hold, as the context writes the line; the context must come out the same whether it adds stored counts or
counts; another tokenizer must ignore them; and a namespace written before the column (NULL counts)
must answer the same, only by counting."""

from __future__ import annotations

import dataclasses

import pytest

from graphrag_dag.dataflows.common.line_tokens import chunk_line, claim_line, claim_statement
from graphrag_dag.dataflows.local.local_context import _evidence_line, local_context
from graphrag_dag.drivers.ingest.demo import demo_queries, demo_records
from graphrag_dag.drivers.api.options import LocalOptions
from graphrag_dag.drivers.llm.tokens import TokenCounter


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    c = TokenCounter()
    assert c.name == "cl100k_base", "the bundled cl100k encoding must load"
    return c


class _Estimate(TokenCounter):
    """Another tokenizer (the ~4 characters a token estimate), for which no count is stored."""

    def __init__(self) -> None:
        super().__init__()
        self.name, self._enc = "estimate-4cpt", None


def test_a_chunks_line_is_the_one_its_stored_count_was_made_for():
    # Changing this line needs a migration that clears chunks.line_tokens (line_tokens.py).
    assert chunk_line("c1", "d1", "  two\n lines\there ") == "[c1] (chunk; doc=d1) two lines here"
    assert chunk_line("c1", None, "") == "[c1] (chunk; doc=None) "
    statement = claim_statement("Mara Quill", "FUNDING", "TRUE", "funded\nthe  institute")
    assert statement == "Mara Quill — FUNDING (TRUE): funded\nthe  institute"
    assert claim_statement("Mara", "T", None, "d") == claim_statement("Mara", "T", "", "d") == "Mara — T: d"
    assert claim_line("k1", "d1", "c1", statement, 'a "quote"') == \
        '[k1] (claim; doc=d1 chunk=c1) Mara Quill — FUNDING (TRUE): funded the institute Source: "a "quote""'
    assert claim_line("k1", "d1", "k1", "s", None) == "[k1] (claim; doc=d1) s"


def test_the_writer_stores_every_evidence_chunks_count(rag, counter):
    with rag.store.pool.connection() as conn:
        rows = conn.execute("SELECT id, document_id, kind, text, line_tokens FROM chunks"
                            " WHERE namespace = 'demo'").fetchall()
    evidence = [(chunk_line(cid, doc, text), n) for cid, doc, kind, text, n in rows if kind == "evidence"]
    assert evidence and all(n == counter._encoded(line) for line, n in evidence)
    assert all(n is None for *_, kind, _, n in rows if kind != "evidence")  # units are never evidence lines
    with rag.store.pool.connection() as conn:
        claims = conn.execute("SELECT count(*), count(line_tokens) FROM claims WHERE namespace = 'demo'"
                              " AND subject_name IS NOT NULL").fetchone()
    assert claims[0] > 0 and claims[0] == claims[1]


def test_stored_counts_are_the_counts_of_the_lines_a_search_writes(rag, counter):
    """Every evidence item of every demo question, claims and chunks, carries the count of exactly
    the line the context writes for it."""
    seen = {"claim": 0, "chunk": 0}
    for query in demo_queries().values():
        for item in rag.run("local", query, "demo", final_vars=["candidate_evidence"],  # few chunks: claims come through
                            options=LocalOptions(evidence_chunk_cap=2)).values["candidate_evidence"]:
            assert item.line_tokens == counter._encoded(_evidence_line(item)), item.id
            seen[item.kind] += 1
    assert seen["claim"] and seen["chunk"]


@pytest.mark.parametrize("budget", [12000, 300])
def test_the_context_is_the_same_whether_chunk_counts_are_stored_or_counted(rag, counter, budget):
    run = rag.run("local", demo_queries()["local"], "demo", final_vars=["selected_communities", "candidate_evidence"],
                  options=LocalOptions(context_token_budget=budget, evidence_chunk_cap=2))
    evidence = run.values["candidate_evidence"]  # whole chunks and claims: the items that carry stored counts
    assert {e.kind for e in evidence} == {"chunk", "claim"} and all(e.line_tokens is not None for e in evidence)
    communities = run.values["selected_communities"]
    stored = local_context(communities, evidence, counter, budget)
    counted = local_context(communities, [dataclasses.replace(e, line_tokens=None) for e in evidence],
                            TokenCounter(), budget)
    assert dataclasses.astuple(stored) == dataclasses.astuple(counted)
    # another tokenizer's context ignores cl100k counts, even absurd ones
    absurd = [dataclasses.replace(e, line_tokens=10**6) for e in evidence]
    assert dataclasses.astuple(local_context(communities, absurd, _Estimate(), budget)) == \
        dataclasses.astuple(local_context(communities, evidence, _Estimate(), budget))
    summaries, lines = (part.split("\n")[1:] for part in stored.text.split("\n\n"))  # after their headers
    headers = counter._encoded("[Community summaries]") + counter._encoded("[Evidence]")
    assert len(lines) == len(stored.evidence_ids)
    assert stored.tokens == headers + sum(counter._encoded(line) + 1 for line in [*summaries, *lines])


def test_a_namespace_written_before_the_column_answers_the_same(rag):
    """Lines with NULL counts (as a namespace written before migration 014 has them) are counted
    whole: every query's evidence, sources, context and answer are those of the stored counts."""
    rag.write("demo_uncounted", demo_records(), replace=True, source="demo")
    try:
        with rag.store.pool.connection() as conn:
            cleared = [conn.execute(f"UPDATE {table} SET line_tokens = NULL WHERE namespace = 'demo_uncounted'"
                                    " AND line_tokens IS NOT NULL").rowcount for table in ("chunks", "claims")]
        assert all(n > 0 for n in cleared)
        for query in demo_queries().values():
            a = rag.run("local", query, "demo", final_vars=["local_result"]).values["local_result"]
            b = rag.run("local", query, "demo_uncounted", final_vars=["local_result"]).values["local_result"]
            assert all(e.line_tokens is None for e in b.evidence)
            assert (a.context.text, a.context.tokens, a.context.evidence_ids, a.answer.text) == \
                (b.context.text, b.context.tokens, b.context.evidence_ids, b.answer.text)
            assert [s.as_json() for s in a.sources] == [s.as_json() for s in b.sources]
    finally:
        rag.store.drop("demo_uncounted")
