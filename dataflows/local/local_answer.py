"""Stage 8 of local search: a labelled, budgeted context and the answer built from it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from graphrag_dag.dataflows import prompts
from graphrag_dag.dataflows.local.community_selection import Selection
from graphrag_dag.dataflows.local.entity_matching import MatchedEntity
from graphrag_dag.dataflows.local.evidence import EvidenceItem
from graphrag_dag.dataflows.local.query_parsing import ParsedQuery
from graphrag_dag.dataflows.common.resources import ChatModel, TokenCounter
from graphrag_dag.dataflows.common.textproc import sentence_spans, term_hits


@dataclass
class LocalContext:
    text: str
    community_ids: list[str]
    evidence_ids: list[str]
    tokens: int  # token count of the lines as budgeted (each line counted on its own, plus newlines)
    truncated: bool


@dataclass
class Answer:
    text: str
    method: str  # "llm" or "extractive"
    warnings: list[str] = field(default_factory=list)


@dataclass
class LocalResult:
    parsed_query: ParsedQuery
    matched_entities: list[MatchedEntity]
    selection: Selection
    evidence: list[EvidenceItem]
    context: LocalContext
    answer: Answer

    @property
    def warnings(self) -> list[str]:
        return [*self.parsed_query.warnings, *self.selection.warnings, *self.answer.warnings]

    @property
    def status(self) -> str:
        return "completed" if (self.selection.communities or self.evidence) else "no_results"


def _evidence_line(item: EvidenceItem) -> str:
    source = f"doc={item.document_id} chunk={item.chunk_id}"
    if item.kind == "claim":
        body = item.statement + (f' Source: "{item.text}"' if item.start is not None else "")
    else:
        body = item.text
    return f"[{item.id}] ({item.kind}; {source}) {' '.join(body.split())}"


def local_context(selected_communities: Selection, evidence: list[EvidenceItem], token_counter: TokenCounter,
                  context_token_budget: int) -> LocalContext:
    """Summaries first (topic context), then evidence (facts), each labelled with its id, added
    whole until the token budget is spent."""
    lines = ["[Community summaries]"]
    used = token_counter.count(lines[0]) + token_counter.count("[Evidence]")
    cids: list[str] = []
    eids: list[str] = []
    truncated = False
    sections: list[tuple[list[str], list[str], list[tuple[str, str]]]] = [
        (lines, cids, [(c.id, f"[community {c.id}] {c.title}: {c.summary}") for c in selected_communities.communities]),
    ]
    evidence_lines: list[str] = ["[Evidence]"]
    sections.append((evidence_lines, eids, [(e.id, _evidence_line(e)) for e in evidence]))
    for target, ids, entries in sections:
        for item_id, line in entries:
            cost = token_counter.count(line) + 1
            if used + cost > context_token_budget:
                truncated = True
                continue
            target.append(line)
            ids.append(item_id)
            used += cost
    text = "\n".join(lines) + "\n\n" + "\n".join(evidence_lines)
    return LocalContext(text, cids, eids, used, truncated)  # `used` counts every line (+1 per newline)


def _extractive(query_terms: list[str], selection: Selection, evidence: list[EvidenceItem], context: LocalContext,
                max_sentences: int = 5, header: str = "Offline extractive answer (no LLM configured):") -> str:
    """Offline answer: the sentences of the in-context evidence and summaries that share the most
    query terms, each with the id it came from."""
    allowed = set(context.evidence_ids)
    scored: list[tuple[float, int, str, str]] = []
    order = 0
    for item in evidence:
        if item.id not in allowed:
            continue
        text = item.statement if item.kind == "claim" else item.text
        for s, e in sentence_spans(text):
            sentence = " ".join(text[s:e].split())
            scored.append((term_hits(sentence, query_terms) + (0.5 if item.kind == "claim" else 0), order, sentence, item.id))
            order += 1
    for c in selection.communities:
        if c.id in context.community_ids:
            for s, e in sentence_spans(c.summary)[:2]:
                scored.append((term_hits(c.summary[s:e], query_terms) * 0.8, order, " ".join(c.summary[s:e].split()),
                               f"community {c.id}"))
                order += 1
    scored.sort(key=lambda x: (-x[0], x[1]))
    picked = [f"{sentence} [{ref}]" for score, _, sentence, ref in scored[:max_sentences] if score > 0]
    if not picked:
        picked = [f"{sentence} [{ref}]" for _, _, sentence, ref in scored[:2]]
    if not picked:
        return "No relevant information was found in the index for this question."
    return header + "\n" + "\n".join(f"- {p}" for p in picked)


_CITATION_RE = re.compile(r"\[([^\[\]]+)\]")
_FALLBACK_HEADER = "Extractive answer (the LLM answer was unavailable):"


def local_answer(query: str, parsed_query: ParsedQuery, selected_communities: Selection,
                 evidence: list[EvidenceItem], local_context: LocalContext, chat_model: ChatModel,
                 llm_identity: str, answer_prompt: str) -> Answer:
    terms = [*parsed_query.keywords, *parsed_query.entities]
    if chat_model.offline:
        return Answer(_extractive(terms, selected_communities, evidence, local_context), "extractive")
    try:
        reply = chat_model.complete("answer", prompts.render(answer_prompt, query=query, context=local_context.text))
    except prompts.PASSTHROUGH_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001 - a failed answer call still returns the retrieval
        return Answer(_extractive(terms, selected_communities, evidence, local_context, header=_FALLBACK_HEADER),
                      "extractive", [f"answer generation by LLM failed ({type(exc).__name__}); returned an extractive answer"])
    text = reply.text.strip()
    if not text:
        return Answer(_extractive(terms, selected_communities, evidence, local_context, header=_FALLBACK_HEADER),
                      "extractive", ["the LLM returned an empty answer; returned an extractive answer"])
    return Answer(text, "llm")


def local_result(parsed_query: ParsedQuery, matched_entities: list[MatchedEntity], selected_communities: Selection,
                 evidence: list[EvidenceItem], local_context: LocalContext, local_answer: Answer) -> LocalResult:
    return LocalResult(parsed_query, matched_entities, selected_communities, evidence, local_context, local_answer)
