"""Stage 4 of local search: evidence chunks recalled by vector similarity and by keywords."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dataflows import sql
from dataflows.entity_matching import MatchedEntity
from dataflows.query_parsing import ParsedQuery
from dataflows.resources import Database
from dataflows.textproc import escape_like


@dataclass(frozen=True)
class RecalledChunk:
    id: str
    text: str
    document_id: str | None
    parent_id: str | None
    start: int | None
    end: int | None
    score: float  # cosine similarity (vector) or matched-term count (keyword)
    via: str  # "vector" or "keyword"


def keyword_terms(matched_entities: list[MatchedEntity], parsed_query: ParsedQuery) -> list[str]:
    """Entity names first (the most specific terms), then the parsed keywords."""
    terms: dict[str, None] = {}
    for m in matched_entities:
        terms[m.name] = None
    for k in parsed_query.keywords:
        if len(k) >= 2:
            terms[k] = None
    return list(terms)[:16]


def keyword_chunks(keyword_terms: list[str], db: Database, namespace: str, index_version: str,
                   keyword_chunk_limit: int) -> list[RecalledChunk]:
    """ILIKE substring search (metacharacters escaped), sorted by how many terms a chunk contains,
    then shorter chunks first (denser evidence)."""
    if not keyword_terms:
        return []
    patterns = [f"%{escape_like(t)}%" for t in keyword_terms]
    rows = db.rows(sql.KEYWORD_CHUNKS, {"ns": namespace, "patterns": patterns, "limit": keyword_chunk_limit})
    return [RecalledChunk(r[0], r[1], r[2], r[3], r[4], r[5], float(r[6]), "keyword") for r in rows]


def vector_chunks(query_embedding: np.ndarray, db: Database, namespace: str, embed_dim: int, index_version: str,
                  vector_chunk_top_k: int) -> list[RecalledChunk]:
    rows = db.rows(sql.nearest_chunks(embed_dim),
                   {"ns": namespace, "qvec": query_embedding.tolist(), "k": vector_chunk_top_k})
    return [RecalledChunk(r[0], r[1], r[2], r[3], r[4], r[5], float(r[6]), "vector") for r in rows]


def recalled_chunks(vector_chunks: list[RecalledChunk], keyword_chunks: list[RecalledChunk],
                    evidence_chunk_cap: int) -> list[RecalledChunk]:
    """Vector order first, then keyword hits; deduplicated by chunk id and capped."""
    out: dict[str, RecalledChunk] = {}
    for chunk in [*vector_chunks, *keyword_chunks]:
        out.setdefault(chunk.id, chunk)
    return list(out.values())[:evidence_chunk_cap]
