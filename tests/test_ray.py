"""The global map fan-out on a local Ray instance, through Hamilton's RayTaskExecutor."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


def test_ray_fanout_matches_the_thread_pool(rag, local_ray):
    from graphrag_dag.drivers.api import GlobalOptions
    from graphrag_dag.drivers.resources import ChatConfig

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
