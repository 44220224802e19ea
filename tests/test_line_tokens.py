"""A chunk's token count, written with its text, stands in for counting the text in every local
search (dataflows/common/line_tokens.py). The sum of the label's count and the stored count must be
exactly the line's count, on any text; the writer must store it for every evidence chunk; and a
namespace written before the column (NULL counts) must give the same context, only by counting."""

from __future__ import annotations

import dataclasses

import pytest

from graphrag_dag.dataflows.common.line_tokens import line_tokens, spaced_text, text_tokens
from graphrag_dag.dataflows.local.local_context import _evidence_line, local_context
from graphrag_dag.drivers.demo import demo_queries, demo_records
from graphrag_dag.drivers.options import LocalOptions
from graphrag_dag.drivers.tokens import TokenCounter

TEXTS = [
    "", "   ", "plain words after a label", "1923 begins with digits", "42", "'s a contraction first",
    "'T upper contraction", "\"quoted\" first", "(bracketed) first", ")) closing first", "— a dash first",
    "   leading   and\ttabs\nand\n\nnewlines   ", "naïve café São Paulo", "東京都は日本の首都です。", "Привет, мир",
    "emoji 🙂 in 🙂🙂 text", "\u00a0no-break\u00a0spaces\u3000ideographic", "<|endoftext|> special-looking",
    "a" * 300, "1234567890" * 5, "mixed3digits and letters4you", "  \n  ", "x)y(z", "...ellipsis first",
]
LABELS = ["[c1] (chunk; doc=d1)", "[e:17] (chunk; doc=None)", "[x'] (chunk; doc=a b)", "[1] (chunk; doc=9)",
          "[東京] (chunk; doc=ドキュメント)", "[a)] (chunk; doc=)", "[" + "f" * 128 + "] (chunk; doc=" + "e" * 128 + ")"]


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    c = TokenCounter()
    assert c.name == "cl100k_base", "the bundled cl100k encoding must load"
    return c


@pytest.mark.parametrize("text", TEXTS)
def test_label_and_stored_text_count_sum_to_the_lines_count(counter, text):
    for label in LABELS:
        whole = counter._encoded(label + spaced_text(text))
        assert counter._encoded(label) + counter._encoded(spaced_text(text)) == whole, (label, text)
        assert line_tokens(label, text, text_tokens(text, counter), counter) == whole
        assert line_tokens(label, text, None, counter) == whole


def test_a_stored_count_is_used_only_where_it_applies(counter):
    class Estimate(TokenCounter):
        def __init__(self) -> None:
            super().__init__()
            self.name = "estimate-4cpt"

    other = Estimate()
    assert text_tokens("some text", other) is None  # never stored for another tokenizer
    # a count stored for cl100k is ignored by another counter, and after a label it cannot split from
    assert line_tokens("[c] (chunk; doc=d)", "text", 10_000, other) == other.count("[c] (chunk; doc=d) text")
    assert line_tokens("[c] label without a bracket", "text", 10_000, counter) == \
        counter.count("[c] label without a bracket text")


def test_the_writer_stores_every_evidence_chunks_count(rag, counter):
    with rag.store.pool.connection() as conn:
        rows = conn.execute("SELECT kind, text, text_tokens FROM chunks WHERE namespace = 'demo'").fetchall()
    evidence = [(text, n) for kind, text, n in rows if kind == "evidence"]
    assert evidence and all(n == counter._encoded(spaced_text(text)) for text, n in evidence)
    assert all(n is None for kind, _, n in rows if kind != "evidence")  # units never end a context line


@pytest.mark.parametrize("budget", [12000, 300])
def test_the_context_is_the_same_whether_chunk_counts_are_stored_or_counted(rag, counter, budget):
    run = rag.run("local", demo_queries()["local"], "demo", final_vars=["selected_communities", "evidence"],
                  options=LocalOptions(context_token_budget=budget))
    evidence = run.values["evidence"]
    chunks = [e for e in evidence if e.kind == "chunk"]
    assert chunks and all(e.text_tokens is not None for e in chunks)
    stored = local_context(run.values["selected_communities"], evidence, counter, None, budget)
    counted = local_context(run.values["selected_communities"],
                            [dataclasses.replace(e, text_tokens=None) for e in evidence], TokenCounter(), None, budget)
    assert dataclasses.astuple(stored) == dataclasses.astuple(counted)
    kept = [e for e in evidence if e.id in stored.evidence_ids]
    summaries = stored.text.split("\n\n")[0].split("\n")[1:]  # after its header
    headers = counter._encoded("[Community summaries]") + counter._encoded("[Evidence]")
    assert stored.tokens == headers + sum(counter._encoded(line) + 1 for line in
                                          [*summaries, *map(_evidence_line, kept)])


def test_a_namespace_written_before_the_column_answers_the_same(rag):
    """Chunks with NULL counts (as a namespace written before migration 014 has them) are counted
    whole: every query's evidence, sources, context and answer are those of the stored counts."""
    rag.write("demo_uncounted", demo_records(), replace=True, source="demo")
    try:
        with rag.store.pool.connection() as conn:
            cleared = conn.execute("UPDATE chunks SET text_tokens = NULL WHERE namespace = 'demo_uncounted'"
                                   " AND text_tokens IS NOT NULL").rowcount
        assert cleared > 0
        for query in demo_queries().values():
            a = rag.run("local", query, "demo", final_vars=["local_result"]).values["local_result"]
            b = rag.run("local", query, "demo_uncounted", final_vars=["local_result"]).values["local_result"]
            assert all(e.text_tokens is None for e in b.evidence if e.kind == "chunk")
            assert (a.context.text, a.context.tokens, a.context.evidence_ids, a.answer.text) == \
                (b.context.text, b.context.tokens, b.context.evidence_ids, b.answer.text)
            assert [s.as_json() for s in a.sources] == [s.as_json() for s in b.sources]
    finally:
        rag.store.drop("demo_uncounted")
