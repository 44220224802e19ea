"""Stage 7 of local search: the facts behind the answer, each traceable to its source.

Claims come from the selected communities' member entities; chunks from vector/keyword recall.
Every item keeps `document_id`, `chunk_id` and its [start, end) span in the document when known,
so an application can show exactly where a statement came from.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from operator import attrgetter

from graphrag_dag.dataflows.common import sql
from graphrag_dag.dataflows.common.line_tokens import claim_statement
from graphrag_dag.dataflows.local.chunk_recall import BM25_B, BM25_K1, RecalledChunk
from graphrag_dag.dataflows.local.community_selection import Selection
from graphrag_dag.dataflows.local.entity_matching import MatchedEntity
from graphrag_dag.dataflows.local.query_parsing import ParsedQuery
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.common.resources import Database
from graphrag_dag.dataflows.common.textproc import folded_hits, folded_terms, passage_terms, sentence_spans


# Not frozen, though nothing changes one: a frozen dataclass sets each field through
# object.__setattr__, and a local search makes hundreds of items (one per claim candidate).
@dataclass
class EvidenceItem:
    id: str
    kind: str  # "claim" or "chunk"
    text: str  # for claims with a located source: the exact source passage
    document_id: str | None
    chunk_id: str | None
    start: int | None
    end: int | None
    statement: str = ""  # a claim's description (what the source is evidence for)
    score: float = 0.0
    unit_id: str | None = None  # the text unit it stands in, which ranks it among the sources
    line_tokens: int | None = None  # its evidence line's stored token count (dataflows/common/line_tokens.py)

    @staticmethod
    def of_chunk(chunk: RecalledChunk) -> EvidenceItem:
        """A chunk as evidence: its own chunk, its recall score and its stored line count."""
        return EvidenceItem(chunk.id, "chunk", chunk.text, chunk.document_id, chunk.id, chunk.start, chunk.end, "",
                            chunk.score, line_tokens=chunk.line_tokens)

    @property
    def body(self) -> str:
        """What the item says: a claim's statement and the passage it quotes (when placed), a
        chunk's (or excerpt's) text."""
        if self.kind == "claim":
            return self.statement + (" " + self.text if self.start is not None else "")
        return self.text

    @property
    def is_excerpt(self) -> bool:
        """Some sentences of a chunk (`excerpt`), labelled in a context by their chunk's id."""
        return self.kind == "chunk" and self.id != self.chunk_id

    @property
    def label(self) -> str:
        """The id the context labels the item's line with, and an answer cites it by."""
        return self.chunk_id if self.is_excerpt and self.chunk_id else self.id

    def excerpt(self, start: int, end: int) -> EvidenceItem:
        """Characters [start, end) of a chunk item's text (some of its sentences) as an item of
        their own: id `<chunk id>#<start>-<end>`, the same chunk and document, placed in the
        document when the chunk is."""
        placed = self.start is not None and self.end is not None
        return EvidenceItem(f"{self.id}#{start}-{end}", "chunk", self.text[start:end], self.document_id, self.chunk_id,
                            self.start + start if placed else None, self.start + end if placed else None, "",
                            self.score, self.unit_id)

    def as_json(self) -> dict:
        out = {"id": self.id, "kind": self.kind, "text": self.text, "document_id": self.document_id,
               "chunk_id": self.chunk_id, "start": self.start, "end": self.end}
        if self.kind == "claim":
            out["statement"] = self.statement
        return out


@dataclass(frozen=True)
class Source:
    """A passage (text unit) behind the result; made by dataflows/local/sources.py."""

    unit_id: str
    document_id: str | None
    title: str
    start: int | None
    end: int | None
    score: float
    signals: tuple[str, ...]  # the signals that ranked it, strongest contribution first

    def as_json(self) -> dict:
        return {"document_id": self.document_id, "title": self.title, "text_unit_id": self.unit_id,
                "start": self.start, "end": self.end, "score": round(self.score, 6), "signals": list(self.signals)}


def ranked_claims(selected_communities: Selection, matched_entities: list[MatchedEntity], parsed_query: ParsedQuery,
                  db: Database, namespace: str,
                  claim_candidate_limit: int = LOCAL.claim_candidate_limit) -> list[EvidenceItem]:
    """Claims about members of the selected communities, most relevant first: about a matched
    entity, then naming one as object, then by query keywords in the statement."""
    cids = [c.id for c in selected_communities.communities]
    if not cids:
        return []
    eids = [m.id for m in matched_entities]
    rows = db.rows(sql.CLAIMS_FOR_COMMUNITIES, {"ns": namespace, "cids": cids, "eids": eids, "limit": claim_candidate_limit})
    if not rows:
        return []
    terms = folded_terms(parsed_query.keywords)  # once, not once per claim
    items = []
    for (cid, subj_name, ctype, status, desc, quote, doc_id, chunk_id, start, end, subj_matched, obj_matched,
         unit_id, line_tokens) in rows:
        score = 2.0 * bool(subj_matched) + 1.0 * bool(obj_matched) + 0.25 * folded_hits(desc, terms)
        statement = claim_statement(subj_name, ctype, status, desc)
        located = start is not None and end is not None and bool(quote)
        items.append(EvidenceItem(cid, "claim", quote if located else desc, doc_id, chunk_id,
                                  start if located else None, end if located else None, statement, score,
                                  unit_id, line_tokens))
    items.sort(key=attrgetter("id"))  # then stably by score, highest first: (-score, id)
    items.sort(key=attrgetter("score"), reverse=True)
    return items


def candidate_evidence(ranked_claims: list[EvidenceItem], recalled_chunks: list[RecalledChunk], sources: list[Source],
                       source_chunks: list[RecalledChunk], chunk_units: dict[str, str], claim_cap: int = LOCAL.claim_cap,
                       evidence_chunk_cap: int = LOCAL.evidence_chunk_cap) -> list[EvidenceItem]:
    """Claims, recalled chunks and the ranked sources' chunks, deduplicated by id. First the chunks
    the question's text or vector recalled, in the order of the sources they come from (then
    recall order): the passages that answer in the question's own words. Then the claims of the
    selected communities and the other chunks of the ranked sources, in source order (claims
    before chunks within one source): what the graph adds, and the context around what was found.
    A source is a text unit of many chunks, and read whole it would spend the budget on its first
    chunks before the next source's best one. Items of no ranked source follow within their tier.
    The caps apply after this order, so the best-supported items stay.

    That order is a stable sort by (tier, source rank, chunks after claims) of the items as first
    seen, so the items are dealt into one bucket per (tier, rank, kind) in the order seen and the
    buckets read in order: about 200 items a search, of which at most the caps are kept, and a
    chunk is made an item only when it is kept.

    A claim that only restates the sentence it quotes would spend the budget on words the context
    holds when its chunk is evidence too, or another such claim quotes the same sentence: it is
    left out (`_without_repeats`)."""
    seen: dict[str, EvidenceItem | RecalledChunk] = {}
    for item in ranked_claims:
        seen.setdefault(item.id, item)
    for ch in [*recalled_chunks, *source_chunks]:
        seen.setdefault(ch.id, ch)
    rank = {s.unit_id: n for n, s in enumerate(sources)}
    units = {**chunk_units, **{c.id: c.parent_id or c.id for c in source_chunks}}
    unranked = len(rank)
    found = {c.id for c in recalled_chunks}
    claims: dict[tuple[int, int], list[EvidenceItem]] = {}
    chunks: dict[tuple[int, int], list[RecalledChunk]] = {}
    for value in seen.values():
        if isinstance(value, EvidenceItem):
            claims.setdefault((1, rank.get(units.get(value.chunk_id or "", ""), unranked)), []).append(value)
        else:
            tier = 0 if value.id in found else 1
            chunks.setdefault((tier, rank.get(units.get(value.id, ""), unranked)), []).append(value)
    out: list[EvidenceItem] = []
    claims_left, chunks_left = claim_cap, evidence_chunk_cap
    for n in sorted(claims.keys() | chunks.keys()):
        kept = claims.get(n, [])[:max(claims_left, 0)]
        claims_left -= len(kept)
        out += kept
        taken = chunks.get(n, [])[:max(chunks_left, 0)]
        chunks_left -= len(taken)
        out += map(EvidenceItem.of_chunk, taken)
    return _without_repeats(out)


def _without_repeats(items: list[EvidenceItem]) -> list[EvidenceItem]:
    """The items less the claims that only repeat a sentence of the context: a claim whose statement
    is its quote (as an offline claim's is) when its chunk is an item, or when an earlier such claim
    quotes the same sentence. A claim whose statement says more (a model's description) stays."""
    chunks = {e.id for e in items if e.kind == "chunk"}
    quoted: set[str] = set()
    out = []
    for e in items:
        if e.kind == "claim" and e.start is not None:
            quote = " ".join(e.text.split()).casefold()
            if quote and quote in " ".join(e.statement.split()).casefold():
                if e.chunk_id in chunks or quote in quoted:
                    continue
                quoted.add(quote)
        out.append(e)
    return out


# How `evidence` ranks passages (RRF as dataflows/common/fusion.py fuses, with the search's `rrf_k`).
CANDIDATE_LISTS = 2  # a candidate's rank fuses two recall lists (vector and keyword): it counts as two
NOVELTY_WINDOW = 30  # the most relevant passages not yet taken, among which novelty chooses
NOVELTY_WEIGHT = 0.5  # the share of a passage's relevance that repeating the context's terms can cost


def evidence(candidate_evidence: list[EvidenceItem], query: str, parsed_query: ParsedQuery,
             rrf_k: float = LOCAL.rrf_k) -> list[EvidenceItem]:
    """The candidates as passages, most relevant and new first: what a cut at any budget keeps.

    A chunk is a few sentences, of which one or two bear on the question; read whole, chunks spend
    a budget on the rest. So a chunk of several sentences becomes one item per sentence (an
    excerpt, `EvidenceItem.excerpt`); a claim, one statement, stays one.

    Relevance fuses two ranks (reciprocal rank fusion): the passage's own, by BM25 of the question's
    terms and its parsed keywords and expansions over the passages (presence, not counts; the idf
    is the passages', so a term every candidate holds weighs nothing), and its candidate's, counted
    `CANDIDATE_LISTS` times, since that rank is itself the fusion of the vector and keyword lists
    (and the graph's sources).

    Novelty (maximal marginal relevance): among the `NOVELTY_WINDOW` most relevant passages not
    yet taken, the next is the one with the highest relevance × (1 − `NOVELTY_WEIGHT` × the share
    of its terms the passages before it hold). A passage repeating what the context already says
    gives way to one that adds something, but only among passages about as relevant. A passage
    whose text an earlier one has word for word is left out: no sentence twice."""
    passages: list[tuple[int, EvidenceItem, frozenset[str]]] = []  # (candidate rank, passage, terms)
    seen: set[str] = set()
    for rank, item in enumerate(candidate_evidence):
        for piece in _pieces(item):
            key = " ".join(piece.text.split()).casefold() if piece.kind == "chunk" else piece.id
            if key not in seen:
                seen.add(key)
                passages.append((rank, piece, passage_terms(piece.body)))
    if not passages:
        return []
    asked = passage_terms(" ".join([query, *parsed_query.keywords, *parsed_query.expansions]))
    relevance = _relevance(passages, asked, rrf_k)
    return [passages[i][1] for i in _novel_order(relevance, [p[2] for p in passages])]


def _pieces(item: EvidenceItem) -> list[EvidenceItem]:
    """A chunk item's sentences as excerpts, or the item itself (a claim, or a chunk of one sentence)."""
    if item.kind != "chunk":
        return [item]
    spans = _sentence_spans(item.text)
    if len(spans) < 2:
        return [item]
    return [item.excerpt(a, b) for a, b in spans]


@functools.lru_cache(maxsize=16384)
def _sentence_spans(text: str) -> tuple[tuple[int, int], ...]:
    """Remembered: the same chunks come back question after question."""
    return tuple(sentence_spans(text))



def _relevance(passages: list[tuple[int, EvidenceItem, frozenset[str]]], query_terms: frozenset[str],
               rrf_k: float) -> list[float]:
    """Each passage's RRF of its BM25 rank and its candidate's rank (see `evidence`)."""
    n = len(passages)
    df: dict[str, int] = {}
    for *_, terms in passages:
        for t in terms & query_terms:
            df[t] = df.get(t, 0) + 1
    idf = {t: math.log1p((n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
    mean_len = max(sum(len(p[2]) for p in passages) / n, 1.0)
    norm = BM25_K1 * (1 - BM25_B)
    bm25 = [sum(idf[t] for t in terms & query_terms) * (BM25_K1 + 1) / (1 + norm + BM25_K1 * BM25_B * len(terms) / mean_len)
            for *_, terms in passages]
    lexical = sorted(range(n), key=lambda i: -bm25[i])
    relevance = [CANDIDATE_LISTS / (rrf_k + 1 + p[0]) for p in passages]
    for r, i in enumerate(lexical):
        relevance[i] += 1 / (rrf_k + 1 + r)
    return relevance


def _novel_order(relevance: list[float], terms: list[frozenset[str]]) -> list[int]:
    """Greedy maximal marginal relevance within a sliding window (see `evidence`). Each passage's
    value is kept up to date: when a taken passage adds terms, the passages holding one of them
    (found through an index of holders) lose their share of it."""
    waiting = sorted(range(len(relevance)), key=lambda i: -relevance[i])
    holders: dict[str, list[int]] = {}
    for i, ts in enumerate(terms):
        for t in ts:
            holders.setdefault(t, []).append(i)
    held = [0] * len(terms)
    cost = [NOVELTY_WEIGHT * r / max(len(ts), 1) for r, ts in zip(relevance, terms, strict=True)]  # per term held
    value = list(relevance)
    covered: set[str] = set()
    out: list[int] = []
    while waiting:
        best = max(waiting[:NOVELTY_WINDOW], key=value.__getitem__)
        waiting.remove(best)
        out.append(best)
        for t in terms[best] - covered:
            covered.add(t)
            for j in holders[t]:
                held[j] += 1
                value[j] = relevance[j] - cost[j] * held[j]
    return out
