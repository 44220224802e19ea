"""Stage 5 of local search: rank the candidate communities over three signals.

semantic: cosine similarity of the community summary to the query;
overlap: Jaccard |Eq ∩ Ec| / |Eq ∪ Ec| of the query entities with the members;
structure: Σ_{e∈Eq} Σ_{v∈Ec} weight(e, v).

Two methods of the design note (3.5), switched by config `ranking`:

* `rrf` (the default): reciprocal rank fusion of the three signals' ranks. A candidate with zero
  overlap (or zero weight) is absent from that list and earns nothing from it. Ranks need no
  weights, which is why this is the default: the signals are a cosine, a ratio and an unbounded sum.
* `weighted`: α·sim' + β·overlap' + γ·structure', where x' = (x − min) / (max − min) over this
  request's candidates (0 for every candidate when all are equal, and for a missing similarity).
  Min-max puts the unbounded edge-weight sum on the same 0–1 scale as the other two, so α, β and
  γ compare like with like; only their ratios matter.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from graphrag_dag.dataflows.common import sql
from graphrag_dag.dataflows.local.community_recall import SemanticCandidate, TopologyCandidate
from graphrag_dag.dataflows.local.community_reports import CommunityReports
from graphrag_dag.dataflows.local.entity_matching import MatchedEntity
from graphrag_dag.dataflows.local.graph_index import GraphIndex
from graphrag_dag.dataflows.common.fusion import jaccard, rank_by, reciprocal_rank_fusion
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.common.resources import Database
from graphrag_dag.dataflows.common.switches import switch_is


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


def community_reports(db: Database, namespace: str, embed_dim: int) -> CommunityReports:
    """Every community's title, report and summary vector, loaded once per namespace version
    (community_reports.py says why and what it costs)."""
    return db.memoized("community_reports", lambda: _load_community_reports(db, namespace, embed_dim))


def _load_community_reports(db: Database, namespace: str, embed_dim: int) -> CommunityReports:
    params = {"ns": namespace}
    rows = db.rows(sql.COMMUNITY_REPORTS, params)
    places, vectors = db.columns(sql.community_vectors(embed_dim), params, ["i4", f"vector({embed_dim})"])
    return CommunityReports(rows, places, vectors, db.fingerprint)


def community_signals(candidate_communities: list[str], matched_entities: list[MatchedEntity],
                      query_embedding: np.ndarray, graph_index: GraphIndex,
                      community_reports: CommunityReports) -> list[CommunitySignals]:
    """All three signals for the candidates only, from memory: similarity and the reports from
    the reports, membership and edge weight from the graph."""
    if not candidate_communities:
        return []
    eids = [m.id for m in matched_entities]
    members = graph_index.member_signals(candidate_communities, eids)
    out = []
    for cid, level, title, summary, sim, report_rank in community_reports.reports(candidate_communities,
                                                                                  query_embedding):
        size, inter, weight, own = members.get(cid, (0, 0, 0.0, []))
        out.append(CommunitySignals(
            id=cid, level=level, title=title, summary=summary, similarity=sim, size=size,
            overlap=jaccard(len(eids), size, inter), structure=weight, report_rank=report_rank,
            matched_entities=own,
        ))
    return sorted(out, key=lambda s: s.id)


def _signal_lists(signals: list[CommunitySignals]) -> dict[str, list[str]]:
    semantic = {s.id: s.similarity for s in signals if s.similarity is not None}
    return {
        "semantic": rank_by(semantic, keep_zero=True),
        "overlap": rank_by({s.id: s.overlap for s in signals}),
        "structure": rank_by({s.id: s.structure for s in signals}),
    }


def _ranked(signals: list[CommunitySignals], scores: dict[str, float], top_k: int) -> list[RankedCommunity]:
    """The best `top_k` by score (ties: the better report rank, then the id), with each signal's rank."""
    lists = _signal_lists(signals)
    by_id = {s.id: s for s in signals}
    ordered = sorted(scores, key=lambda i: (-scores[i], -by_id[i].report_rank, i))[:top_k]
    out = []
    for cid in ordered:
        s = by_id[cid]
        ranks = {name: lst.index(cid) + 1 for name, lst in lists.items() if cid in lst}
        out.append(RankedCommunity(cid, s.level, s.title, s.summary, scores[cid], s.matched_entities, ranks))
    return out


@switch_is("ranking", "rrf")
def ranked_communities__rrf(community_signals: list[CommunitySignals], rrf_k: float = LOCAL.rrf_k,
                            top_k: int = LOCAL.top_k) -> list[RankedCommunity]:
    """RRF over the three signals' ranks (design note 3.5, method 2)."""
    scores = reciprocal_rank_fusion(_signal_lists(community_signals).values(), k=rrf_k)
    return _ranked(community_signals, scores, top_k)


def _min_max(values: list[float]) -> list[float]:
    """(x − min) / (max − min), or all 0 when the values are equal (the signal then tells nothing)."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    return [0.0 if hi == lo else (v - lo) / (hi - lo) for v in values]


@switch_is("ranking", "weighted")
def ranked_communities__weighted(community_signals: list[CommunitySignals], top_k: int = LOCAL.top_k,
                                 ranking_alpha: float = LOCAL.ranking_alpha,
                                 ranking_beta: float = LOCAL.ranking_beta,
                                 ranking_gamma: float = LOCAL.ranking_gamma) -> list[RankedCommunity]:
    """α·sim' + β·overlap' + γ·structure' over min-max normalised signals (design note 3.5, method 1)."""
    present = [s.similarity for s in community_signals if s.similarity is not None]
    floor = min(present) if present else 0.0  # a summary without a vector is as dissimilar as the least similar
    sim = _min_max([floor if s.similarity is None else s.similarity for s in community_signals])
    overlap = _min_max([s.overlap for s in community_signals])
    structure = _min_max([s.structure for s in community_signals])
    scores = {s.id: ranking_alpha * a + ranking_beta * b + ranking_gamma * c
              for s, a, b, c in zip(community_signals, sim, overlap, structure, strict=True)}
    return _ranked(community_signals, scores, top_k)
