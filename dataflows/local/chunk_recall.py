"""Stage 4 of local search: evidence chunks recalled by vector similarity and by keywords."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from graphrag_dag.dataflows.common import sql
from graphrag_dag.dataflows.local.entity_matching import MatchedEntity
from graphrag_dag.dataflows.local.query_parsing import ParsedQuery
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.common.resources import Database
from graphrag_dag.dataflows.common.switches import switch_is
from graphrag_dag.dataflows.common.textproc import escape_like, is_cjk, tokens


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
    line_tokens: int | None = None  # its evidence line's stored token count (dataflows/common/line_tokens.py)


KEYWORD_TERMS = 12  # terms searched at most


@switch_is("decompose", "off")
def keyword_terms__plain(matched_entities: list[MatchedEntity], parsed_query: ParsedQuery) -> list[str]:
    """Entity names first (the most specific terms), then the parsed keywords."""
    terms: dict[str, None] = {}
    for m in matched_entities:
        terms[m.name] = None
    for k in parsed_query.keywords:
        if len(k) >= 2:
            terms[k] = None
    return list(terms)[:KEYWORD_TERMS]


_TOP = chr(0x10FFFF)  # sorts after every character in the "C" collation


def _word_range(term: str) -> tuple[str, str] | None:
    """The chunk_words range that must contain a chunk for it to contain `term`: its first word
    exactly when it has several, or any word starting with it when it is one word (ILIKE
    '%storm%' also matches "Stormwatch"). None for CJK-only terms."""
    words = [w for tok in tokens(term) if not is_cjk(tok) for w in re.split(r"['’]", tok) if w]
    if not words:
        return None
    if len(words) > 1:
        return words[0], words[0] + "\x01"
    return words[0], words[0] + _TOP


def keyword_chunks(keyword_terms: list[str], db: Database, namespace: str,
                   keyword_chunk_limit: int = LOCAL.keyword_chunk_limit,
                   keyword_candidate_cap: int = LOCAL.keyword_candidate_cap) -> list[RecalledChunk]:
    """Case-insensitive substring search, sorted by how many terms a chunk contains, then shorter
    chunks first (denser evidence). A word table bounds the candidates (at most
    `keyword_candidate_cap` per term), so the cost does not grow with the namespace; only CJK
    terms, which no word holds, are searched by ILIKE (metacharacters escaped)."""
    if not keyword_terms:
        return []
    scan_patterns = [f"%{escape_like(t)}%" for t in keyword_terms if is_cjk(t)]
    ranges = [r for r in (_word_range(t) for t in keyword_terms) if r]
    rows = db.rows(sql.keyword_chunks(scan=bool(scan_patterns)),
                   {"ns": namespace, "terms": keyword_terms, "scan_patterns": scan_patterns,
                    "lo": [r[0] for r in ranges], "hi": [r[1] for r in ranges],
                    "limit": keyword_chunk_limit, "per_term_cap": keyword_candidate_cap})
    return [RecalledChunk(r[0], r[1], r[2], r[3], r[4], r[5], float(r[7]), "keyword", r[6]) for r in rows]


def _nearest_chunks(query_embedding: np.ndarray, db: Database, namespace: str, embed_dim: int,
                    vector_chunk_top_k: int) -> list[RecalledChunk]:
    rows = db.rows(sql.nearest_chunks(embed_dim), {"ns": namespace, "qvec": query_embedding, "k": vector_chunk_top_k})
    return [RecalledChunk(r[0], r[1], r[2], r[3], r[4], r[5], float(r[7]), "vector", r[6]) for r in rows]


@switch_is("decompose", "off")
def vector_chunks__plain(query_embedding: np.ndarray, db: Database, namespace: str, embed_dim: int,
                         vector_chunk_top_k: int = LOCAL.vector_chunk_top_k) -> list[RecalledChunk]:
    """The evidence chunks nearest the query embedding (HNSW), most similar first."""
    return _nearest_chunks(query_embedding, db, namespace, embed_dim, vector_chunk_top_k)


def recalled_chunks(vector_chunks: list[RecalledChunk], keyword_chunks: list[RecalledChunk],
                    evidence_chunk_cap: int = LOCAL.evidence_chunk_cap) -> list[RecalledChunk]:
    """Vector order first, then keyword hits; deduplicated by chunk id and capped."""
    out: dict[str, RecalledChunk] = {}
    for chunk in [*vector_chunks, *keyword_chunks]:
        out.setdefault(chunk.id, chunk)
    return list(out.values())[:evidence_chunk_cap]
