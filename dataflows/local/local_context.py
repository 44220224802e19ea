"""Stage 8 of local search: a labelled context within a token budget, which the answer reads."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from graphrag_dag.dataflows.common.line_tokens import chunk_line, claim_line, stored_tokens
from graphrag_dag.dataflows.common.resources import TokenCounter
from graphrag_dag.dataflows.common.textproc import sentence_spans
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.local.community_ranking import RankedCommunity
from graphrag_dag.dataflows.local.community_selection import Selection
from graphrag_dag.dataflows.local.evidence import EvidenceItem


@dataclass
class LocalContext:
    text: str
    community_ids: list[str]
    evidence_ids: list[str]  # the evidence items it holds (the excerpts of a chunk share one line)
    tokens: int  # token count of the lines as budgeted (each line counted on its own, plus newlines)
    truncated: bool



def _evidence_line(item: EvidenceItem) -> str:
    if item.kind == "claim":
        return claim_line(item.id, item.document_id, item.chunk_id, item.statement,
                          item.text if item.start is not None else None)
    return chunk_line(item.id, item.document_id, item.text)


def _evidence_tokens(item: EvidenceItem, line: str, token_counter: TokenCounter) -> int:
    """The line's tokens: the count stored when its chunk or claim was written
    (dataflows/common/line_tokens.py) when there is one for this counter, else the line counted."""
    if item.line_tokens is not None and stored_tokens(token_counter):
        return item.line_tokens
    return token_counter.count(line)


@functools.lru_cache(maxsize=16384)
def _sentences(text: str) -> tuple[str, ...]:
    """A text's sentences, whitespace folded. Remembered: the same summaries and chunks come back
    question after question, and splitting every line of a context is most of its work."""
    return tuple(" ".join(text[a:b].split()) for a, b in sentence_spans(text))


def _body(item: EvidenceItem | RankedCommunity) -> str:
    """What a line says, less its label: a summary, a chunk's text, a claim's statement and quote."""
    return item.summary if isinstance(item, RankedCommunity) else item.body


def _line(item: EvidenceItem | RankedCommunity, body: str | None = None) -> str:
    """The item's labelled line; with `body`, the line saying only that."""
    if isinstance(item, RankedCommunity):
        return f"[community {item.id}] {item.title}: {item.summary if body is None else body}"
    if body is not None and item.kind == "chunk":
        return chunk_line(item.id, item.document_id, body)
    if body is not None:  # a claim's statement, without the quote the context holds
        return claim_line(item.id, item.document_id, item.chunk_id, item.statement, None)
    return _evidence_line(item)


def local_context(selected_communities: Selection, evidence: list[EvidenceItem], token_counter: TokenCounter,
                  context_token_budget: int = LOCAL.context_token_budget) -> LocalContext:
    """Summaries first (topic context), then evidence (facts), each labelled with its id, added
    whole until the token budget is spent. The excerpts of one chunk share a line, labelled once
    with the chunk's id, in the order they come: each joins its chunk's line, costing its own
    tokens, or opens it. No sentence is spent twice: a line is written without
    the sentences the context already holds (a summary extracted from the same passages, a claim
    quoting a chunk: its statement alone), and left out when nothing else is left. Each line is counted on its own (an evidence line as written, by the
    count stored with its chunk or claim when the counter is the stored one), so the budget is the
    sum of the lines' counts plus one per newline."""
    summary_lines = ["[Community summaries]"]
    evidence_lines = ["[Evidence]"]
    used = token_counter.count(summary_lines[0]) + token_counter.count(evidence_lines[0])
    cids: list[str] = []
    eids: list[str] = []
    truncated = False
    seen: set[str] = set()
    entries: list[tuple[list[str], list[str], EvidenceItem | RankedCommunity]] = [
        *((summary_lines, cids, c) for c in selected_communities.communities),
        *((evidence_lines, eids, e) for e in evidence),
    ]
    joins: dict[str, int] = {}  # chunk id → the line its excerpts are written on
    for target, ids, item in entries:
        sentences = _sentences(_body(item))
        new = [x for x in dict.fromkeys(sentences) if x.casefold() not in seen]
        if sentences and not new:
            continue  # says nothing the context does not hold
        if isinstance(item, EvidenceItem) and item.is_excerpt:
            piece = " ".join(new)
            at = joins.get(item.label)
            written = chunk_line(item.label, item.document_id, piece) if at is None else " " + piece
            counted = token_counter.count(written)
            newline = 1 if at is None else 0
            if used + counted + newline > context_token_budget:
                truncated = True
                continue
            if at is None:
                joins[item.label] = len(target)
                target.append(written)
            else:
                target[at] += written
            ids.append(item.id)
            used += counted + newline
            seen.update(x.casefold() for x in new)
            continue
        whole = len(new) == len(sentences)
        if not whole and isinstance(item, EvidenceItem) and item.kind == "claim":
            stated = _sentences(item.statement)  # the statement alone, when only its quote is a repeat
            if any(x.casefold() in seen for x in stated):
                continue
            new = stated
        line = _line(item) if whole else _line(item, " ".join(new))
        if whole and isinstance(item, EvidenceItem):
            counted = _evidence_tokens(item, line, token_counter)
        else:
            counted = token_counter.count(line)
        if used + counted + 1 > context_token_budget:
            truncated = True
            continue
        target.append(line)
        ids.append(item.id)
        used += counted + 1
        seen.update(x.casefold() for x in new)
    text = "\n".join(summary_lines) + "\n\n" + "\n".join(evidence_lines)
    return LocalContext(text, cids, eids, used, truncated)  # `used` counts every line (+1 per newline)
