"""Acceptance tests for global search (issue 3): batching, bounded map, budgeted reduce, honest status.

Everything is real: the embedded PostgreSQL with the demo namespace, the Hamilton global driver,
and the `openai` client talking HTTP to the loopback server in tests/llm_server.py. Tests steer
the map stage by scripting the server per prompt (a batch is recognised by its part label, e.g.
"[community c2-4]"), and steer later stages by injecting node values with `overrides`.
"""

from __future__ import annotations

import collections
import json
import math
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

import pytest

from graphrag_dag.dataflows import prompts
from graphrag_dag.dataflows.common import prompting
from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.global_search.mapping import MapAnswer
from graphrag_dag.dataflows.global_search.global_summaries import AugmentedSummary, SummaryItem
from graphrag_dag.drivers.api import GlobalOptions
from graphrag_dag.drivers.llm.tokens import token_counter
from llm_server import Recorded, Reply

QUERY = "What are the main themes?"
# Small budgets turn the 14 leaf summaries of the demo into many batches (16 at 600/100) and force
# the three largest summaries to be split into parts.
SMALL = {"map_budget": 600, "map_output_reserve": 100}
FINALS = ["global_result", "summary_batches", "map_answers", "reduce_input"]
REDUCE_TEXT = "Combined final answer from the loopback server."


def options(**kw) -> GlobalOptions:
    return GlobalOptions(**{**SMALL, **kw})


def valid(answer: str = "The harbour economy and its disputes.", usefulness: int = 60) -> str:
    return json.dumps({"answer": answer, "usefulness": usefulness})


def respond(map_reply: Callable[[Recorded], Reply | str]) -> Callable[[Recorded], Reply]:
    """A responder: map requests go to `map_reply`, reduce requests get REDUCE_TEXT."""

    def responder(req: Recorded) -> Reply:
        if req.stage == "reduce":
            return Reply(content=REDUCE_TEXT)
        assert req.stage == "map", f"unexpected stage {req.stage!r}"
        out = map_reply(req)
        return Reply(content=out) if isinstance(out, str) else out

    return responder


def bad_for(key: str, bad: str, times: int | None = None) -> Callable[[Recorded], str]:
    """Map replies: `bad` for prompts containing `key` (the first `times` times, or always),
    a valid reply otherwise."""
    seen = collections.Counter()
    lock = threading.Lock()

    def reply(req: Recorded) -> str:
        if key in req.prompt:
            with lock:
                seen[key] += 1
                n = seen[key]
            if times is None or n <= times:
                return bad
        return valid()

    return reply


def stage_requests(server, stage: str) -> list[Recorded]:
    return [r for r in server.chat_requests() if r.stage == stage]


def labels(batches) -> list[list[str]]:
    return [[p.label for p in b.parts] for b in batches]


def map_limit(opts: GlobalOptions) -> int:
    return opts.map_budget - opts.map_output_reserve


def map_prompt_tokens(content: str, query: str = QUERY) -> int:
    return token_counter().count(prompting.render(prompts.current_template("global_map"), query=query, content=content))


@pytest.fixture(scope="module")
def small_batches(rag):
    """The demo's batches at the small budgets, computed offline (no server)."""
    run = rag.run("global", QUERY, "demo", final_vars=["summary_batches"], options=options())
    batches = run.values["summary_batches"]
    assert len(batches) >= 8, "the small budgets should give many batches"
    return batches


@pytest.fixture(scope="module")
def target(small_batches):
    """One batch (not the first) holding a single part, and the label that identifies its prompt."""
    batch = next(b for b in small_batches[1:] if len(b.parts) == 1)
    return batch.index, f"[{batch.parts[0].label}]\n"


# ------------------------------------------------------------------------------- defaults


def test_defaults_match_the_issue():
    o = GlobalOptions()
    assert (o.map_budget, o.reduce_budget, o.map_output_reserve, o.reduce_output_reserve, o.map_concurrency) == \
        (8000, 8000, 512, 1024, 4)
    assert GlobalOptions().seed == o.seed  # fixed default seed


# ---------------------------------------------------------------------- map calls and retries


def test_one_map_call_per_batch_and_one_reduce(rag, llm_server, chat_config, small_batches):
    llm_server.responder = respond(lambda req: valid())
    run = rag.run("global", QUERY, "demo", final_vars=FINALS, options=options(), chat=chat_config)
    batches = run.values["summary_batches"]
    assert labels(batches) == labels(small_batches)
    maps = stage_requests(llm_server, "map")
    assert len(maps) == len(batches)
    assert len(stage_requests(llm_server, "reduce")) == 1
    # Each batch's content was sent exactly once.
    for b in batches:
        assert sum(b.content in r.prompt for r in maps) == 1
    out = run.as_json()
    assert out["status"] == "completed" and out["failed_batches"] == 0
    assert out["answer"] == REDUCE_TEXT
    assert [m["batch"] for m in out["map_answers"]] == [b.index for b in batches]
    assert [m["community_ids"] for m in out["map_answers"]] == [b.community_ids for b in batches]
    assert out["llm"]["by_stage"]["map"]["calls"] == len(batches)
    assert out["llm"]["by_stage"]["reduce"]["calls"] == 1
    assert out["llm"]["calls"] == len(batches) + 1


def test_a_batch_failing_once_is_retried_once(rag, llm_server, chat_config, small_batches, target):
    index, key = target
    llm_server.responder = respond(bad_for(key, "this is not JSON", times=1))
    run = rag.run("global", QUERY, "demo", final_vars=FINALS, options=options(), chat=chat_config)
    maps = stage_requests(llm_server, "map")
    assert len(maps) == len(small_batches) + 1
    assert sum(key in r.prompt for r in maps) == 2
    answers = run.values["map_answers"]
    assert [m.attempts for m in answers if m.batch == index] == [2]
    assert all(m.attempts == 1 for m in answers if m.batch != index)
    out = run.as_json()
    assert out["status"] == "completed" and out["failed_batches"] == 0
    assert len(out["map_answers"]) == len(small_batches)


INVALID_REPLIES = {
    "not json": "The batch talks about harbours.",
    "truncated json": '{"answer": "harbours", "usefulness": 5',
    "not an object": '["harbours", 50]',
    "missing usefulness": '{"answer": "harbours"}',
    "missing answer": '{"usefulness": 40}',
    "answer not a string": '{"answer": ["harbours"], "usefulness": 40}',
    "usefulness 150": valid(usefulness=150),
    "usefulness -1": valid(usefulness=-1),
    "usefulness 'high'": '{"answer": "harbours", "usefulness": "high"}',
    "usefulness true": '{"answer": "harbours", "usefulness": true}',
    "usefulness null": '{"answer": "harbours", "usefulness": null}',
    "blank useful answer": '{"answer": "   ", "usefulness": 50}',
}


@pytest.mark.parametrize("bad", list(INVALID_REPLIES.values()), ids=list(INVALID_REPLIES))
def test_a_batch_invalid_twice_is_recorded_and_the_result_is_partial(rag, llm_server, chat_config, small_batches,
                                                                     target, bad):
    index, key = target
    llm_server.responder = respond(bad_for(key, bad))
    run = rag.run("global", QUERY, "demo", final_vars=FINALS, options=options(), chat=chat_config)
    maps = stage_requests(llm_server, "map")
    assert len(maps) == len(small_batches) + 1  # one retry for the bad batch, no more
    assert sum(key in r.prompt for r in maps) == 2
    failed = [m for m in run.values["map_answers"] if m.error]
    assert [(m.batch, m.attempts) for m in failed] == [(index, 2)]
    out = run.as_json()
    assert out["status"] == "partial"
    assert out["failed_batches"] == 1
    assert index not in [m["batch"] for m in out["map_answers"]]
    assert len(out["map_answers"]) == len(small_batches) - 1
    assert any(f"map batch {index} failed" in w for w in out["warnings"])
    assert len(stage_requests(llm_server, "reduce")) == 1  # usable answers remain: reduce still runs
    assert out["answer"] == REDUCE_TEXT


VALID_EDGE_REPLIES = {
    "usefulness 0 with blank answer": '{"answer": "", "usefulness": 0}',
    "usefulness 100": valid(usefulness=100),
    "fenced json": "```json\n" + valid(usefulness=30) + "\n```",
    "float usefulness": '{"answer": "harbours", "usefulness": 55.0}',
}


@pytest.mark.parametrize("good", list(VALID_EDGE_REPLIES.values()), ids=list(VALID_EDGE_REPLIES))
def test_valid_edge_replies_are_not_retried(rag, llm_server, chat_config, small_batches, target, good):
    index, key = target
    llm_server.responder = respond(bad_for(key, good))
    run = rag.run("global", QUERY, "demo", final_vars=FINALS, options=options(), chat=chat_config)
    assert len(stage_requests(llm_server, "map")) == len(small_batches)
    (answer,) = [m for m in run.values["map_answers"] if m.batch == index]
    assert answer.error is None and answer.attempts == 1
    expected = json.loads(prompting.strip_fences(good))
    assert answer.usefulness == expected["usefulness"]
    assert run.as_json()["status"] == "completed"


def test_all_batches_failing_is_failed_not_no_results_and_no_reduce(rag, llm_server, chat_config, small_batches):
    llm_server.responder = respond(lambda req: "no JSON here")
    run = rag.run("global", QUERY, "demo", final_vars=FINALS, options=options(), chat=chat_config)
    assert len(stage_requests(llm_server, "map")) == 2 * len(small_batches)
    assert stage_requests(llm_server, "reduce") == []
    out = run.as_json()
    assert out["status"] == "failed" and out["error"].startswith("every map call failed")
    assert "No relevant information" not in out["answer"]
    assert out["failed_batches"] == len(small_batches)
    assert out["map_answers"] == []
    assert "reduce" not in out["llm"]["by_stage"]


def test_all_zero_usefulness_gives_no_results_and_no_reduce(rag, llm_server, chat_config, small_batches):
    llm_server.responder = respond(lambda req: valid("Nothing relevant here.", 0))
    run = rag.run("global", QUERY, "demo", final_vars=FINALS, options=options(), chat=chat_config)
    assert len(stage_requests(llm_server, "map")) == len(small_batches)  # usefulness 0 is valid: no retry
    assert stage_requests(llm_server, "reduce") == []
    assert run.values["reduce_input"].kept == []
    assert len(run.values["reduce_input"].dropped) == len(small_batches)
    out = run.as_json()
    assert out["status"] == "no_results"
    assert out["failed_batches"] == 0
    assert out["llm"]["calls"] == len(small_batches)


def test_no_summaries_gives_no_results_without_any_llm_call(rag, llm_server, chat_config):
    llm_server.responder = respond(lambda req: valid())
    out = rag.run("global", QUERY, "demo", options=options(), chat=chat_config,
                  overrides={"global_summaries": []}).as_json()
    assert out["status"] == "no_results"
    assert out["map_answers"] == [] and out["failed_batches"] == 0
    assert llm_server.chat_requests() == []
    assert out["llm"]["calls"] == 0


# ----------------------------------------------------------------------------- concurrency


@pytest.mark.slow
@pytest.mark.parametrize("limit", [1, 3])
def test_the_server_never_sees_more_than_the_concurrency_limit(rag, llm_server, chat_config, limit):
    llm_server.responder = respond(lambda req: Reply(content=valid(), delay=0.15))
    opts = options(map_budget=1000, map_concurrency=limit)  # 8 batches
    run = rag.run("global", QUERY, "demo", final_vars=FINALS, options=opts, chat=chat_config)
    batches = len(run.values["summary_batches"])
    assert batches > limit
    assert len(stage_requests(llm_server, "map")) == batches
    assert llm_server.max_in_flight <= limit
    if limit > 1:
        assert llm_server.max_in_flight > 1  # calls really do overlap
    assert run.as_json()["status"] == "completed"


def test_map_wall_time_follows_the_concurrency_limit(rag, llm_server, chat_config):
    delay = 0.2
    llm_server.responder = respond(lambda req: Reply(content=valid(), delay=delay))
    planned = len(rag.run("global", QUERY, "demo", final_vars=["summary_batches"],
                          options=options(map_budget=800)).values["summary_batches"])
    limit = next(c for c in (4, 3, 5) if planned % c)  # a last, partial round makes the count visible
    opts = options(map_budget=800, map_concurrency=limit)
    run = rag.run("global", QUERY, "demo", final_vars=FINALS, options=opts, chat=chat_config)
    batches = len(run.values["summary_batches"])
    assert batches == planned and batches % limit != 0 and batches > 2 * limit
    expected = math.ceil(batches / limit) * delay
    seconds = run.timings_ms()["map_answers"] / 1000
    # Unbounded would take ~delay (below the lower bound); serial would take batches*delay (above
    # the upper bound).
    assert 0.8 * expected <= seconds <= 2.5 * expected + 0.5, (seconds, expected, batches)
    assert seconds < batches * delay
    assert llm_server.max_in_flight == limit


# --------------------------------------------------------------------------------- budgets


def test_every_prompt_the_server_receives_fits_its_budget(rag, llm_server, chat_config):
    long_answer = " ".join(f"The harbour point number {i} concerns fishing quotas and storms." for i in range(8))
    llm_server.responder = respond(lambda req: valid(long_answer, 50))
    opts = options(reduce_budget=500, reduce_output_reserve=120)
    run = rag.run("global", QUERY, "demo", final_vars=FINALS, options=opts, chat=chat_config)
    count = token_counter().count
    maps = stage_requests(llm_server, "map")
    reduces = stage_requests(llm_server, "reduce")
    assert len(maps) == len(run.values["summary_batches"]) and len(reduces) == 1
    assert any(", part " in p.label for b in run.values["summary_batches"] for p in b.parts)  # splits happened
    assert max(count(r.prompt) for r in maps) <= opts.map_budget - opts.map_output_reserve
    assert count(reduces[0].prompt) <= opts.reduce_budget - opts.reduce_output_reserve
    # The output reserves are what the model may write.
    assert {r.body.get("max_tokens") for r in maps} == {opts.map_output_reserve}
    assert reduces[0].body.get("max_tokens") == opts.reduce_output_reserve
    # The reduce budget really bit: some answers were left out, and that is reported.
    red = run.values["reduce_input"]
    assert red.kept and red.skipped
    assert reduces[0].prompt == red.prompt
    out = run.as_json()
    assert out["status"] == "completed"
    assert any("did not fit the reduce budget" in w for w in out["warnings"])


def test_a_map_budget_that_cannot_hold_the_template_is_bad_input(rag, llm_server, chat_config):
    llm_server.responder = respond(lambda req: valid())
    with pytest.raises(BadInput):
        rag.run("global", QUERY, "demo", options=options(map_budget=150, map_output_reserve=100), chat=chat_config)
    assert llm_server.chat_requests() == []


def test_a_map_budget_too_small_for_any_part_is_bad_input(rag, llm_server, chat_config):
    # Room for the template and question plus a handful of tokens: not enough for a part label and
    # any text, so no batch could respect the budget.
    template = map_prompt_tokens("")
    llm_server.responder = respond(lambda req: valid())
    opts = options(map_budget=template + 100 + 6, map_output_reserve=100)
    with pytest.raises(BadInput):
        rag.run("global", QUERY, "demo", options=opts, chat=chat_config)
    assert llm_server.chat_requests() == []


# --------------------------------------------------------------------------------- splitting

SENTENCES = [f"Sentence {i} says the {w} harbour council met about quotas." for i, w in
             enumerate(["north", "south", "east", "west", "old", "new"] * 12)]


def _split_run(rag, text: str, opts: GlobalOptions, **kw):
    big = AugmentedSummary("big", "Big", text)
    small = AugmentedSummary("small", "Small", "Small: a short report about nets.")
    return rag.run("global", QUERY, "demo", final_vars=["summary_batches", *kw.pop("extra", [])], options=opts,
                   overrides={"augmented_summaries": [big, small]}, **kw)


def _big_parts(batches) -> list:
    return [p for b in batches for p in b.parts if p.community_id == "big"]


def _check_fit(batches, opts: GlobalOptions) -> None:
    for b in batches:
        tokens = map_prompt_tokens(b.content)
        assert tokens == b.tokens
        assert tokens <= map_limit(opts)


def test_an_oversized_summary_is_split_at_sentence_boundaries(rag, llm_server, chat_config):
    text = " ".join(SENTENCES)
    opts = options(map_budget=400)
    assert map_prompt_tokens(f"[community big]\n{text}") > map_limit(opts)
    llm_server.responder = respond(lambda req: valid())
    run = _split_run(rag, text, opts, chat=chat_config, extra=["global_result"])
    batches = run.values["summary_batches"]
    parts = _big_parts(batches)
    n = len(parts)
    assert n >= 3
    assert [p.label for p in parts] == [f"community big, part {i}/{n}" for i in range(1, n + 1)]
    _check_fit(batches, opts)
    for p in parts:  # whole sentences only
        assert p.text.startswith("Sentence ") and p.text.endswith("quotas.")
    assert " ".join(p.text for p in parts) == text  # nothing lost, nothing repeated
    # On the wire: every map prompt fits, and each part went out under its label.
    maps = stage_requests(llm_server, "map")
    assert len(maps) == len(batches)
    assert max(token_counter().count(r.prompt) for r in maps) <= map_limit(opts)
    for p in parts:
        assert sum(f"[{p.label}]\n" in r.prompt for r in maps) == 1
    assert run.values["global_result"].status == "completed"


def test_an_oversized_sentence_is_split_at_word_boundaries(rag):
    words = [f"w{i}" for i in range(600)]  # one "sentence", no punctuation, short words
    text = " ".join(words)
    opts = options(map_budget=450)
    batches = _split_run(rag, text, opts).values["summary_batches"]
    parts = _big_parts(batches)
    n = len(parts)
    assert n >= 2
    assert [p.label for p in parts] == [f"community big, part {i}/{n}" for i in range(1, n + 1)]
    _check_fit(batches, opts)
    assert [w for p in parts for w in p.text.split()] == words  # no word broken, none lost
    # Pieces are packed greedily (loosely: each part but the last nearly fills the budget).
    for p in parts[:-1]:
        assert map_prompt_tokens(p.block) > map_limit(opts) - 15


def test_parts_are_packed_with_other_summaries_when_they_fit(rag, small_batches):
    """Packing is greedy over the shuffled parts: a batch closes only when the next part does not fit."""
    limit = map_limit(options())
    for b, nxt in zip(small_batches, small_batches[1:]):
        assert b.tokens <= limit
        assert map_prompt_tokens(b.content + "\n\n" + nxt.parts[0].block) > limit
    assert [b.index for b in small_batches] == list(range(len(small_batches)))


# ---------------------------------------------------------------------------------- reduce


def _answers() -> list[MapAnswer]:
    huge = " ".join(f"Long finding {i} about the fishing cooperative and its quotas." for i in range(120))
    return [
        MapAnswer(0, ["c0"], 70, "Tie one: zebra mussels spread along the quay."),
        MapAnswer(1, ["c1"], 90, huge),  # most useful, but too long for the reduce budget
        MapAnswer(2, ["c2"], 0, "Irrelevant aside that must be dropped."),
        MapAnswer(3, ["c3"], 70, "Tie two: anchovy prices rose after the storm."),
        MapAnswer(4, ["c4"], 40, "Short later answer that still fits."),
        MapAnswer(5, ["c5"], 0, "", 2, "MapReplyInvalid: reply is not JSON"),
        MapAnswer(6, ["c6"], 85, "Second most useful: the storm barrier vote."),
    ]


def test_reduce_skips_what_does_not_fit_and_keeps_a_later_shorter_answer(rag, llm_server, chat_config):
    opts = options(reduce_budget=700, reduce_output_reserve=200)
    answers = _answers()
    assert token_counter().count(answers[1].answer) > 700
    llm_server.responder = respond(lambda req: pytest.fail("no map call expected"))
    run = rag.run("global", QUERY, "demo", final_vars=FINALS, options=opts, chat=chat_config,
                  overrides={"map_answers": answers})
    red = run.values["reduce_input"]
    assert [m.batch for m in red.kept] == [6, 0, 3, 4]  # by usefulness; the 70s keep batch order
    assert [m.batch for m in red.skipped] == [1]
    assert sorted(m.batch for m in red.dropped) == [2, 5]
    assert red.tokens == token_counter().count(red.prompt) <= opts.reduce_budget - opts.reduce_output_reserve
    # The server saw exactly one reduce prompt: the kept answers, in order, and nothing else.
    (req,) = llm_server.chat_requests()
    assert req.stage == "reduce"
    assert req.prompt == red.prompt
    positions = [req.prompt.index(m.answer) for m in red.kept]
    assert positions == sorted(positions)
    for m in (answers[1], answers[2]):
        assert m.answer not in req.prompt
    out = run.as_json()
    assert out["status"] == "partial"  # batch 5 failed, usable answers remain
    assert out["failed_batches"] == 1
    assert any("1 map answers did not fit" in w for w in out["warnings"])


def test_reduce_input_offline_is_deterministic_and_stable(rag):
    """Ties keep their input order even when their text sorts the other way."""
    answers = [
        MapAnswer(0, ["a"], 50, "zzz last alphabetically"),
        MapAnswer(1, ["b"], 50, "mmm middle"),
        MapAnswer(2, ["c"], 50, "aaa first alphabetically"),
        MapAnswer(3, ["d"], 60, "higher"),
    ]
    run = rag.run("global", QUERY, "demo", final_vars=["reduce_input"], options=options(),
                  overrides={"map_answers": answers})
    assert [m.batch for m in run.values["reduce_input"].kept] == [3, 0, 1, 2]


# ------------------------------------------------------------------------------------ seeds


def _batch_labels(rag, **kw) -> list[list[str]]:
    run = rag.run("global", QUERY, "demo", final_vars=["summary_batches"], options=options(**kw))
    return labels(run.values["summary_batches"])


def test_the_same_seed_gives_the_same_batches_and_another_seed_another_order(rag, small_batches):
    default = _batch_labels(rag)
    assert default == labels(small_batches) == _batch_labels(rag, seed=GlobalOptions().seed)
    assert _batch_labels(rag, seed=7) == _batch_labels(rag, seed=7)
    other = _batch_labels(rag, seed=7)
    assert other != default
    # Same content, only the order differs.
    flat = sorted(label for batch in default for label in batch)
    assert sorted(label for batch in other for label in batch) == flat


# ------------------------------------------------------------------------------------ levels


def test_a_level_that_does_not_exist_is_bad_input_naming_the_levels(rag):
    levels = [r[0] for r in rag.store.admin_rows(
        "SELECT DISTINCT level FROM communities WHERE namespace = %s ORDER BY level", ("demo",))]
    assert levels == [0, 1, 2]
    with pytest.raises(BadInput) as info:
        rag.run("global", QUERY, "demo", options=GlobalOptions(level=9))
    message = str(info.value)
    assert "9" in message and "0, 1, 2" in message


def test_the_default_level_uses_leaf_summaries(rag):
    (leaves,) = rag.store.admin_rows(
        "SELECT count(*) FROM communities WHERE namespace = %s AND is_leaf", ("demo",))[0]
    leaf_ids = {r[0] for r in rag.store.admin_rows(
        "SELECT id FROM communities WHERE namespace = %s AND is_leaf", ("demo",))}
    run = rag.run("global", QUERY, "demo", final_vars=["global_summaries", "augmented_summaries"])
    summaries = run.values["global_summaries"]
    assert len(summaries) == leaves > 0
    assert {s.community_id for s in summaries} == leaf_ids
    assert all(isinstance(s, SummaryItem) for s in summaries)
    assert [a.community_id for a in run.values["augmented_summaries"]] == [s.community_id for s in summaries]


def test_a_requested_level_uses_that_level(rag):
    (count,) = rag.store.admin_rows(
        "SELECT count(*) FROM community_summaries WHERE namespace = %s AND level = 1", ("demo",))[0]
    run = rag.run("global", QUERY, "demo", final_vars=["global_summaries", "global_result"],
                  options=GlobalOptions(level=1))
    summaries = run.values["global_summaries"]
    assert len(summaries) == count > 0
    assert {s.level for s in summaries} == {1}
    assert run.as_json()["level"] == 1


def test_augmented_summaries_are_bounded_and_keep_ids(rag):
    run = rag.run("global", QUERY, "demo", final_vars=["augmented_summaries"],
                  options=GlobalOptions(claims_per_summary=2, excerpts_per_summary=1))
    augmented = run.values["augmented_summaries"]
    assert any(a.claim_ids for a in augmented)
    for a in augmented:
        assert len(a.claim_ids) <= 2 and len(a.chunk_ids) <= 1
        for cid in a.claim_ids + a.chunk_ids:
            assert f"[{cid}]" in a.text



def _statements(run, node: str) -> int:
    return sum(e.statements for e in run.trace if e.node == node)


def test_summaries_and_their_blocks_are_read_once_per_namespace_version(rag):
    """The level's summaries and their claim blocks depend on the index, not the question: a
    second search of the same version reads neither again and builds the same blocks, and a
    rewrite (a new version) is read anew, so no block outlives the rows it was made from."""
    from test_isolation import _tenant

    finals = ["global_summaries", "augmented_summaries"]
    rag.write("global-memo", _tenant("a-", "FACT-A"), replace=True)
    try:
        first = rag.run("global", QUERY, "global-memo", final_vars=finals)
        again = rag.run("global", "Who funded the Stormwatch Project?", "global-memo", final_vars=finals)
        assert _statements(first, "global_summaries") == 1 and _statements(first, "augmented_summaries") == 1
        assert _statements(again, "global_summaries") == 0 and _statements(again, "augmented_summaries") == 0
        assert again.values == first.values
        blocks = first.values["augmented_summaries"]
        assert any(a.claim_ids for a in blocks) and all(a.community_id.startswith("a-") for a in blocks)
        assert "FACT-A" in blocks[0].text

        rag.write("global-memo", _tenant("b-", "FACT-B"), replace=True)
        after = rag.run("global", QUERY, "global-memo", final_vars=finals)
        assert _statements(after, "augmented_summaries") == 1
        blocks = after.values["augmented_summaries"]
        assert [a.community_id for a in blocks] == ["b-" + a.community_id[2:] for a in first.values["augmented_summaries"]]
        assert all("FACT-A" not in a.text for a in blocks) and "FACT-B" in blocks[0].text
        assert {c for a in blocks for c in a.claim_ids} == {"b-" + c[2:] for a in first.values["augmented_summaries"]
                                                           for c in a.claim_ids}
    finally:
        rag.store.drop("global-memo")


def test_a_block_is_kept_for_its_whole_summary_not_only_its_community(rag):
    """Dynamic selection may title a report by its community where static selection reads an
    empty title: one community's two summaries get a block each, each starting with its own."""
    from graphrag_dag.dataflows.global_search.global_summaries import augmented_summaries

    (leaf,) = rag.run("global", QUERY, "demo", final_vars=["global_summaries"]).values["global_summaries"][:1]
    other = SummaryItem(leaf.community_id, leaf.level, "Another title", leaf.summary, leaf.rank, leaf.is_leaf)
    with rag.reading("demo") as db:
        first = augmented_summaries([leaf], db, "demo")
        both = augmented_summaries([leaf, other], db, "demo")
    assert both[0] is first[0] and both[0].text.startswith(f"{leaf.title}: ")
    assert both[1].text.startswith("Another title: ")
    assert both[1].text.partition("\n")[2] == both[0].text.partition("\n")[2]

# ---------------------------------------------------------------------------- the contract

CONTRACT_KEYS = {"method", "namespace", "query", "status", "offline", "answer", "answer_method", "warnings", "level",
                 "map_answers", "failed_batches", "error", "timings_ms", "llm"}


def _check_contract(out: dict, leaf_level: int = 2) -> None:
    assert CONTRACT_KEYS <= set(out)
    assert out["method"] == "global" and out["namespace"] == "demo" and out["query"] == QUERY
    assert out["status"] == "completed"
    assert out["offline"] is True
    assert isinstance(out["answer"], str) and out["answer"].strip()
    assert isinstance(out["warnings"], list)
    assert out["level"] == leaf_level
    assert out["failed_batches"] == 0
    assert out["map_answers"]
    for m in out["map_answers"]:
        assert set(m) == {"batch", "community_ids", "usefulness", "answer"}
        assert isinstance(m["batch"], int) and m["community_ids"] and all(isinstance(c, str) for c in m["community_ids"])
        assert isinstance(m["usefulness"], int) and 0 <= m["usefulness"] <= 100
        assert isinstance(m["answer"], str)
    assert {"global_summaries", "summary_batches", "map_answers", "reduce_input", "global_answer"} <= set(out["timings_ms"])
    assert out["llm"]["calls"] == 0 and out["llm"]["by_stage"] == {}
    assert {"calls", "prompt_tokens", "completion_tokens", "by_stage"} <= set(out["llm"])


def test_offline_global_search_meets_the_contract(rag):
    out = rag.global_search(QUERY, "demo")
    _check_contract(out)
    json.dumps(out)  # serialisable


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "graphrag-dag"
    return [str(script)] if script.exists() else [sys.executable, "-m", "graphrag_dag.drivers.cli"]


@pytest.mark.slow
def test_cli_global_query_json_offline(cli_env):
    proc = subprocess.run([*_cli(), "query", QUERY, "--namespace", "demo", "--method", "global", "--json"],
                          capture_output=True, text=True, env=cli_env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    _check_contract(json.loads(proc.stdout))


@pytest.mark.slow
def test_cli_unknown_level_exits_2_with_one_line(cli_env):
    proc = subprocess.run([*_cli(), "query", QUERY, "--namespace", "demo", "--method", "global", "--level", "9"],
                          capture_output=True, text=True, env=cli_env, timeout=120)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("[graphrag-dag]")
             and not re.match(r"^(INFO|WARNING|DEBUG)[: ]", ln)]
    assert "Traceback" not in proc.stderr
    assert any("0, 1, 2" in ln for ln in lines), proc.stderr


def _check_digest(answer: str, question: str) -> None:
    """The offline digest: 3-8 numbered themes, at most 400 words, each theme cited, every sentence
    whole (ends as a sentence ends, at most 60 words), none twice."""
    head, *themes = answer.splitlines()
    assert head.startswith("Offline extractive digest") and "LLM" in head, answer
    assert 3 <= len(themes) <= 8 and len(answer.split()) <= 400, (question, len(themes), len(answer.split()))
    said = []
    for n, line in enumerate(themes, 1):
        match = re.fullmatch(rf"{n}\. (.+?) \((\d+) communit(?:y|ies)\): (.+)", line)
        assert match and int(match[2]) >= 1, line
        sentences = re.findall(r"(.+?) \[(community [^\]]+)\](?: |$)", match[3])
        assert 1 <= len(sentences) <= 2, line
        for sentence, _cite in sentences:
            assert re.search(r"[.!?。！？][\"'”’)\]」』]*$", sentence) and len(sentence.split()) <= 60, sentence
            said.append(sentence.casefold())
    assert len(said) == len(set(said)), answer


@pytest.mark.slow
def test_the_offline_global_answer_is_a_short_digest_by_theme(rag):
    from shared_data import shared_data

    from graphrag_dag.drivers.ingest.indexer import index_corpus

    for question in ("What are the main themes?", "How do the communities of the corpus relate to each other?"):
        _check_digest(rag.global_search(question, "demo")["answer"], question)
    guides = sorted((shared_data() / "benchmarks" / "graphrag-bench-medical" / "documents").glob("*.txt"))[:6]
    index_corpus(rag, [str(g) for g in guides], "meddigest", replace=True, offline=True)
    try:
        for question in ("What are the most common treatments used across different cancers?",
                         "What do the guides say about side effects?"):
            res = rag.global_search(question, "meddigest", options=GlobalOptions(reduce_budget=1500))
            _check_digest(res["answer"], question)
            assert not any("did not fit" in w for w in res["warnings"])  # the digest reads them all
    finally:
        rag.store.drop("meddigest")
