"""Stage 1 of local search: what the question asks about, and its embedding."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from graphrag_dag.dataflows import prompts
from graphrag_dag.dataflows.common.resources import ChatModel, Embedder
from graphrag_dag.dataflows.common.textproc import capitalised_phrases, keywords


@dataclass
class ParsedQuery:
    entities: list[str]
    keywords: list[str]
    themes: list[str]
    source: str  # "llm" or "rules"
    warnings: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, list[str]]:
        return {"entities": self.entities, "keywords": self.keywords, "themes": self.themes}


def _rule_based(query: str) -> ParsedQuery:
    ents = capitalised_phrases(query)
    kws = keywords(query)
    entity_words = {w.casefold() for e in ents for w in e.split()}
    themes = [k for k in kws if k not in entity_words][:5]
    return ParsedQuery(entities=ents, keywords=kws, themes=themes, source="rules")


def _string_list(value: object) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return [v.strip() for v in value if v.strip()][:20]


def _parse_intent_json(text: str) -> ParsedQuery | None:
    try:
        data = json.loads(prompts.strip_fences(text))
    except (json.JSONDecodeError, TypeError):
        return None
    if not isinstance(data, dict):
        return None
    fields = {k: _string_list(data.get(k, [])) for k in ("entities", "keywords", "themes")}
    if any(v is None for v in fields.values()):
        return None
    return ParsedQuery(source="llm", **fields)  # type: ignore[arg-type]


def parsed_query(query: str, chat_model: ChatModel, llm_identity: str, parse_prompt: str) -> ParsedQuery:
    """LLM intent extraction when a model is configured; rules otherwise or when its JSON is
    unusable, so a parse problem degrades the request instead of failing it."""
    if chat_model.offline:
        return _rule_based(query)
    try:
        reply = chat_model.complete("parse", prompts.render(parse_prompt, query=query), json_mode=True)
    except prompts.PASSTHROUGH_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001 - any LLM failure falls back to rules
        fallback = _rule_based(query)
        fallback.warnings.append(f"query parsing by LLM failed ({type(exc).__name__}); used rule-based parsing")
        return fallback
    parsed = _parse_intent_json(reply.text)
    if parsed is None:
        fallback = _rule_based(query)
        fallback.warnings.append("LLM query parse was not valid JSON {entities, keywords, themes}; used rule-based parsing")
        return fallback
    if not parsed.keywords:
        parsed.keywords = keywords(query)
    return parsed


def query_embedding(query: str, embedder: Embedder, embed_model: str) -> np.ndarray:
    """`embed_model` is an input so cached embeddings never cross embedders."""
    return np.asarray(embedder.embed([query])[0], dtype=np.float32)
