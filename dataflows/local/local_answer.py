"""Stage 9 of local search: the answer, from the LLM or extracted from the context, and the result."""

from __future__ import annotations

from dataclasses import dataclass, field

from graphrag_dag.dataflows.common.citations import citable_ids, usable_prose
from graphrag_dag.dataflows.common.line_tokens import claim_description
from graphrag_dag.dataflows.common.prompting import Prompt, ask
from graphrag_dag.dataflows.local.community_selection import Selection
from graphrag_dag.dataflows.local.entity_matching import MatchedEntity
from graphrag_dag.dataflows.local.evidence import EvidenceItem, Source
from graphrag_dag.dataflows.local.local_context import LocalContext
from graphrag_dag.dataflows.local.query_parsing import ParsedQuery
from graphrag_dag.dataflows.common.resources import ChatModel
from graphrag_dag.dataflows.common.textproc import TermCoverage, folded, sentence_spans, whole_sentence


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
    sources: list[Source] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        return [*self.parsed_query.warnings, *self.selection.warnings, *self.answer.warnings]

    @property
    def status(self) -> str:
        return "completed" if (self.selection.communities or self.evidence) else "no_results"


def _extractive(query_terms: list[str], selection: Selection, evidence: list[EvidenceItem], context: LocalContext,
                max_sentences: int = 5, header: str = "Offline extractive answer (no LLM configured):") -> str:
    """Offline answer: at most `max_sentences` whole sentences of the in-context evidence and
    summaries, each with the id it came from, chosen greedily to cover the question's terms. Each
    pick is the sentence that mentions the most terms no earlier pick mentioned (then the most
    terms, then claims first, then context order), so every part of a question ("... and who
    funded it?") gets its sentence before any part gets a second one. A claim speaks in its
    source's words, without the subject its extraction named (an attribution the text may not
    make); headings, file names and fragments are not sentences; no sentence is said twice."""
    allowed = set(context.evidence_ids)
    coverage = TermCoverage(query_terms)
    candidates: list[tuple[set[str], float, int, str, str]] = []  # (terms, score, order, sentence, ref)

    def add(text: str, ref: str, weight: float, bonus: float, sentences: int | None = None) -> None:
        # A text that mentions no term gives only sentences of score 0, which are never picked:
        # it is not split, unless the answer may fall back to the first two candidates.
        if not bonus and len(candidates) >= 2 and not coverage.possible(text):
            return
        for s, e in sentence_spans(text)[:sentences]:
            sentence = " ".join(text[s:e].split())
            terms = coverage.covered(sentence)
            score = len(terms) * weight + bonus if whole_sentence(sentence) else 0.0
            candidates.append((terms, score, len(candidates), sentence, ref))

    for item in evidence:
        if item.id in allowed:
            add(claim_description(item.statement) if item.kind == "claim" else item.text, item.label, 1.0,
                0.5 if item.kind == "claim" else 0.0)
    for c in selection.communities:
        if c.id in context.community_ids:
            add(c.summary, f"community {c.id}", 0.8, 0.0, sentences=2)
    return _picked(candidates, max_sentences, header)


def _picked(candidates: list[tuple[set[str], float, int, str, str]], max_sentences: int, header: str) -> str:
    """The greedy pick over (terms, score, order, sentence, ref) candidates (see `_extractive`),
    skipping a sentence already said (or said within a longer pick); with none of positive score,
    the first two candidates."""
    picked: list[str] = []
    said: list[str] = []
    covered: set[str] = set()
    pool = [c for c in candidates if c[1] > 0]
    while pool and len(picked) < max_sentences:
        best = max(pool, key=lambda c: (len(c[0] - covered), c[1], -c[2]))
        pool.remove(best)
        key = folded(best[3])
        if any(key in earlier or earlier in key for earlier in said):
            continue
        said.append(key)
        covered |= best[0]
        picked.append(f"{best[3]} [{best[4]}]")
    if not picked:
        picked = [f"{sentence} [{ref}]" for _, _, _, sentence, ref in candidates[:2]]
    if not picked:
        return "No relevant information was found in the index for this question."
    return header + "\n" + "\n".join(f"- {p}" for p in picked)


_FALLBACK_HEADER = "Extractive answer (the LLM answer was unavailable):"


def local_answer(parsed_query: ParsedQuery, selected_communities: Selection, evidence: list[EvidenceItem],
                 local_context: LocalContext, answer_prompt: Prompt, chat_model: ChatModel) -> Answer:
    """The LLM's answer from the context; offline, or when the call fails or its reply is unusable
    (dataflows/common/citations.py), the extractive answer, so a request always returns its
    retrieval and never a reply that failed validation. Citations are checked against the ids
    labelled in the context the prompt carried."""
    terms = [*parsed_query.keywords, *parsed_query.entities]
    if chat_model.offline:
        return Answer(_extractive(terms, selected_communities, evidence, local_context), "extractive")
    allowed = citable_ids(answer_prompt.fields.get("context", local_context.text))
    asked = ask(chat_model, answer_prompt, lambda text: usable_prose(text, allowed))
    if asked.value is None:
        return Answer(_extractive(terms, selected_communities, evidence, local_context, header=_FALLBACK_HEADER),
                      "extractive", [asked.warning("answer generation", "returned an extractive answer")])
    return Answer(asked.value.text, "llm", asked.value.warning("the answer"))


def local_result(parsed_query: ParsedQuery, matched_entities: list[MatchedEntity], selected_communities: Selection,
                 evidence: list[EvidenceItem], local_context: LocalContext, local_answer: Answer,
                 sources: list[Source]) -> LocalResult:
    return LocalResult(parsed_query, matched_entities, selected_communities, evidence, local_context, local_answer,
                       sources)
