"""Character spans in document text (not a DAG module): sentences, evidence chunks of a few
sentences, a text unit's place in its document and a quote's place in its text. Every span is
[start, end) into the document, so evidence can always be shown where it stands."""

from __future__ import annotations

import re

from graphrag_dag.dataflows.common.records import Chunk
from graphrag_dag.dataflows.common.textproc import trim_span


# Evidence chunk size: pack whole sentences up to EVIDENCE_MAX characters; a last chunk
# shorter than EVIDENCE_TINY joins its predecessor if that stays within EVIDENCE_SLACK * max.
EVIDENCE_MAX = 600


EVIDENCE_TINY = 120


EVIDENCE_SLACK = 1.25


# Leading lines of prepended metadata we are willing to skip when placing a text unit.
_MAX_HEADER_LINES = 5


_MAX_HEADER_CHARS = 400


def split_sentence_spans(text: str) -> list[tuple[int, int]]:
    """Sentence spans [start, end) of `text`, whitespace trimmed, in order, never overlapping.

    A sentence ends after `.`, `!` or `?` (plus closing quotes/brackets) followed by whitespace,
    after the CJK stops `。！？` (which need no following space), or at a blank line. The pieces
    between sentences are only whitespace, so joining consecutive spans loses no text.
    """
    boundaries = re.compile(
        r"[.!?]+[\"'”’)\]»]*(?=\s|$)"  # western stop, then space or end
        r"|[。！？]+[”’」』）》]*"  # CJK stop
        r"|\n[ \t]*\n"  # paragraph break
    )
    spans: list[tuple[int, int]] = []
    start = 0
    for match in boundaries.finditer(text):
        end = match.end() if not match.group().startswith("\n") else match.start()
        spans.append((start, end))
        start = match.end()
    spans.append((start, len(text)))
    return [span for span in (trim_span(text, s, e) for s, e in spans) if span]


def _cut_long_span(text: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """Cut one over-long sentence at newlines, then whitespace, then hard, into <= limit pieces."""
    pieces: list[tuple[int, int]] = []
    while end - start > limit:
        window = text[start : start + limit]
        cut = window.rfind("\n")
        if cut < limit // 3:
            cut = max(window.rfind(" "), window.rfind("\t"), window.rfind("\u3000"))
        if cut < limit // 3:
            cut = limit
        piece_end = start + cut
        while piece_end > start and text[piece_end - 1].isspace():
            piece_end -= 1
        if piece_end > start:
            pieces.append((start, piece_end))
        start += cut
        while start < end and text[start].isspace():
            start += 1
    if end > start:
        pieces.append((start, end))
    return pieces


def evidence_spans(text: str, limit: int = EVIDENCE_MAX) -> list[tuple[int, int]]:
    """Group whole sentences into spans of at most `limit` characters (a few sentences each).

    Greedy packing gives chunks of roughly limit/2..limit characters; a lone sentence longer than
    the limit is cut at a newline or space instead. A tiny leftover (the last short sentence of
    a unit) joins its predecessor rather than standing alone as a useless citation.
    """
    units: list[tuple[int, int]] = []
    for s, e in split_sentence_spans(text):
        units.extend(_cut_long_span(text, s, e, limit) if e - s > limit else [(s, e)])
    packed: list[tuple[int, int]] = []
    for s, e in units:
        if packed and e - packed[-1][0] <= limit:
            packed[-1] = (packed[-1][0], e)
        else:
            packed.append((s, e))
    if len(packed) > 1:
        (s0, _), (s1, e1) = packed[-2], packed[-1]
        if e1 - s1 < EVIDENCE_TINY and e1 - s0 <= limit * EVIDENCE_SLACK:
            packed[-2:] = [(s0, e1)]
    return packed


def locate(document_text: str, unit_text: str, cursor: int) -> tuple[int, int] | None:
    """Where `unit_text` sits in the document: (document offset, offset inside the unit).

    Text units overlap, so searching starts at the previous unit's start (the cursor), then the
    whole document. GraphRAG v3 can prepend metadata lines ("title: x.txt.") that are not in the
    document; we skip up to a few leading lines and place the rest.
    """
    if not document_text or not unit_text:
        return None
    skip = 0
    for _ in range(_MAX_HEADER_LINES + 1):
        body = unit_text[skip:]
        if body.strip():
            pos = document_text.find(body, cursor)
            if pos < 0:
                pos = document_text.find(body)
            if pos >= 0:
                return pos, skip
        newline = unit_text.find("\n", skip)
        if newline < 0 or newline + 1 > _MAX_HEADER_CHARS:
            return None
        skip = newline + 1
    return None


_REPLACEMENT = "\ufffd"


def place(document_text: str, unit_text: str, cursor: int) -> tuple[int, int] | None:
    """The span [start, end) of a text unit in its document, or None.

    Microsoft GraphRAG cuts text units at token boundaries, and a token boundary can fall inside a
    multi-byte character: the unit then begins or ends with U+FFFD where the document has that
    character. Such a unit is placed by its text without the replacement characters, and its span
    takes in the one cut character on each side where it had them (a cut splits one character),
    so the document's slice is the unit with its characters whole again.
    """
    where = locate(document_text, unit_text, cursor)
    if where is not None:
        pos, skip = where
        return pos, pos + len(unit_text) - skip
    core = unit_text.strip(_REPLACEMENT)
    if core == unit_text or not core.strip():
        return None
    where = locate(document_text, core, cursor)
    if where is None:
        return None
    pos, skip = where
    start, end = pos, pos + len(core) - skip
    if unit_text.startswith(_REPLACEMENT) and skip == 0 and start > 0 and ord(document_text[start - 1]) > 0x7F:
        start -= 1
    if unit_text.endswith(_REPLACEMENT) and end < len(document_text) and ord(document_text[end]) > 0x7F:
        end += 1
    return start, end


_QUOTE_CLASSES = {"'": "['‘’`]", "‘": "['‘’`]", "’": "['‘’`]", '"': '["“”]', "“": '["“”]', "”": '["“”]'}


def _quote_pattern(quote: str) -> str:
    """Regex for `quote` that tolerates different whitespace and straight/curly quote marks."""
    words = quote.split()
    return r"\s+".join("".join(_QUOTE_CLASSES.get(ch, re.escape(ch)) for ch in w) for w in words)


def find_quote(text: str, quote: str) -> tuple[int, int] | None:
    """Span of a claim's source text inside `text`, or of its longest locatable part.

    Claim extraction quotes the text but re-flows line breaks, straightens quote marks and
    sometimes joins several quotes with ";" or "...". We try the whole quote verbatim, then
    whitespace/quote-insensitively, then each part of at least 30 characters (longest first).
    """
    quote = quote.strip()
    if not quote or not text:
        return None
    pos = text.find(quote)
    if pos >= 0:
        return pos, pos + len(quote)
    parts = [quote] + sorted(
        (p.strip() for p in re.split(r";|\.\.\.|…", quote) if len(p.strip()) >= 30),
        key=len,
        reverse=True,
    )
    for part in parts:
        match = re.search(_quote_pattern(part), text)
        if match:
            return match.start(), match.end()
    return None


def best_child(unit: Chunk, children: list[Chunk], span: tuple[int, int]) -> str | None:
    """The evidence chunk (of `unit`) overlapping the unit-relative `span` most; None if none."""
    best, best_overlap = None, 0
    offset = 0
    for child in children:
        if unit.start is not None and child.start is not None:
            c_start = child.start - unit.start
        else:  # unplaced unit: children are in order, recover offsets by search
            c_start = unit.text.find(child.text, offset)
        offset = max(c_start, 0)
        overlap = min(span[1], c_start + len(child.text)) - max(span[0], c_start)
        if overlap > best_overlap:
            best, best_overlap = child.id, overlap
    return best
