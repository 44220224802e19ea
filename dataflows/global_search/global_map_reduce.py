"""Global search, stages 3-5: map each batch to a scored answer, reduce the useful ones.

Map calls run on a bounded pool (never more than `map_concurrency` in flight); a batch whose
reply is not valid `{"answer": str, "usefulness": 0..100}` is retried once, and a failure is
recorded, not raised. Reduce drops usefulness 0, sorts by usefulness (stable) and adds answers
one by one within its budget, skipping one that does not fit so a later shorter one can enter.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hamilton.function_modifiers import config

from graphrag_dag.dataflows import prompts
from graphrag_dag.dataflows.common.errors import Cancelled
from graphrag_dag.dataflows.global_search.global_batches import EXACT_MARGIN, Batch
from graphrag_dag.dataflows.global_search.global_summaries import SummaryItem
from graphrag_dag.dataflows.common.resources import ChatModel, Embedder, TokenCounter
from graphrag_dag.dataflows.common.textproc import sentence_spans


@dataclass
class MapAnswer:
    batch: int
    community_ids: list[str]
    usefulness: int
    answer: str
    attempts: int = 1
    error: str | None = None
    usage: dict[str, int] = field(default_factory=dict)  # this batch's LLM calls and tokens

    def as_json(self) -> dict[str, Any]:
        return {"batch": self.batch, "community_ids": self.community_ids, "usefulness": self.usefulness,
                "answer": self.answer}


@dataclass
class ReduceInput:
    kept: list[MapAnswer]
    skipped: list[MapAnswer]  # useful but did not fit the reduce budget
    dropped: list[MapAnswer]  # usefulness 0 or failed
    prompt: str
    tokens: int


@dataclass
class GlobalAnswer:
    text: str
    method: str  # "llm", "extractive" or "none"
    warnings: list[str] = field(default_factory=list)


@dataclass
class GlobalResult:
    level: int | None
    summaries: int
    batches: int
    map_answers: list[MapAnswer]
    reduce: ReduceInput
    answer: GlobalAnswer

    @property
    def failed_batches(self) -> int:
        return sum(1 for m in self.map_answers if m.error)

    @property
    def status(self) -> str:
        if not self.reduce.kept:
            return "no_results"
        return "partial" if self.failed_batches else "completed"

    def as_json(self) -> dict[str, Any]:
        warnings = list(self.answer.warnings)
        warnings += [f"map batch {m.batch} failed after {m.attempts} attempts: {m.error}"
                     for m in self.map_answers if m.error]
        if self.reduce.skipped:
            warnings.append(f"{len(self.reduce.skipped)} map answers did not fit the reduce budget")
        return {"status": self.status, "answer": self.answer.text, "warnings": warnings, "level": self.level,
                "map_answers": [m.as_json() for m in self.map_answers if not m.error],
                "failed_batches": self.failed_batches}


class MapReplyInvalid(ValueError):
    pass


def _validated(text: str) -> tuple[str, int]:
    try:
        data = json.loads(prompts.strip_fences(text))
    except (json.JSONDecodeError, TypeError) as exc:
        raise MapReplyInvalid("reply is not JSON") from exc
    if not isinstance(data, dict) or not {"answer", "usefulness"} <= set(data):
        raise MapReplyInvalid("reply is not an object with answer and usefulness")
    answer, usefulness = data.get("answer"), data.get("usefulness")
    if not isinstance(answer, str):
        raise MapReplyInvalid("answer is not a string")
    if isinstance(usefulness, bool) or not isinstance(usefulness, (int, float)) or usefulness != usefulness:
        raise MapReplyInvalid("usefulness is not a number")
    if not 0 <= usefulness <= 100:
        raise MapReplyInvalid(f"usefulness {usefulness} is outside 0..100")
    if usefulness > 0 and not answer.strip():
        raise MapReplyInvalid("a useful answer is blank")
    return answer.strip(), int(round(usefulness))


def _offline_map(batch: Batch, query_vec: np.ndarray, embedder: Embedder) -> MapAnswer:
    """Extractive: the batch's three sentences closest to the question, in reading order, with
    their community labels; usefulness is their mean cosine similarity to the question, scaled to
    0..100 (a batch-level score would be diluted by everything irrelevant in the batch)."""
    sentences: list[tuple[str, str]] = []
    for part in batch.parts:
        for s, e in sentence_spans(part.text):
            text = " ".join(part.text[s:e].split()).lstrip("-• ").strip()
            if text and text not in ("Claims:", "Source excerpts:"):
                sentences.append((part.community_id, text))
    if not sentences:
        return MapAnswer(batch.index, batch.community_ids, 0, "")
    vecs = np.asarray(embedder.embed([s for _, s in sentences]), dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1) * (np.linalg.norm(query_vec) or 1.0)
    sims = (vecs @ query_vec) / np.where(norms == 0, 1.0, norms)
    top = np.argsort(-sims, kind="stable")[:3]
    usefulness = int(round(max(0.0, min(1.0, float(np.mean(sims[top])))) * 100))
    answer = " ".join(f"{sentences[i][1]} [community {sentences[i][0]}]" for i in sorted(top))
    return MapAnswer(batch.index, batch.community_ids, usefulness, answer)


def map_batch_answer(batch: Batch, query: str, chat_model: ChatModel, map_prompt: str, map_output_reserve: int,
                     embedder: Embedder, stop: threading.Event | None = None) -> MapAnswer:
    """One batch: one LLM call plus at most one retry when the reply is unusable (not a node: it
    is shared by the thread-pool map and the task-based map that can run on Ray)."""
    if chat_model.offline:
        qvec = np.asarray(embedder.embed([query])[0], dtype=np.float32)
        return _offline_map(batch, qvec, embedder)
    prompt = prompts.render(map_prompt, query=query, content=batch.content)
    error = ""
    usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    for attempt in (1, 2):
        if stop is not None and stop.is_set():
            raise Cancelled("the request was cancelled")
        try:
            usage["calls"] += 1
            reply = chat_model.complete("map", prompt, json_mode=True, max_tokens=map_output_reserve)
            usage["prompt_tokens"] += reply.prompt_tokens
            usage["completion_tokens"] += reply.completion_tokens
            answer, usefulness = _validated(reply.text)
            return MapAnswer(batch.index, batch.community_ids, usefulness, answer, attempt, usage=usage)
        except Cancelled:
            if stop is not None:
                stop.set()
            raise
        except Exception as exc:  # noqa: BLE001 - recorded on the batch, retried once
            error = f"{type(exc).__name__}: {exc}"
    return MapAnswer(batch.index, batch.community_ids, 0, "", 2, error[:300], usage=usage)


@config.when_not(map_fanout="tasks")
def map_answers(summary_batches: list[Batch], query: str, chat_model: ChatModel, llm_identity: str,
                map_prompt: str, map_concurrency: int, map_output_reserve: int, embedder: Embedder,
                map_executor: Any) -> list[MapAnswer]:
    """One call per batch (plus at most one retry), at most `map_concurrency` in flight on a local
    thread pool (or `map_executor`, any `concurrent.futures.Executor`)."""
    if not summary_batches:
        return []
    if chat_model.offline:
        return [map_batch_answer(b, query, chat_model, map_prompt, map_output_reserve, embedder)
                for b in summary_batches]
    stop = threading.Event()
    pool = map_executor or ThreadPoolExecutor(max_workers=map_concurrency, thread_name_prefix="map")
    futures = []
    try:
        futures = [pool.submit(map_batch_answer, b, query, chat_model, map_prompt, map_output_reserve, embedder, stop)
                   for b in summary_batches]
        results = [f.result() for f in futures]
    except Cancelled:
        stop.set()
        for f in futures:
            f.cancel()
        raise
    finally:
        if map_executor is None:
            pool.shutdown(wait=False, cancel_futures=True)
    return results


def _answer_block(m: MapAnswer) -> str:
    return f"[answer from batch {m.batch}, usefulness {m.usefulness}]\n{m.answer}"


def reduce_input(map_answers: list[MapAnswer], query: str, token_counter: TokenCounter, reduce_budget: int,
                 reduce_output_reserve: int, reduce_prompt: str) -> ReduceInput:
    limit = reduce_budget - reduce_output_reserve
    useful = [m for m in map_answers if not m.error and m.usefulness > 0]
    dropped = [m for m in map_answers if m.error or m.usefulness <= 0]
    useful.sort(key=lambda m: -m.usefulness)  # stable: ties keep batch order

    def render(answers: list[MapAnswer]) -> str:
        return prompts.render(reduce_prompt, query=query, answers=ANSWER_SEPARATOR.join(_answer_block(x) for x in answers))

    kept: list[MapAnswer] = []
    skipped: list[MapAnswer] = []
    tokens = token_counter.count(render([]))
    sep = token_counter.count(ANSWER_SEPARATOR)
    for m in useful:
        # The running sum decides far from the limit; near it the whole prompt is counted exactly.
        estimate = tokens + sep + token_counter.count(_answer_block(m))
        exact = estimate if estimate <= limit - EXACT_MARGIN else token_counter.count(render([*kept, m]))
        if exact <= limit:
            kept.append(m)
            tokens = exact
        else:
            skipped.append(m)
    prompt = render(kept)
    tokens = token_counter.count(prompt)
    while tokens > limit and kept:  # a rare tokenizer merge made the estimate low: give back the last
        skipped.insert(0, kept.pop())
        prompt = render(kept)
        tokens = token_counter.count(prompt)
    return ReduceInput(kept, skipped, dropped, prompt, tokens)


ANSWER_SEPARATOR = "\n\n"


def global_answer(reduce_input: ReduceInput, chat_model: ChatModel, llm_identity: str,
                  reduce_output_reserve: int) -> GlobalAnswer:
    """No usable map answer means no reduce call at all."""
    if not reduce_input.kept:
        return GlobalAnswer("No relevant information was found for this question.", "none")
    if chat_model.offline:
        body = "\n".join(f"- {m.answer}" for m in reduce_input.kept)
        return GlobalAnswer("Offline extractive answer (no LLM configured), most useful first:\n" + body, "extractive")
    try:
        reply = chat_model.complete("reduce", reduce_input.prompt, max_tokens=reduce_output_reserve)
    except prompts.PASSTHROUGH_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001 - fall back to the map answers themselves
        body = "\n".join(f"- {m.answer}" for m in reduce_input.kept)
        return GlobalAnswer(body, "extractive", [f"reduce call failed ({type(exc).__name__}); returned the map answers"])
    return GlobalAnswer(reply.text.strip(), "llm")


def global_result(global_summaries: list[SummaryItem], summary_batches: list[Batch], map_answers: list[MapAnswer],
                  reduce_input: ReduceInput, global_answer: GlobalAnswer, level: int | None) -> GlobalResult:
    resolved = level if level is not None else (max((s.level for s in global_summaries), default=None))
    return GlobalResult(resolved, len(global_summaries), len(summary_batches), map_answers, reduce_input, global_answer)
