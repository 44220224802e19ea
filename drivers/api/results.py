"""The JSON contract of `query --json` (docs/contract.md), built from a run's values."""

from __future__ import annotations

from typing import Any


def result_json(run: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "method": run.flow,
        "namespace": run.namespace,
        "query": run.query,
        "offline": run.offline,
    }
    if run.flow in ("local", "basic"):  # basic answers in local search's shape
        res = run.values.get(f"{run.flow}_result")
        if res is None:
            raise ValueError(f"{run.flow}_result was not computed")
        base.update({
            "status": res.status,
            "answer": res.answer.text,
            "answer_method": res.answer.method,
            "warnings": res.warnings,
            "parsed_query": res.parsed_query.as_json(),
            "matched_entities": [m.as_json() for m in res.matched_entities],
            "communities": [c.as_json() for c in res.selection.communities],
            "evidence": [e.as_json() for e in res.evidence],
            "sources": [s.as_json() for s in res.sources],
        })
    elif run.flow == "drift":
        res = run.values.get("drift_result")
        if res is None:
            raise ValueError("drift_result was not computed")
        base.update(res.as_json())
    else:
        res = run.values.get("global_result")
        if res is None:
            raise ValueError("global_result was not computed")
        base.update(res.as_json())
    base["timings_ms"] = run.timings_ms()
    base["trace"] = [{"node": t.node, "ms": round(t.ms, 3), "cached": t.cached} for t in run.trace]
    base["llm"] = run.llm_json()
    return base
