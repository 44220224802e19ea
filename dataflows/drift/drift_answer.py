"""DRIFT, step 3: the answer from the primer's draft and every follow-up, and the result.

The result keeps the evidence and sources of every step, in step order, so each claim of the
answer can be traced to the passage it came from. Status follows the contract: `no_results`
when nothing was found, `failed` when every follow-up search failed, `partial` when some did or
an LLM reply could not be used, `completed` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graphrag_dag.dataflows.common.citations import citable_ids, usable_prose
from graphrag_dag.dataflows.common.prompting import Prompt, ask
from graphrag_dag.dataflows.common.resources import ChatModel
from graphrag_dag.dataflows.drift.drift_prompts import ReduceFindings
from graphrag_dag.dataflows.drift.follow_ups import DriftSteps
from graphrag_dag.dataflows.drift.primer import Primer, PrimerReport


@dataclass
class DriftAnswer:
    text: str
    method: str  # "llm", "extractive" or "none"
    warnings: list[str] = field(default_factory=list)
    fell_back: bool = False


def _extractive(primer: Primer, steps: DriftSteps, header: str) -> str:
    lines = [header]
    if primer.draft:
        lines += ["From the community reports:", primer.draft]
    for s in steps.steps:
        if s.result is None:
            continue
        first = [ln for ln in s.result.answer.text.splitlines() if ln.startswith("- ")][:2]
        if first:
            lines += [f"{s.question}", *first]
    return "\n".join(lines) if len(lines) > 1 else "No relevant information was found in the index for this question."


def drift_answer(drift_primer: Primer, drift_steps: DriftSteps, reduce_findings: ReduceFindings,
                 drift_reduce_prompt: Prompt, chat_model: ChatModel) -> DriftAnswer:
    """The LLM's reduce over the findings; offline, or when the reply is unusable, the draft and
    each follow-up's best sentences, with their citations."""
    if not reduce_findings.text.strip():
        return DriftAnswer("No relevant information was found in the index for this question.", "none")
    if chat_model.offline:
        return DriftAnswer(_extractive(drift_primer, drift_steps, "Offline DRIFT answer (no LLM configured):"),
                           "extractive")
    allowed = citable_ids(reduce_findings.text)
    asked = ask(chat_model, drift_reduce_prompt, lambda text: usable_prose(text, allowed))
    if asked.value is None:
        return DriftAnswer(_extractive(drift_primer, drift_steps, "Extractive answer (the LLM answer was unavailable):"),
                           "extractive", [asked.warning("the DRIFT reduce", "returned an extractive answer")], True)
    return DriftAnswer(asked.value.text, "llm", asked.value.warning("the DRIFT answer"))


@dataclass
class DriftResult:
    primer_reports: list[PrimerReport]
    primer: Primer
    steps: DriftSteps
    findings: ReduceFindings
    answer: DriftAnswer

    @property
    def sources(self) -> list[Any]:
        """Every step's ranked sources, in step order, each once."""
        out: dict[str, Any] = {}
        for s in self.steps.steps:
            for src in (s.result.sources if s.result else []):
                out.setdefault(src.unit_id, src)
        return list(out.values())

    @property
    def evidence(self) -> list[Any]:
        """Every step's evidence, in step order, each item once."""
        out: dict[str, Any] = {}
        for s in self.steps.steps:
            for item in (s.result.evidence if s.result else []):
                out.setdefault(item.id, item)
        return list(out.values())

    @property
    def status(self) -> str:
        ran = self.steps.steps
        if ran and all(s.result is None for s in ran):
            return "failed"
        found = any(s.result is not None and s.result.status == "completed" for s in ran)
        if not found and not self.primer_reports:
            return "no_results"
        fell_back = self.primer.fell_back or self.steps.fell_back or self.answer.fell_back
        return "partial" if fell_back or any(s.result is None for s in ran) else "completed"

    def as_json(self) -> dict[str, Any]:
        evidence: dict[str, Any] = {}
        for s in self.steps.steps:
            for e in (s.result.evidence if s.result else []):
                evidence.setdefault(e.id, e.as_json())
        failed = [s for s in self.steps.steps if s.result is None]
        warnings = [*self.primer.warnings, *self.steps.warnings, *self.answer.warnings]
        warnings += [f"follow-up {s.question!r} failed: {s.error}" for s in failed]
        if self.findings.steps_cut:
            warnings.append(f"{self.findings.steps_cut} follow-up answers did not fit the reduce budget")
        return {"status": self.status, "answer": self.answer.text, "answer_method": self.answer.method,
                "warnings": warnings,
                "error": (f"every follow-up search failed ({len(failed)}); first error: {failed[0].error}"
                          if self.status == "failed" else None),
                "primer": {"communities": [r.as_json() for r in self.primer_reports], "draft": self.primer.draft,
                           "follow_ups": self.primer.follow_ups, "method": self.primer.method},
                "steps": [s.as_json() for s in self.steps.steps],
                "evidence": list(evidence.values()), "sources": [src.as_json() for src in self.sources]}


def drift_result(primer_reports: list[PrimerReport], drift_primer: Primer, drift_steps: DriftSteps,
                 reduce_findings: ReduceFindings, drift_answer: DriftAnswer) -> DriftResult:
    return DriftResult(primer_reports, drift_primer, drift_steps, reduce_findings, drift_answer)
