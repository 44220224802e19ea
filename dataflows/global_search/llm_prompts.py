"""Global search's prompts as nodes: each template as it is on disk, and each prompt as sent.

The template nodes always re-read their file (behavior="recompute"); batching and reduce packing
count tokens with the same templates, so a prompt as sent always fits the budget it was packed to.
"""

from __future__ import annotations

from hamilton.function_modifiers import cache

from graphrag_dag.dataflows.common.prompting import Prompt, prompt
from graphrag_dag.dataflows.global_search.global_batches import Batch
from graphrag_dag.dataflows.global_search.global_reduce import ReduceInput
from graphrag_dag.dataflows.prompts import current_template


@cache(behavior="recompute")
def map_template() -> str:
    return current_template("global_map")


@cache(behavior="recompute")
def reduce_template() -> str:
    return current_template("global_reduce")


def map_prompts(summary_batches: list[Batch], map_template: str, query: str) -> list[Prompt]:
    """One prompt per batch, in batch order."""
    return [prompt("map", map_template, query=query, content=b.content) for b in summary_batches]


def reduce_prompt(reduce_input: ReduceInput, query: str) -> Prompt:
    """The prompt that reduce packing measured, as sent."""
    return Prompt("reduce", reduce_input.prompt, {"query": query, "answers": reduce_input.answers})
