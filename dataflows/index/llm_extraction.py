"""Indexer, stage 3 with an LLM: entities, relationships, claims and aliases per text unit.

One call per text unit (retried once when the reply is not the JSON asked for; a unit that still
fails is skipped with a warning, never a crash), at most `extraction_concurrency` in flight, plus
`gleanings` follow-up calls per unit that ask for what the first reading missed (0 by default;
a gleaning reply that fails is ignored, the first reading stands).
Every reply is kept in the extraction cache under a hash of the prompt as sent and the model's
identity, so a rerun makes no call for text it has seen, and a crashed run keeps what it paid
for. Offline (no model configured) nothing is called and the rule-based extractor is used.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from hamilton.function_modifiers import cache, config

from graphrag_dag.dataflows.common import waiting
from graphrag_dag.dataflows.common.errors import Cancelled
from graphrag_dag.dataflows.common.prompting import Prompt, ReplyInvalid, ask, json_object, prompt
from graphrag_dag.dataflows.common.records import Chunk
from graphrag_dag.dataflows.common.resources import ChatModel, ExtractionCache
from graphrag_dag.dataflows.common.settings import INDEX
from graphrag_dag.dataflows.prompts import current_template

_SHAPE = "{entities, relationships, claims}"


@dataclass
class UnitExtraction:
    entities: list[dict[str, Any]] = field(default_factory=list)
    relationships: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Extractions:
    used_llm: bool
    by_unit: dict[str, UnitExtraction] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    cache_hits: int = 0


def _strings(value: Any) -> list[str]:
    return [v.strip() for v in value if isinstance(v, str) and v.strip()] if isinstance(value, list) else []


def _objects(data: dict, key: str, required: tuple[str, ...]) -> list[dict[str, Any]]:
    items = data.get(key, [])
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise ReplyInvalid(f"was not valid JSON {_SHAPE}")
    out = []
    for item in items:
        if all(isinstance(item.get(r), str) and item[r].strip() for r in required):
            out.append(item)
    return out


def _validated(text: str) -> UnitExtraction:
    """The reply's lists, keeping the items that name what they must (a name, two endpoints, a
    subject); an item of the wrong shape is dropped, a reply of the wrong shape is invalid."""
    data = json_object(text, _SHAPE)
    entities = _objects(data, "entities", ("name",))
    for e in entities:
        e["aliases"] = _strings(e.get("aliases"))
    relationships = _objects(data, "relationships", ("source", "target"))
    for r in relationships:
        s = r.get("strength")
        r["strength"] = float(min(10, max(1, s))) if isinstance(s, (int, float)) and not isinstance(s, bool) else 5.0
    return UnitExtraction(entities, relationships, _objects(data, "claims", ("subject", "description")))


@cache(behavior="recompute")
def extraction_template() -> str:
    return current_template("extract_graph")


@cache(behavior="recompute")
def gleaning_template() -> str:
    return current_template("glean_graph")


def extraction_prompts(text_units: list[Chunk], extraction_template: str) -> list[Prompt]:
    return [prompt("extract", extraction_template, text=u.text) for u in text_units]


def _key(p: Prompt, chat_model: ChatModel, gleanings: int) -> str:
    glean = f"\x00glean{gleanings}" if gleanings else ""
    return hashlib.sha256(f"{chat_model.identity}\x00{p.text}{glean}".encode("utf-8")).hexdigest()


def _merged(first: UnitExtraction, more: UnitExtraction) -> UnitExtraction:
    known = {e["name"].casefold() for e in first.entities}
    return UnitExtraction([*first.entities, *(e for e in more.entities if e["name"].casefold() not in known)],
                          [*first.relationships, *more.relationships], [*first.claims, *more.claims])


def _as_json(x: UnitExtraction) -> str:
    return json.dumps({"entities": x.entities, "relationships": x.relationships, "claims": x.claims},
                      ensure_ascii=False)


@dataclass(frozen=True)
class ExtractionJob:
    """One text unit the cache does not know yet: what to send, and where its reply is kept."""

    index: int
    unit: Chunk
    prompt: Prompt
    key: str


@dataclass
class ExtractionJobs:
    """The replies the cache already holds, and the units still to ask about, in unit order."""

    used_llm: bool
    cached: dict[str, UnitExtraction] = field(default_factory=dict)
    jobs: list[ExtractionJob] = field(default_factory=list)


@dataclass
class ExtractionDone:
    """One job's outcome; `usage` travels back from wherever the job ran (a thread or a Ray task)."""

    job: ExtractionJob
    value: UnitExtraction | None
    problem: str = ""
    usage: dict[str, dict[str, int]] = field(default_factory=dict)  # by stage: extract, glean


def extraction_jobs(text_units: list[Chunk], extraction_prompts: list[Prompt], chat_model: ChatModel,
                    extraction_cache: ExtractionCache, gleanings: int = INDEX.gleanings) -> ExtractionJobs:
    """Split the units into cache hits and calls to make, before any call, so both fan-outs (a
    thread pool here, Hamilton tasks in extraction_tasks.py) see the same work."""
    if chat_model.offline:
        return ExtractionJobs(False)
    out = ExtractionJobs(True)
    for unit, p in zip(text_units, extraction_prompts, strict=True):
        key = _key(p, chat_model, gleanings)
        kept = extraction_cache.get(key)
        if kept is not None:
            out.cached[unit.id] = _validated(kept)
        else:
            out.jobs.append(ExtractionJob(len(out.jobs), unit, p, key))
    return out


def _extracted(job: ExtractionJob, gleaning_template: str, chat_model: ChatModel, extraction_cache: ExtractionCache,
               gleanings: int, stop: threading.Event | None = None) -> ExtractionDone:
    """Ask about one unit (retried once), glean, and keep a usable reply in the cache at once, so a
    crash later in the run has still paid for this call only once."""
    asked = ask(chat_model, job.prompt, _validated, json_mode=True, attempts=2, stop=stop)
    usage = {"extract": dict(asked.usage)}
    for _ in range(gleanings if asked.value is not None else 0):
        more = ask(chat_model, prompt("glean", gleaning_template, text=job.unit.text, found=_as_json(asked.value)),
                   _validated, json_mode=True, stop=stop)
        glean = usage.setdefault("glean", {})
        for k, v in more.usage.items():
            glean[k] = glean.get(k, 0) + v
        if more.value is None or not (more.value.entities or more.value.relationships or more.value.claims):
            break
        asked.value = _merged(asked.value, more.value)
    if asked.value is not None:
        extraction_cache.put(job.key, _as_json(asked.value))
    return ExtractionDone(job, asked.value, asked.problem, usage)


def _collected(extraction_jobs: ExtractionJobs, done: list[ExtractionDone]) -> Extractions:
    out = Extractions(extraction_jobs.used_llm, dict(extraction_jobs.cached),
                      cache_hits=len(extraction_jobs.cached))
    for d in sorted(done, key=lambda d: d.job.index):
        if d.value is None:
            out.warnings.append(f"text unit {d.job.unit.id} skipped: extraction by LLM {d.problem}")
        else:
            out.by_unit[d.job.unit.id] = d.value
    return out


@config.when_not(extraction_fanout="tasks")
def extractions(extraction_jobs: ExtractionJobs, gleaning_template: str, chat_model: ChatModel,
                extraction_cache: ExtractionCache, extraction_concurrency: int = INDEX.extraction_concurrency,
                gleanings: int = INDEX.gleanings, progress: Any = None) -> Extractions:
    """At most `extraction_concurrency` calls in flight; a cancelled request starts no new call."""
    jobs = extraction_jobs.jobs
    done: list[ExtractionDone] = []
    stop = threading.Event()
    with waiting.thread_pool(extraction_concurrency, "extract") as pool:
        futures = [pool.submit(_extracted, job, gleaning_template, chat_model, extraction_cache, gleanings, stop)
                   for job in jobs]
        try:
            for n, future in enumerate(futures, 1):
                done.append(waiting.result(future))
                if progress is not None and (n == len(futures) or n % max(1, len(futures) // 50) == 0):
                    progress(f"extraction: {n}/{len(futures)}")
        except Cancelled:
            stop.set()
            for f in futures:
                f.cancel()
            raise
    return _collected(extraction_jobs, done)
