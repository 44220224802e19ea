"""Stage 7 of local search: the facts behind the answer, each traceable to its source.

Claims come from the selected communities' member entities; chunks from vector/keyword recall.
Every item keeps `document_id`, `chunk_id` and its [start, end) span in the document when known,
so an application can show exactly where a statement came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

from graphrag_dag.dataflows.common import sql
from graphrag_dag.dataflows.common.line_tokens import claim_statement
from graphrag_dag.dataflows.local.chunk_recall import RecalledChunk
from graphrag_dag.dataflows.local.community_selection import Selection
from graphrag_dag.dataflows.local.entity_matching import MatchedEntity
from graphrag_dag.dataflows.local.query_parsing import ParsedQuery
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.common.resources import Database
from graphrag_dag.dataflows.common.textproc import folded_hits, folded_terms


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


def evidence(ranked_claims: list[EvidenceItem], recalled_chunks: list[RecalledChunk], sources: list[Source],
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
