"""Stage 5 of local search: rank the candidate communities by RRF over three signals.

semantic: cosine similarity of the community summary to the query;
overlap: Jaccard |Eq ∩ Ec| / |Eq ∪ Ec| of the query entities with the members;
structure: Σ_{e∈Eq} Σ_{v∈Ec} weight(e, v).
A candidate with zero overlap (or zero weight) is absent from that list and earns nothing from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from graphrag_dag.dataflows.common import sql
from graphrag_dag.dataflows.local.community_recall import SemanticCandidate, TopologyCandidate
from graphrag_dag.dataflows.local.entity_matching import MatchedEntity
from graphrag_dag.dataflows.common.fusion import jaccard, rank_by, reciprocal_rank_fusion
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.common.resources import Database


@dataclass
class CommunitySignals:
    id: str
    level: int
    title: str
    summary: str
    similarity: float | None
    size: int
    overlap: float
    structure: float
    report_rank: float
    matched_entities: list[str] = field(default_factory=list)


@dataclass
class RankedCommunity:
    id: str
    level: int
    title: str
    summary: str
    score: float
    matched_entities: list[str]
    ranks: dict[str, int]  # 1-based rank in each list it appears in

    def as_json(self) -> dict:
        return {"id": self.id, "level": self.level, "title": self.title, "score": round(self.score, 6),
                "summary": self.summary, "matched_entities": self.matched_entities}


def candidate_communities(topology_communities: list[TopologyCandidate],
                          semantic_communities: list[SemanticCandidate]) -> list[str]:
    ids = dict.fromkeys(c.id for c in topology_communities)
    ids.update(dict.fromkeys(c.id for c in semantic_communities))
    return list(ids)


def community_signals(candidate_communities: list[str], matched_entities: list[MatchedEntity],
                      query_embedding: np.ndarray, db: Database, namespace: str,
                      embed_dim: int) -> list[CommunitySignals]:
    """All three signals for the candidates only, in one statement; nothing is loaded per namespace."""
    if not candidate_communities:
        return []
    eids = [m.id for m in matched_entities]
    params = {"ns": namespace, "cids": candidate_communities, "eids": eids, "qvec": query_embedding}
    out = []
    for cid, level, title, summary, sim, size, inter, weight, report_rank, own in db.rows(
            sql.community_signals(embed_dim), params):
        out.append(CommunitySignals(
            id=cid, level=int(level), title=title, summary=summary,
            similarity=None if sim is None else float(sim), size=int(size),
            overlap=jaccard(len(eids), int(size), int(inter)), structure=float(weight),
            report_rank=float(report_rank), matched_entities=list(own),
        ))
    return sorted(out, key=lambda s: s.id)


def _signal_lists(signals: list[CommunitySignals]) -> dict[str, list[str]]:
    semantic = {s.id: s.similarity for s in signals if s.similarity is not None}
    return {
        "semantic": rank_by(semantic, keep_zero=True),
        "overlap": rank_by({s.id: s.overlap for s in signals}),
        "structure": rank_by({s.id: s.structure for s in signals}),
    }


def ranked_communities(community_signals: list[CommunitySignals], rrf_k: float = LOCAL.rrf_k,
                       top_k: int = LOCAL.top_k) -> list[RankedCommunity]:
    lists = _signal_lists(community_signals)
    scores = reciprocal_rank_fusion(lists.values(), k=rrf_k)
    by_id = {s.id: s for s in community_signals}
    ordered = sorted(scores, key=lambda i: (-scores[i], -by_id[i].report_rank, i))[:top_k]
    out = []
    for cid in ordered:
        s = by_id[cid]
        ranks = {name: lst.index(cid) + 1 for name, lst in lists.items() if cid in lst}
        out.append(RankedCommunity(cid, s.level, s.title, s.summary, scores[cid], s.matched_entities, ranks))
    return out
