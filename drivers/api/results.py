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


DETAILS = ("brief", "full")
BRIEF_SOURCES = 5  # evidence passages a brief result shows
BRIEF_COMMUNITIES = 5
BRIEF_SNIPPET_CHARS = 300
BRIEF_ANSWER_CHARS = 4000  # about 1,000 tokens; a longer answer is cut at a line or sentence end
_CUT_NOTE = "\n… (cut for the brief result: detail \"full\" holds the whole answer)"


def _snippet(text: str, limit: int) -> str:
    flat = " ".join((text or "").split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    return (cut[: cut.rfind(" ")] if " " in cut[limit // 2:] else cut) + "…"


def _brief_answer(answer: str) -> str:
    if len(answer) <= BRIEF_ANSWER_CHARS:
        return answer
    head = answer[:BRIEF_ANSWER_CHARS]
    end = max(head.rfind("\n"), head.rfind(". ") + 1)
    return (head[:end] if end > BRIEF_ANSWER_CHARS // 2 else head).rstrip() + _CUT_NOTE


def brief_json(result: dict[str, Any]) -> dict[str, Any]:
    """A result an agent can afford to read: the answer (cut past about 1,000 tokens), status and
    warnings, the top evidence passages (those the answer cites first) as snippets of at most
    BRIEF_SNIPPET_CHARS with the ids `get_source` takes, and the communities with the ids
    `community_details` takes. Everything else (stages, scores, map answers, timings) is in the
    full result."""
    from graphrag_dag.dataflows.common.citations import citable_ids

    answer = result.get("answer") or ""
    cited = citable_ids(answer)
    out: dict[str, Any] = {k: result[k] for k in ("method", "namespace", "query", "status", "offline",
                                                  "answer_method", "warnings", "error") if k in result}
    out["answer"] = _brief_answer(answer)
    titles = {s.get("document_id"): s.get("title") for s in result.get("sources", []) if s.get("title")}
    evidence = sorted(result.get("evidence", []), key=lambda e: (e["id"] not in cited and e.get("chunk_id") not in cited))
    out["sources"] = [{"evidence_id": e["id"], "kind": e.get("kind"), "document_id": e.get("document_id"),
                       "title": titles.get(e.get("document_id")),
                       "snippet": _snippet(e.get("statement") or e.get("text") or "", BRIEF_SNIPPET_CHARS)}
                      for e in evidence[:BRIEF_SOURCES]]
    communities = result.get("communities") or result.get("primer", {}).get("communities") or []
    if communities:
        out["communities"] = [{"id": c["id"], "title": c.get("title")} for c in communities[:BRIEF_COMMUNITIES]]
    else:  # global: the communities the answer cites, else those of the most useful map answers
        maps = sorted(result.get("map_answers", []), key=lambda m: -(m.get("usefulness") or 0))
        known = [cid for m in maps for cid in m.get("community_ids", [])]
        ids = [cid for cid in dict.fromkeys(known) if cid in cited] or list(dict.fromkeys(known))
        out["communities"] = [{"id": cid} for cid in ids[:BRIEF_COMMUNITIES]]
    out["detail"] = "brief"
    return out
