"""Indexer, stage 5: relationships and claims, offline from co-occurrence and sentences.

Two entities mentioned in one evidence chunk are one relation instance. An edge's weight is the
design note's Σ count(r) over the relation instances between its two entities: the number of
evidence chunks that mention both (with an LLM, a reported strength will scale each instance).
A claim is a sentence that states something about an entity: a sentence of at least four words
(or eight CJK characters) that mentions it, with the first entity it mentions as subject and the
next one, if any, as object; the sentence is its exact quote and span.

With an LLM, the relationships and claims are the ones it reported. Each reported relationship is
one relation instance, counted as strength / 10 (strength 1-10, 5 when missing), so the weight
stays Σ count(r) when every strength is 10 and a weak mention counts less. A claim is placed at
its quote where the quote stands in its text unit, and at the unit otherwise.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from graphrag_dag.dataflows.common.records import Chunk, Claim, Edge, Entity
from graphrag_dag.dataflows.index.extraction import ChunkMentions
from graphrag_dag.dataflows.index.llm_extraction import Extractions
from graphrag_dag.dataflows.index.resolution import EntityIndex
from graphrag_dag.dataflows.index.spans import find_quote, split_sentence_spans

_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")


@dataclass(frozen=True)
class Sentence:
    chunk_id: str
    document_id: str
    start: int  # document offsets
    end: int
    text: str
    entity_ids: tuple[str, ...]  # in order of first mention


def sentences(chunk_mentions: list[ChunkMentions], entity_index: EntityIndex) -> list[Sentence]:
    out: list[Sentence] = []
    for cm in chunk_mentions:
        base = cm.chunk.start or 0
        for s, e in split_sentence_spans(cm.chunk.text):
            doc = cm.chunk.document_id or ""
            ids = [entity_index.id_of(m.text, doc) for m in cm.mentions if m.start >= 0 and base + s <= m.start < base + e]
            out.append(Sentence(cm.chunk.id, cm.chunk.document_id or "", base + s, base + e, cm.chunk.text[s:e],
                                tuple(dict.fromkeys(i for i in ids if i))))
    return out


def _chunk_entities(chunk_mentions: list[ChunkMentions], entity_index: EntityIndex) -> dict[str, list[str]]:
    return {cm.chunk.id: list(dict.fromkeys(
        i for i in (entity_index.id_of(m.text, cm.chunk.document_id or "") for m in cm.mentions) if i))
        for cm in chunk_mentions}


def _llm_weights(extractions: Extractions, entity_index: EntityIndex, text_units: list[Chunk],
                 described: dict[tuple[str, str], str]) -> dict[tuple[str, str], float]:
    weights: dict[tuple[str, str], float] = {}
    doc_of = {u.id: u.document_id or "" for u in text_units}
    for unit_id, extraction in extractions.by_unit.items():
        for r in extraction.relationships:
            a = entity_index.id_of(r["source"], doc_of.get(unit_id, ""))
            b = entity_index.id_of(r["target"], doc_of.get(unit_id, ""))
            if a and b and a != b:
                pair = (a, b) if a < b else (b, a)
                weights[pair] = weights.get(pair, 0.0) + r["strength"] / 10
                described.setdefault(pair, " ".join(str(r.get("description") or "").split())[:300])
    return weights


def edges(chunk_mentions: list[ChunkMentions], entity_index: EntityIndex, sentences: list[Sentence],
          extractions: Extractions, text_units: list[Chunk]) -> list[Edge]:
    described: dict[tuple[str, str], str] = {}
    weights: dict[tuple[str, str], float] = {}
    if extractions.used_llm:
        weights = _llm_weights(extractions, entity_index, text_units, described)
    for ids in [] if extractions.used_llm else _chunk_entities(chunk_mentions, entity_index).values():
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                pair = (a, b) if a < b else (b, a)
                weights[pair] = weights.get(pair, 0.0) + 1.0
    for s in sentences:
        for i, a in enumerate(s.entity_ids):
            for b in s.entity_ids[i + 1:]:
                described.setdefault((a, b) if a < b else (b, a), " ".join(s.text.split())[:300])
    return [Edge("rel-" + hashlib.sha1(f"{a}|{b}".encode()).hexdigest()[:16], a, b, w, described.get((a, b), ""))
            for (a, b), w in sorted(weights.items())]


def _states_something(text: str) -> bool:
    cjk = len(_CJK_RE.findall(text))
    return cjk >= 8 or len(text.split()) >= 4


def _llm_claims(extractions: Extractions, entity_index: EntityIndex, text_units: list[Chunk],
                evidence_chunks: list[Chunk]) -> list[Claim]:
    out: list[Claim] = []
    by_unit = {u.id: u for u in text_units}
    chunks_of: dict[str, list[Chunk]] = {}
    for c in evidence_chunks:
        chunks_of.setdefault(c.document_id or "", []).append(c)
    for unit_id, extraction in extractions.by_unit.items():
        unit = by_unit[unit_id]
        doc = unit.document_id or ""
        for n, c in enumerate(extraction.claims):
            subject = entity_index.id_of(c["subject"], doc)
            if not subject:
                continue
            obj = entity_index.id_of(str(c.get("object") or ""), doc) if c.get("object") else None
            span = find_quote(unit.text, str(c.get("quote") or "")) if c.get("quote") else None
            start, end = (unit.start + span[0], unit.start + span[1]) if span and unit.start is not None else (
                unit.start, unit.end)
            chunk = next((ch.id for ch in chunks_of.get(doc, []) if (ch.start or 0) <= (start or 0) < (ch.end or 0)),
                         None)
            out.append(Claim(f"{unit_id}:c{n}", subject, obj, str(c.get("type") or "claim"), c["description"],
                             str(c.get("status") or ""), c.get("start_date") if isinstance(c.get("start_date"), str)
                             else None, c.get("end_date") if isinstance(c.get("end_date"), str) else None,
                             str(c.get("quote") or ""), doc, chunk, start, end))
    return out


def claims(sentences: list[Sentence], extractions: Extractions, entity_index: EntityIndex, text_units: list[Chunk],
           evidence_chunks: list[Chunk]) -> list[Claim]:
    if extractions.used_llm:
        return _llm_claims(extractions, entity_index, text_units, evidence_chunks)
    out: list[Claim] = []
    # A claim is named by its chunk and the sentence's place in it, so an edit elsewhere in the
    # corpus leaves its id, and an update leaves its row, as they were.
    place: dict[str, int] = {}
    for s in sentences:
        n = place[s.chunk_id] = place.get(s.chunk_id, -1) + 1
        if not s.entity_ids or s.text.startswith("#") or not _states_something(s.text):
            continue
        obj = s.entity_ids[1] if len(s.entity_ids) > 1 else None
        text = " ".join(s.text.split())
        out.append(Claim(f"{s.chunk_id}:c{n}", s.entity_ids[0], obj, "statement", text, "", None, None, s.text,
                         s.document_id, s.chunk_id, s.start, s.end))
    return out


def entity_degrees(described_entities: list[Entity], edges: list[Edge], chunk_mentions: list[ChunkMentions],
                   entity_index: EntityIndex) -> list[Entity]:
    """Entities with their number of distinct neighbours and the text units that mention them (a
    document's title counts as a mention in its first unit), which local search ranks sources by."""
    degree: dict[str, int] = {}
    for e in edges:
        degree[e.source_id] = degree.get(e.source_id, 0) + 1
        degree[e.target_id] = degree.get(e.target_id, 0) + 1
    units: dict[str, dict[str, None]] = {}
    for cm in chunk_mentions:
        unit = cm.chunk.parent_id or cm.chunk.id
        for m in cm.mentions:
            i = entity_index.id_of(m.text, cm.chunk.document_id or "")
            if i:
                units.setdefault(i, {})[unit] = None
    return [Entity(e.id, e.name, e.type, e.description, degree.get(e.id, 0), unit_ids=tuple(units.get(e.id, ())))
            for e in described_entities]
