"""DRIFT search (issue 17): the primer call, the follow-up local searches within their bounds,
and the reduce, through the real `openai` client to the loopback server; and offline."""

from __future__ import annotations

import pytest

import json
import re

from graphrag_dag.drivers.api.options import DriftOptions
from llm_server import Recorded, Reply

QUESTION = "How does the Saltmarrow storm warning work, and who pays for it?"
FOLLOW_UPS = ["Who funds the Stormwatch Project?", "What did Mara Quill find in Corran Sound?",
              "Who designed the Sentinel Buoy Network?", "What is the Greywick Lighthouse Institute?"]
LATER = ["Who funds the Stormwatch Project?", "Who is Oren Pike?", "What is Storm Orla?"]
ID_RE = re.compile(r"\[([a-z0-9-]+)\]")


def _label(rec: Recorded, pattern: str) -> str:
    return re.search(pattern, rec.prompt).group(1)


def responder(primer: str | None = None, delay: float = 0.0):
    def respond(rec: Recorded) -> Reply:
        if rec.stage == "primer":
            first = _label(rec, r"\[community (\S+)\]")
            return Reply(content=primer or json.dumps({"intermediate_answer": f"Stormwatch warns of surges [community {first}].",
                                                       "follow_up_questions": FOLLOW_UPS}))
        if rec.stage == "follow_up":
            return Reply(content=json.dumps({"follow_up_questions": LATER}))
        if rec.stage == "parse":
            return Reply(content=json.dumps({"entities": [], "keywords": [], "themes": []}))
        if rec.stage == "select":
            return Reply(content=json.dumps({"community_ids": []}))
        if rec.stage == "answer":
            ids = ID_RE.findall(rec.prompt)
            return Reply(content=f"From the evidence [{ids[0]}]." if ids else "Nothing found.", delay=delay)
        assert rec.stage == "drift_reduce", rec.stage
        ids = ID_RE.findall(rec.prompt)
        return Reply(content=f"Stormwatch warns of surges and the Trust pays [{ids[-1]}] [made-up-9].")
    return respond


def _stages(server) -> list[str]:
    return [r.stage for r in server.chat_requests()]


@pytest.mark.slow
def test_primer_follow_ups_and_reduce_within_their_bounds(rag, llm_server, chat_config):
    llm_server.responder = responder(delay=0.2)
    opts = DriftOptions(drift_follow_ups=3, drift_depth=2, drift_concurrency=2)
    run = rag.run("drift", QUESTION, "demo", chat=chat_config, options=opts)
    res = run.as_json()
    stages = _stages(llm_server)
    assert stages.count("primer") == 1 and stages.count("follow_up") == 1 and stages.count("drift_reduce") == 1
    steps = res["steps"]
    # depth 1: the primer's first three; depth 2: the new ones of the follow-up call (a repeat is not asked again)
    assert [s["question"] for s in steps if s["depth"] == 1] == FOLLOW_UPS[:3]
    assert [s["question"] for s in steps if s["depth"] == 2] == LATER[1:]
    assert len(steps) <= opts.drift_follow_ups * opts.drift_depth
    assert stages.count("parse") == stages.count("answer") == len(steps)  # each follow-up is one local search
    assert 1 < llm_server.max_in_flight <= opts.drift_concurrency  # follow-ups overlap, within the bound
    parse_questions = {r.prompt.rsplit("Question: ", 1)[-1].strip() for r in llm_server.chat_requests()
                       if r.stage == "parse"}
    assert parse_questions == {s["question"] for s in steps}
    # the reduce read every step's answer and evidence; its made-up citation is removed
    reduce = next(r for r in llm_server.chat_requests() if r.stage == "drift_reduce")
    for s in steps:
        assert s["question"] in reduce.prompt and s["evidence"]
        assert f"[{s['evidence'][0]}]" in reduce.prompt
    assert res["answer_method"] == "llm" and "made-up-9" not in res["answer"]
    assert any("made-up-9" in w for w in res["warnings"])
    assert res["status"] == "completed" and res["primer"]["method"] == "llm"
    union = {e for s in steps for e in s["evidence"]}
    assert {e["id"] for e in res["evidence"]} == union  # the evidence of every step, once each
    assert all(e["document_id"] and e["start"] is not None for e in res["evidence"] if e["kind"] == "chunk")
    assert res["llm"]["calls"] == len(stages)  # one account for the whole request


def test_depth_one_runs_only_the_primers_follow_ups(rag, llm_server, chat_config):
    llm_server.responder = responder()
    res = rag.run("drift", QUESTION, "demo", chat=chat_config,
                  options=DriftOptions(drift_follow_ups=2, drift_depth=1)).as_json()
    assert "follow_up" not in _stages(llm_server)
    assert [s["question"] for s in res["steps"]] == FOLLOW_UPS[:2]


def test_an_unusable_primer_falls_back_to_rules_and_says_so(rag, llm_server, chat_config):
    llm_server.responder = responder(primer="not json at all")
    res = rag.run("drift", QUESTION, "demo", chat=chat_config, options=DriftOptions(drift_depth=1)).as_json()
    assert _stages(llm_server).count("primer") == 2  # validated, one retry
    assert res["primer"]["method"] == "rules" and res["status"] == "partial"
    assert any("DRIFT primer" in w for w in res["warnings"]) and res["steps"]


def test_a_failed_follow_up_makes_the_result_partial(rag, llm_server, chat_config):
    llm_server.responder = responder(primer=json.dumps({"intermediate_answer": "Draft.",
                                                        "follow_up_questions": ["\x01\x02", FOLLOW_UPS[0]]}))
    res = rag.run("drift", QUESTION, "demo", chat=chat_config, options=DriftOptions(drift_depth=1)).as_json()
    failed = [s for s in res["steps"] if s["status"] == "failed"]
    assert len(failed) == 1 and "empty" in failed[0]["error"] and res["status"] == "partial"
    assert any("failed" in w for w in res["warnings"])


def test_offline_drift_and_the_cli(rag, capsys):
    res = rag.run("drift", QUESTION, "demo", offline=True).as_json()
    assert res["status"] == "completed" and res["answer_method"] == "extractive" and res["llm"]["calls"] == 0
    depth1 = [s for s in res["steps"] if s["depth"] == 1]
    assert depth1 and [s["question"] for s in depth1] == res["primer"]["follow_ups"]
    asked = " ".join(s["question"] for s in depth1)
    for s in res["steps"]:
        if s["depth"] == 2:  # an entity a first-step answer matched and no first-step question named
            name = s["question"].removeprefix("What is ").rstrip("?")
            assert name not in asked
    assert len(res["steps"]) <= 3 * 2 and res["evidence"] and res["sources"]
    cited = set(ID_RE.findall(res["answer"])) | {c.removeprefix("community ") for c in
                                                 re.findall(r"\[(community [^\]]+)\]", res["answer"])}
    known = {e["id"] for e in res["evidence"]} | {e["chunk_id"] for e in res["evidence"]} | \
        {c["id"] for c in res["primer"]["communities"]} | \
        {c for s in res["steps"] for c in s["communities"]}  # an excerpt is cited by its chunk's label
    assert cited and cited <= known
    from graphrag_dag.drivers.cli.main import main  # the CLI's own entry point, in this process

    code = main(["query", QUESTION, "--namespace", "demo", "--method", "drift", "--offline", "--drift-depth", "1",
                 "--drift-follow-ups", "2", "--decompose"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "Follow-ups:" in out.out and 1 <= out.out.count("step 1:") <= 2 and "step 2:" not in out.out
