"""Run the indexer flow: a user's files in, one namespace written atomically out.

Checks that cannot depend on the data (namespace name, --replace) run before anything is read,
so a refused run costs nothing; the flow ends in `prepare` (vectors, leaf communities, claim
quotes) and the store writes the result in one transaction, so a crash at any moment leaves the
namespace as it was.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from graphrag_dag.dataflows import index
from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.drivers.runtime import engine
from graphrag_dag.drivers.runtime.cancel import CancelToken
from graphrag_dag.drivers.api.options import IndexOptions
from graphrag_dag.drivers.llm.chat import ChatConfig, chat_for_request
from graphrag_dag.drivers.llm.tokens import token_counter
from graphrag_dag.drivers.store import validate_namespace
from graphrag_dag.drivers.store.cache import StoreExtractionCache

def index_corpus(rag: Any, paths: Sequence[str | Path], namespace: str, *, replace: bool = False,
                 options: Any = None, progress: Callable[[str], None] | None = None,
                 cancel: CancelToken | None = None, offline: bool = False,
                 chat: ChatConfig | None = None, update: bool = False) -> dict[str, Any]:
    """Index `paths` (files or folders) into `namespace`, with the configured chat model unless
    `offline` (or none is configured); returns counts, warnings, LLM calls and tokens per stage,
    extraction cache hits and the time of each stage in milliseconds.

    `update` syncs an existing namespace with `paths` as they are now: every document is read
    again, but text the LLM has seen (and communities whose members did not change) cost no call,
    and documents that are gone lose their contribution. `replace` rebuilds with the same caches;
    the difference is that `update` refuses a namespace that does not exist yet."""
    validate_namespace(namespace)
    if not paths:
        raise BadInput("give at least one file or folder to index")
    if update and replace:
        raise BadInput("--update and --replace do not go together: --update syncs, --replace rebuilds")
    exists = any(n["namespace"] == namespace for n in rag.store.namespaces())
    if update and not exists:
        raise BadInput(f"namespace {namespace!r} does not exist; index it first (without --update)")
    if exists and not (replace or update):
        raise BadInput(f"namespace {namespace!r} already exists; pass --replace to overwrite it or --update to sync it")
    replace = replace or update
    opts = options or IndexOptions()
    opts.validate()
    started = time.perf_counter()
    cancel = cancel or CancelToken()
    chat_model = chat_for_request(ChatConfig() if offline else (chat or rag.chat), cancel)
    inputs = {"corpus_paths": [str(p) for p in paths], "token_counter": token_counter(), "embedder": rag.embedder,
              "progress": progress, "chat_model": chat_model,
              "extraction_cache": StoreExtractionCache(rag.store.pool, namespace), **dataclasses.asdict(opts)}
    state = engine.RunState(cancel=cancel, flow="index", namespace=namespace, usage=chat_model.usage)
    fanout = inputs.pop("extraction_fanout", "threads")  # an execution choice, not a node input
    dr = (rag.engine.task_driver("index", engine.ray_executor()) if fanout == "ray" and not chat_model.offline
          else rag.engine.driver("index"))
    try:
        values = engine.execute(dr, [index.PREPARE_FINAL, "extractions"], inputs, state)
    except KeyboardInterrupt:
        cancel.cancel()  # stop the LLM calls in flight before the interpreter exits (as a search does)
        raise
    finally:
        cancel.close()
        if hasattr(chat_model, "close"):
            chat_model.close()
    write_set = values[index.PREPARE_FINAL]
    counts = rag.store.write_index(namespace, write_set, replace=replace, source="index", progress=progress)
    timings: dict[str, float] = {}
    for t in state.trace:
        timings[t.node] = round(timings.get(t.node, 0.0) + t.ms, 3)
    seconds = time.perf_counter() - started
    if progress:
        progress(f"indexed {counts['documents']} documents into {namespace!r} in {seconds:.1f} s")
    usage = chat_model.usage
    return {**counts, "warnings": list(write_set.records.warnings), "offline": chat_model.offline,
            "llm": {"calls": usage.calls, "prompt_tokens": usage.prompt_tokens,
                    "completion_tokens": usage.completion_tokens, "by_stage": usage.by_stage},
            "extraction_cache_hits": values["extractions"].cache_hits, "timings_ms": timings,
            "seconds": round(seconds, 3)}
