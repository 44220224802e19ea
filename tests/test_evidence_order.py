"""`evidence` on random inputs against its rule, written here as a sort: the items deduplicated by
id (claims first, then recalled chunks, then the sources' chunks), the recalled chunks before the
claims and the sources' other chunks, then ordered by the rank of the source their chunk belongs to
(no ranked source last), claims before chunks within one rank, then as first seen; each kind capped in that order; then the claims that only restate their quote left
out when their chunk is an item or an earlier such claim has the same quote."""

from __future__ import annotations

import random

import pytest

from graphrag_dag.dataflows.local.chunk_recall import RecalledChunk
from graphrag_dag.dataflows.local.evidence import EvidenceItem, Source, evidence


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
def test_evidence_follows_its_rule(seed):
    claims, recalled, source_chunks, sources, chunk_units, claim_cap, chunk_cap = _inputs(random.Random(seed))
    got = evidence(claims, recalled, sources, source_chunks, chunk_units, claim_cap=claim_cap,
                   evidence_chunk_cap=chunk_cap)
    assert got == _rule(claims, recalled, source_chunks, sources, chunk_units, claim_cap, chunk_cap)
