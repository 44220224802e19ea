"""Prompt budgets summed from block counts (dataflows/common/budget.py) against whole-prompt counts
with the real tokenizer, including the texts where a sum of plain block counts would be wrong."""

from __future__ import annotations

import random

import pytest

from graphrag_dag.dataflows.common.budget import SEPARATOR, Packed, PromptMeter
from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.resources import TokenCounter
from graphrag_dag.drivers.llm.tokens import TokenCounter as Cl100k

# Pieces chosen to sit at block edges: punctuation that absorbs line breaks, trailing spaces,
# digits, contractions, CJK, combining marks, CRLF and runs of blank lines.
PIECES = ["word", " word", "Word", "12345", "3.14", ".", "...", "!", "?", ",", "'s", "'ll", " ", "  ", "\t",
          "\n", "\n\n", "\r\n", " \n", "\n ", "中文", "的", "東京タワー", "é", "e\u0301", "[x]", "- [c1] ",
          "{", "}", "\"", "“", "—", "€", "🙂", "http://a.b/c", "a_b", "ß"]


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(PIECES) for _ in range(n))


def _block(rng: random.Random) -> str:
    return f"[community {rng.randint(0, 999)}]\n" + _text(rng, rng.randint(0, 40))


@pytest.fixture(scope="module")
def counter() -> Cl100k:
    c = Cl100k()
    assert c.name == "cl100k_base" and c.line_start_splits
    return c


def test_a_line_start_always_begins_a_token(counter):
    rng = random.Random(7)
    for _ in range(3000):
        a = _text(rng, rng.randint(0, 30)) + "\n"
        b = _text(rng, rng.randint(0, 30)).lstrip() or "x"
        assert counter.count(a + b) == counter.count(a) + counter.count(b), (a, b)


def test_plain_sums_would_be_wrong_without_the_following_text(counter):
    """Why shares carry what follows a block: "." and "\\n\\n" are two tokens apart, one together."""
    assert counter.count("[a] end." + SEPARATOR) < counter.count("[a] end.") + counter.count(SEPARATOR)


TEMPLATES = ["Question: {query}\n\nReports:\n{content}\n", "Q={query} {content} done.", "{content}",
             "intro\n{content}\n\n--\n{query}\n"]


@pytest.mark.parametrize("template", TEMPLATES)
def test_metered_prompts_equal_whole_counts(counter, template):
    rng = random.Random(hash(template) % 1000)
    meter = PromptMeter(counter, template, "content", query="Who founded the " + _text(rng, 5) + "?")
    assert meter.empty() == counter.count(meter.text(()))
    for _ in range(150):
        blocks = [_block(rng) for _ in range(rng.randint(1, 8))]
        meter.remember(blocks)
        whole = counter.count(meter.text(blocks))
        assert meter.tokens(blocks) == whole
        packed = Packed()
        for b in blocks:
            packed = meter.grown(packed, b)
        assert packed.blocks == tuple(blocks) and packed.tokens == whole


class _Words(TokenCounter):
    """A counter that does not declare line_start_splits (one token per whitespace-separated word
    and per line break): the meter must count whole prompts."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split()) + text.count("\n")


def test_a_counter_without_the_property_is_asked_for_whole_prompts():
    words = _Words()
    meter = PromptMeter(words, TEMPLATES[0], "content", query="q")
    rng = random.Random(3)
    for _ in range(50):
        blocks = [_block(rng) for _ in range(rng.randint(1, 5))]
        packed = Packed()
        for b in blocks:
            packed = meter.grown(packed, b)
        assert packed.tokens == meter.tokens(blocks) == words.count(meter.text(blocks))


def test_blocks_that_start_with_a_space_are_counted_whole(counter):
    meter = PromptMeter(counter, TEMPLATES[0], "content", query="q")
    blocks = ["[a] one.", " two.", "\nthree", "[b] four."]
    packed = Packed()
    for b in blocks:
        packed = meter.grown(packed, b)
    assert packed.tokens == meter.tokens(blocks) == counter.count(meter.text(blocks))


@pytest.mark.parametrize("template", ["no slot here", "{content} and {content}"])
def test_a_template_must_hold_its_slot_once(counter, template):
    with pytest.raises(BadInput, match="exactly once"):
        PromptMeter(counter, template, "content")


def test_batched_counts_equal_single_counts_and_are_remembered():
    fresh = Cl100k()
    rng = random.Random(11)
    texts = [_text(rng, 500) for _ in range(200)]  # large enough for the threaded path
    assert sum(map(len, texts)) >= 200_000
    many = fresh.count_many(texts)
    assert many == [Cl100k()._encoded(t) for t in texts]
    assert all(fresh._known.get(t) == n for t, n in zip(texts, many) if len(t) <= fresh.CACHED_CHARS)


@pytest.mark.slow
def test_batched_counts_hold_one_batch_of_token_lists_at_a_time():
    """An import counts every evidence line at once (2M at 1M entities): only the counts may stay,
    not every line's list of token ids until the last is encoded."""
    import tracemalloc

    rng = random.Random(12)
    texts = [_text(rng, 2000) for _ in range(600)]
    expected = [Cl100k()._encoded(t) for t in texts]
    peaks = {}
    for batch in (len(texts), 50):  # all at once, and in batches (the last one short: 600 = 12·50)
        fresh = Cl100k()
        fresh.ENCODE_BATCH = batch
        fresh._known = type(fresh._known)(0, 0)  # nothing remembered: every text is encoded
        tracemalloc.start()
        try:
            assert fresh.count_many(texts) == expected
            peaks[batch] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peaks[50] < peaks[len(texts)] / 4, peaks
