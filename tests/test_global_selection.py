"""Dynamic community selection for global search (issue 17): ratings from the roots down, and
only the relevant branches mapped. The LLM cases go through the real `openai` client to the
loopback server, which rates by the community id in each rating prompt."""

from __future__ import annotations

import json
import re

from graphrag_dag.drivers.api import GlobalOptions
from llm_server import Recorded, Reply

QUERY = "What happened in the storm research?"
DYNAMIC = {"global_selection": "dynamic"}
COMMUNITY_RE = re.compile(r"Report of community (\S+):")
FINALS = ["global_result", "community_ratings", "summary_batches"]


def _tree(rag) -> dict[str, str | None]:
    with rag.reading("demo") as db:
        return dict(db.rows("SELECT id, parent_id FROM communities WHERE namespace = %(ns)s", {"ns": "demo"}))


def _rater(relevant: set[str], broken: set[str] = frozenset()):
    def respond(rec: Recorded) -> Reply:
        if rec.stage == "rate":
            cid = COMMUNITY_RE.search(rec.prompt).group(1)
            if cid in broken:
                return Reply(content="not json")
            return Reply(content=json.dumps({"rating": 9 if cid in relevant else 0}))
        if rec.stage == "map":
            return Reply(content=json.dumps({"answer": "The storm research found a tide trap.", "usefulness": 70}))
        assert rec.stage == "reduce", rec.stage
        return Reply(content="The storm research found a tide trap.")
    return respond


def _rated(server) -> list[str]:
    return sorted(COMMUNITY_RE.search(r.prompt).group(1) for r in server.chat_requests() if r.stage == "rate")


def _mapped(run) -> set[str]:
    return {p.community_id for b in run.values["summary_batches"] for p in b.parts}


def test_llm_rates_from_the_roots_down_and_maps_only_the_relevant_branch(rag, llm_server, chat_config):
    tree = _tree(rag)
    llm_server.responder = _rater({"c0-1", "c1-1", "c2-1", "c2-2"})
    run = rag.run("global", QUERY, "demo", chat=chat_config, config=DYNAMIC, final_vars=FINALS)
    roots = sorted(c for c, p in tree.items() if p is None)
    children = lambda parent: sorted(c for c, p in tree.items() if p == parent)  # noqa: E731
    assert _rated(llm_server) == sorted(roots + children("c0-1") + children("c1-1"))
    assert _mapped(run) == {"c2-1", "c2-2"}  # the deepest relevant communities, under the relevant root
    mapped_prompts = [r.prompt for r in llm_server.chat_requests() if r.stage == "map"]
    assert mapped_prompts and all("[community c2-3" not in p and "[community c1-1" not in p for p in mapped_prompts)
    res = run.as_json()
    assert res["status"] == "completed"
    sel = res["selection"]
    assert sel["rated_by"] == "llm" and sel["kept"] == 2 and sel["rating_calls"] == len(_rated(llm_server))
    assert sel["relevant"] == ["c0-1", "c1-1", "c2-1", "c2-2"]
    assert res["llm"]["by_stage"]["rate"]["calls"] == sel["rating_calls"]


def test_a_relevant_community_whose_children_are_not_is_mapped_itself(rag, llm_server, chat_config):
    llm_server.responder = _rater({"c0-2"})
    run = rag.run("global", QUERY, "demo", chat=chat_config, config=DYNAMIC, final_vars=FINALS)
    assert _mapped(run) == {"c0-2"}


def test_a_failed_rating_keeps_its_community_with_a_warning(rag, llm_server, chat_config):
    llm_server.responder = _rater(set(), broken={"c0-3"})
    run = rag.run("global", QUERY, "demo", chat=chat_config, config=DYNAMIC, final_vars=FINALS)
    res = run.as_json()
    assert _mapped(run) == {"c0-3"}  # its children were rated 0, so it stands for its branch
    assert any("rating community c0-3" in w and "kept it" in w for w in res["warnings"])
    assert _rated(llm_server).count("c0-3") == 2  # validated, one retry


def test_nothing_relevant_maps_nothing(rag, llm_server, chat_config):
    llm_server.responder = _rater(set())
    res = rag.run("global", QUERY, "demo", chat=chat_config, config=DYNAMIC).as_json()
    assert res["status"] == "no_results" and res["selection"]["kept"] == 0
    assert {r.stage for r in llm_server.chat_requests()} == {"rate"}


def test_offline_dynamic_selection_descends_by_similarity(rag):
    tree = _tree(rag)
    static = rag.run("global", QUERY, "demo", offline=True, final_vars=["global_summaries"])
    run = rag.run("global", QUERY, "demo", offline=True, config=DYNAMIC, final_vars=FINALS)
    ratings = run.values["community_ratings"]
    relevant = {c.id for c in ratings.rated if c.relevant}
    rated = {c.id for c in ratings.rated}
    assert ratings.method == "similarity" and ratings.kept
    for c in ratings.rated:  # only roots and children of relevant communities were rated
        assert c.parent_id is None or c.parent_id in relevant
        assert c.rating is not None and 0 <= c.rating <= 10
    for cid in ratings.kept:  # kept: relevant, with every ancestor relevant, and no relevant child
        assert cid in relevant and not any(tree[o] == cid for o in relevant)
        parent = tree[cid]
        while parent is not None:
            assert parent in relevant
            parent = tree[parent]
    assert rated < set(tree)  # some branch was never rated
    assert len(run.values["summary_batches"]) >= 1
    assert len(ratings.kept) < len(static.values["global_summaries"])
    assert run.as_json()["selection"]["rating_calls"] == 0


def test_dynamic_selection_stops_at_the_requested_level(rag):
    run = rag.run("global", QUERY, "demo", offline=True, config=DYNAMIC, final_vars=FINALS,
                  options=GlobalOptions(level=1, rating_threshold=0))
    ratings = run.values["community_ratings"]
    assert max(c.level for c in ratings.rated) == 1
    assert {c.id for c in ratings.rated if c.level == 1} == set(ratings.kept)  # threshold 0 keeps all
