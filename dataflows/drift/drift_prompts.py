"""DRIFT's prompts as nodes: each template as it is on disk, and the prompts that can be rendered
before the run (the follow-up prompts depend on earlier answers; dataflows/drift/follow_ups.py)."""

from __future__ import annotations

from dataclasses import dataclass

from hamilton.function_modifiers import cache

from graphrag_dag.dataflows.common.prompting import Prompt, prompt, render
from graphrag_dag.dataflows.common.resources import TokenCounter
from graphrag_dag.dataflows.common.settings import DRIFT
from graphrag_dag.dataflows.drift.follow_ups import DriftSteps
from graphrag_dag.dataflows.drift.primer import Primer, PrimerReport
from graphrag_dag.dataflows.prompts import current_template

REPORT_CHARS = 1500  # of each report the primer reads
EVIDENCE_CHARS = 300  # of each evidence text in the reduce findings
EVIDENCE_PER_STEP = 6
REDUCE_RESERVE = 1024  # tokens of the reduce budget kept for the reply


@cache(behavior="recompute")
def primer_template() -> str:
    return current_template("drift_primer")


@cache(behavior="recompute")
def drift_reduce_template() -> str:
    return current_template("drift_reduce")


def primer_prompt(primer_template: str, query: str, primer_reports: list[PrimerReport],
                  drift_follow_ups: int = DRIFT.drift_follow_ups) -> Prompt:
    reports = "\n\n".join(f"[community {r.community_id}] {r.title}: {r.summary[:REPORT_CHARS]}" for r in primer_reports)
    return prompt("primer", primer_template, query=query, follow_ups=str(drift_follow_ups), reports=reports)


@dataclass
class ReduceFindings:
    text: str  # the findings as they stand in the reduce prompt
    steps_cut: int  # follow-ups left out for the budget


def _step_block(step, evidence: bool) -> str:
    lines = [f"Follow-up {step.depth}: {step.question}", f"Answer: {step.result.answer.text}"]
    if evidence:
        for e in step.result.evidence[:EVIDENCE_PER_STEP]:
            text = e.statement if e.kind == "claim" else e.text
            lines.append(f"- [{e.id}] {' '.join(text.split())[:EVIDENCE_CHARS]}")
    return "\n".join(lines)


def reduce_findings(drift_primer: Primer, drift_steps: DriftSteps, query: str, drift_reduce_template: str,
                    token_counter: TokenCounter,
                    drift_reduce_budget: int = DRIFT.drift_reduce_budget) -> ReduceFindings:
    """The draft, then each follow-up's answer with its evidence, in step order, while the prompt
    fits the budget: a step that does not fit with its evidence enters with its answer alone."""
    limit = drift_reduce_budget - REDUCE_RESERVE
    blocks = [f"Draft from community reports:\n{drift_primer.draft}"] if drift_primer.draft else []
    fits = lambda bs: token_counter.count(render(drift_reduce_template, query=query, findings="\n\n".join(bs))) <= limit  # noqa: E731
    cut = 0
    for step in drift_steps.steps:
        if step.result is None:
            continue
        for block in (_step_block(step, True), _step_block(step, False)):
            if fits([*blocks, block]):
                blocks.append(block)
                break
        else:
            cut += 1
    return ReduceFindings("\n\n".join(blocks), cut)


def drift_reduce_prompt(drift_reduce_template: str, query: str, reduce_findings: ReduceFindings) -> Prompt:
    return prompt("drift_reduce", drift_reduce_template, query=query, findings=reduce_findings.text)
