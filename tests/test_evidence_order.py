"""`candidate_evidence` on random inputs against its rule, written here as a sort: the items deduplicated by
id (claims first, then recalled chunks, then the sources' chunks), the recalled chunks before the
claims and the sources' other chunks, then ordered by the rank of the source their chunk belongs to
(no ranked source last), claims before chunks within one rank, then as first seen; each kind capped in that order; then the claims that only restate their quote left
out when their chunk is an item or an earlier such claim has the same quote.

Then `evidence`, the candidates as passages, against its rule written here from its definition:
BM25 by the question's terms and the candidate's rank fused, then the greedy choice by relevance
and novelty within a window, computed afresh at every step."""

from __future__ import annotations

import math
import random

import pytest

from graphrag_dag.dataflows.local.chunk_recall import RecalledChunk
from graphrag_dag.dataflows.common.textproc import passage_terms, sentence_spans
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.local import evidence as module
from graphrag_dag.dataflows.local.evidence import EvidenceItem, Source, candidate_evidence, evidence
from graphrag_dag.dataflows.local.query_parsing import ParsedQuery


def _rule(claims, recalled, source_chunks, sources, chunk_units, claim_cap, chunk_cap):
    items: dict[str, EvidenceItem] = {}
    for c in claims:
        items.setdefault(c.id, c)
    for ch in [*recalled, *source_chunks]:
        items.setdefault(ch.id, EvidenceItem.of_chunk(ch))
    rank = {s.unit_id: n for n, s in enumerate(sources)}
    units = {**chunk_units, **{c.id: c.parent_id or c.id for c in source_chunks}}
    seen = list(items)
    found = {c.id for c in recalled}
    ordered = sorted(items.values(), key=lambda e: (not (e.kind == "chunk" and e.id in found),
                                                    rank.get(units.get(e.chunk_id or "", ""), len(rank)),
                                                    e.kind != "claim", seen.index(e.id)))
    left = {"claim": claim_cap, "chunk": chunk_cap}
    capped = []
    for e in ordered:
        if left[e.kind] > 0:
            left[e.kind] -= 1
            capped.append(e)
    chunk_ids = {e.id for e in capped if e.kind == "chunk"}
    out, quotes = [], set()
    for e in capped:
        if e.kind == "claim" and e.statement == e.text:
            if e.chunk_id in chunk_ids or e.text in quotes:
                continue
            quotes.add(e.text)
        out.append(e)
    return out


def _inputs(rng: random.Random):
    ids = [f"x{n}" for n in range(rng.randint(0, 30))]  # claims and chunks draw from one pool of ids
    units = [f"u{n}" for n in range(rng.randint(1, 8))]

    def chunk() -> RecalledChunk:
        return RecalledChunk(rng.choice(ids), "text", "d", rng.choice([*units, None]), 0, 4, 1.0, "vector")

    def claim() -> EvidenceItem:
        quote = "quote " + rng.choice("qrstuvwxyz")
        statement = rng.choice([quote, "a statement of its own"])  # an offline claim restates its quote
        return EvidenceItem(rng.choice(ids), "claim", quote, "d", rng.choice([*ids, None]), 0, 1, statement, 1.0)

    claims = [claim() for _ in range(rng.randint(0, 25))] if ids else []
    recalled = [chunk() for _ in range(rng.randint(0, 15))] if ids else []
    source_chunks = [chunk() for _ in range(rng.randint(0, 10))] if ids else []
    chunk_units = {rng.choice(ids): rng.choice(units) for _ in range(rng.randint(0, 20))} if ids else {}
    sources = [Source(u, "d", "t", 0, 1, 1.0, ()) for u in rng.sample(units, rng.randint(0, len(units)))]
    return claims, recalled, source_chunks, sources, chunk_units, rng.randint(0, 8), rng.randint(0, 8)


@pytest.mark.parametrize("seed", range(40))
def test_candidate_evidence_follows_its_rule(seed):
    claims, recalled, source_chunks, sources, chunk_units, claim_cap, chunk_cap = _inputs(random.Random(seed))
    got = candidate_evidence(claims, recalled, sources, source_chunks, chunk_units, claim_cap=claim_cap,
                   evidence_chunk_cap=chunk_cap)
    assert got == _rule(claims, recalled, source_chunks, sources, chunk_units, claim_cap, chunk_cap)


WORDS = "storm surge tide flood wall harbour funded study basal cell carcinoma skin lesion".split()


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))).capitalize() + "."


def _passage_rule(candidates: list[EvidenceItem], question: str) -> list[EvidenceItem]:
    passages, seen = [], set()
    for rank, item in enumerate(candidates):
        spans = sentence_spans(item.text) if item.kind == "chunk" else []
        pieces = [item.excerpt(a, b) for a, b in spans] if len(spans) > 1 else [item]
        for p in pieces:
            key = " ".join(p.text.split()).casefold() if p.kind == "chunk" else p.id
            if key not in seen:
                seen.add(key)
                said = f"{p.statement} {p.text}" if p.kind == "claim" else p.text
                passages.append((rank, p, passage_terms(said)))
    q = passage_terms(question)
    n = len(passages)
    mean = max(sum(len(t) for *_, t in passages) / max(n, 1), 1.0)
    k1, b = module.BM25_K1, module.BM25_B

    def bm25(terms: frozenset[str]) -> float:
        idf = sum(math.log1p((n - df + 0.5) / (df + 0.5))
                  for df in (sum(w in t for *_, t in passages) for w in terms & q))
        return idf * (k1 + 1) / (1 + k1 * (1 - b) + k1 * b * len(terms) / mean)

    scores = [bm25(t) for *_, t in passages]
    lexical = sorted(range(n), key=lambda i: -scores[i])
    k = LOCAL.rrf_k
    relevance = {i: module.CANDIDATE_LISTS / (k + 1 + passages[i][0]) + 1 / (k + 1 + lexical.index(i)) for i in range(n)}
    waiting, taken, covered = sorted(range(n), key=lambda i: -relevance[i]), [], set()
    while waiting:
        def value(i: int) -> float:
            terms = passages[i][2]
            return relevance[i] * (1 - module.NOVELTY_WEIGHT * len(terms & covered) / max(len(terms), 1))
        best = max(waiting[:module.NOVELTY_WINDOW], key=value)
        waiting.remove(best)
        taken.append(passages[best][1])
        covered |= passages[best][2]
    return taken


@pytest.mark.parametrize("seed", range(30))
def test_evidence_is_the_candidates_passages_by_relevance_and_novelty(seed):
    rng = random.Random(seed)
    candidates = []
    for n in range(rng.randint(0, 40)):
        text = " ".join(_sentence(rng) for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.3:
            candidates.append(EvidenceItem(f"k{n}", "claim", text, "d", f"c{n}", 0, len(text), _sentence(rng), 1.0))
        else:
            candidates.append(EvidenceItem(f"c{n}", "chunk", text, "d", f"c{n}", 10, 10 + len(text)))
    question = " ".join(rng.sample(WORDS, 3)) + "?"
    got = evidence(candidates, question, ParsedQuery([], [], [], "rules"))
    assert got == _passage_rule(candidates, question)
    texts = [" ".join(e.text.split()).casefold() for e in got if e.kind == "chunk"]
    assert len(texts) == len(set(texts))  # no sentence twice
    for e in got:
        if e.is_excerpt:  # placed in the document as its chunk is, and named by its span in it
            chunk = next(c for c in candidates if c.id == e.chunk_id)
            a, b = e.start - chunk.start, e.end - chunk.start
            assert e.id == f"{chunk.id}#{a}-{b}" and chunk.text[a:b] == e.text


def test_the_sentence_that_says_what_the_question_asks_comes_first():
    text = "The harbour wall was built in 1902. Basal cell carcinoma arises from basal cells. It is common."
    chunks = [EvidenceItem("c1", "chunk", text, "d", "c1", 0, len(text))]
    got = evidence(chunks, "From which cells does basal cell carcinoma arise?", ParsedQuery([], [], [], "rules"))
    assert [e.id for e in got][0] == "c1#36-81" and got[0].text == "Basal cell carcinoma arises from basal cells."
    assert sorted(e.text for e in got) == sorted(text[a:b] for a, b in sentence_spans(text))
