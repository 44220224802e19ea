"""Microsoft GraphRAG import, stage 2: documents, text units placed in their documents, and the
small evidence chunks cut from each text unit with exact document offsets."""

from __future__ import annotations

import bisect

import pyarrow as pa
from graphrag_dag.dataflows.common.records import (
    Chunk,
    Document,
)
from graphrag_dag.dataflows.index.graphrag_values import as_text, first_value, int_or_none, table_rows
from graphrag_dag.dataflows.index.spans import evidence_spans, place


def documents(source_tables: dict[str, pa.Table]) -> list[Document]:
    """One Document per documents row (never more, never fewer), text "" when absent.

    v0 called the text `raw_content`. Stale `text_unit_ids` (operation-dulce) are ignored: text
    units say which document they belong to.
    """
    result: list[Document] = []
    for row in table_rows(source_tables, "documents"):
        doc_id = as_text(first_value(row, "id"))
        result.append(
            Document(
                id=doc_id,
                title=as_text(first_value(row, "title", default=doc_id)),
                text=as_text(first_value(row, "text", "raw_content")),
            )
        )
    return result


def text_units(source_tables: dict[str, pa.Table], documents: list[Document]) -> list[Chunk]:
    """Text units as chunks (kind="text_unit"), placed in their document when possible.

    Placement uses `str.find` from a running cursor per document (units overlap). When placed,
    the chunk text is exactly `document.text[start:end]` (metadata lines GraphRAG prepended are
    dropped, and a character its token chunker cut in half is whole again); otherwise start/end are None and the text is kept as GraphRAG stored it.
    A document id that names no document becomes None so the store's foreign keys hold.
    """
    docs = {d.id: d for d in documents}
    rows = table_rows(source_tables, "text_units", ("id", "human_readable_id", "document_id", "document_ids", "text",
                                                    "chunk"))
    # Place units in reading order; GraphRAG numbers them in that order.
    order = sorted(range(len(rows)), key=lambda i: (int_or_none(rows[i].get("human_readable_id")) or 0, i))
    cursors: dict[str, int] = {}
    placed: dict[int, Chunk] = {}
    for i in order:
        row = rows[i]
        doc_id = first_value(row, "document_id")
        if doc_id is None:
            ids = first_value(row, "document_ids") or []
            doc_id = next((str(x) for x in ids if x is not None), None)
        doc_id = str(doc_id) if doc_id is not None and str(doc_id) in docs else None
        text = as_text(first_value(row, "text", "chunk"))
        start = end = None
        if doc_id is not None:
            where = place(docs[doc_id].text, text, cursors.get(doc_id, 0))
            if where is not None:
                start, end = where
                text = docs[doc_id].text[start:end]
                cursors[doc_id] = start + 1
        placed[i] = Chunk(
            id=as_text(first_value(row, "id")),
            document_id=doc_id,
            text=text,
            kind="text_unit",
            parent_id=None,
            start=start,
            end=end,
        )
    return [placed[i] for i in range(len(rows))]


def evidence_chunks(text_units: list[Chunk], documents: list[Document]) -> list[Chunk]:
    """Small chunks of a few whole sentences (kind="evidence"), each in the text unit where it starts.

    Text units (~1,200 tokens) are too coarse to cite; evidence chunks are what an answer quotes.
    Where units are placed in their document, chunks are cut from the document text the units
    cover, so the sentences that overlapping units share become one chunk, not two, and
    `doc.text[start:end] == text`. A unit that could not be placed is cut on its own.
    """
    texts = {d.id: d.text for d in documents}
    placed: dict[str, list[Chunk]] = {}
    result: list[Chunk] = []
    counts: dict[str, int] = {}

    def add(unit: Chunk, text: str, start: int | None, end: int | None) -> None:
        n = counts.get(unit.id, 0)
        counts[unit.id] = n + 1
        result.append(Chunk(f"{unit.id}:ev{n}", unit.document_id, text, "evidence", unit.id, start, end))

    for unit in text_units:
        if unit.start is not None and unit.end is not None and unit.document_id in texts:
            placed.setdefault(unit.document_id or "", []).append(unit)
        else:
            for s, e in evidence_spans(unit.text):
                add(unit, unit.text[s:e], None, None)
    for doc_id, units in placed.items():
        units.sort(key=lambda u: (u.start, u.end))
        starts = [u.start or 0 for u in units]
        text = texts[doc_id]
        for a, b in _covered(units):
            for s, e in evidence_spans(text[a:b]):
                add(units[bisect.bisect_right(starts, a + s) - 1], text[a + s:a + e], a + s, a + e)
    return result


def _covered(units: list[Chunk]) -> list[tuple[int, int]]:
    """The document ranges the (sorted) units cover, overlapping units merged."""
    out: list[tuple[int, int]] = []
    for u in units:
        s, e = u.start or 0, u.end or 0
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out
