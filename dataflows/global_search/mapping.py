"""How one map batch becomes a scored answer (not a DAG module: the thread-pool map and the
task-based map that can run on Ray share it).

A reply must be `{"answer": str, "usefulness": 0..100}`; an unusable reply is retried once and a
failure is recorded on the answer, not raised. Offline, the answer is extracted from the batch.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphrag_dag.dataflows.common.citations import checked_citations, citable_ids
from graphrag_dag.dataflows.common.prompting import Prompt, ReplyInvalid, ask, json_object
from graphrag_dag.dataflows.common.resources import ChatModel, Embedder
from graphrag_dag.dataflows.common.textproc import sentence_spans
from graphrag_dag.dataflows.global_search.global_batches import Batch


@dataclass
class MapAnswer:
    batch: int
    community_ids: list[str]
    usefulness: int
    answer: str
    attempts: int = 1
    error: str | None = None
    usage: dict[str, int] = field(default_factory=dict)  # this batch's LLM calls and tokens
    citable: list[str] = field(default_factory=list)  # the ids its batch labelled (what reduce may cite)
    removed_citations: list[str] = field(default_factory=list)  # made-up ids taken out of the answer

    def as_json(self) -> dict[str, Any]:
        return {"batch": self.batch, "community_ids": self.community_ids, "usefulness": self.usefulness,
                "answer": self.answer}


@dataclass(frozen=True)
class MapJob:
    """One batch and the prompt that asks about it: the unit of the map fan-out."""

    batch: Batch
    prompt: Prompt


_SHAPE = "with answer and usefulness"


def validated(text: str) -> tuple[str, int]:
    data = json_object(text, _SHAPE)
    if not {"answer", "usefulness"} <= set(data):
        raise ReplyInvalid(f"was not valid JSON {_SHAPE}")
    answer, usefulness = data.get("answer"), data.get("usefulness")
    if not isinstance(answer, str):
        raise ReplyInvalid("gave an answer that is not a string")
    if isinstance(usefulness, bool) or not isinstance(usefulness, (int, float)) or usefulness != usefulness:
        raise ReplyInvalid("gave a usefulness that is not a number")
    if not 0 <= usefulness <= 100:
        raise ReplyInvalid(f"gave usefulness {usefulness}, outside 0..100")
    if usefulness > 0 and not answer.strip():
        raise ReplyInvalid("gave a blank answer it called useful")
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


def batch_citable(batch: Batch) -> set[str]:
    """The ids a map answer may cite: the batch's communities and the claims and passages labelled
    in its content (dataflows/common/citations.py)."""
    return citable_ids(batch.content) | set(batch.community_ids) | {f"community {c}" for c in batch.community_ids}


def _validated_against(allowed: set[str]):
    """`validated`, then the citation rule: made-up ids are removed, and an answer that cites
    only made-up ids is unusable (so it is retried like any other bad reply)."""

    def check(text: str) -> tuple[str, int, list[str]]:
        answer, usefulness = validated(text)
        checked = checked_citations(answer, allowed)
        if checked.removed and not checked.cited:
            raise ReplyInvalid(f"cited only ids that were not in its batch ({', '.join(checked.removed[:3])})")
        return checked.text, usefulness, checked.removed

    return check


def map_one(job: MapJob, query: str, chat_model: ChatModel, embedder: Embedder, max_tokens: int,
            stop: threading.Event | None = None) -> MapAnswer:
    """One batch: one LLM call plus at most one retry when the reply is unusable."""
    batch = job.batch
    allowed = batch_citable(batch)
    if chat_model.offline:
        qvec = np.asarray(embedder.embed([query])[0], dtype=np.float32)
        offline = _offline_map(batch, qvec, embedder)
        offline.citable = sorted(allowed)
        return offline
    asked = ask(chat_model, job.prompt, _validated_against(allowed), json_mode=True, max_tokens=max_tokens,
                attempts=2, stop=stop)
    if asked.value is None:
        return MapAnswer(batch.index, batch.community_ids, 0, "", asked.attempts, asked.error[:300],
                         usage=asked.usage)
    answer, usefulness, removed = asked.value
    return MapAnswer(batch.index, batch.community_ids, usefulness, answer, asked.attempts, usage=asked.usage,
                     citable=sorted(allowed), removed_citations=removed)
