"""Dynamic community selection for global search (config `global_selection="dynamic"`).

Static selection maps every community report of the level. Dynamic selection, as Microsoft
GraphRAG's, rates the root communities first and descends only into the children of those rated
relevant, so a question about one corner of a corpus maps that corner's reports only.

* A community is relevant when its rating (0-10) is at least `rating_threshold`. With an LLM, the
  model rates each report (`rate_community.txt`, validated, one retry). Offline, the rating is the
  report's similarity to the question, min-max scaled over the reports rated at the same step
  (10 for the most similar, 0 for the least), so the rule does not depend on an embedder's range.
* The descent stops at leaves, or at `level` when one is asked for.
* What is mapped: the deepest relevant communities. A relevant community whose children include a
  relevant one is replaced by them (its report is their summary); one whose children were all
  rated irrelevant is mapped itself. A rating that fails keeps its community, with a warning: a
  model error must not silently drop evidence.

The rating prompts are rendered inside the descent, not as a node, because each step's prompts
depend on the previous step's ratings; `community_ratings` keeps every rating it made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hamilton.function_modifiers import cache

from graphrag_dag.dataflows.common import sql, waiting
from graphrag_dag.dataflows.common.prompting import ReplyInvalid, ask, json_object, prompt
from graphrag_dag.dataflows.common.resources import ChatModel, Database, Embedder
from graphrag_dag.dataflows.common.settings import GLOBAL
from graphrag_dag.dataflows.common.switches import switch_is
from graphrag_dag.dataflows.local import query_parsing
from graphrag_dag.dataflows.global_search.global_summaries import SummaryItem, _check_level
from graphrag_dag.dataflows.prompts import current_template

_DYNAMIC = switch_is("global_selection", "dynamic")
REPORT_CHARS = 2000  # of each report shown to the rater


@dataclass
class RatedCommunity:
    id: str
    parent_id: str | None
    level: int
    is_leaf: bool
    title: str
    summary: str
    rank: float
    similarity: float | None
    rating: int | None = None  # None: the rating call failed, and the community was kept
    relevant: bool = False


@dataclass
class CommunityRatings:
    method: str  # "llm" or "similarity"
    rated: list[RatedCommunity]
    kept: list[str]  # the communities mapped, by id
    usage: dict[str, int] = field(default_factory=lambda: {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
    warnings: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"method": "dynamic", "rated_by": self.method, "rated": len(self.rated), "kept": len(self.kept),
                "rating_calls": self.usage["calls"], "rating_prompt_tokens": self.usage["prompt_tokens"],
                "rating_completion_tokens": self.usage["completion_tokens"],
                "relevant": [c.id for c in self.rated if c.relevant]}


@_DYNAMIC
@cache(behavior="recompute")
def rating_template() -> str:
    return current_template("rate_community")


@_DYNAMIC
def query_embedding(query: str, embedder: Embedder) -> np.ndarray:
    """The question's vector, for the offline rating (local search's node, as basic search uses it)."""
    return query_parsing.query_embedding(query, embedder)


def _tier(db: Database, namespace: str, embed_dim: int, qvec: np.ndarray, parents: list[str] | None) -> list[RatedCommunity]:
    rows = db.rows(sql.community_tier(embed_dim, roots=parents is None),
                   {"ns": namespace, "qvec": qvec, "parents": parents or []})
    return [RatedCommunity(cid, parent, int(level), bool(leaf), title, summary, float(rank),
                           None if sim is None else float(sim))
            for cid, parent, level, leaf, title, summary, rank, sim in rows if (summary or "").strip()]


def _rating(text: str) -> int:
    value = json_object(text, '{"rating": integer 0-10}').get("rating")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 10:
        raise ReplyInvalid('was not valid JSON {"rating": integer 0-10}')
    return int(round(value))


def _rate_by_similarity(tier: list[RatedCommunity]) -> None:
    sims = [c.similarity if c.similarity is not None else -1.0 for c in tier]
    lo, hi = min(sims), max(sims)
    for c, s in zip(tier, sims, strict=True):
        c.rating = 10 if hi == lo else int(round(10 * (s - lo) / (hi - lo)))


def _rate_by_llm(tier: list[RatedCommunity], query: str, template: str, chat_model: ChatModel,
                 concurrency: int, ratings: CommunityRatings) -> None:
    def one(c: RatedCommunity) -> Any:
        text = f"{c.title}: {c.summary}"[:REPORT_CHARS]
        return ask(chat_model, prompt("rate", template, query=query, community=c.id, report=text), _rating, json_mode=True,
                   max_tokens=32, attempts=2)

    with waiting.thread_pool(concurrency, "rate") as pool:
        asked = waiting.results(pool, one, tier)
    for c, a in zip(tier, asked, strict=True):
        for key in ratings.usage:
            ratings.usage[key] += a.usage[key]
        c.rating = a.value
        if a.value is None:
            ratings.warnings.append(a.warning(f"rating community {c.id}", "kept it"))


@_DYNAMIC
def community_ratings(query: str, rating_template: str, query_embedding: np.ndarray, chat_model: ChatModel,
                      db: Database, namespace: str, embed_dim: int, level: int | None = GLOBAL.level,
                      rating_threshold: int = GLOBAL.rating_threshold,
                      map_concurrency: int = GLOBAL.map_concurrency) -> CommunityRatings:
    """Rate from the roots down, one step per level, into the children of relevant communities."""
    _check_level(db, namespace, level)
    ratings = CommunityRatings("similarity" if chat_model.offline else "llm", [], [])
    tier = _tier(db, namespace, embed_dim, query_embedding, None)
    while tier:
        if chat_model.offline:
            _rate_by_similarity(tier)
        else:
            _rate_by_llm(tier, query, rating_template, chat_model, map_concurrency, ratings)
        for c in tier:
            c.relevant = c.rating is None or c.rating >= rating_threshold
        ratings.rated += tier
        parents = [c.id for c in tier if c.relevant and not c.is_leaf and (level is None or c.level < level)]
        tier = _tier(db, namespace, embed_dim, query_embedding, parents) if parents else []
    relevant_parents = {c.parent_id for c in ratings.rated if c.relevant}
    ratings.kept = sorted(c.id for c in ratings.rated if c.relevant and c.id not in relevant_parents)
    return ratings


@_DYNAMIC
def global_summaries__dynamic(community_ratings: CommunityRatings) -> list[SummaryItem]:
    """The kept communities' reports, by id as static selection orders them (batching shuffles)."""
    by_id = {c.id: c for c in community_ratings.rated}
    return [SummaryItem(cid, by_id[cid].level, by_id[cid].title, by_id[cid].summary, by_id[cid].rank,
                        by_id[cid].is_leaf)
            for cid in community_ratings.kept]
