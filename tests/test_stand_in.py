"""The benchmarks' stand-in chat model answers by the stage of the node that called it and the
prompt's fields and choices, never by words inside the prompt: prompts rewritten with none of
the original wording still get well-formed replies for every stage."""

from __future__ import annotations

from graphrag_dag.drivers.llm.chat import ChatConfig

QUESTION = "What did Dr. Mara Quill discover about the storm surge?"
REWORDED = {  # no "Question:", "Reports:" or "- id:" anywhere
    "parse_template": "Q <<{query}>> as JSON please",
    "selection_template": "{query}\n{candidates}\nchoose",
    "answer_template": "{context}\n\n{query}",
    "map_template": "Look at {content} for {query}",
    "reduce_template": "{answers} / {query}",
}


def _overrides(flow: str) -> dict[str, str]:
    keys = ("parse_template", "selection_template", "answer_template") if flow == "local" else (
        "map_template", "reduce_template")
    return {k: REWORDED[k] for k in keys}


def test_local_search_with_reworded_prompts(rag):
    run = rag.run("local", QUESTION, "demo", chat=ChatConfig(stand_in_latency_ms=0), overrides=_overrides("local"),
                  final_vars=["local_result", "selection_prompt"])
    res = run.values["local_result"]
    assert res.warnings == []  # every reply was valid for its stage
    assert res.parsed_query.source == "llm" and "Dr. Mara Quill" in res.parsed_query.entities
    assert res.selection.method == "llm" and res.selection.communities
    assert {c.id for c in res.selection.communities} <= set(run.values["selection_prompt"].choices)
    assert res.answer.method == "llm" and res.answer.text == "Stand-in answer answer."
    assert run.usage.by_stage.keys() == {"parse", "select", "answer"}


def test_selection_picks_among_the_prompt_choices(rag):
    run = rag.run("local", QUESTION, "demo", chat=ChatConfig(stand_in_latency_ms=0),
                  overrides=_overrides("local"), final_vars=["selection_prompt", "selected_communities"])
    prompt, selection = run.values["selection_prompt"], run.values["selected_communities"]
    assert prompt.stage == "select" and len(prompt.choices) >= 2
    assert [c.id for c in selection.communities] == list(prompt.choices[: len(prompt.choices) // 2])


def test_global_search_with_reworded_prompts(rag):
    run = rag.run("global", "What are the main themes?", "demo", chat=ChatConfig(stand_in_latency_ms=0),
                  overrides=_overrides("global"), final_vars=["global_result", "map_prompts"])
    res = run.values["global_result"]
    assert res.failed_batches == 0 and res.map_answers
    assert all(m.usefulness == 50 and m.answer for m in res.map_answers)
    assert all(p.text.startswith("Look at") for p in run.values["map_prompts"])
    assert res.status == "completed" and res.answer.method == "llm"
    assert run.usage.by_stage["map"]["calls"] == len(res.map_answers) and run.usage.by_stage["reduce"]["calls"] == 1
