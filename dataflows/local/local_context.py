"""Stage 8 of local search: a labelled context within a token budget, which the answer reads."""

from __future__ import annotations

from dataclasses import dataclass

from graphrag_dag.dataflows.common.line_tokens import chunk_line, claim_line, stored_tokens
from graphrag_dag.dataflows.common.resources import TokenCounter
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.local.community_ranking import RankedCommunity
from graphrag_dag.dataflows.local.community_selection import Selection
from graphrag_dag.dataflows.local.evidence import EvidenceItem


@dataclass
class LocalContext:
    text: str
    community_ids: list[str]
    evidence_ids: list[str]
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


def _summary_line(community: RankedCommunity) -> str:
    return f"[community {community.id}] {community.title}: {community.summary}"


def local_context(selected_communities: Selection, evidence: list[EvidenceItem], token_counter: TokenCounter,
                  context_token_budget: int = LOCAL.context_token_budget) -> LocalContext:
    """Summaries first (topic context), then evidence (facts), each labelled with its id, added
    whole until the token budget is spent. Each line is counted on its own (an evidence line by
    the count stored with its chunk or claim, when the counter is the stored one), so the budget
    is the sum of the lines' counts plus one per newline."""
    lines = ["[Community summaries]"]
    used = token_counter.count(lines[0]) + token_counter.count("[Evidence]")
    cids: list[str] = []
    eids: list[str] = []
    truncated = False
    sections: list[tuple[list[str], list[str], list[tuple[str, str, EvidenceItem | None]]]] = [
        (lines, cids, [(c.id, _summary_line(c), None) for c in selected_communities.communities]),
    ]
    evidence_lines: list[str] = ["[Evidence]"]
    sections.append((evidence_lines, eids, [(e.id, _evidence_line(e), e) for e in evidence]))
    for target, ids, entries in sections:
        for item_id, line, item in entries:
            counted = token_counter.count(line) if item is None else _evidence_tokens(item, line, token_counter)
            cost = counted + 1
            if used + cost > context_token_budget:
                truncated = True
                continue
            target.append(line)
            ids.append(item_id)
            used += cost
    text = "\n".join(lines) + "\n\n" + "\n".join(evidence_lines)
    return LocalContext(text, cids, eids, used, truncated)  # `used` counts every line (+1 per newline)
