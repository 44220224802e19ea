"""DRIFT, step 2: the follow-ups, each answered by a local search inside this request.

Depth 1 runs the primer's follow-ups. Each later step asks for new follow-ups from what the
answers so far found (`drift_follow_up.txt`, one call per step), until `drift_depth` steps ran or
no new question came. At most `drift_follow_ups` questions run per step and at most
`drift_concurrency` at once, so the request's cost is bounded by depth × follow-ups local
searches. Offline, a later step's questions ask about the best-matched entity of each answer
that no question has named yet.

The follow-up prompts are rendered inside the loop rather than as a node, because each step's
prompt is made from the previous step's answers; every question asked is in `drift_steps`.
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass, field
from typing import Any

from hamilton.function_modifiers import cache

from graphrag_dag.dataflows.common import waiting
from graphrag_dag.dataflows.common.prompting import PASSTHROUGH_ERRORS, ReplyInvalid, ask, json_object, prompt
from graphrag_dag.dataflows.common.resources import ChatModel, LocalSearcher
from graphrag_dag.dataflows.common.settings import DRIFT
from graphrag_dag.dataflows.drift.primer import Primer, _distinct
from graphrag_dag.dataflows.prompts import current_template

ANSWER_CHARS = 1200  # of each answer shown when asking for the next follow-ups


@dataclass
class DriftStep:
    depth: int
    question: str
    result: Any = None  # the follow-up's LocalResult; None when it failed
    error: str = ""
    ms: float = 0.0

    @property
    def status(self) -> str:
        return "failed" if self.result is None else self.result.status

    def as_json(self) -> dict[str, Any]:
        r = self.result
        return {"depth": self.depth, "question": self.question, "status": self.status,
                "answer": r.answer.text if r else "", "answer_method": r.answer.method if r else "none",
                "matched_entities": [m.name for m in r.matched_entities] if r else [],
                "communities": [c.id for c in r.selection.communities] if r else [],
                "evidence": [e.id for e in r.evidence] if r else [],
                "sources": [s.unit_id for s in r.sources] if r else [],
                "warnings": r.warnings if r else [], "error": self.error or None, "ms": round(self.ms, 3)}


@dataclass
class DriftSteps:
    steps: list[DriftStep] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    fell_back: bool = False  # a follow-up call's reply could not be used


@cache(behavior="recompute")
def follow_up_template() -> str:
    return current_template("drift_follow_up")


def _run(searcher: LocalSearcher, depth: int, question: str) -> DriftStep:
    started = time.perf_counter()
    try:
        result = searcher.search(question)
    except PASSTHROUGH_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001 - one failed follow-up leaves the others standing
        return DriftStep(depth, question, None, f"{type(exc).__name__}: {exc}", (time.perf_counter() - started) * 1000)
    return DriftStep(depth, question, result, "", (time.perf_counter() - started) * 1000)


def _findings(primer: Primer, steps: list[DriftStep]) -> str:
    lines = [f"Draft: {primer.draft}"] if primer.draft else []
    for s in steps:
        lines.append(f"Follow-up: {s.question}\nAnswer: {(s.result.answer.text if s.result else '(failed)')[:ANSWER_CHARS]}")
    return "\n\n".join(lines)


def _questions(text: str) -> list[str]:
    value = json_object(text, "{follow_up_questions}").get("follow_up_questions")
    if not isinstance(value, list) or not all(isinstance(q, str) for q in value):
        raise ReplyInvalid("was not valid JSON {follow_up_questions: [string]}")
    return value


def _next_by_rules(steps: list[DriftStep], asked: list[str]) -> list[str]:
    said = " ".join(asked).casefold()
    out = []
    for s in steps:
        for m in (s.result.matched_entities if s.result else [])[:3]:
            if m.name.casefold() not in said:
                out.append(f"What is {m.name}?")
                said += " " + m.name.casefold()
                break
    return out


def drift_steps(query: str, drift_primer: Primer, local_searcher: LocalSearcher, chat_model: ChatModel,
                follow_up_template: str, drift_follow_ups: int = DRIFT.drift_follow_ups,
                drift_depth: int = DRIFT.drift_depth, drift_concurrency: int = DRIFT.drift_concurrency) -> DriftSteps:
    """Every follow-up's local search, step by step, within the depth and width bounds."""
    out = DriftSteps()
    asked = [query]
    questions = _distinct(drift_primer.follow_ups, *asked)[:drift_follow_ups]
    with waiting.thread_pool(drift_concurrency, "drift") as pool:
        for depth in range(1, drift_depth + 1):
            if not questions:
                break
            asked += questions
            futures = [pool.submit(contextvars.copy_context().run, _run, local_searcher, depth, q) for q in questions]
            done = [waiting.result(f) for f in futures]
            out.steps += done
            if depth == drift_depth:
                break
            if chat_model.offline:
                proposed = _next_by_rules(done, asked)
            else:
                p = prompt("follow_up", follow_up_template, query=query, follow_ups=str(drift_follow_ups),
                           findings=_findings(drift_primer, out.steps))
                got = ask(chat_model, p, _questions, json_mode=True, attempts=2)
                if got.value is None:
                    out.warnings.append(got.warning(f"DRIFT follow-ups after step {depth}", "stopped there"))
                    out.fell_back = True
                    break
                proposed = got.value
            questions = _distinct(proposed, *asked)[:drift_follow_ups]
    return out
