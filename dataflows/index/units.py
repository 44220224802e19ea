"""Indexer, stage 2: text units and evidence chunks, each an exact span of its document.

Text units are token windows (1,200 tokens with 100 of overlap by default, as in Microsoft
GraphRAG) cut at sentence boundaries; a sentence longer than a window is cut at whitespace.
Evidence chunks are a few whole sentences (as the importer makes them), cut from the document
itself so overlapping units do not repeat them; each belongs to the unit where it starts.
"""

from __future__ import annotations

import bisect

from graphrag_dag.dataflows.common.records import Chunk, Document
from graphrag_dag.dataflows.common.resources import TokenCounter
from graphrag_dag.dataflows.common.settings import INDEX
from graphrag_dag.dataflows.index.corpus import Corpus
from graphrag_dag.dataflows.index.spans import evidence_spans, split_sentence_spans


def _pieces(text: str, start: int, end: int, tokens: int, limit: int) -> list[tuple[int, int]]:
    """Cut an over-long sentence into about `limit`-token pieces at whitespace (by character share)."""
    parts = max(2, -(-tokens // limit))
    step = max(1, (end - start) // parts)
    out, s = [], start
    while s < end:
        e = min(end, s + step)
        if e < end:
            space = text.rfind(" ", s + 1, e + 1)
            e = space if space > s else e
        out.append((s, e))
        s = e
        while s < end and text[s].isspace():
            s += 1
    return out


def _windows(text: str, counter: TokenCounter, size: int, overlap: int) -> list[tuple[int, int]]:
    sentences: list[tuple[int, int, int]] = []
    for s, e in split_sentence_spans(text):
        n = counter.count(text[s:e])
        if n > size:
            sentences += [(a, b, counter.count(text[a:b])) for a, b in _pieces(text, s, e, n, size)]
        else:
            sentences.append((s, e, n))
    windows: list[tuple[int, int]] = []
    i = 0
    while i < len(sentences):
        j, used = i, 0
        while j < len(sentences) and (j == i or used + sentences[j][2] <= size):
            used += sentences[j][2]
            j += 1
        windows.append((sentences[i][0], sentences[j - 1][1]))
        if j >= len(sentences):
            break
        back, shared = j, 0  # start the next window on the sentences that make up the overlap
        while back - 1 > i and shared + sentences[back - 1][2] <= overlap:
            back -= 1
            shared += sentences[back][2]
        i = back
    return windows


def text_units(corpus: Corpus, token_counter: TokenCounter, unit_tokens: int = INDEX.unit_tokens,
               unit_overlap: int = INDEX.unit_overlap) -> list[Chunk]:
    out: list[Chunk] = []
    for doc in corpus.documents:
        for n, (s, e) in enumerate(_windows(doc.text, token_counter, unit_tokens, min(unit_overlap, unit_tokens - 1))):
            out.append(Chunk(f"{doc.id}:u{n}", doc.id, doc.text[s:e], "text_unit", None, s, e))
    return out


def documents(corpus: Corpus) -> list[Document]:
    return corpus.documents


def evidence_chunks(documents: list[Document], text_units: list[Chunk]) -> list[Chunk]:
    units: dict[str, list[Chunk]] = {}
    for u in text_units:
        units.setdefault(u.document_id or "", []).append(u)
    out: list[Chunk] = []
    for doc in documents:
        own = units.get(doc.id, [])
        starts = [u.start or 0 for u in own]
        for n, (s, e) in enumerate(evidence_spans(doc.text)):
            parent = own[max(0, bisect.bisect_right(starts, s) - 1)].id if own else None
            out.append(Chunk(f"{doc.id}:e{n}", doc.id, doc.text[s:e], "evidence", parent, s, e))
    return out
