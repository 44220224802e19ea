"""Local search with an LLM: the real `openai` client over real HTTP to the loopback
OpenAI-compatible server (tests/llm_server.py). The server answers by the request's X-Stage header
(parse, select, answer) and records every request, so the tests assert on the traffic itself:
which stages were called, what the prompts contained, and how malformed or failed replies
degrade (rules, ranked order, extractive answer) with a warning instead of failing the request."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

import pytest

from graphrag_dag.drivers.ingest.demo import demo_queries
from llm_server import Recorded, Reply

NS = "demo"
QUERY = demo_queries()["local"]  # Dr. Mara Quill, storm surge, Corran Sound, who funded it
PARSE_JSON = {"entities": ["Mara Quill", "Corran Sound", "Meridian Coastal Trust"],
              "keywords": ["storm surge", "funding", "discovery"], "themes": ["storm research", "funding"]}
ANSWER = "Quill found the rising-tide trap in Corran Sound [cl-14]; the Meridian Coastal Trust funded it."
CANDIDATE_RE = re.compile(r"^- id: (\S+) \|", re.MULTILINE)

Handler = Callable[[Recorded], Any]


def candidate_ids(rec: Recorded) -> list[str]:
    return CANDIDATE_RE.findall(rec.prompt)


def select_first_two_reversed(rec: Recorded) -> str:
    ids = candidate_ids(rec)
    return json.dumps({"community_ids": ids[:2][::-1]})


def responder(parse: Handler = json.dumps(PARSE_JSON), select: Handler = select_first_two_reversed,
              answer: Handler = ANSWER) -> Callable[[Recorded], Reply]:
    """Reply by stage; a handler is a string, a Reply, or a function of the request returning either."""

    def respond(rec: Recorded) -> Reply:
        handler = {"parse": parse, "select": select, "answer": answer}.get(rec.stage or "")
        if handler is None:
            return Reply(content=f"unexpected stage {rec.stage!r}", status=400)
        out = handler(rec) if callable(handler) else handler
        return out if isinstance(out, Reply) else Reply(content=out, prompt_tokens=100, completion_tokens=10)

    return respond


def stages(server) -> list[str | None]:
    return [r.stage for r in server.chat_requests()]


def only(server, stage: str) -> Recorded:
    recs = [r for r in server.chat_requests() if r.stage == stage]
    assert len(recs) == 1, f"expected one {stage} request, got {len(recs)}"
    return recs[0]


def run_local(rag, chat_config, query: str = QUERY, **kwargs):
    final = ["parsed_query", "ranked_communities", "local_context", "local_result"]
    run = rag.run("local", query, NS, chat=chat_config, final_vars=final, **kwargs)
    return run, run.as_json()


# ------------------------------------------------------------------------------- happy path


def test_parse_select_and_answer_each_reach_the_server_once(rag, llm_server, chat_config):
    llm_server.responder = responder()
    run, res = run_local(rag, chat_config)

    assert stages(llm_server) == ["parse", "select", "answer"]
    assert all(r.body.get("model") == "test-model" for r in llm_server.chat_requests())
    assert res["offline"] is False
    assert res["warnings"] == []
    assert res["answer"] == ANSWER
    assert res["parsed_query"] == PARSE_JSON

    # usage per request and per stage, as the server reported it
    assert res["llm"]["calls"] == 3
    assert set(res["llm"]["by_stage"]) == {"parse", "select", "answer"}
    for stage in ("parse", "select", "answer"):
        assert res["llm"]["by_stage"][stage] == {"calls": 1, "prompt_tokens": 100, "completion_tokens": 10}
    assert res["llm"]["prompt_tokens"] == 300 and res["llm"]["completion_tokens"] == 30


def test_parse_prompt_carries_the_query(rag, llm_server, chat_config):
    llm_server.responder = responder()
    run_local(rag, chat_config)
    prompt = only(llm_server, "parse").prompt
    assert QUERY in prompt
    assert '"entities"' in prompt and '"keywords"' in prompt and '"themes"' in prompt


def test_selection_sees_the_ranked_candidates_and_its_choice_is_used(rag, llm_server, chat_config):
    llm_server.responder = responder()
    run, res = run_local(rag, chat_config)
    ranked = [c.id for c in run.values["ranked_communities"]]
    prompt = only(llm_server, "select").prompt
    assert QUERY in prompt
    assert candidate_ids(only(llm_server, "select")) == ranked
    assert len(ranked) >= 3
    # the LLM kept the first two, most relevant first as it said
    assert [c["id"] for c in res["communities"]] == [ranked[1], ranked[0]]


def test_answer_prompt_has_labelled_sections_with_ids(rag, llm_server, chat_config):
    llm_server.responder = responder()
    run, res = run_local(rag, chat_config)
    prompt = only(llm_server, "answer").prompt
    assert QUERY in prompt
    context = run.values["local_context"]
    assert context.text in prompt
    # the sections are labelled on their own lines, summaries first (the instructions above the
    # context also mention the labels, so look inside the context itself)
    body = prompt[prompt.index(context.text):]
    lines = body.splitlines()
    assert lines[0] == "[Community summaries]"
    assert "[Evidence]" in lines
    split = body.index("\n[Evidence]\n")
    summaries_part, evidence_part = body[:split], body[split:]
    assert context.evidence_ids and context.community_ids == [c["id"] for c in res["communities"]]
    labels = {e["id"]: e["chunk_id"] if "#" in e["id"] else e["id"] for e in res["evidence"]}  # an excerpt: its chunk's line
    for eid in context.evidence_ids:
        assert f"[{labels[eid]}]" in evidence_part, eid
    assert set(labels) >= set(context.evidence_ids)
    for cid in context.community_ids:
        assert f"[community {cid}]" in summaries_part
    # communities the LLM dropped are not in the answer context
    dropped = [c.id for c in run.values["ranked_communities"] if c.id not in context.community_ids]
    assert dropped
    for cid in dropped:
        assert f"[community {cid}]" not in prompt


def test_llm_intent_entities_join_the_matched_entities(rag, llm_server, chat_config):
    """The question never names her; the LLM's parse does, by alias, and the intent channel resolves it."""
    q = "Who discovered the rising-tide trap?"
    llm_server.responder = responder(parse=json.dumps({"entities": ["Dr. Quill"], "keywords": ["trap"], "themes": []}))
    res = rag.local_search(q, NS, chat=chat_config)
    quill = next(m for m in res["matched_entities"] if m["id"] == "e-mara-quill")
    assert "intent" in quill["channels"]
    assert "exact" not in quill["channels"]


def test_fenced_selection_json_is_accepted(rag, llm_server, chat_config):
    def fenced(rec: Recorded) -> str:
        return "```json\n" + json.dumps({"community_ids": candidate_ids(rec)[:1]}) + "\n```"

    llm_server.responder = responder(select=fenced)
    run, res = run_local(rag, chat_config)
    assert [c["id"] for c in res["communities"]] == [run.values["ranked_communities"][0].id]
    assert res["warnings"] == []


# ------------------------------------------------------------------------- selection fallback


@pytest.mark.parametrize(
    "reply",
    [
        "not json",
        '{"community_ids": ["c-not-a-candidate"]}',
        lambda rec: json.dumps({"community_ids": [candidate_ids(rec)[0], "c-not-a-candidate"]}),
        '{"community_ids": "c2-1"}',
        '{"ids": ["c2-1"]}',
        '["c2-1"]',
        Reply(content="server error", status=500),
    ],
    ids=["not-json", "unknown-id", "one-unknown-id", "not-a-list", "wrong-key", "bare-list", "http-500"],
)
def test_unusable_selection_falls_back_to_ranked_order_with_a_warning(rag, llm_server, chat_config, reply):
    llm_server.responder = responder(select=reply)
    run, res = run_local(rag, chat_config)
    ranked = [c.id for c in run.values["ranked_communities"]]
    assert [c["id"] for c in res["communities"]] == ranked
    assert any("community selection" in w and "ranked order" in w for w in res["warnings"]), res["warnings"]
    assert res["status"] == "completed"
    assert res["answer"] == ANSWER  # the rest of the request went on with the LLM
    assert stages(llm_server) == ["parse", "select", "answer"]


# ----------------------------------------------------------------------------- parse fallback


@pytest.mark.parametrize(
    "reply",
    [
        "not json",
        '{"entities": "Mara Quill", "keywords": [], "themes": []}',
        '{"entities": [1, 2], "keywords": [], "themes": []}',
        '"just a string"',
        Reply(content="server error", status=500),
    ],
    ids=["not-json", "entities-not-a-list", "entities-not-strings", "not-an-object", "http-500"],
)
def test_unusable_parse_falls_back_to_rules_with_a_warning(rag, llm_server, chat_config, reply):
    rules = rag.run("local", QUERY, NS, final_vars=["parsed_query"]).values["parsed_query"]  # offline rules
    llm_server.responder = responder(parse=reply)
    run, res = run_local(rag, chat_config)
    assert run.values["parsed_query"].source == "rules"
    assert res["parsed_query"] == rules.as_json()
    assert any("pars" in w and "rule-based" in w for w in res["warnings"]), res["warnings"]
    assert res["status"] == "completed" and res["answer"] == ANSWER
    assert stages(llm_server) == ["parse", "select", "answer"]


def test_parse_with_missing_keywords_gets_rule_keywords(rag, llm_server, chat_config):
    llm_server.responder = responder(parse='{"entities": ["Mara Quill"], "themes": ["storms"]}')
    run, res = run_local(rag, chat_config)
    assert res["parsed_query"]["entities"] == ["Mara Quill"]
    assert "quill" in res["parsed_query"]["keywords"] and "surge" in res["parsed_query"]["keywords"]
    assert res["warnings"] == []


# ---------------------------------------------------------------------------- answer fallback


def test_answer_http_500_yields_an_extractive_answer_and_a_warning(rag, llm_server, chat_config):
    assert chat_config.max_retries == 0
    llm_server.responder = responder(answer=Reply(content="boom", status=500))
    run, res = run_local(rag, chat_config)
    assert stages(llm_server) == ["parse", "select", "answer"]  # no retry
    assert res["status"] == "completed"
    assert res["offline"] is False
    answer = res["answer"]
    assert answer.strip() and answer != ANSWER
    # extractive: lines citing ids of evidence or communities that were in the context
    context = run.values["local_context"]
    cited = set(re.findall(r"\[([^\[\]]+)\]", answer))
    items = {e.id: e for e in run.values["local_result"].evidence}
    allowed = {items[i].label for i in context.evidence_ids} | {f"community {c}" for c in context.community_ids}
    assert cited and cited <= allowed
    # it must not claim that no LLM is configured: one is, and it failed
    assert "no LLM configured" not in answer
    assert any("answer generation by LLM failed" in w and "InternalServerError" in w for w in res["warnings"])
    assert res["llm"]["calls"] == 3
    assert "answer" not in res["llm"]["by_stage"]  # no usage was reported for the failed call


def test_empty_llm_answer_yields_an_extractive_answer_and_a_warning(rag, llm_server, chat_config):
    llm_server.responder = responder(answer="   ")
    run, res = run_local(rag, chat_config)
    assert res["answer"].strip()
    assert any("empty answer" in w for w in res["warnings"])


def test_offline_run_makes_no_requests_even_with_a_chat_config(rag, llm_server, chat_config):
    llm_server.responder = responder()
    res = rag.local_search(QUERY, NS, chat=chat_config, offline=True)
    assert llm_server.chat_requests() == []
    assert res["offline"] is True and res["llm"]["calls"] == 0
    assert res["answer"].startswith("Offline extractive answer")
