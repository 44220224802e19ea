"""Hamilton's cache: LLM nodes are served on an identical rerun, DB nodes recompute after the
namespace's index version changes, and an override recomputes only its descendants."""

from __future__ import annotations

import json
import re

import pytest

from llm_server import Recorded, Reply

QUESTION = "What did Dr. Mara Quill discover about the storm surge?"
LLM_NODES = {"parsed_query", "selected_communities", "local_answer"}
# The nodes that take the database run again when its index version changes. exact_matches and
# alias_matches only filter name_key_rows, so the cache serves them when its rows come back the same.
DB_NODES = {"name_key_rows", "intent_matches", "semantic_matches", "entity_neighbourhood",
            "topology_communities", "semantic_communities", "community_signals", "keyword_chunks",
            "vector_chunks", "ranked_claims", "titled_units", "linked_units", "unit_total", "seed_weights",
            "walked_entities", "entity_units", "source_rows"}


def responder(rec: Recorded) -> Reply:
    if rec.stage == "parse":
        return Reply(json.dumps({"entities": ["Mara Quill"], "keywords": ["storm", "surge"], "themes": ["discovery"]}))
    if rec.stage == "select":
        ids = re.findall(r"^- id: (\S+) \|", rec.prompt, flags=re.M)
        return Reply(json.dumps({"community_ids": ids[:2]}))
    return Reply("Quill found the rising-tide trap [cl-14].")


@pytest.fixture()
def cached_rag(home, rag, tmp_path):
    from graphrag_dag.drivers.api import GraphRag

    instance = GraphRag(rag.dsn, home=home, cache=tmp_path / "cache", pool_size=2)
    yield instance
    instance.close()


def _status(run) -> dict[str, str]:
    from graphrag_dag.drivers.runtime.engine import cached_nodes

    return cached_nodes(run.driver, run.run_id)


@pytest.mark.slow
def test_identical_rerun_serves_llm_nodes_from_cache(cached_rag, llm_server, chat_config):
    llm_server.responder = responder
    first = cached_rag.run("local", QUESTION, "demo", chat=chat_config)
    assert len(llm_server.chat_requests()) == 3
    assert all(_status(first)[n] == "executed" for n in LLM_NODES)

    llm_server.reset()
    second = cached_rag.run("local", QUESTION, "demo", chat=chat_config)
    status = _status(second)
    assert all(status[n] == "hit" for n in LLM_NODES), status
    assert llm_server.chat_requests() == []  # nothing reached the LLM
    assert second.as_json()["answer"] == first.as_json()["answer"]
    cached_flags = {t.node: t.cached for t in second.trace}
    assert all(cached_flags[n] for n in LLM_NODES)


@pytest.mark.slow
def test_index_version_bump_recomputes_db_nodes(cached_rag, llm_server, chat_config):
    llm_server.responder = responder
    cached_rag.run("local", QUESTION, "demo", chat=chat_config)
    again = cached_rag.run("local", QUESTION, "demo", chat=chat_config)
    assert all(_status(again)[n] == "hit" for n in DB_NODES)

    old = cached_rag.store.namespace_info("demo").index_version
    cached_rag.store.bump_index_version("demo")
    try:
        after = cached_rag.run("local", QUESTION, "demo", chat=chat_config)
        status = _status(after)
        assert all(status[n] == "executed" for n in DB_NODES), status
        assert status["parsed_query"] == "hit"  # depends on the question, not the data
    finally:
        with cached_rag.store.pool.connection() as conn:
            conn.execute("UPDATE namespaces SET index_version = %s WHERE namespace = 'demo'", (old,))


def test_override_recomputes_only_descendants(cached_rag):
    base = cached_rag.run("local", QUESTION, "demo", offline=True)
    dr = base.driver
    override = {"fuzzy_matches": []}
    changed = cached_rag.run("local", QUESTION, "demo", offline=True, overrides=override)
    status = _status(changed)
    descendants = {n.name for n in dr.what_is_downstream_of("fuzzy_matches")}
    upstream_only = {"parsed_query", "exact_matches", "alias_matches", "semantic_matches", "query_embedding",
                     "intent_matches", "vector_chunks"}
    assert "matched_entities" in descendants
    for node in upstream_only:
        assert status.get(node) == "hit", (node, status.get(node))
    ran = {t.node for t in changed.trace}
    assert "fuzzy_matches" not in ran and "fuzzy_terms" not in ran  # an override and its private inputs do not run
    executed = {n for n, s in status.items() if s == "executed"}
    prompt_nodes = {"parse_template", "selection_template", "answer_template"}  # always re-read their files
    assert executed - prompt_nodes <= descendants, executed - prompt_nodes - descendants
    assert "matched_entities" in executed


@pytest.mark.slow
def test_a_real_import_recomputes_db_nodes_and_llm_nodes_stay_cached(cached_rag, llm_server, chat_config):
    """No node takes the index version: the database resource's fingerprint carries it, so writing
    the namespace again (a new version) is enough for every DB-reading node to recompute."""
    from graphrag_dag.drivers.ingest.demo import demo_records

    ns = "cache-import"
    cached_rag.write(ns, demo_records(), replace=True, source="test")
    llm_server.responder = responder
    first = cached_rag.run("local", QUESTION, ns, chat=chat_config)
    again = cached_rag.run("local", QUESTION, ns, chat=chat_config)
    status = _status(again)
    assert all(status[n] == "hit" for n in DB_NODES | LLM_NODES | {"name_index", "graph_index"}), status
    assert len(llm_server.chat_requests()) == 3  # the rerun reached no model
    cached_rag.write(ns, demo_records(), replace=True, source="test")  # same rows, new version
    after = cached_rag.run("local", QUESTION, ns, chat=chat_config)
    status = _status(after)
    assert all(status[n] == "executed" for n in DB_NODES | {"name_index", "graph_index"}), status
    assert status["parsed_query"] == "hit"  # depends on the question and the model, not the data
    assert after.as_json()["communities"] == first.as_json()["communities"]
    cached_rag.store.drop(ns)


def test_a_different_model_is_a_different_cache_key(cached_rag, llm_server, chat_config):
    import dataclasses

    llm_server.responder = responder
    cached_rag.run("local", QUESTION, "demo", chat=chat_config)
    other = cached_rag.run("local", QUESTION, "demo", chat=dataclasses.replace(chat_config, model="other-model"))
    status = _status(other)
    assert all(status[n] == "executed" for n in LLM_NODES), status
    assert all(status[n] == "hit" for n in DB_NODES), status


# -- fingerprints: a cached value is only ever its own node's --------------------------------------

def test_fingerprints_tell_apart_what_hamiltons_defaults_confuse():
    from dataclasses import dataclass

    import numpy as np
    from hamilton.caching import fingerprinting

    from graphrag_dag.drivers.runtime import fingerprints

    @dataclass
    class A:
        x: object

    @dataclass
    class B:
        x: object

    def nest(leaf, levels=12):
        for _ in range(levels):
            leaf = [A(leaf)]
        return leaf

    pairs = [({}, []), ([], ()), ("1", 1), (1, 1.0), (1, True), ([1], (1,)), (A(1), B(1)), (A([]), A({})),
             (np.zeros(2, np.float32), np.zeros(2, np.int32)), (np.zeros(4), np.zeros((2, 2))),
             (nest("a"), nest("b")), ({"a": 1, "b": 2}.keys(), {"a": 1}), (("ab", "c"), ("a", "bc")),
             ({"a": 1, "b": 2}, {"b": 2, "a": 1})]  # a dict's order is part of its value
    for left, right in pairs:
        assert fingerprinting.hash_value(left) != fingerprinting.hash_value(right), (left, right)
    assert fingerprinting.hash_value({"a": 1, "b": [2]}) == fingerprinting.hash_value({"a": 1, "b": [2]})
    assert fingerprinting.hash_value(A(np.arange(3))) == fingerprinting.hash_value(A(np.arange(3)))
    assert fingerprinting.hash_value(nest("a", fingerprints.MAX_DEPTH)) == fingerprinting.UNHASHABLE  # not cached


CONFUSING = ["Who funded the Stormwatch Project?", "Zorblax Corporation", "qqq", "Stormwatch Zorblax", "Mara Quill",
             "hello world", "qqq unique16", "qqq unique17"]


def _same(a, b) -> bool:
    """Equal values of equal types, all the way down (arrays by their elements)."""
    import dataclasses

    import numpy as np

    if type(a) is not type(b):
        return False
    if not dataclasses.is_dataclass(a) and hasattr(a, "version"):
        return a.version == b.version  # an in-memory index of the namespace: one per GraphRag
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    if dataclasses.is_dataclass(a):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.slow
def test_cached_runs_give_every_node_its_own_value_in_every_namespace(cached_rag, rag):
    """The queries that once made a cached run hand `entity_units` another node's list, on the demo
    and then on a second namespace: every node's value equals an uncached run's."""
    from test_isolation import _tenant

    from graphrag_dag.drivers.service.lineage import flow_graph

    rag.write("cache-b", _tenant("b-", "FACT-B"), replace=True)
    nodes = [n["name"] for n in flow_graph("local", None)["nodes"] if not n["input"]]
    try:
        for namespace in ("demo", "cache-b"):
            for question in CONFUSING:
                cached = cached_rag.run("local", question, namespace, offline=True, final_vars=nodes).values
                fresh = rag.run("local", question, namespace, offline=True, final_vars=nodes).values
                wrong = [n for n in nodes if not _same(cached[n], fresh[n])]
                assert wrong == [], (namespace, question, wrong)
        again = cached_rag.run("local", CONFUSING[-1], "demo", offline=True, final_vars=nodes)
        assert "hit" in set(_status(again).values())  # the cache did serve values
    finally:
        rag.store.drop("cache-b")
