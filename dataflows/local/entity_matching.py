"""Stage 2 of local search: which indexed entities the question is about.

Five channels each produce a ranked list; `matched_entities` fuses them with RRF. Each channel
is its own node so it can be inspected, overridden (e.g. with []) or switched off by config
(`channels`, see dataflows/common/switches.py): an off channel resolves to its `__off` variant.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hamilton.caching import fingerprinting

from graphrag_dag.dataflows.common import sql
from graphrag_dag.dataflows.common.fusion import reciprocal_rank_fusion
from graphrag_dag.dataflows.common.resources import Database
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.common.textproc import STOP_WORDS, is_cjk, name_key, query_keys
from graphrag_dag.dataflows.local.name_index import NameIndex
from graphrag_dag.dataflows.local.query_parsing import ParsedQuery
from graphrag_dag.dataflows.common.switches import channel_off, channel_on, switch_is


@dataclass(frozen=True)
class EntityHit:
    id: str
    name: str
    score: float  # channel-specific: match length, fuzzy ratio or cosine similarity
    via: str = ""  # the text that matched (name, alias or query term)


@dataclass
class MatchedEntity:
    id: str
    name: str
    score: float
    channels: list[str] = field(default_factory=list)
    concept: bool = False  # a term of a subject rather than the name of one thing (named_entities says)

    def as_json(self) -> dict:
        return {"id": self.id, "name": self.name, "score": round(self.score, 6), "channels": self.channels}


@fingerprinting.hash_value.register(NameIndex)
def _name_index_fingerprint(obj: NameIndex, *args: object, depth: int = 0, **kwargs: object) -> str:
    """A name index is what its namespace version holds: hashing 100k names per run would cost
    more than the fuzzy search itself."""
    return fingerprinting.hash_value(f"NameIndex:{obj.version}", depth=depth + 1)


def _load_name_index(db: Database, namespace: str) -> NameIndex:
    pairs = [(i, n, n) for i, n in db.rows(sql.ENTITY_NAMES, {"ns": namespace})]
    names = {i: n for i, n, _ in pairs}
    pairs += [(i, names.get(i, a), a) for i, a in db.rows(sql.ALIAS_NAMES, {"ns": namespace})]
    return NameIndex(pairs, db.fingerprint)


def _ranked(hits: dict[str, EntityHit]) -> list[EntityHit]:
    return sorted(hits.values(), key=lambda h: (-h.score, h.name, h.id))


def _best(hits: dict[str, EntityHit], hit: EntityHit) -> None:
    if hit.id not in hits or hit.score > hits[hit.id].score:
        hits[hit.id] = hit


@dataclass(frozen=True)
class KeyRow:
    """An entity whose name or alias has one of the looked-up keys: `via` is the text that has it,
    `alias` whether that text is an alias."""

    id: str
    name: str
    via: str
    key: str
    alias: bool


def _hits(rows: list[KeyRow], keys: list[str], *, names: bool = True) -> list[EntityHit]:
    wanted = set(keys)
    hits: dict[str, EntityHit] = {}
    for row in rows:
        if row.key in wanted and (names or row.alias):
            _best(hits, EntityHit(row.id, row.name, float(len(row.key)), row.via))
    return _ranked(hits)


def query_name_keys(query: str) -> list[str]:
    """Every form in which a name could occur in the query: word n-grams (so a match falls on
    word boundaries and "Al" never matches inside "Alice") and CJK substrings."""
    return query_keys(query)


def intent_name_keys(parsed_query: ParsedQuery) -> list[str]:
    """The parsed intent entities as name keys."""
    return list(dict.fromkeys(k for k in (name_key(e) for e in parsed_query.entities) if k))


def _key_rows(keys: list[str], db: Database, namespace: str) -> list[KeyRow]:
    if not keys:
        return []
    return [KeyRow(eid, name, via, key, is_alias) for eid, name, via, key, is_alias
            in db.rows(sql.ENTITIES_BY_KEY, {"ns": namespace, "keys": keys})]


def name_key_rows(query_name_keys: list[str], db: Database, namespace: str) -> list[KeyRow]:
    """Entities and aliases having any of the query's keys: one statement serves the exact and
    alias channels (and the intent channel, for the keys it shares with the query)."""
    return _key_rows(query_name_keys, db, namespace)


@channel_on("exact")
def exact_matches(query_name_keys: list[str], name_key_rows: list[KeyRow]) -> list[EntityHit]:
    """Names or aliases occurring in the query itself. Longer matches rank first: "Mara Quill"
    is stronger evidence than "Quill"."""
    return _hits(name_key_rows, query_name_keys)


@channel_on("alias")
def alias_matches(query_name_keys: list[str], name_key_rows: list[KeyRow]) -> list[EntityHit]:
    """The entity_aliases table on its own: nicknames, abbreviations and translations resolve to
    their canonical entity, and an entity named by alias earns this channel's vote too."""
    return _hits(name_key_rows, query_name_keys, names=False)


@channel_on("intent")
def intent_matches(intent_name_keys: list[str], query_name_keys: list[str], name_key_rows: list[KeyRow],
                   db: Database, namespace: str) -> list[EntityHit]:
    """Parsed intent entities that name a known entity or alias (an LLM may normalise a mention
    the query spelled differently). Only keys the query did not already have are looked up."""
    known = set(query_name_keys)
    rows = name_key_rows + _key_rows([k for k in intent_name_keys if k not in known], db, namespace)
    return _hits(rows, intent_name_keys)


def fuzzy_terms(query: str, parsed_query: ParsedQuery) -> list[str]:
    """Latin word n-grams (1-3 words) and intent entities worth comparing fuzzily; CJK is matched
    exactly, since edit distance on two-character names is meaningless."""
    terms: dict[str, None] = {}
    for key in query_keys(query):
        words = key.split(" ")
        if is_cjk(key) or len(key) < 4 or len(words) > 3 or words[0] in STOP_WORDS or words[-1] in STOP_WORDS:
            continue  # a name neither starts nor ends with "the", "of", "is"...
        terms[key] = None
    for ent in parsed_query.entities:
        k = name_key(ent)
        if k and not is_cjk(k):
            terms[k] = None
    return list(terms)


def name_index(db: Database, namespace: str) -> NameIndex:
    """Names and aliases of the namespace for fuzzy matching, loaded once per namespace version
    (kept in memory by the database resource; an import changes the version)."""
    return db.memoized("name_index", lambda: _load_name_index(db, namespace))


@channel_on("fuzzy")
def fuzzy_matches(fuzzy_terms: list[str], name_index: NameIndex,
                  fuzzy_threshold: float = LOCAL.fuzzy_threshold) -> list[EntityHit]:
    """Typo-tolerant, case-insensitive matching of query terms against names and aliases."""
    hits: dict[str, EntityHit] = {}
    for found in name_index.search(fuzzy_terms, fuzzy_threshold, limit=5):
        for eid, name, score, key in found:
            _best(hits, EntityHit(eid, name, score, key))
    return _ranked(hits)[:20]


def _nearest_entities(query_embedding: np.ndarray, db: Database, namespace: str, embed_dim: int,
                      semantic_entity_top_k: int, semantic_min_similarity: float) -> list[EntityHit]:
    rows = db.rows(sql.nearest_entities(embed_dim), {"ns": namespace, "qvec": query_embedding, "k": semantic_entity_top_k})
    return [EntityHit(eid, name, float(sim), "") for eid, name, sim in rows if sim >= semantic_min_similarity]


@channel_on("semantic")
def semantic_matches(query_embedding: np.ndarray, db: Database, namespace: str, embed_dim: int,
                     semantic_entity_top_k: int = LOCAL.semantic_entity_top_k,
                     semantic_min_similarity: float = LOCAL.semantic_min_similarity) -> list[EntityHit]:
    """Query embedding against the *stored* entity embeddings, searched through the namespace's
    HNSW index."""
    return _nearest_entities(query_embedding, db, namespace, embed_dim, semantic_entity_top_k,
                             semantic_min_similarity)

# ------------------------------------------------------------- channels switched off by config


@channel_off("exact")
def exact_matches__off() -> list[EntityHit]:
    """The exact channel, switched off by config: contributes nothing to the fusion."""
    return []


@channel_off("alias")
def alias_matches__off() -> list[EntityHit]:
    """The alias channel, switched off by config: contributes nothing to the fusion."""
    return []


@channel_off("fuzzy")
def fuzzy_matches__off() -> list[EntityHit]:
    """The fuzzy channel, switched off by config: contributes nothing to the fusion."""
    return []


@channel_off("semantic")
def semantic_matches__off() -> list[EntityHit]:
    """The semantic channel, switched off by config: contributes nothing to the fusion."""
    return []


@channel_off("intent")
def intent_matches__off() -> list[EntityHit]:
    """The intent channel, switched off by config: contributes nothing to the fusion."""
    return []


def _fuse_channels(lists: list[tuple[str, list[EntityHit]]], rrf_k: float, limit: int) -> list[MatchedEntity]:
    """RRF over (channel, ranked hits) lists, remembering which channels found each entity."""
    scores = reciprocal_rank_fusion(([h.id for h in hits] for _, hits in lists), k=rrf_k)
    names: dict[str, str] = {}
    found_by: dict[str, list[str]] = {}
    for channel, hits in lists:
        for h in hits:
            names.setdefault(h.id, h.name)
            if channel not in found_by.setdefault(h.id, []):
                found_by[h.id].append(channel)
    ordered = sorted(scores, key=lambda i: (-scores[i], names[i], i))[:limit]
    return [MatchedEntity(i, names[i], scores[i], found_by[i]) for i in ordered]


@switch_is("decompose", "off")
def matched_entities__plain(exact_matches: list[EntityHit], alias_matches: list[EntityHit],
                            fuzzy_matches: list[EntityHit], semantic_matches: list[EntityHit],
                            intent_matches: list[EntityHit], rrf_k: float = LOCAL.rrf_k,
                            max_matched_entities: int = LOCAL.max_matched_entities) -> list[MatchedEntity]:
    """RRF over the channels, remembering which channels found each entity."""
    return _fuse_channels([("exact", exact_matches), ("alias", alias_matches), ("fuzzy", fuzzy_matches),
                          ("semantic", semantic_matches), ("intent", intent_matches)], rrf_k, max_matched_entities)
