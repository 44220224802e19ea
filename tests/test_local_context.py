"""The local context counts ahead the lines of recalled chunks (`recalled_line_tokens`, while the
graph half of the DAG waits on the database) and of the selected summaries (`summary_line_tokens`,
while the claims are read), and must come out exactly as if it had counted every line itself: the
same lines, the same ids, the same token total, under any budget. Its labels spend no tokens twice
on one id."""

from __future__ import annotations

import pytest

from graphrag_dag.dataflows.local.local_context import local_context
from graphrag_dag.drivers.demo import demo_queries
from graphrag_dag.drivers.options import LocalOptions
from graphrag_dag.drivers.tokens import TokenCounter

QUERY = demo_queries()["local"]
NODES = ["selected_communities", "evidence", "recalled_chunks", "recalled_line_tokens", "summary_line_tokens",
         "local_context"]


class _Recording(TokenCounter):
    """The real cl100k counter, remembering which texts it was asked to count."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def count(self, text: str) -> int:
        self.asked.append(text)
        return super().count(text)


@pytest.mark.parametrize("budget", [12000, 400, 150])
def test_counted_ahead_or_not_the_context_is_the_same(rag, budget):
    run = rag.run("local", QUERY, "demo", final_vars=NODES, options=LocalOptions(context_token_budget=budget))
    v = run.values
    assert v["recalled_line_tokens"], "the demo question recalls chunks"
    fresh = TokenCounter()
    assert all(fresh._encoded(line) == n for line, n in v["recalled_line_tokens"].items())
    assert v["summary_line_tokens"], "the demo question selects communities"
    assert all(fresh._encoded(line) == n for line, n in v["summary_line_tokens"].items())
    alone = local_context(v["selected_communities"], v["evidence"], fresh, None, budget)
    assert (v["local_context"].text, v["local_context"].evidence_ids, v["local_context"].community_ids,
            v["local_context"].tokens, v["local_context"].truncated) == (
        alone.text, alone.evidence_ids, alone.community_ids, alone.tokens, alone.truncated)
    if budget == 150:
        assert alone.truncated  # the small budgets do drop lines, so the decisions are compared too


def test_recalled_chunks_in_the_context_are_looked_up_not_counted(rag):
    run = rag.run("local", QUERY, "demo", final_vars=NODES)
    v = run.values
    recorder = _Recording()
    context = local_context(v["selected_communities"], v["evidence"], recorder, v["recalled_line_tokens"])
    recalled = {c.id for c in v["recalled_chunks"]}
    in_context = [e for e in v["evidence"] if e.id in recalled and e.id in context.evidence_ids]
    assert in_context
    counted_again = [t for t in recorder.asked if t.startswith(tuple(f"[{e.id}] " for e in in_context))]
    assert counted_again == []
    assert any(t.startswith("[community ") or "(claim;" in t for t in recorder.asked)  # the others still are


def test_selected_summaries_in_the_context_are_looked_up_not_counted(rag):
    v = rag.run("local", QUERY, "demo", final_vars=NODES).values
    recorder = _Recording()
    context = local_context(v["selected_communities"], v["evidence"], recorder, v["recalled_line_tokens"],
                            summary_line_tokens=v["summary_line_tokens"])
    assert context.community_ids
    assert [t for t in recorder.asked if t.startswith("[community ")] == []
    assert context.text == v["local_context"].text


def test_a_chunk_is_named_once_and_a_claim_names_its_chunk(rag):
    v = rag.run("local", QUERY, "demo", final_vars=NODES).values
    context, items = v["local_context"], {e.id: e for e in v["evidence"]}
    kinds = {items[i].kind for i in context.evidence_ids}
    assert kinds == {"chunk", "claim"}, kinds
    for item_id in context.evidence_ids:
        item = items[item_id]
        line = next(ln for ln in context.text.splitlines() if ln.startswith(f"[{item_id}] "))
        assert f"doc={item.document_id}" in line
        if item.kind == "chunk":
            assert line.count(item.chunk_id) == 1, line  # its label is its chunk id; no `chunk=` again
        else:
            assert f"chunk={item.chunk_id})" in line, line
