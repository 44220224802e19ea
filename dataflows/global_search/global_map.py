"""Global search, stage 3: map every batch to a scored answer, at most `map_concurrency` calls in
flight on a bounded pool. A batch whose reply is unusable is retried once; a failure is recorded
on its answer, not raised (dataflows/global_search/mapping.py)."""

from __future__ import annotations

import threading
from concurrent.futures import Executor, ThreadPoolExecutor

from hamilton.function_modifiers import config

from graphrag_dag.dataflows.common import waiting
from graphrag_dag.dataflows.common.errors import Cancelled
from graphrag_dag.dataflows.common.prompting import Prompt
from graphrag_dag.dataflows.common.resources import ChatModel, Embedder
from graphrag_dag.dataflows.common.settings import GLOBAL
from graphrag_dag.dataflows.global_search.global_batches import Batch
from graphrag_dag.dataflows.global_search.mapping import MapAnswer, MapJob, batch_citable, map_one


def map_jobs(summary_batches: list[Batch], map_prompts: list[Prompt]) -> list[MapJob]:
    return [MapJob(b, p) for b, p in zip(summary_batches, map_prompts, strict=True)]


@config.when_not(map_fanout="tasks")
def map_answers(map_jobs: list[MapJob], query: str, chat_model: ChatModel, embedder: Embedder,
                map_executor: Executor | None, map_concurrency: int = GLOBAL.map_concurrency,
                map_output_reserve: int = GLOBAL.map_output_reserve) -> list[MapAnswer]:
    """On a local thread pool, or on `map_executor` (any `concurrent.futures.Executor`). The first
    cancelled call stops the others from starting a new attempt."""
    if not map_jobs:
        return []
    if chat_model.offline:
        return [map_one(j, query, chat_model, embedder, map_output_reserve) for j in map_jobs]
    stop = threading.Event()
    pool = map_executor or ThreadPoolExecutor(max_workers=map_concurrency, thread_name_prefix="map")
    # The ids each reply may cite are gathered on one more thread while the first calls wait for
    # the model: gathered by each call before sending, they would delay every round of calls (the
    # GIL serialises the workers' regex scans). A caller's executor may
    # run calls in other processes, which gather their own.
    gatherer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="map-ids")
    ids = [gatherer.submit(batch_citable, j.batch).result if map_executor is None else None for j in map_jobs]
    futures = []
    try:
        futures = [pool.submit(map_one, j, query, chat_model, embedder, map_output_reserve, stop, i)
                   for j, i in zip(map_jobs, ids, strict=True)]
        return [waiting.result(f) for f in futures]
    except Cancelled:
        stop.set()
        for f in futures:
            f.cancel()
        raise
    finally:
        gatherer.shutdown(wait=False, cancel_futures=True)
        if map_executor is None:
            pool.shutdown(wait=False, cancel_futures=True)
