"""Global search, map stage as Hamilton tasks: one task per batch (`Parallelizable`/`Collect`), so
a task executor such as Hamilton's RayTaskExecutor can fan the map out past one machine.

Selected with config `map_fanout="tasks"` (the driver then uses dynamic execution). Each task
gets a copy of the chat model (chat models pickle to a fresh client), so the per-batch usage
travels back on the answers and is recorded on the request's own chat model when collected.
Ray bounds concurrency by its own resources; the request's `map_concurrency` applies to the
thread-pool map only.
"""

from __future__ import annotations

from hamilton.function_modifiers import config
from hamilton.htypes import Collect, Parallelizable

from graphrag_dag.dataflows.common.resources import ChatModel, Embedder
from graphrag_dag.dataflows.common.settings import GLOBAL
from graphrag_dag.dataflows.global_search.mapping import MapAnswer, MapJob, map_one


@config.when(map_fanout="tasks")
def map_job(map_jobs: list[MapJob]) -> Parallelizable[MapJob]:
    yield from map_jobs


@config.when(map_fanout="tasks")
def map_task_answer(map_job: MapJob, query: str, chat_model: ChatModel, embedder: Embedder,
                    map_output_reserve: int = GLOBAL.map_output_reserve) -> MapAnswer:
    return map_one(map_job, query, chat_model, embedder, map_output_reserve)


@config.when(map_fanout="tasks")
def map_answers__tasks(map_task_answer: Collect[MapAnswer], chat_model: ChatModel) -> list[MapAnswer]:
    answers = sorted(map_task_answer, key=lambda m: m.batch)
    if not chat_model.offline:
        for m in answers:
            chat_model.record("map", m.usage.get("calls", 0), m.usage.get("prompt_tokens", 0),
                              m.usage.get("completion_tokens", 0))
    return answers
