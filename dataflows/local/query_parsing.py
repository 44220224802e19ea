"""Stage 1 of local search: what the question asks about, and its embedding."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from graphrag_dag.dataflows.common.prompting import Prompt, ReplyInvalid, ask, json_object
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


_INTENT_SHAPE = "{entities, keywords, themes}"


def _parse_intent_json(text: str) -> ParsedQuery:
    data = json_object(text, _INTENT_SHAPE)
    fields = {k: _string_list(data.get(k, [])) for k in ("entities", "keywords", "themes")}
    if any(v is None for v in fields.values()):
        raise ReplyInvalid(f"was not valid JSON {_INTENT_SHAPE}")
    return ParsedQuery(source="llm", **fields)  # type: ignore[arg-type]


def parsed_query(query: str, chat_model: ChatModel, parse_prompt: Prompt) -> ParsedQuery:
    """LLM intent extraction when a model is configured; rules otherwise or when its reply is
    unusable, so a parse problem degrades the request instead of failing it."""
    if chat_model.offline:
        return _rule_based(query)
    asked = ask(chat_model, parse_prompt, _parse_intent_json, json_mode=True)
    if asked.value is None:
        fallback = _rule_based(query)
        fallback.warnings.append(asked.warning("query parsing", "used rule-based parsing"))
        return fallback
    parsed = asked.value
    if not parsed.keywords:
        parsed.keywords = keywords(query)
    return parsed


def query_embedding(query: str, embedder: Embedder) -> np.ndarray:
    """Cached per embedder: the embedder's fingerprint is its model and dimension."""
    return np.asarray(embedder.embed([query])[0], dtype=np.float32)
