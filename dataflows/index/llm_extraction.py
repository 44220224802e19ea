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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from hamilton.function_modifiers import cache

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


def extractions(text_units: list[Chunk], extraction_prompts: list[Prompt], gleaning_template: str,
                chat_model: ChatModel, extraction_cache: ExtractionCache,
                extraction_concurrency: int = INDEX.extraction_concurrency, gleanings: int = INDEX.gleanings,
                progress: Any = None) -> Extractions:
    if chat_model.offline:
        return Extractions(False)
    out = Extractions(True)
    todo: list[tuple[Chunk, Prompt, str]] = []
    for unit, p in zip(text_units, extraction_prompts, strict=True):
        key = _key(p, chat_model, gleanings)
        kept = extraction_cache.get(key)
        if kept is not None:
            out.by_unit[unit.id] = _validated(kept)
            out.cache_hits += 1
        else:
            todo.append((unit, p, key))
    stop = threading.Event()

    def run(job: tuple[Chunk, Prompt, str]) -> tuple[Chunk, str, Any]:
        unit, p, key = job
        asked = ask(chat_model, p, _validated, json_mode=True, attempts=2, stop=stop)
        for _ in range(gleanings if asked.value is not None else 0):
            more = ask(chat_model, prompt("glean", gleaning_template, text=unit.text, found=_as_json(asked.value)),
                       _validated, json_mode=True, stop=stop)
            asked.usage["calls"] += more.usage["calls"]
            if more.value is None or not (more.value.entities or more.value.relationships or more.value.claims):
                break
            asked.value = _merged(asked.value, more.value)
        return unit, key, asked

    with ThreadPoolExecutor(max_workers=extraction_concurrency, thread_name_prefix="extract") as pool:
        futures = [pool.submit(run, job) for job in todo]
        try:
            for n, future in enumerate(futures, 1):
                unit, key, asked = future.result()
                if progress is not None and (n == len(futures) or n % max(1, len(futures) // 50) == 0):
                    progress(f"extraction: {n}/{len(futures)}")
                if asked.value is None:
                    out.warnings.append(f"text unit {unit.id} skipped: extraction by LLM {asked.problem}")
                    continue
                extraction_cache.put(key, _as_json(asked.value))
                out.by_unit[unit.id] = asked.value
        except Cancelled:
            stop.set()
            for f in futures:
                f.cancel()
            raise
    return out
