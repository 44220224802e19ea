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
    score: float  # cosine similarity (vector) or BM25 score (keyword)
    via: str  # "vector" or "keyword"
    line_tokens: int | None = None  # its evidence line's stored token count (dataflows/common/line_tokens.py)


KEYWORD_TERMS = 12  # terms searched at most


@switch_is("decompose", "off")
def keyword_terms__plain(matched_entities: list[MatchedEntity], parsed_query: ParsedQuery) -> list[str]:
    """The names of the entities the question names first (the most specific terms), then the
    parsed keywords. An entity found by embedding alone is not in the question: its name is not
    one of the question's terms."""
    terms: dict[str, None] = {}
    for m in matched_entities:
        if set(m.channels) != {"semantic"}:
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


# BM25's constants (Robertson and Zaragoza's usual values), with presence in place of term
# frequency: a chunk is a few sentences, where a term seldom stands twice.
BM25_K1 = 1.2
BM25_B = 0.75
SPREAD_CAP = 5_000  # chunks counted per term at most: a word in more is common, and its weight near nothing


def keyword_chunks(keyword_terms: list[str], db: Database, namespace: str,
                   keyword_chunk_limit: int = LOCAL.keyword_chunk_limit,
                   keyword_candidate_cap: int = LOCAL.keyword_candidate_cap) -> list[RecalledChunk]:
    """Chunks that contain the terms (case-insensitive substrings), ranked by BM25: each term found
    weighs its inverse document frequency, so a chunk holding the question's rare term outranks
    one holding several common ones, and shorter chunks weigh more (denser evidence).

    A word table bounds the candidates (at most `keyword_candidate_cap` per term), so the cost does
    not grow with the namespace; only CJK terms, which no word holds, are searched by ILIKE
    (metacharacters escaped). The statement orders the candidates by how many terms they hold and
    returns four times `keyword_chunk_limit` of them; BM25 orders those, and the first
    `keyword_chunk_limit` are kept."""
    if not keyword_terms:
        return []
    scan_patterns = [f"%{escape_like(t)}%" for t in keyword_terms if is_cjk(t)]
    ranged = [(n, r) for n, r in enumerate(_word_range(t) for t in keyword_terms) if r]
    lo, hi = [r[0] for _, r in ranged], [r[1] for _, r in ranged]
    rows = db.rows(sql.keyword_chunks(scan=bool(scan_patterns)),
                   {"ns": namespace, "terms": keyword_terms, "scan_patterns": scan_patterns, "lo": lo, "hi": hi,
                    "limit": 4 * keyword_chunk_limit, "per_term_cap": keyword_candidate_cap, "spread_cap": SPREAD_CAP})
    if not rows:
        return []
    total, mean_length = db.memoized("evidence_stats", lambda: tuple(db.rows(sql.EVIDENCE_STATS, {"ns": namespace})[0]))
    spread = [1] * len(keyword_terms)  # a CJK term, found by scan: taken as rare
    for (n, _), count in zip(ranged, rows[0][9] or [], strict=True):
        spread[n] = int(count)
    idf = [float(np.log1p((total - df + 0.5) / (df + 0.5))) for df in spread]
    norm = BM25_K1 * (1 - BM25_B)
    scored = []
    for r in rows:
        length = len(r[1]) / max(float(mean_length), 1.0)
        gain = (BM25_K1 + 1) / (1 + norm + BM25_K1 * BM25_B * length)
        score = sum(idf[k - 1] for k in r[8]) * gain
        scored.append((-score, len(r[1]), r[0], r))
    scored.sort(key=lambda s: s[:3])
    return [RecalledChunk(r[0], r[1], r[2], r[3], r[4], r[5], -neg, "keyword", r[6])
            for neg, _, _, r in scored[:keyword_chunk_limit]]


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
