"""The global map fan-out on a local Ray instance, through Hamilton's RayTaskExecutor."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes


ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


def test_ray_fanout_matches_the_thread_pool(rag, local_ray):
    from graphrag_dag.drivers.api import GlobalOptions
    from graphrag_dag.drivers.llm.chat import ChatConfig

    chat = ChatConfig(stand_in_latency_ms=10)

    def run(fanout: str):
        opts = GlobalOptions(map_budget=600, map_output_reserve=100, map_fanout=fanout)
        return rag.run("global", "What are the main themes?", "demo", options=opts, chat=chat)

    threads, on_ray = run("threads"), run("ray")
    batches = len(threads.values["global_result"].map_answers)
    assert batches > 1
    assert on_ray.values["global_result"].status == "completed"
    assert [m.as_json() for m in on_ray.values["global_result"].map_answers] == \
        [m.as_json() for m in threads.values["global_result"].map_answers]
    # usage made inside Ray tasks comes back to the request
    assert on_ray.usage.calls == threads.usage.calls == batches + 1
    assert on_ray.usage.by_stage["map"]["calls"] == batches
    assert "map_job" in {t.node for t in on_ray.trace}  # the task-based DAG ran


def test_unknown_fanout_is_bad_input(rag):
    from graphrag_dag.dataflows.common.errors import BadInput
    from graphrag_dag.drivers.api import GlobalOptions

    with pytest.raises(BadInput, match="map-fanout"):
        rag.run("global", "themes?", "demo", options=GlobalOptions(map_fanout="carrier-pigeon"))


def test_ray_extraction_matches_the_thread_pool_and_fills_the_cache(rag, llm_server, chat_config, local_ray):
    from test_indexer_llm import BAD_UNIT_MARK, DEMO_DOCS, _passage, responder

    from graphrag_dag.drivers.ingest.indexer import IndexOptions, index_corpus

    llm_server.responder = responder

    def entities(ns: str) -> list[tuple]:
        return rag.store.scoped(ns).rows("SELECT name, description FROM entities WHERE namespace = %(ns)s "
                                         "ORDER BY name", {"ns": ns})

    threads = index_corpus(rag, [str(DEMO_DOCS)], "idx-threads", replace=True, chat=chat_config)
    before = len(llm_server.chat_requests())
    on_ray = index_corpus(rag, [str(DEMO_DOCS)], "idx-ray", replace=True, chat=chat_config,
                          options=IndexOptions(extraction_fanout="ray"))
    extract_calls = sum(1 for r in llm_server.chat_requests()[before:] if r.stage == "extract")
    assert extract_calls == threads["llm"]["by_stage"]["extract"]["calls"] > 0
    # usage made inside Ray tasks comes back to the run's report
    assert on_ray["llm"]["by_stage"]["extract"] == threads["llm"]["by_stage"]["extract"]
    assert on_ray["warnings"] == threads["warnings"]
    assert {k: v for k, v in on_ray.items() if isinstance(v, int)} == \
        {k: v for k, v in threads.items() if isinstance(v, int)}
    assert entities("idx-ray") == entities("idx-threads")
    assert "extraction_job" in on_ray["timings_ms"]  # the task-based DAG ran
    # the tasks kept their replies in the namespace's cache: a rerun on threads asks again only
    # about the unit whose replies were never valid
    before = len(llm_server.chat_requests())
    again = index_corpus(rag, [str(DEMO_DOCS)], "idx-ray", replace=True, chat=chat_config)
    rerun = [r for r in llm_server.chat_requests()[before:] if r.stage == "extract"]
    assert rerun and all(BAD_UNIT_MARK in _passage(r) for r in rerun)
    assert again["extraction_cache_hits"] == on_ray["chunks"] - len(rag.store.scoped("idx-ray").rows(
        "SELECT id FROM chunks WHERE namespace = %(ns)s AND kind = 'evidence'", {"ns": "idx-ray"})) - 1
