"""How one map batch becomes a scored answer (not a DAG module: the thread-pool map and the
task-based map that can run on Ray share it).

A reply must be `{"answer": str, "usefulness": 0..100}`; an unusable reply is retried once and a
failure is recorded on the answer, not raised. Offline, the answer is extracted from the batch.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

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


_MARKER_RE = re.compile(r"(?:^|\s)- \[([^\[\]\s]+)\] ")
_QUOTES = "'\"‘’“”«»「」『』"
_EXCERPTS = "Source excerpts:"


def _segments(text: str) -> list[tuple[str | None, bool, str]]:
    """A part's text as (labelled id, is_source_excerpt, text) pieces: the summary first, then one
    piece per `- [id]` claim or excerpt line. Split parts lost their line breaks, so the markers
    are found in running text."""
    out: list[tuple[str | None, bool, str]] = []
    in_excerpts = False
    pos, label = 0, None
    for m in [*_MARKER_RE.finditer(text), None]:
        piece = text[pos:m.start() if m else len(text)]
        if _EXCERPTS in piece:
            before, _, after = piece.partition(_EXCERPTS)
            out.append((label, in_excerpts, before))
            in_excerpts, label, piece = True, None, after
        out.append((label, in_excerpts, piece.replace("Claims:", " ")))
        if m:
            pos, label = m.end(), m.group(1)
    return [(i, ex, " ".join(t.split())) for i, ex, t in out if t.strip()]


def _informative(sentence: str) -> bool:
    """A whole sentence that states something: not a fragment (too short, or starting in lower
    case, as a cut-off "said Scrooge." does) and not dialogue (opening or closing on a quote mark,
    or mostly quoted). Unspaced scripts count characters instead of words."""
    words = sentence.split()
    if len(words) < 6 and not (len(words) <= 2 and len(sentence) >= 12 and not sentence.isascii()):
        return False
    first = sentence.lstrip("-• ")[:1]
    if not first or first in _QUOTES or (first.isalpha() and first.islower()):
        return False
    if sentence.rstrip(".!?。！？ ")[-1:] in _QUOTES:
        return False
    quoted = sum(len(q) for q in re.findall(r"[‘“\"][^‘’“”\"]*[’”\"]", sentence))
    return quoted <= len(sentence) / 2


def _offline_map(batch: Batch, query_vec: np.ndarray, embedder: Embedder) -> MapAnswer:
    """Extractive: the batch's three informative sentences closest to the question, from the
    summaries and their claims (source excerpts are raw passages, mostly dialogue, and serve as
    evidence, not as answers), near-duplicates skipped. Each cites its community and, for a
    claim, the claim. Usefulness is their mean cosine similarity to the question, scaled to
    0..100 (a batch-level score would be diluted by everything irrelevant in the batch)."""
    sentences: list[tuple[str, str]] = []  # (citation, sentence)
    for part in batch.parts:
        for label, excerpt, text in _segments(part.text):
            if excerpt:
                continue
            cite = f"community {part.community_id}" + (f", {label}" if label else "")
            for s, e in sentence_spans(text):
                sentence = text[s:e].strip()
                if _informative(sentence):
                    sentences.append((cite, sentence))
    if not sentences:
        return MapAnswer(batch.index, batch.community_ids, 0, "")
    vecs = np.asarray(embedder.embed([s for _, s in sentences]), dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1) * (np.linalg.norm(query_vec) or 1.0)
    sims = (vecs @ query_vec) / np.where(norms == 0, 1.0, norms)
    picked: list[int] = []
    for i in np.argsort(-sims, kind="stable"):
        words = set(sentences[i][1].casefold().split())
        if all(len(words & (other := set(sentences[j][1].casefold().split()))) < 0.5 * len(words | other)
               for j in picked):
            picked.append(int(i))
        if len(picked) == 3:
            break
    usefulness = int(round(max(0.0, min(1.0, float(np.mean(sims[picked])))) * 100))
    answer = " ".join(f"{sentences[i][1]} [{sentences[i][0]}]" for i in picked)
    return MapAnswer(batch.index, batch.community_ids, usefulness, answer)


def batch_citable(batch: Batch) -> set[str]:
    """The ids a map answer may cite: the batch's communities and the claims and passages labelled
    in its content (dataflows/common/citations.py)."""
    return citable_ids(batch.content) | set(batch.community_ids) | {f"community {c}" for c in batch.community_ids}


def _validated_against(allowed: Callable[[], set[str]]):
    """`validated`, then the citation rule: made-up ids are removed, and an answer that cites
    only made-up ids is unusable (so it is retried like any other bad reply). The ids are asked
    for only once a reply is there: they may still be being gathered while the call runs."""

    def check(text: str) -> tuple[str, int, list[str]]:
        answer, usefulness = validated(text)
        checked = checked_citations(answer, allowed())
        if checked.removed and not checked.cited:
            raise ReplyInvalid(f"cited only ids that were not in its batch ({', '.join(checked.removed[:3])})")
        return checked.text, usefulness, checked.removed

    return check


def map_one(job: MapJob, query: str, chat_model: ChatModel, embedder: Embedder, max_tokens: int,
            stop: threading.Event | None = None, citable: Callable[[], set[str]] | None = None) -> MapAnswer:
    """One batch: one LLM call plus at most one retry when the reply is unusable. `citable` gives
    the batch's ids when another thread gathers them during the call (global_map.py)."""
    batch = job.batch
    if chat_model.offline:
        qvec = np.asarray(embedder.embed_queries([query])[0], dtype=np.float32)
        offline = _offline_map(batch, qvec, embedder)
        offline.citable = sorted(batch_citable(batch))
        return offline
    ids = citable or functools.cache(functools.partial(batch_citable, batch))
    asked = ask(chat_model, job.prompt, _validated_against(ids), json_mode=True, max_tokens=max_tokens,
                attempts=2, stop=stop)
    allowed = ids()
    if asked.value is None:
        return MapAnswer(batch.index, batch.community_ids, 0, "", asked.attempts, asked.error[:300],
                         usage=asked.usage)
    answer, usefulness, removed = asked.value
    return MapAnswer(batch.index, batch.community_ids, usefulness, answer, asked.attempts, usage=asked.usage,
                     citable=sorted(allowed), removed_citations=removed)
