"""Prompt templates as DAG nodes.

They always re-read their file (behavior="recompute") and their text becomes part of the cache key
of every LLM node that uses them, so editing a prompt file invalidates exactly those nodes.
"""

from __future__ import annotations

from hamilton.function_modifiers import cache

from graphrag_dag.dataflows import prompts


def _read(name: str) -> str:
    return prompts.current_template(name)


@cache(behavior="recompute")
def parse_prompt() -> str:
    return _read("parse_query")


@cache(behavior="recompute")
def selection_prompt() -> str:
    return _read("select_communities")


@cache(behavior="recompute")
def answer_prompt() -> str:
    return _read("local_answer")


@cache(behavior="recompute")
def map_prompt() -> str:
    return _read("global_map")


@cache(behavior="recompute")
def reduce_prompt() -> str:
    return _read("global_reduce")
