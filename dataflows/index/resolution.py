"""Indexer, stage 4: one entity per name, however its mentions spell it.

Mentions are merged when their names agree after folding case, whitespace, punctuation,
diacritics, a trailing possessive and a leading article ("The Saltmarrow Lantern",
"saltmarrow lantern", "Saltmarrow Lantern's"). The canonical name is the most frequent
full spelling (then the longest, then the first seen); every other spelling becomes an alias.
Within one document, a one-word name that is the first or last word of exactly one longer name
mentioned in that document is that entity ("Quill" after "Mara Quill"); a one-word name that
could be several ("Saltmarrow" beside "Saltmarrow Lantern" and "Saltmarrow Harbour Council") is
left on its own. An acronym the corpus defines ("basal cell carcinoma (BCC)") is an alias of its
expansion. With an LLM, the aliases it reports join their entity too, and the description is
the LLM's descriptions of the entity, each once, within the same budget.
An entity's description, offline, is its most informative sentences within a budget: the first
sentences of a document titled with its name, then sentences that begin with it, then the rest,
each once, in document order.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field, replace

from hamilton.function_modifiers import cache

from graphrag_dag.dataflows.common import waiting
from graphrag_dag.dataflows.common.prompting import ReplyInvalid, ask, prompt
from graphrag_dag.dataflows.common.records import Alias, Entity
from graphrag_dag.dataflows.common.resources import ChatModel, ExtractionCache
from graphrag_dag.dataflows.common.settings import INDEX
from graphrag_dag.dataflows.index.extraction import ChunkMentions
from graphrag_dag.dataflows.index.llm_extraction import Extractions
from graphrag_dag.dataflows.index.names import entity_id, resolution_key
from graphrag_dag.dataflows.index.spans import split_sentence_spans
from graphrag_dag.dataflows.prompts import current_template

@dataclass
class EntityIndex:
    """Every resolved entity, by resolution key."""

    names: dict[str, str] = field(default_factory=dict)  # key → canonical name
    types: dict[str, str] = field(default_factory=dict)
    spellings: dict[str, list[str]] = field(default_factory=dict)  # key → other spellings
    short_names: dict[tuple[str, str], str] = field(default_factory=dict)  # (document, one-word key) → key
    aliases: dict[str, str] = field(default_factory=dict)  # an LLM-reported alias's key → its entity's key

    def key_of(self, surface: str, document_id: str) -> str:
        key = resolution_key(surface)
        key = self.aliases.get(key, key)
        return self.short_names.get((document_id, key), key)

    def id_of(self, surface: str, document_id: str) -> str | None:
        key = self.key_of(surface, document_id)
        return entity_id(key) if key in self.names else None


def _short_names(chunk_mentions: list[ChunkMentions]) -> dict[tuple[str, str], str]:
    longer: dict[str, set[str]] = {}
    single: set[tuple[str, str]] = set()
    for cm in chunk_mentions:
        doc = cm.chunk.document_id or ""
        for m in cm.mentions:
            key = resolution_key(m.text)
            (longer.setdefault(doc, set()).add(key) if " " in key else single.add((doc, key)))
    out: dict[tuple[str, str], str] = {}
    for doc, key in single:
        fits = [k for k in longer.get(doc, ()) if k.split(" ")[0] == key or k.split(" ")[-1] == key]
        if len(fits) == 1:
            out[(doc, key)] = fits[0]
    return out


def _llm_aliases(extractions: Extractions) -> dict[str, str]:
    out: dict[str, str] = {}
    for extraction in extractions.by_unit.values():
        for e in extraction.entities:
            key = resolution_key(e["name"])
            for alias in e["aliases"]:
                other = resolution_key(alias)
                if other and other != key:
                    out.setdefault(other, key)
    return {a: k for a, k in out.items() if a not in out.values()}  # no chains of aliases


def entity_index(chunk_mentions: list[ChunkMentions], extractions: Extractions,
                 acronym_aliases: dict[str, str]) -> EntityIndex:
    spellings: dict[str, Counter] = {}
    kinds: dict[str, Counter] = {}
    order: dict[str, int] = {}
    short = _short_names(chunk_mentions)
    alias_of = {**acronym_aliases, **_llm_aliases(extractions)}
    alias_of = {a: k for a, k in alias_of.items() if a not in alias_of.values()}  # no chains of aliases
    for cm in chunk_mentions:
        for m in cm.mentions:
            key = resolution_key(m.text)
            key = short.get((cm.chunk.document_id or "", alias_of.get(key, key)), alias_of.get(key, key))
            if len(key) < 2:
                continue
            spellings.setdefault(key, Counter())[m.text] += 1
            kinds.setdefault(key, Counter())[m.type] += 1
            order.setdefault(key, len(order))
    index = EntityIndex(short_names=short, aliases=alias_of)
    for key in sorted(spellings, key=order.__getitem__):
        counts = spellings[key]
        # A spelling that is the full name comes first ("Mara Quill", not the more frequent "Quill").
        ranked = sorted(counts, key=lambda s: (resolution_key(s) != key, -counts[s], -len(s), s))
        index.names[key] = ranked[0]
        index.spellings[key] = ranked[1:]
        typed = [(n, k) for k, n in kinds[key].items() if k != "ENTITY"]
        index.types[key] = max(typed)[1] if typed else "ENTITY"
    return index


def _description(sentences: list[tuple[int, int, str]], budget: int) -> str:
    """The best sentences (score, document order, then text) that fit `budget` characters."""
    picked: list[tuple[int, int, str]] = []
    used = 0
    for score, order, text in sorted(sentences, key=lambda s: (-s[0], s[1])):
        if any(text == p[2] for p in picked):
            continue
        if picked and used + len(text) + 1 > budget:
            continue
        picked.append((order, score, text[:budget]))
        used += len(text) + 1
    return " ".join(t for _, _, t in sorted(picked))


def _llm_descriptions(entity_index: EntityIndex, extractions: Extractions) -> dict[str, list[tuple[int, int, str]]]:
    out: dict[str, list[tuple[int, int, str]]] = {}
    order = 0
    for extraction in extractions.by_unit.values():
        for e in extraction.entities:
            text = " ".join(str(e.get("description") or "").split())
            if text:
                key = entity_index.aliases.get(resolution_key(e["name"]), resolution_key(e["name"]))
                out.setdefault(key, []).append((1, order, text))
                order += 1
    return out


def entities(entity_index: EntityIndex, chunk_mentions: list[ChunkMentions], extractions: Extractions,
             description_chars: int = INDEX.description_chars) -> list[Entity]:
    candidates: dict[str, list[tuple[int, int, str]]] = {}
    order = 0
    if extractions.used_llm:  # with a model, descriptions are the model's
        candidates = _llm_descriptions(entity_index, extractions)
    for cm in [] if extractions.used_llm else chunk_mentions:
        text, base = cm.chunk.text, cm.chunk.start or 0
        doc = cm.chunk.document_id or ""
        titled = [m for m in cm.mentions if m.start < 0]
        for n, (s, e) in enumerate(split_sentence_spans(text)):
            if text[s:e].startswith("#"):  # a heading states nothing about what it names
                continue
            inside = [m for m in cm.mentions if m.start >= 0 and base + s <= m.start < base + e]
            keys = [entity_index.key_of(m.text, doc) for m in inside]
            about_title = [entity_index.key_of(m.text, doc) for m in titled] if n == 0 else []
            for rank, key in enumerate(dict.fromkeys(about_title + keys)):
                score = 3 if key in about_title else (2 if rank == 0 else 1)
                candidates.setdefault(key, []).append((score, order, " ".join(text[s:e].split())))
            order += 1
    out = []
    for key, name in entity_index.names.items():
        out.append(Entity(entity_id(key), name, entity_index.types[key],
                          _description(candidates.get(key, []), description_chars)))
    return out


def aliases(entity_index: EntityIndex) -> list[Alias]:
    return [Alias(entity_id(key), spelling) for key, others in entity_index.spellings.items() for spelling in others]


@cache(behavior="recompute")
def description_template() -> str:
    return current_template("summarize_descriptions")


def _non_empty(text: str) -> str:
    if not text.strip():
        raise ReplyInvalid("returned an empty description")
    return " ".join(text.split())


def described_entities(entities: list[Entity], entity_index: EntityIndex, extractions: Extractions,
                       description_template: str, chat_model: ChatModel, extraction_cache: ExtractionCache,
                       extraction_concurrency: int = INDEX.extraction_concurrency) -> list[Entity]:
    """With a model, an entity that several text units describe gets one description written from
    all of theirs (one call per such entity, cached by its prompt; on failure the descriptions
    stay joined). Offline, and for entities described once, the descriptions stand."""
    if not extractions.used_llm:
        return entities
    many = {entity_id(k): [d for *_, d in ds] for k, ds in _llm_descriptions(entity_index, extractions).items()
            if len(dict.fromkeys(d for *_, d in ds)) > 1}
    jobs = []
    for e in entities:
        if e.id in many:
            p = prompt("describe", description_template, name=e.name,
                       descriptions="\n".join(f"- {d}" for d in dict.fromkeys(many[e.id])))
            jobs.append((e, p, hashlib.sha256(f"describe\x00{chat_model.identity}\x00{p.text}".encode()).hexdigest()))
    written = {e.id: extraction_cache.get(k) for e, _, k in jobs}
    todo = [(e, p, k) for e, p, k in jobs if written[e.id] is None]
    with waiting.thread_pool(extraction_concurrency, "describe") as pool:
        answers = waiting.results(pool, lambda job: ask(chat_model, job[1], _non_empty), todo)
    for (e, _, k), a in zip(todo, answers, strict=True):
        if a.value is not None:
            extraction_cache.put(k, a.value)
            written[e.id] = a.value
    return [replace(e, description=written[e.id]) if written.get(e.id) else e for e in entities]
