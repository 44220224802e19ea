"""Issue 17's switches, local side: query decomposition and weighted ranking. Offline cases run
the rules and the formula; the LLM cases go through the real `openai` client to the loopback
server, and every assertion reads the run's own node values."""

from __future__ import annotations

import json

import pytest

from graphrag_dag.dataflows.common.decompose import expansions, sub_questions
from graphrag_dag.dataflows.local.community_ranking import (
    CommunitySignals, ranked_communities__rrf, ranked_communities__weighted,
)
from llm_server import Recorded, Reply

COMPARISON = "Which came first, the Saltmarrow Lantern or the Meridian Coastal Trust?"


# ---------------------------------------------------------------------- decomposition by rule


@pytest.mark.parametrize("question, expected", [
    ("Which film came out first, Blue Harbour or The Long Tide?",
     ["Which film came out first, Blue Harbour?", "Which film came out first, The Long Tide?"]),
    ("Are both Kestrel Bay and Amber Coast in the same country?",
     ["Are Kestrel Bay in the same country?", "Are Amber Coast in the same country?"]),
    ("Who was born first out of Orla Venn and Tomas Reed?",
     ["Who was born first out of Orla Venn?", "Who was born first out of Tomas Reed?"]),
    ("Which came first, Pride and Prejudice or Emma?",  # "or" first: a title may hold "and"
     ["Which came first, Pride and Prejudice?", "Which came first, Emma?"]),
    ("Who is the mother of the director of film Blue Harbour?", ["the director of film Blue Harbour"]),
    ("Where did Orla Venn's husband die?", ["Orla Venn's husband"]),
    ("北京和上海哪个城市人口更多？", ["北京哪个城市人口更多？", "上海哪个城市人口更多？"]),
    ("东京大学的校长的妻子是谁？", ["东京大学的校长"]),
    ("映画Aと映画Bはどちらが先に公開されましたか？", ["映画Aはどちらが先に公開されましたか？", "映画Bはどちらが先に公開されましたか？"]),
])
def test_rules_split_comparisons_conjunctions_and_chains(question, expected):
    assert sub_questions(question) == expected


@pytest.mark.parametrize("question", [
    "Who is the director of film Blue Harbour?",  # one hop: nothing to split
    "What did Dr. Mara Quill discover in Corran Sound, and who funded it?",  # "and" without a comparison
    "Is Pride and Prejudice a long novel?",
    "storm surge",
])
def test_rules_leave_a_single_look_up_whole(question):
    assert sub_questions(question) == []


def test_expansions_name_implied_concepts_not_words_already_asked():
    assert expansions("Tell me about its history") == ["timeline", "events", "milestones", "origins"]
    assert "timeline" not in expansions("What is the timeline and history of the Trust?")
    assert expansions("它的历史沿革")[:2] == ["时间线", "事件"]
    assert expansions("Where is Corran Sound?") == []


def test_a_two_entity_comparison_gets_one_sub_question_per_entity_offline(rag):
    run = rag.run("local", COMPARISON, "demo", offline=True, config={"decompose": "on"},
                  final_vars=["parsed_query", "sub_question_matches", "matched_entities", "local_result"])
    parsed = run.values["parsed_query"]
    assert parsed.sub_questions == ["Which came first, the Saltmarrow Lantern?",
                                    "Which came first, the Meridian Coastal Trust?"]
    subs = run.values["sub_question_matches"]
    assert [s.question for s in subs] == parsed.sub_questions
    # each sub-question's exact channel ranks its own entity first, and the fusion keeps both
    assert [s.channels["exact"][0].name for s in subs] == ["The Saltmarrow Lantern", "Meridian Coastal Trust"]
    names = [m.name for m in run.values["matched_entities"]][:4]
    assert {"The Saltmarrow Lantern", "Meridian Coastal Trust"} <= set(names)
    res = run.as_json()
    assert res["parsed_query"]["sub_questions"] == parsed.sub_questions and "expansions" in res["parsed_query"]
    plain = rag.run("local", COMPARISON, "demo", offline=True, final_vars=["local_result"]).as_json()
    assert "sub_questions" not in plain["parsed_query"]  # the default JSON is unchanged


def test_a_question_with_nothing_to_split_or_expand_gets_the_plain_result(rag):
    q = "Where is Corran Sound?"
    plain = rag.run("local", q, "demo", offline=True).as_json()
    switched = rag.run("local", q, "demo", offline=True, config={"decompose": "on"}).as_json()
    assert switched["parsed_query"]["sub_questions"] == [] and switched["parsed_query"]["expansions"] == []
    for key in ("matched_entities", "communities", "evidence", "sources", "answer"):
        assert switched[key] == plain[key], key


def test_decomposition_respects_the_channels_switch(rag):
    run = rag.run("local", COMPARISON, "demo", offline=True, final_vars=["sub_question_matches"],
                  config={"decompose": "on", "channels": "exact,semantic"})
    assert all(set(s.channels) == {"exact", "semantic"} for s in run.values["sub_question_matches"])


def test_sub_questions_join_the_vector_recall(rag):
    """Each sub-question's nearest chunk is among the fused vector chunks."""
    from graphrag_dag.dataflows.local.chunk_recall import vector_chunks__plain

    run = rag.run("local", COMPARISON, "demo", offline=True, config={"decompose": "on"},
                  final_vars=["vector_chunks", "sub_question_embeddings", "db", "embed_dim"])
    fused = [c.id for c in run.values["vector_chunks"]]
    for vec in run.values["sub_question_embeddings"]:
        with rag.reading("demo") as db:
            own = vector_chunks__plain(vec, db, "demo", run.values["embed_dim"], 12)
        assert own[0].id in fused[:4]
    assert len(fused) <= 12


# ---------------------------------------------------------------------- decomposition by LLM


SUBS = ["Who is Dr. Mara Quill?", "What is the Meridian Coastal Trust?"]


def _decomposing(rec: Recorded) -> Reply:
    if rec.stage == "parse":
        assert "sub_questions" in rec.prompt  # the decomposing template was sent
        return Reply(content=json.dumps({"entities": ["Mara Quill"], "keywords": ["funding"], "themes": [],
                                         "sub_questions": SUBS, "expansions": ["grant", "sponsor"]}))
    if rec.stage == "select":
        return Reply(content=json.dumps({"community_ids": []}))
    return Reply(content="Quill worked with the Trust.")


def test_llm_sub_questions_run_through_matching(rag, llm_server, chat_config):
    llm_server.responder = _decomposing
    run = rag.run("local", "Who paid for Quill's work?", "demo", chat=chat_config, config={"decompose": "on"},
                  final_vars=["parsed_query", "sub_question_matches", "matched_entities", "keyword_terms"])
    assert [r.stage for r in llm_server.chat_requests()] == ["parse"]
    assert run.values["parsed_query"].sub_questions == SUBS
    subs = run.values["sub_question_matches"]
    assert [s.question for s in subs] == SUBS
    assert subs[1].channels["exact"][0].name == "Meridian Coastal Trust"
    matched = {m.name: m.channels for m in run.values["matched_entities"]}
    assert "exact" in matched["Meridian Coastal Trust"]  # named only by a sub-question
    assert run.values["keyword_terms"][-2:] == ["grant", "sponsor"]
    plain = rag.run("local", "Who paid for Quill's work?", "demo", offline=True, final_vars=["matched_entities"])
    assert "exact" not in {m.name: m.channels for m in plain.values["matched_entities"]}.get("Meridian Coastal Trust", [])


def test_llm_reply_without_sub_questions_gets_the_rules(rag, llm_server, chat_config):
    llm_server.responder = lambda rec: Reply(content=json.dumps({"entities": [], "keywords": [], "themes": []}))
    run = rag.run("local", COMPARISON, "demo", chat=chat_config, config={"decompose": "on"},
                  final_vars=["parsed_query"])
    parsed = run.values["parsed_query"]
    assert parsed.source == "llm" and parsed.sub_questions == sub_questions(COMPARISON)


# ---------------------------------------------------------------------- weighted ranking


def _signals() -> list[CommunitySignals]:
    # id, similarity, overlap, structure (edge weight); sizes and report ranks equal
    rows = [("a", 0.90, 0.0, 0.0), ("b", 0.89, 0.45, 0.5), ("c", 0.88, 0.0, 10.0), ("d", 0.10, 0.5, 1.0)]
    return [CommunitySignals(i, 0, i, "", sim, 3, ov, st, 0.0) for i, sim, ov, st in rows]


def test_weighted_and_rrf_rank_a_constructed_case_as_their_formulas_say():
    signals = _signals()
    # min-max over the four: sim' a 1, b .9875, c .975, d 0; overlap' a 0, b .9, c 0, d 1;
    # structure' a 0, b .05, c 1, d .1. With α = β = γ = 1: c 1.975, b 1.9375, d 1.1, a 1.0
    weighted = ranked_communities__weighted(signals, top_k=4, ranking_alpha=1.0, ranking_beta=1.0, ranking_gamma=1.0)
    assert [c.id for c in weighted] == ["c", "b", "d", "a"]
    assert [round(c.score, 6) for c in weighted] == [1.975, 1.9375, 1.1, 1.0]
    # RRF (k=60) sees only ranks: sim a1 b2 c3 d4; overlap d1 b2 (a and c have none); structure c1 d2 b3
    expected = {"a": 1 / 61, "b": 1 / 62 + 1 / 62 + 1 / 63, "c": 1 / 63 + 1 / 61, "d": 1 / 64 + 1 / 61 + 1 / 62}
    rrf = ranked_communities__rrf(signals, rrf_k=60, top_k=4)
    assert [c.id for c in rrf] == ["d", "b", "c", "a"]
    assert [c.score for c in rrf] == pytest.approx([expected[i] for i in "dbca"])
    assert [c.ranks for c in rrf][0] == {"semantic": 4, "overlap": 1, "structure": 2}
    # similarity alone (β = γ = 0) is the summaries' order
    alone = ranked_communities__weighted(signals, top_k=4, ranking_alpha=1.0, ranking_beta=0.0, ranking_gamma=0.0)
    assert [c.id for c in alone] == ["a", "b", "c", "d"]


def test_min_max_of_equal_values_and_missing_similarity_is_zero():
    flat = [CommunitySignals(i, 0, i, "", None if i == "x" else 0.5, 3, 0.2, 1.0, 0.0) for i in ("x", "y")]
    ranked = ranked_communities__weighted(flat, top_k=2)
    assert [c.score for c in ranked] == [0.0, 0.0] and [c.id for c in ranked] == ["x", "y"]  # ties by id


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    """The CLI's own entry point in this process (the embedded server is already up)."""
    from graphrag_dag.drivers.cli.main import main

    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_weighted_ranking_through_the_dag_and_the_cli(rag, capsys):
    over = {"community_signals": _signals()}
    run = rag.run("local", "storm surge", "demo", offline=True, final_vars=["ranked_communities"], overrides=over,
                  config={"ranking": "weighted"})
    assert [c.id for c in run.values["ranked_communities"]] == ["c", "b", "d", "a"]
    default = rag.run("local", "storm surge", "demo", offline=True, final_vars=["ranked_communities"], overrides=over)
    assert [c.id for c in default.values["ranked_communities"]] == ["d", "b", "c", "a"]  # RRF stays the default
    from graphrag_dag.drivers.api.options import LocalOptions

    alone = rag.run("local", "storm surge", "demo", offline=True, final_vars=["ranked_communities"], overrides=over,
                    config={"ranking": "weighted"}, options=LocalOptions(ranking_beta=0.0, ranking_gamma=0.0))
    assert [c.id for c in alone.values["ranked_communities"]] == ["a", "b", "c", "d"]
    code, out, err = _cli(capsys, "query", "Who is Mara Quill?", "--namespace", "demo", "--offline", "--json",
                          "--ranking", "weighted", "--ranking-alpha", "2")
    assert code == 0, err
    assert json.loads(out)["communities"]
    code, _, err = _cli(capsys, "query", "x", "--namespace", "demo", "--config", "ranking=best")
    assert code == 2 and err.count("\n") == 1 and "unknown ranking 'best'" in err


def test_dag_draws_each_switch(capsys):
    """`dag FLOW --config KEY=VALUE` through the CLI's own entry point (no subprocess: drawing needs no server)."""
    from graphrag_dag.drivers.cli.main import main

    def dag(*args: str) -> tuple[int, str, str]:
        code = main(["dag", *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    plain, switched = dag("local"), dag("local", "--config", "decompose=on", "--config", "ranking=weighted")
    assert plain[0] == switched[0] == 0, switched[2]
    assert "sub_question_matches" not in plain[1] and "sub_question_matches" in switched[1]
    dynamic = dag("global", "--config", "global_selection=dynamic")
    assert dynamic[0] == 0 and "community_ratings" in dynamic[1] and "community_ratings" not in dag("global")[1]
    assert "drift_steps" in dag("drift")[1]
    for args, message in ((("local", "--config", "ranking=best"), "unknown ranking"),
                          (("index", "--config", "decompose=on"), "has no switches"),
                          (("local", "--config", "decompose"), "KEY=VALUE")):
        code, _, err = dag(*args)
        assert code == 2 and message in err and err.count("\n") == 1, (args, err)
