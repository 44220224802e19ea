"""Local search's prompts as nodes: each template as it is on disk, and each prompt as sent.

The template nodes always re-read their file (behavior="recompute"), and the rendered prompt is an
input of its LLM node, so editing a prompt file invalidates exactly the nodes that use it, and an
override of a rendered prompt changes exactly what the model receives.
"""

from __future__ import annotations

from hamilton.function_modifiers import cache

from graphrag_dag.dataflows.common.prompting import Prompt, prompt
from graphrag_dag.dataflows.common.switches import switch_is
from graphrag_dag.dataflows.local.community_ranking import RankedCommunity
from graphrag_dag.dataflows.local.local_context import LocalContext
from graphrag_dag.dataflows.prompts import current_template

SUMMARY_CHARS = 600  # of each candidate's summary shown to the selector


@switch_is("decompose", "off")
@cache(behavior="recompute")
def parse_template__plain() -> str:
    return current_template("parse_query")


@switch_is("decompose", "on")
@cache(behavior="recompute")
def parse_template__decompose() -> str:
    """The parse prompt that also asks for sub-questions and expansions."""
    return current_template("parse_query_decompose")


@cache(behavior="recompute")
def selection_template() -> str:
    return current_template("select_communities")


@cache(behavior="recompute")
def answer_template() -> str:
    return current_template("local_answer")


def parse_prompt(parse_template: str, query: str) -> Prompt:
    return prompt("parse", parse_template, query=query)


def selection_prompt(selection_template: str, query: str, ranked_communities: list[RankedCommunity]) -> Prompt:
    """The ranked candidates, one line each; their ids are the only valid choices."""
    listing = "\n".join(f"- id: {c.id} | title: {c.title} | summary: {c.summary[:SUMMARY_CHARS]}"
                        for c in ranked_communities)
    return prompt("select", selection_template, choices=tuple(c.id for c in ranked_communities), query=query,
                  candidates=listing)


def answer_prompt(answer_template: str, query: str, local_context: LocalContext) -> Prompt:
    return prompt("answer", answer_template, query=query, context=local_context.text)
