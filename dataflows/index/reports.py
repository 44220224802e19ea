"""Indexer, stage 7: a report per community: written by the LLM when one is configured (one call
per community, from its members, their relationships and claims within a token budget, bottom-up
so that a parent whose material does not fit is written from its children's reports; retried
once, and extractive with a warning when the reply stays unusable; kept per membership, so only
communities whose members changed are written again), extractive offline.

The extractive report:
A member's centrality is the weight of its edges to other members (then its degree). The title
names the three most central members; the summary is the first sentence of each of their
descriptions, within a budget; the findings are the claims about the most central members (one
per member first, then more), each with its source sentence as explanation. The rank (1-10)
grows with the log of the community's internal edge weight, so tightly knit communities rank
first among equals.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

from hamilton.function_modifiers import cache

from graphrag_dag.dataflows.common import waiting
from graphrag_dag.dataflows.common.prompting import Prompt, ReplyInvalid, ask, json_object, prompt
from graphrag_dag.dataflows.common.records import Claim, Community, CommunitySummary, Edge, Entity
from graphrag_dag.dataflows.common.resources import ChatModel, ExtractionCache, TokenCounter
from graphrag_dag.dataflows.common.settings import INDEX
from graphrag_dag.dataflows.index.spans import split_sentence_spans
from graphrag_dag.dataflows.prompts import current_template

SUMMARY_CHARS = 600
FINDINGS = 5


def _first_sentence(text: str) -> str:
    spans = split_sentence_spans(text)
    return text[spans[0][0]:spans[0][1]] if spans else ""


def _title(names: list[str]) -> str:
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " and " + names[-1]


def _central(communities: list[Community], entity_degrees: list[Entity],
             edges: list[Edge]) -> tuple[list[tuple[Community, list[str], float]], dict[str, list[tuple[str, float]]]]:
    by_id = {e.id: e for e in entity_degrees}
    adjacency: dict[str, list[tuple[str, float]]] = {}
    for e in edges:
        adjacency.setdefault(e.source_id, []).append((e.target_id, e.weight))
        adjacency.setdefault(e.target_id, []).append((e.source_id, e.weight))
    drafts = []
    for com in communities:
        inside = set(com.member_ids)
        weight = {m: sum(w for n, w in adjacency.get(m, []) if n in inside) for m in com.member_ids}
        central = sorted((m for m in com.member_ids if m in by_id),
                         key=lambda m: (-weight[m], -by_id[m].degree, by_id[m].name))
        drafts.append((com, central, sum(weight.values()) / 2))
    return drafts, adjacency


def extractive_reports(communities: list[Community], entity_degrees: list[Entity], edges: list[Edge],
                       claims: list[Claim]) -> list[CommunitySummary]:
    by_id = {e.id: e for e in entity_degrees}
    about: dict[str, list[Claim]] = {}
    for c in claims:
        about.setdefault(c.subject_id, []).append(c)
    drafts, _ = _central(communities, entity_degrees, edges)
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


@cache(behavior="recompute")
def report_template() -> str:
    return current_template("community_report")


@dataclass(frozen=True)
class ReportPrompt:
    prompt: Prompt
    complete: bool  # all of the community's own material fitted the budget


def _fit(lines: list[str], token_counter: TokenCounter, budget: int) -> list[str]:
    kept, used = [], 0
    for line in lines:
        cost = token_counter.count(line) + 1
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    return kept


def report_prompts(communities: list[Community], entity_degrees: list[Entity], edges: list[Edge],
                   claims: list[Claim], report_template: str, token_counter: TokenCounter, chat_model: ChatModel,
                   report_budget: int = INDEX.report_budget) -> list[ReportPrompt]:
    """Each community's own material, most central members first: entities, then relationships
    among them, then claims about them, line by line while the budget lasts (none offline: no
    model reads them). A parent whose material does not fit is written from its children's
    reports instead (`community_reports`)."""
    if chat_model.offline:
        return []
    by_id = {e.id: e for e in entity_degrees}
    about: dict[str, list[Claim]] = {}
    for c in claims:
        about.setdefault(c.subject_id, []).append(c)
    drafts, adjacency = _central(communities, entity_degrees, edges)
    out = []
    for com, central, _ in drafts:
        inside = set(com.member_ids)
        lines = [f"Entity: {by_id[m].name} ({by_id[m].type}): {by_id[m].description}" for m in central]
        lines += [f"Relationship: {by_id[m].name} -- {by_id[n].name} (weight {w:g})" for m in central
                  for n, w in adjacency.get(m, []) if n in inside and m < n and n in by_id]
        lines += [f"Claim about {by_id[m].name}: {c.description}" for m in central for c in about.get(m, [])]
        kept = _fit(lines, token_counter, report_budget)
        out.append(ReportPrompt(prompt("report", report_template, material="\n".join(kept)), len(kept) == len(lines)))
    return out


@dataclass
class Reports:
    summaries: list[CommunitySummary]
    warnings: list[str] = field(default_factory=list)


def _report(text: str) -> dict[str, Any]:
    data = json_object(text, "{title, summary, rating, findings}")
    title, summary, rating = data.get("title"), data.get("summary"), data.get("rating")
    findings = data.get("findings", [])
    if not (isinstance(title, str) and title.strip() and isinstance(summary, str) and summary.strip()):
        raise ReplyInvalid("was not valid JSON {title, summary, rating, findings}")
    if isinstance(rating, bool) or not isinstance(rating, (int, float)):
        rating = 5.0
    findings = [f for f in findings if isinstance(f, dict) and isinstance(f.get("summary"), str)] \
        if isinstance(findings, list) else []
    return {"title": title.strip(), "summary": summary.strip(), "rating": float(min(10, max(0, rating))),
            "findings": [{"summary": f["summary"], "explanation": str(f.get("explanation") or "")} for f in findings]}


def _membership_key(community: Community, chat_model: ChatModel) -> str:
    members = "\x00".join(sorted(community.member_ids))
    return "report:" + hashlib.sha256(f"{chat_model.identity}\x00{members}".encode("utf-8")).hexdigest()


def _summary(fallback: CommunitySummary, r: dict[str, Any]) -> CommunitySummary:
    body = "\n\n".join(f"## {f['summary']}\n\n{f['explanation']}" for f in r["findings"])
    return CommunitySummary(fallback.community_id, r["title"], r["summary"],
                            f"# {r['title']}\n\n{r['summary']}\n\n{body}".strip(), r["rating"], r["findings"])


def community_reports(communities: list[Community], extractive_reports: list[CommunitySummary],
                      report_prompts: list[ReportPrompt], report_template: str, chat_model: ChatModel,
                      extraction_cache: ExtractionCache, token_counter: TokenCounter,
                      extraction_concurrency: int = INDEX.extraction_concurrency,
                      report_budget: int = INDEX.report_budget) -> Reports:
    """Written bottom-up, deepest level first, so that a parent whose own material does not fit
    is written from its children's reports (as Microsoft GraphRAG does). A report is kept in the
    extraction cache under its community's members, so a rerun or an update rewrites only the
    reports of communities whose membership changed."""
    if chat_model.offline:
        return Reports(extractive_reports)
    keys = [_membership_key(c, chat_model) for c in communities]
    written: dict[str, CommunitySummary] = {}  # community id → report by the model
    children: dict[str, list[str]] = {}
    for c in communities:
        if c.parent_id:
            children.setdefault(c.parent_id, []).append(c.id)
    out = Reports([])
    fallbacks = {s.community_id: s for s in extractive_reports}

    def write(p: Prompt) -> Any:
        return ask(chat_model, p, lambda text: (_report(text), text), json_mode=True, attempts=2)

    for level in sorted({c.level for c in communities}, reverse=True):
        jobs: list[tuple[int, Prompt]] = []
        for i, c in enumerate(communities):
            if c.level != level:
                continue
            cached = extraction_cache.get(keys[i])
            if cached is not None:
                written[c.id] = _summary(fallbacks[c.id], _report(cached))
                continue
            p = report_prompts[i].prompt
            kids = [written[k] for k in children.get(c.id, []) if k in written]
            if not report_prompts[i].complete and kids:
                lines = [f"Sub-community report: {k.title}: {k.summary}" for k in kids]
                p = prompt("report", report_template, material="\n".join(_fit(lines, token_counter, report_budget)))
            jobs.append((i, p))
        with waiting.thread_pool(extraction_concurrency, "report") as pool:
            answers = waiting.results(pool, write, [p for _, p in jobs])
        for (i, _), a in zip(jobs, answers, strict=True):
            cid = communities[i].id
            if a.value is None:
                out.warnings.append(a.warning(f"the report of community {cid}", "kept an extractive one"))
                continue
            r, raw = a.value
            extraction_cache.put(keys[i], raw)
            written[cid] = _summary(fallbacks[cid], r)
    out.summaries = [written.get(s.community_id, s) for s in extractive_reports]
    return out


def community_summaries(community_reports: Reports) -> list[CommunitySummary]:
    return community_reports.summaries
