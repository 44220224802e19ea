"""Stage 6 of local search: keep the communities that genuinely answer the question.

A ranking score is not a relevance judgement, so an LLM re-reads the top candidates' summaries.
Offline, the documented rule is: keep every candidate whose RRF score is at least
`selection_min_ratio` (default 0.5) of the best score, always at least the best one.
Config `selector="score"` (dataflows/common/switches.py) applies that rule even when an LLM is configured.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graphrag_dag.dataflows.common.prompting import Prompt, ReplyInvalid, ask, json_object
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.local.community_ranking import RankedCommunity
from graphrag_dag.dataflows.common.resources import ChatModel
from graphrag_dag.dataflows.common.switches import selector_is


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


_IDS_SHAPE = "with candidate ids"


def _selected_ids(text: str, allowed: tuple[str, ...]) -> list[str]:
    ids = json_object(text, _IDS_SHAPE).get("community_ids")
    if not isinstance(ids, list) or not all(isinstance(i, (str, int)) for i in ids):
        raise ReplyInvalid(f"was not valid JSON {_IDS_SHAPE}")
    ids = [str(i) for i in ids]
    if any(i not in allowed for i in ids):
        raise ReplyInvalid(f"was not valid JSON {_IDS_SHAPE}")
    return list(dict.fromkeys(ids))


@selector_is("score")
def selected_communities__score(ranked_communities: list[RankedCommunity],
                                selection_min_ratio: float = LOCAL.selection_min_ratio) -> Selection:
    """The score rule only: no LLM call, whatever the chat configuration."""
    if not ranked_communities:
        return Selection([], "none")
    return Selection(_score_rule(ranked_communities, selection_min_ratio), "score-rule")


@selector_is("llm")
def selected_communities__llm(ranked_communities: list[RankedCommunity], selection_prompt: Prompt,
                              chat_model: ChatModel,
                              selection_min_ratio: float = LOCAL.selection_min_ratio) -> Selection:
    """An LLM re-reads the candidates' summaries and keeps ids among the prompt's choices; the
    score rule when offline, the ranked order when the reply is unusable."""
    if not ranked_communities:
        return Selection([], "none")
    if chat_model.offline:
        return Selection(_score_rule(ranked_communities, selection_min_ratio), "score-rule")
    asked = ask(chat_model, selection_prompt, lambda text: _selected_ids(text, selection_prompt.choices),
                json_mode=True)
    if asked.value is None:
        return Selection(list(ranked_communities), "fallback",
                         [asked.warning("community selection", "kept the ranked order")])
    by_id = {c.id: c for c in ranked_communities}
    return Selection([by_id[i] for i in asked.value if i in by_id], "llm")
