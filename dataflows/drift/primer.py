"""DRIFT, step 1: the primer. The community reports nearest the question (any level) are read
once, for a first draft of the answer and the follow-up questions that local search will answer.

With an LLM the primer is one call (`drift_primer.txt`, validated, one retry). Offline, or when the
reply is unusable, the draft is each report's first sentence with its citation, and the follow-ups
are the question's own sub-questions (dataflows/common/decompose.py), then one question per report
about its title: rules that only reuse the question's and the reports' own words.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from graphrag_dag.dataflows.common import decompose, sql
from graphrag_dag.dataflows.common.citations import citable_ids, checked_citations
from graphrag_dag.dataflows.common.prompting import Prompt, ReplyInvalid, ask, json_object
from graphrag_dag.dataflows.common.resources import ChatModel, Database, Embedder
from graphrag_dag.dataflows.common.settings import DRIFT
from graphrag_dag.dataflows.common.textproc import sentence_spans
from graphrag_dag.dataflows.local import query_parsing


@dataclass(frozen=True)
class PrimerReport:
    community_id: str
    level: int
    title: str
    summary: str
    similarity: float

    def as_json(self) -> dict:
        return {"id": self.community_id, "level": self.level, "title": self.title,
                "similarity": round(self.similarity, 6)}


@dataclass
class Primer:
    draft: str
    follow_ups: list[str]
    method: str  # "llm" or "rules"
    warnings: list[str] = field(default_factory=list)
    fell_back: bool = False  # an LLM was asked and its reply could not be used


def query_embedding(query: str, embedder: Embedder) -> np.ndarray:
    return query_parsing.query_embedding(query, embedder)  # as basic search does: one implementation


def primer_reports(query_embedding: np.ndarray, db: Database, namespace: str, embed_dim: int,
                   drift_primer_k: int = DRIFT.drift_primer_k) -> list[PrimerReport]:
    """The reports nearest the question at any level: a broad report can prime as well as a leaf."""
    rows = db.rows(sql.primer_reports(embed_dim), {"ns": namespace, "qvec": query_embedding, "k": drift_primer_k})
    return [PrimerReport(cid, int(level), title, summary, float(sim)) for cid, level, title, summary, sim in rows]


def _by_rules(query: str, reports: list[PrimerReport], limit: int) -> Primer:
    lines = []
    for r in reports[:3]:
        spans = sentence_spans(r.summary)
        if spans:
            s, e = spans[0]
            lines.append(f"- {' '.join(r.summary[s:e].split())} [community {r.community_id}]")
    draft = "\n".join(lines)
    questions = decompose.sub_questions(query) + [f"What do the sources say about {r.title}?"
                                                  for r in reports if r.title.strip()]
    return Primer(draft, _distinct(questions, query)[:limit], "rules")


def _distinct(questions: list[str], *asked: str) -> list[str]:
    seen = {" ".join(a.casefold().split()) for a in asked}
    out = []
    for q in questions:
        key = " ".join(q.casefold().split())
        if q.strip() and key not in seen:
            seen.add(key)
            out.append(q.strip())
    return out


def _parse(text: str, allowed: set[str]) -> tuple[str, list[str]]:
    data = json_object(text, "{intermediate_answer, follow_up_questions}")
    draft, questions = data.get("intermediate_answer"), data.get("follow_up_questions")
    if not isinstance(draft, str) or not isinstance(questions, list) or not all(isinstance(q, str) for q in questions):
        raise ReplyInvalid("was not valid JSON {intermediate_answer: string, follow_up_questions: [string]}")
    return checked_citations(draft, allowed).text, questions


def drift_primer(query: str, primer_reports: list[PrimerReport], primer_prompt: Prompt, chat_model: ChatModel,
                 drift_follow_ups: int = DRIFT.drift_follow_ups) -> Primer:
    """The draft and the first follow-ups; rules offline or when the reply is unusable."""
    if not primer_reports:
        return Primer("", [], "rules")
    if chat_model.offline:
        return _by_rules(query, primer_reports, drift_follow_ups)
    allowed = citable_ids(primer_prompt.fields.get("reports", ""))
    asked = ask(chat_model, primer_prompt, lambda text: _parse(text, allowed), json_mode=True, attempts=2)
    if asked.value is None:
        out = _by_rules(query, primer_reports, drift_follow_ups)
        out.warnings.append(asked.warning("the DRIFT primer", "used the rule-based primer"))
        out.fell_back = True
        return out
    draft, questions = asked.value
    return Primer(draft, _distinct(questions, query)[:drift_follow_ups], "llm")
