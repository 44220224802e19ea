"""Microsoft GraphRAG import, stage 4: claims (covariates), each placed at its quote in its
document where the quote can be found, and otherwise at its source chunk."""

from __future__ import annotations

import bisect

import pyarrow as pa
from graphrag_dag.dataflows.common.records import (
    Chunk,
    Claim,
)
from graphrag_dag.dataflows.index.graphrag_values import as_text, claim_object, claim_subject, first_value, table_rows
from graphrag_dag.dataflows.index.spans import best_child, find_quote


def claims(
    source_tables: dict[str, pa.Table],
    entity_ids_by_title: dict[str, str],
    text_units: list[Chunk],
    evidence_chunks: list[Chunk],
) -> list[Claim]:
    """Covariates as claims, with provenance as precise as the text allows.

    Subject/object titles resolve to entity ids (missing ones were synthesized). The claim's
    chunk is the evidence chunk holding (most of) its source text, else its text unit; its span
    is the source text's position in the document when the text unit was placed and the quote
    could be found (see `find_quote`).
    """
    units = {u.id: u for u in text_units}
    children: dict[str, list[Chunk]] = {}
    for chunk in evidence_chunks:
        children.setdefault(chunk.parent_id or "", []).append(chunk)
    in_doc: dict[str, list[Chunk]] = {}  # placed chunks by document, in order: a quote in the part a
    for chunk in evidence_chunks:        # unit shares with the one before stands in that unit's chunk
        if chunk.start is not None:
            in_doc.setdefault(chunk.document_id or "", []).append(chunk)
    for chunks in in_doc.values():
        chunks.sort(key=lambda c: c.start or 0)
    ends = {d: [c.end or 0 for c in chunks] for d, chunks in in_doc.items()}

    def candidates(unit: Chunk) -> list[Chunk]:
        if unit.start is None or unit.end is None:
            return children.get(unit.id, [])
        chunks = in_doc.get(unit.document_id or "", [])
        first = bisect.bisect_right(ends.get(unit.document_id or "", []), unit.start)
        out = []
        for c in chunks[first:]:
            if (c.start or 0) >= unit.end:
                break
            out.append(c)
        return out
    result: list[Claim] = []
    for row in table_rows(source_tables, "covariates"):
        unit = units.get(as_text(first_value(row, "text_unit_id")))
        source_text = as_text(first_value(row, "source_text"))
        chunk_id = unit.id if unit is not None else None
        start = end = None
        span = find_quote(unit.text, source_text) if unit is not None else None
        if unit is not None and span is not None:
            chunk_id = best_child(unit, candidates(unit), span) or unit.id
            if unit.start is not None:
                start, end = unit.start + span[0], unit.start + span[1]
        obj = claim_object(row)
        result.append(
            Claim(
                id=as_text(first_value(row, "id")),
                subject_id=entity_ids_by_title[claim_subject(row)],
                object_id=entity_ids_by_title.get(obj) if obj is not None else None,
                type=as_text(first_value(row, "type", "covariate_type")),
                description=as_text(first_value(row, "description")),
                status=as_text(first_value(row, "status")),
                start_date=as_text(first_value(row, "start_date")) or None,
                end_date=as_text(first_value(row, "end_date")) or None,
                source_text=source_text,
                document_id=unit.document_id if unit is not None else None,
                chunk_id=chunk_id,
                start=start,
                end=end,
            )
        )
    return result
