"""Basic search: naive RAG, the baseline every graph method must beat.

The question's vector, the nearest evidence chunks by pgvector (the same embedder and HNSW index
local search uses), their distinct text units as sources, and an answer written from them
exactly as local search writes its own: the same context format, prompt and offline extractive
rule. No entity, graph or community takes part, so the difference to `local` in `graphrag-dag
eval` is what the graph adds.
"""

from __future__ import annotations

import numpy as np
from hamilton.function_modifiers import cache

from graphrag_dag.dataflows.common import sql
from graphrag_dag.dataflows.common.prompting import Prompt, prompt
from graphrag_dag.dataflows.common.resources import ChatModel, Database, Embedder, TokenCounter
from graphrag_dag.dataflows.common.settings import BASIC, LOCAL
from graphrag_dag.dataflows.local import local_answer as answers
from graphrag_dag.dataflows.local import local_context as contexts
from graphrag_dag.dataflows.local import query_parsing
from graphrag_dag.dataflows.local.chunk_recall import RecalledChunk
from graphrag_dag.dataflows.local.community_selection import Selection
from graphrag_dag.dataflows.local.evidence import EvidenceItem, Source
from graphrag_dag.dataflows.local.local_answer import Answer, LocalResult
from graphrag_dag.dataflows.local.local_context import LocalContext
from graphrag_dag.dataflows.local.query_parsing import ParsedQuery
from graphrag_dag.dataflows.prompts import current_template

_NO_COMMUNITIES = Selection([], "none")


def query_embedding(query: str, embedder: Embedder) -> np.ndarray:
    return query_parsing.query_embedding(query, embedder)


def basic_chunks(query_embedding: np.ndarray, db: Database, namespace: str, embed_dim: int,
                 basic_top_k: int = BASIC.basic_top_k) -> list[RecalledChunk]:
    rows = db.rows(sql.nearest_chunks(embed_dim), {"ns": namespace, "qvec": query_embedding, "k": basic_top_k})
    return [RecalledChunk(r[0], r[1], r[2], r[3], r[4], r[5], float(r[7]), "vector", r[6]) for r in rows]


def basic_sources(basic_chunks: list[RecalledChunk], db: Database, namespace: str,
                  rrf_k: float = LOCAL.rrf_k) -> list[Source]:
    """The chunks' distinct text units, in the order of their nearest chunk."""
    units = list(dict.fromkeys(c.parent_id or c.id for c in basic_chunks))
    if not units:
        return []
    meta = {r[0]: r[1:] for r in db.rows(sql.SOURCE_UNITS, {"ns": namespace, "ids": units})}
    return [Source(u, *meta[u], 1.0 / (rrf_k + n + 1), ("vector",))
            for n, u in enumerate(u for u in units if u in meta)]


def basic_evidence(basic_chunks: list[RecalledChunk]) -> list[EvidenceItem]:
    return [EvidenceItem.of_chunk(c) for c in basic_chunks]


def basic_context(basic_evidence: list[EvidenceItem], token_counter: TokenCounter,
                  context_token_budget: int = LOCAL.context_token_budget) -> LocalContext:
    return contexts.local_context(_NO_COMMUNITIES, basic_evidence, token_counter,
                                  context_token_budget=context_token_budget)


@cache(behavior="recompute")
def answer_template() -> str:
    return current_template("local_answer")


def basic_prompt(answer_template: str, query: str, basic_context: LocalContext) -> Prompt:
    return prompt("answer", answer_template, query=query, context=basic_context.text)


def basic_answer(query: str, basic_evidence: list[EvidenceItem], basic_context: LocalContext,
                 basic_prompt: Prompt, chat_model: ChatModel) -> Answer:
    """Local search's answer rule, with the question's words as the terms an extractive answer
    looks for (no parse: a baseline spends no call on understanding the question)."""
    words = ParsedQuery([], [w for w in query.split() if len(w) > 3], [], "rules")
    return answers.local_answer(words, _NO_COMMUNITIES, basic_evidence, basic_context, basic_prompt, chat_model)


def basic_result(basic_evidence: list[EvidenceItem], basic_context: LocalContext, basic_answer: Answer,
                 basic_sources: list[Source]) -> LocalResult:
    return LocalResult(ParsedQuery([], [], [], "none"), [], _NO_COMMUNITIES, basic_evidence, basic_context,
                       basic_answer, basic_sources)
