"""The last stage of every index flow: decide what the store writes for a set of records.

Shared by the Microsoft GraphRAG import and the demo corpus (and the indexer to come), so every
way into a namespace makes the same decisions: what text each vector embeds, each entity's leaf
community, and where each claim's quote stands in its document.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from graphrag_dag.dataflows.common.line_tokens import chunk_line, claim_line, claim_statement, stored_tokens
from graphrag_dag.dataflows.common.records import Claim, IndexRecords, WriteSet
from graphrag_dag.dataflows.common.resources import Embedder, TokenCounter
from graphrag_dag.dataflows.common.textproc import name_key
from graphrag_dag.dataflows.common.titles import first_line, names_entity

EMBED_BATCH = 512

# What a query is compared with, per kind of record: an entity by its name and description, a
# community by its title and summary, an evidence chunk by its text (text units are not searched).
EMBEDDED: dict[str, tuple[str, Callable[[IndexRecords], list[Any]], Callable[[Any], str], Callable[[Any], str]]] = {
    "entities": ("entities", lambda r: r.entities, lambda e: e.id, lambda e: f"{e.name}: {e.description}".strip()),
    "community_summaries": ("community summaries", lambda r: r.summaries, lambda s: s.community_id,
                            lambda s: f"{s.title}\n{s.summary}".strip()),
    "chunks": ("evidence chunks", lambda r: [c for c in r.chunks if c.kind == "evidence"], lambda c: c.id,
               lambda c: c.text),
}


def vectors(index_records: IndexRecords, embedder: Embedder, progress: Any = None) -> dict[str, dict[str, Any]]:
    """Every vector to store. Carried vectors are kept only when the configured embedder made them
    (another model's vectors are not comparable with the query's); the rest are embedded."""
    say: Callable[[str], None] = progress or (lambda _msg: None)
    reuse = not index_records.embedding_model or index_records.embedding_model == embedder.model
    out: dict[str, dict[str, Any]] = {}
    for table, (label, items_of, key_of, text_of) in EMBEDDED.items():
        items = items_of(index_records)
        kept = {key_of(it): it.embedding for it in items
                if reuse and it.embedding is not None and len(it.embedding) == embedder.dim}
        todo = [it for it in items if key_of(it) not in kept]
        for start in range(0, len(todo), EMBED_BATCH):
            part = todo[start:start + EMBED_BATCH]
            vecs = np.asarray(embedder.embed([text_of(it) or " " for it in part]), dtype=np.float32)
            kept.update(zip((key_of(it) for it in part), vecs, strict=True))
            if len(todo) > EMBED_BATCH:
                say(f"embedding {label}: {min(start + EMBED_BATCH, len(todo))}/{len(todo)}")  # a bar on a terminal
        if todo:
            say(f"embedded {len(todo)} {label}")
        out[table] = kept
    return out


def leaf_communities(index_records: IndexRecords) -> dict[str, str]:
    """Each entity's deepest community (ties: smallest id), stored on the entity so the graph walk
    maps entities to communities with one index lookup instead of scanning every level."""
    best: dict[str, tuple[int, str]] = {}
    for c in sorted(index_records.communities, key=lambda c: c.id):
        for m in c.member_ids:
            if m not in best or c.level > best[m][0]:
                best[m] = (c.level, c.id)
    return {m: cid for m, (_lvl, cid) in best.items()}


def _place(claim: Claim, texts: dict[str, str], spans: dict[str, tuple[int, int]]) -> tuple:
    text = texts.get(claim.document_id or "")
    start, end = claim.start, claim.end
    if (start is None or end is None) and claim.chunk_id in spans:
        start, end = spans[claim.chunk_id]
    if text is None or start is None or end is None or not 0 <= start < end <= len(text):
        return (None, None, None)
    return (start, end, text[start:end])


def claim_places(index_records: IndexRecords) -> dict[str, tuple[int | None, int | None, str | None]]:
    """(start, end, quote) of each claim in its document: its own span, or for a paraphrased claim
    that could not be placed, its source chunk's span. The quote is always the text at that span,
    so evidence text always equals the span it reports."""
    texts = {d.id: d.text for d in index_records.documents}
    spans = {c.id: (c.start, c.end) for c in index_records.chunks if c.start is not None and c.end is not None}
    return {c.id: _place(c, texts, spans) for c in index_records.claims}


def subject_units(index_records: IndexRecords) -> set[tuple[str, str]]:
    """(entity, text unit) pairs where the unit's document is named after the entity (its title or
    first line): local search ranks an entity's own page above the pages that mention it, and
    deciding it here keeps that comparison off the query path."""
    doc_of = {c.id: c.document_id for c in index_records.chunks if c.kind != "evidence"}
    names = {d.id: (d.title, first_line(d.text)) for d in index_records.documents}
    out: set[tuple[str, str]] = set()
    for e in index_records.entities:
        key = name_key(e.name)
        for unit in e.unit_ids:
            titles = names.get(doc_of.get(unit) or "", ())
            if any(names_entity(key, t) for t in titles):
                out.add((e.id, unit))
    return out


def chunk_tokens(index_records: IndexRecords, token_counter: TokenCounter) -> dict[str, int]:
    """Each evidence chunk's line in a local-search context, counted once here so that no query
    counts it (dataflows/common/line_tokens.py). Empty when the counter is not the tokenizer stored
    counts are for: queries then count the lines."""
    chunks = [c for c in index_records.chunks if c.kind == "evidence"]
    if not chunks or not stored_tokens(token_counter):
        return {}
    counts = token_counter.count_many([chunk_line(c.id, c.document_id, c.text) for c in chunks])
    return {c.id: n for c, n in zip(chunks, counts, strict=True)}


def claim_tokens(index_records: IndexRecords, claim_places: dict[str, tuple[int | None, int | None, str | None]],
                 token_counter: TokenCounter) -> dict[str, int]:
    """Each claim's line in a local-search context, counted once here (as `chunk_tokens`). A claim
    whose subject is not an entity of the namespace never reaches a context, and is not counted."""
    if not index_records.claims or not stored_tokens(token_counter):
        return {}
    names = {e.id: e.name for e in index_records.entities}
    lines: dict[str, str] = {}
    for c in index_records.claims:
        if c.subject_id in names:
            quote = claim_places.get(c.id, (None, None, None))[2]
            lines[c.id] = claim_line(c.id, c.document_id, c.chunk_id,
                                     claim_statement(names[c.subject_id], c.type, c.status, c.description),
                                     quote or None)
    return dict(zip(lines, token_counter.count_many(list(lines.values())), strict=True))


def write_set(index_records: IndexRecords, vectors: dict[str, dict[str, Any]], leaf_communities: dict[str, str],
              claim_places: dict[str, tuple[int | None, int | None, str | None]], subject_units: set[tuple[str, str]],
              chunk_tokens: dict[str, int], claim_tokens: dict[str, int], embedder: Embedder) -> WriteSet:
    return WriteSet(index_records, vectors, leaf_communities, claim_places, embedder.model, embedder.dim,
                    subject_units, chunk_tokens, claim_tokens)
