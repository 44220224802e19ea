"""Decomposed local search (config `decompose="on"`): each sub-question runs the match and recall
channels, and its ranked lists join the question's own in the fusions.

A comparison ("which came first, X or Y?") needs evidence about both X and Y, but the question's
own embedding lands between them and its name look-ups rank the longer name first. A sub-question
per thing gives each its own lists: its entity lists join the RRF of the channels, and its
nearest chunks and summaries are taken in turn with the question's own.
The sub-questions come from `parsed_query` (LLM or rules, dataflows/common/decompose.py), and the
expansions join the keyword terms.

Every node here replaces a plain node of the same name (`matched_entities`, `vector_chunks`,
`semantic_communities`, `keyword_terms`) or feeds one, so downstream stages are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from graphrag_dag.dataflows.common.resources import Database, Embedder
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.common.switches import CHANNELS, switch_is
from graphrag_dag.dataflows.common.textproc import query_keys
from graphrag_dag.dataflows.local.chunk_recall import (
    KEYWORD_TERMS, RecalledChunk, _nearest_chunks, keyword_terms__plain,
)
from graphrag_dag.dataflows.local.community_recall import (
    SemanticCandidate, _nearest_summaries,
)
from graphrag_dag.dataflows.local.entity_matching import (
    EntityHit, KeyRow, MatchedEntity, NameIndex, _hits, _key_rows, _fuse_channels, _nearest_entities, fuzzy_matches,
    fuzzy_terms,
)
from graphrag_dag.dataflows.local.query_parsing import ParsedQuery

_ON = switch_is("decompose", "on")


@dataclass
class SubQuestionMatches:
    """One sub-question's channel lists, each ranked as the question's own channel would rank it."""

    question: str
    channels: dict[str, list[EntityHit]]


@_ON
def sub_question_embeddings(parsed_query: ParsedQuery, embedder: Embedder) -> np.ndarray:
    """One vector per sub-question, in one embedding call; shape (0, 0) when there are none."""
    if not parsed_query.sub_questions:
        return np.zeros((0, 0), dtype=np.float32)
    return np.asarray(embedder.embed_queries(parsed_query.sub_questions), dtype=np.float32)


@_ON
def sub_question_matches(parsed_query: ParsedQuery, query_name_keys: list[str], name_key_rows: list[KeyRow],
                         sub_question_embeddings: np.ndarray, name_index: NameIndex, db: Database,
                         namespace: str, embed_dim: int, channels: str = ",".join(CHANNELS),
                         fuzzy_threshold: float = LOCAL.fuzzy_threshold,
                         semantic_entity_top_k: int = LOCAL.semantic_entity_top_k,
                         semantic_min_similarity: float = LOCAL.semantic_min_similarity) -> list[SubQuestionMatches]:
    """The exact, alias, fuzzy and semantic channels of each sub-question (those the `channels`
    config keeps on). Name keys the question did not have are looked up in one statement."""
    subs = parsed_query.sub_questions
    if not subs:
        return []
    on = {c.strip() for c in channels.split(",")}
    keys = [query_keys(s) for s in subs]
    rows = name_key_rows
    if on & {"exact", "alias"}:
        known = set(query_name_keys)
        rows = rows + _key_rows(list(dict.fromkeys(k for ks in keys for k in ks if k not in known)), db, namespace)
    out = []
    for i, (question, ks) in enumerate(zip(subs, keys, strict=True)):
        lists: dict[str, list[EntityHit]] = {}
        if "exact" in on:
            lists["exact"] = _hits(rows, ks)
        if "alias" in on:
            lists["alias"] = _hits(rows, ks, names=False)
        if "fuzzy" in on:
            terms = fuzzy_terms(question, ParsedQuery([], [], [], "rules"))
            lists["fuzzy"] = fuzzy_matches(terms, name_index, fuzzy_threshold)
        if "semantic" in on:
            lists["semantic"] = _nearest_entities(sub_question_embeddings[i], db, namespace, embed_dim,
                                                  semantic_entity_top_k, semantic_min_similarity)
        out.append(SubQuestionMatches(question, lists))
    return out


@_ON
def matched_entities__decompose(exact_matches: list[EntityHit], alias_matches: list[EntityHit],
                                fuzzy_matches: list[EntityHit], semantic_matches: list[EntityHit],
                                intent_matches: list[EntityHit], sub_question_matches: list[SubQuestionMatches],
                                rrf_k: float = LOCAL.rrf_k,
                                max_matched_entities: int = LOCAL.max_matched_entities) -> list[MatchedEntity]:
    """RRF over the question's channels and every sub-question's: an entity a sub-question names
    ranks first in that sub-question's lists, however long the other names are."""
    lists = [("exact", exact_matches), ("alias", alias_matches), ("fuzzy", fuzzy_matches),
             ("semantic", semantic_matches), ("intent", intent_matches)]
    lists += [(c, hits) for sub in sub_question_matches for c, hits in sub.channels.items()]
    return _fuse_channels(lists, rrf_k, max_matched_entities)


def _interleaved(lists: list[list], key: Callable[[Any], str], limit: int) -> list:
    """The lists' rows taken in turn (first of each, then second of each, ...), without repeats.
    Not RRF: a sub-question's best row must not lose to rows the other lists merely share."""
    out: dict[str, Any] = {}
    for rank in range(max((len(rows) for rows in lists), default=0)):
        for rows in lists:
            if rank < len(rows):
                out.setdefault(key(rows[rank]), rows[rank])
    return list(out.values())[:limit]


@_ON
def vector_chunks__decompose(query_embedding: np.ndarray, sub_question_embeddings: np.ndarray, db: Database,
                             namespace: str, embed_dim: int,
                             vector_chunk_top_k: int = LOCAL.vector_chunk_top_k) -> list[RecalledChunk]:
    """The nearest chunks of the question and of each sub-question, taken in turn: each
    sub-question's best chunk is among the first, and the total stays `vector_chunk_top_k`."""
    lists = [_nearest_chunks(v, db, namespace, embed_dim, vector_chunk_top_k)
             for v in [query_embedding, *sub_question_embeddings]]
    return _interleaved(lists, lambda c: c.id, vector_chunk_top_k)


@_ON
def semantic_communities__decompose(query_embedding: np.ndarray, sub_question_embeddings: np.ndarray,
                                    db: Database, namespace: str, embed_dim: int, level: int | None = LOCAL.level,
                                    semantic_community_top_k: int = LOCAL.semantic_community_top_k
                                    ) -> list[SemanticCandidate]:
    """The nearest summaries of the question and of each sub-question, taken in turn; each keeps
    its best similarity to any of them, which is what the ranking's semantic signal reads."""
    lists = [_nearest_summaries(v, db, namespace, embed_dim, level, semantic_community_top_k)
             for v in [query_embedding, *sub_question_embeddings]]
    best: dict[str, float] = {}
    for rows in lists:
        for c in rows:
            best[c.id] = max(best.get(c.id, -1.0), c.similarity)
    fused = _interleaved(lists, lambda c: c.id, semantic_community_top_k)
    return [SemanticCandidate(c.id, best[c.id]) for c in fused]


@_ON
def keyword_terms__decompose(matched_entities: list[MatchedEntity], parsed_query: ParsedQuery) -> list[str]:
    """The plain terms, then the expansions (implied concepts) while there is room."""
    terms = keyword_terms__plain(matched_entities, parsed_query)
    extra = [e for e in parsed_query.expansions if len(e) >= 2 and e not in terms]
    head = terms[:KEYWORD_TERMS - min(len(extra), 2)]  # two places are kept for expansions
    return head + extra[:KEYWORD_TERMS - len(head)]
