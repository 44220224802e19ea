"""Indexer, stage 7: a report per community, extractive when offline.

A member's centrality is the weight of its edges to other members (then its degree). The title
names the three most central members; the summary is the first sentence of each of their
descriptions, within a budget; the findings are the claims about the most central members (one
per member first, then more), each with its source sentence as explanation. The rank (1-10)
grows with the log of the community's internal edge weight, so tightly knit communities rank
first among equals.
"""

from __future__ import annotations

import math

from graphrag_dag.dataflows.common.records import Claim, Community, CommunitySummary, Edge, Entity
from graphrag_dag.dataflows.index.spans import split_sentence_spans

SUMMARY_CHARS = 600
FINDINGS = 5


def _first_sentence(text: str) -> str:
    spans = split_sentence_spans(text)
    return text[spans[0][0]:spans[0][1]] if spans else ""


def _title(names: list[str]) -> str:
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " and " + names[-1]


def community_summaries(communities: list[Community], entity_degrees: list[Entity], edges: list[Edge],
                        claims: list[Claim]) -> list[CommunitySummary]:
    by_id = {e.id: e for e in entity_degrees}
    adjacency: dict[str, list[tuple[str, float]]] = {}
    for e in edges:
        adjacency.setdefault(e.source_id, []).append((e.target_id, e.weight))
        adjacency.setdefault(e.target_id, []).append((e.source_id, e.weight))
    about: dict[str, list[Claim]] = {}
    for c in claims:
        about.setdefault(c.subject_id, []).append(c)
    drafts = []
    for com in communities:
        inside = set(com.member_ids)
        weight = {m: sum(w for n, w in adjacency.get(m, []) if n in inside) for m in com.member_ids}
        central = sorted((m for m in com.member_ids if m in by_id),
                         key=lambda m: (-weight[m], -by_id[m].degree, by_id[m].name))
        drafts.append((com, central, sum(weight.values()) / 2))
    top = max((w for _, _, w in drafts), default=0.0)
    out = []
    for com, central, total in drafts:
        names = [by_id[m].name for m in central[:3]]
        summary_parts, used = [], 0
        for m in central[:3]:
            sentence = " ".join(_first_sentence(by_id[m].description).split())
            if sentence and used + len(sentence) <= SUMMARY_CHARS:
                summary_parts.append(sentence)
                used += len(sentence) + 1
        findings = []
        rounds = [[claims_of[0] for claims_of in (about.get(m, []) for m in central) if claims_of],
                  [c for m in central for c in about.get(m, [])[1:]]]
        for claim in (c for r in rounds for c in r):
            if len(findings) >= FINDINGS:
                break
            findings.append({"summary": by_id[claim.subject_id].name, "explanation": claim.description})
        title = _title(names) if names else f"Community {com.id}"
        summary = " ".join(summary_parts) or title
        body = "\n\n".join(f"## {f['summary']}\n\n{f['explanation']}" for f in findings)
        rank = round(1 + 9 * math.log1p(total) / math.log1p(top), 1) if top > 0 else 1.0
        out.append(CommunitySummary(com.id, title, summary, f"# {title}\n\n{summary}\n\n{body}".strip(), rank,
                                    findings))
    return out
