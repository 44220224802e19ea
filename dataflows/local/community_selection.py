"""Stage 6 of local search: keep the communities that genuinely answer the question.

A ranking score is not a relevance judgement, so an LLM re-reads the top candidates' summaries.
Offline, the documented rule is: keep every candidate whose RRF score is at least
`selection_min_ratio` (default 0.5) of the best score, always at least the best one.
Config `selector="score"` (dataflows/switches.py) applies that rule even when an LLM is configured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from graphrag_dag.dataflows import prompts
from graphrag_dag.dataflows.local.community_ranking import RankedCommunity
from graphrag_dag.dataflows.common.resources import ChatModel
from graphrag_dag.dataflows.local.switches import selector_is


@dataclass
class Selection:
    communities: list[RankedCommunity]
    method: str  # "llm", "score-rule" or "fallback"
    warnings: list[str] = field(default_factory=list)


def _score_rule(ranked: list[RankedCommunity], min_ratio: float) -> list[RankedCommunity]:
    if not ranked:
        return []
    best = ranked[0].score
    return [c for c in ranked if c.score >= best * min_ratio] or ranked[:1]


def _selected_ids(text: str, allowed: set[str]) -> list[str] | None:
    try:
        data = json.loads(prompts.strip_fences(text))
    except (json.JSONDecodeError, TypeError):
        return None
    ids = data.get("community_ids") if isinstance(data, dict) else None
    if not isinstance(ids, list) or not all(isinstance(i, (str, int)) for i in ids):
        return None
    ids = [str(i) for i in ids]
    if any(i not in allowed for i in ids):
        return None
    return list(dict.fromkeys(ids))


@selector_is("score")
def selected_communities__score(ranked_communities: list[RankedCommunity], selection_min_ratio: float) -> Selection:
    """The score rule only: no LLM call, whatever the chat configuration."""
    if not ranked_communities:
        return Selection([], "none")
    return Selection(_score_rule(ranked_communities, selection_min_ratio), "score-rule")


@selector_is("llm")
def selected_communities__llm(ranked_communities: list[RankedCommunity], query: str, chat_model: ChatModel,
                              llm_identity: str, selection_prompt: str, selection_min_ratio: float) -> Selection:
    """An LLM re-reads the candidates' summaries; the score rule when offline."""
    if not ranked_communities:
        return Selection([], "none")
    if chat_model.offline:
        return Selection(_score_rule(ranked_communities, selection_min_ratio), "score-rule")
    listing = "\n".join(
        f"- id: {c.id} | title: {c.title} | summary: {c.summary[:600]}" for c in ranked_communities
    )
    try:
        reply = chat_model.complete("select", prompts.render(selection_prompt, query=query, candidates=listing),
                                    json_mode=True)
        ids = _selected_ids(reply.text, {c.id for c in ranked_communities})
        problem = "was not valid JSON with candidate ids"
    except prompts.PASSTHROUGH_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001 - selection failures degrade to the ranking
        ids, problem = None, f"failed ({type(exc).__name__})"
    if ids is None:
        return Selection(list(ranked_communities), "fallback",
                         [f"community selection by LLM {problem}; kept the ranked order"])
    by_id = {c.id: c for c in ranked_communities}
    return Selection([by_id[i] for i in ids], "llm")
