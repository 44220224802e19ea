"""The local context: labelled lines added whole within the token budget, its total the sum of
its lines' counts (plus a newline each), and its labels spend no tokens twice on one id (the
excerpts of one chunk share its line)."""

from __future__ import annotations

import pytest

from graphrag_dag.drivers.ingest.demo import demo_queries
from graphrag_dag.drivers.api.options import LocalOptions
from graphrag_dag.drivers.llm.tokens import TokenCounter

QUERY = demo_queries()["local"]
NODES = ["selected_communities", "evidence", "local_context"]


@pytest.mark.parametrize("budget", [12000, 400, 150])
def test_the_context_is_its_lines_counted_within_the_budget(rag, budget):
    v = rag.run("local", QUERY, "demo", final_vars=NODES, options=LocalOptions(context_token_budget=budget)).values
    context = v["local_context"]
    fresh = TokenCounter()
    lines = [ln for ln in context.text.splitlines() if ln and ln not in ("[Community summaries]", "[Evidence]")]
    items = {e.id: e for e in v["evidence"]}
    labels = list(dict.fromkeys(items[i].label for i in context.evidence_ids))  # a chunk's excerpts share a line
    assert len(lines) == len(context.community_ids) + len(labels)
    assert len(labels) < len(context.evidence_ids) or budget < 12000  # excerpts did join their chunks' lines
    expected = fresh.count("[Community summaries]") + fresh.count("[Evidence]") + sum(fresh.count(ln) + 1 for ln in lines)
    assert context.tokens == expected <= budget
    assert context.truncated == (budget < 12000)  # the whole context fits the default budget
    assert len(context.evidence_ids) <= len(v["evidence"])
    if budget == 150:
        assert context.truncated  # the small budgets do drop lines


def test_a_chunk_is_named_once_and_a_claim_names_its_chunk(rag):
    # few chunks, so that claims whose chunks are not evidence come through
    v = rag.run("local", QUERY, "demo", final_vars=NODES, options=LocalOptions(evidence_chunk_cap=2)).values
    context, items = v["local_context"], {e.id: e for e in v["evidence"]}
    kinds = {items[i].kind for i in context.evidence_ids}
    assert kinds == {"chunk", "claim"}, kinds
    for item_id in context.evidence_ids:
        item = items[item_id]
        lines = [ln for ln in context.text.splitlines() if ln.startswith(f"[{item.label}] ")]
        assert len(lines) == 1 and f"doc={item.document_id}" in lines[0]  # one line per chunk or claim
        if item.kind == "chunk":
            assert item.label == item.chunk_id and lines[0].count(item.chunk_id) == 1, lines[0]  # no `chunk=` again
            assert " ".join(item.text.split()) in lines[0]  # an excerpt is written on its chunk's line
        else:
            assert f"chunk={item.chunk_id})" in lines[0], lines[0]


def test_no_sentence_is_spent_twice(rag):
    """A claim whose chunk is evidence is left out, and a line repeats no sentence the context holds."""
    from graphrag_dag.dataflows.common.textproc import sentence_spans

    for query in demo_queries().values():
        v = rag.run("local", query, "demo", final_vars=NODES).values
        bodies = [ln.split(") ", 1)[-1] if ln.startswith("[") and "(chunk;" in ln or "(claim;" in ln else ln.split(": ", 1)[-1]
                  for ln in v["local_context"].text.splitlines() if ln.startswith("[") and not ln.endswith("]")]
        sentences = [" ".join(b[s:e].split()).casefold() for b in bodies for s, e in sentence_spans(b)]
        assert sentences and len(sentences) == len(set(sentences)), query
