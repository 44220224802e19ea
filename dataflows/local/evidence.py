"""Stage 7 of local search: the facts behind the answer, each traceable to its source.

Claims come from the selected communities' member entities; chunks from vector/keyword recall.
Every item keeps `document_id`, `chunk_id` and its [start, end) span in the document when known,
so an application can show exactly where a statement came from.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphrag_dag.dataflows.common import sql
from graphrag_dag.dataflows.local.chunk_recall import RecalledChunk
from graphrag_dag.dataflows.local.community_selection import Selection
from graphrag_dag.dataflows.local.entity_matching import MatchedEntity
from graphrag_dag.dataflows.local.query_parsing import ParsedQuery
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.common.resources import Database
from graphrag_dag.dataflows.common.textproc import term_hits


@dataclass(frozen=True)
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

    def as_json(self) -> dict:
        out = {"id": self.id, "kind": self.kind, "text": self.text, "document_id": self.document_id,
               "chunk_id": self.chunk_id, "start": self.start, "end": self.end}
        if self.kind == "claim":
            out["statement"] = self.statement
        return out


def ranked_claims(selected_communities: Selection, matched_entities: list[MatchedEntity],
                  parsed_query: ParsedQuery, db: Database, namespace: str,
                  claim_candidate_limit: int = LOCAL.claim_candidate_limit) -> list[EvidenceItem]:
    """Claims about members of the selected communities, most relevant first: about a matched
    entity, then naming one as object, then by query keywords in the statement."""
    cids = [c.id for c in selected_communities.communities]
    if not cids:
        return []
    eids = [m.id for m in matched_entities]
    rows = db.rows(sql.CLAIMS_FOR_COMMUNITIES,
                   {"ns": namespace, "cids": cids, "eids": eids, "limit": claim_candidate_limit})
    terms = parsed_query.keywords
    items = []
    for (cid, _subj, subj_name, _obj, ctype, status, desc, quote, doc_id, chunk_id, start, end,
         subj_matched, obj_matched) in rows:
        score = 2.0 * bool(subj_matched) + 1.0 * bool(obj_matched) + 0.25 * term_hits(desc, terms)
        statement = f"{subj_name} — {ctype}{f' ({status})' if status else ''}: {desc}"
        located = start is not None and end is not None and bool(quote)
        items.append(EvidenceItem(cid, "claim", quote if located else desc, doc_id, chunk_id,
                                  start if located else None, end if located else None, statement, score))
    items.sort(key=lambda e: (-e.score, e.id))
    return items


def evidence(ranked_claims: list[EvidenceItem], recalled_chunks: list[RecalledChunk],
             claim_cap: int = LOCAL.claim_cap,
             evidence_chunk_cap: int = LOCAL.evidence_chunk_cap) -> list[EvidenceItem]:
    """Claims first (they are statements), then chunks, deduplicated by id."""
    out: dict[str, EvidenceItem] = {}
    for item in ranked_claims[:claim_cap]:
        out.setdefault(item.id, item)
    for ch in recalled_chunks[:evidence_chunk_cap]:
        out.setdefault(ch.id, EvidenceItem(ch.id, "chunk", ch.text, ch.document_id, ch.id, ch.start, ch.end,
                                           "", ch.score))
    return list(out.values())
