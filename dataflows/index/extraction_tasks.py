"""Indexer, stage 3 as Hamilton tasks: one task per text unit the cache does not know
(`Parallelizable`/`Collect`), so Hamilton's RayTaskExecutor can spread extraction past one
machine, as the global map does.

Selected with config `extraction_fanout="tasks"` (`--extraction-fanout ray`). Each task gets a
copy of the chat model and of the extraction cache (both pickle to what they need to reconnect),
keeps its reply in the cache as soon as it arrives, and sends its usage back on its result, which
the collecting node records on the request's chat model. Ray bounds concurrency by its own
resources; `extraction_concurrency` applies to the thread pool only.
"""

from __future__ import annotations

from hamilton.function_modifiers import config
from hamilton.htypes import Collect, Parallelizable

from graphrag_dag.dataflows.common.resources import ChatModel, ExtractionCache
from graphrag_dag.dataflows.common.settings import INDEX
from graphrag_dag.dataflows.index.llm_extraction import (
    ExtractionDone,
    ExtractionJob,
    ExtractionJobs,
    Extractions,
    _collected,
    _extracted,
)


@config.when(extraction_fanout="tasks")
def extraction_job(extraction_jobs: ExtractionJobs) -> Parallelizable[ExtractionJob]:
    yield from extraction_jobs.jobs


@config.when(extraction_fanout="tasks")
def unit_extraction(extraction_job: ExtractionJob, gleaning_template: str, chat_model: ChatModel,
                    extraction_cache: ExtractionCache, gleanings: int = INDEX.gleanings) -> ExtractionDone:
    return _extracted(extraction_job, gleaning_template, chat_model, extraction_cache, gleanings)


@config.when(extraction_fanout="tasks")
def extractions__tasks(unit_extraction: Collect[ExtractionDone], extraction_jobs: ExtractionJobs,
                       chat_model: ChatModel) -> Extractions:
    done = list(unit_extraction)
    for d in done:
        for stage, u in d.usage.items():
            chat_model.record(stage, u.get("calls", 0), u.get("prompt_tokens", 0), u.get("completion_tokens", 0))
    return _collected(extraction_jobs, done)
