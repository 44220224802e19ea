"""Stage 1 of local search: what the question asks about, and its embedding.

With config `decompose="on"` the parse also returns sub-questions and expansions (design note
5.1 and 5.2): from the LLM, or by the rules of dataflows/common/decompose.py offline or when the
reply leaves them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from graphrag_dag.dataflows.common import decompose
from graphrag_dag.dataflows.common.prompting import Prompt, ReplyInvalid, ask, json_object
from graphrag_dag.dataflows.common.resources import ChatModel, Embedder
from graphrag_dag.dataflows.common.switches import switch_is
from graphrag_dag.dataflows.common.textproc import capitalised_phrases, keywords


@dataclass
class ParsedQuery:
    entities: list[str]
    keywords: list[str]
    themes: list[str]
    source: str  # "llm" or "rules"
    warnings: list[str] = field(default_factory=list)
    sub_questions: list[str] = field(default_factory=list)
    expansions: list[str] = field(default_factory=list)
    decomposed: bool = False  # decomposition was asked for, so the JSON shows what it gave

    def as_json(self) -> dict[str, list[str]]:
        out = {"entities": self.entities, "keywords": self.keywords, "themes": self.themes}
        if self.decomposed:
            out |= {"sub_questions": self.sub_questions, "expansions": self.expansions}
        return out


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
    parsed = ParsedQuery(source="llm", **fields)  # type: ignore[arg-type]
    for key in ("sub_questions", "expansions"):  # asked for by the decomposing prompt only
        if key in data:
            value = _string_list(data[key])
            if value is None:
                raise ReplyInvalid(f"was not valid JSON: {key} must be a list of strings")
            setattr(parsed, key, value[:decompose.MAX_SUB_QUESTIONS] if key == "sub_questions" else value)
    return parsed


def _parsed(query: str, chat_model: ChatModel, parse_prompt: Prompt) -> tuple[ParsedQuery, bool]:
    """The LLM's parse, or the rules' (offline or on an unusable reply); and whether the LLM's."""
    if chat_model.offline:
        return _rule_based(query), False
    asked = ask(chat_model, parse_prompt, _parse_intent_json, json_mode=True)
    if asked.value is None:
        fallback = _rule_based(query)
        fallback.warnings.append(asked.warning("query parsing", "used rule-based parsing"))
        return fallback, False
    parsed = asked.value
    if not parsed.keywords:
        parsed.keywords = keywords(query)
    return parsed, True


@switch_is("decompose", "off")
def parsed_query__plain(query: str, chat_model: ChatModel, parse_prompt: Prompt) -> ParsedQuery:
    """LLM intent extraction when a model is configured; rules otherwise or when its reply is
    unusable, so a parse problem degrades the request instead of failing it."""
    return _parsed(query, chat_model, parse_prompt)[0]


@switch_is("decompose", "on")
def parsed_query__decompose(query: str, chat_model: ChatModel, parse_prompt: Prompt) -> ParsedQuery:
    """The intent plus sub-questions and expansions. A list the reply leaves empty or out gets the
    rules' value: the rules only cut the question's own text, so they never add a wrong hop."""
    parsed, _ = _parsed(query, chat_model, parse_prompt)
    parsed.decomposed = True
    parsed.sub_questions = parsed.sub_questions or decompose.sub_questions(query)
    parsed.expansions = parsed.expansions or decompose.expansions(query)
    return parsed


def query_embedding(query: str, embedder: Embedder) -> np.ndarray:
    """Cached per embedder: the embedder's fingerprint is its model and dimension."""
    return np.asarray(embedder.embed_queries([query])[0], dtype=np.float32)
