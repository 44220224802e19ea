"""What `GraphRag.run` returns: a flow's requested values, its trace and its LLM usage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphrag_dag.drivers.runtime import engine


@dataclass
class RunOutput:
    flow: str
    query: str
    namespace: str
    values: dict[str, Any]
    trace: list["engine.TraceEntry"]
    usage: Any
    offline: bool
    run_id: str | None
    driver: Any = field(repr=False, default=None)
    execute_ms: float = 0.0  # time inside Hamilton's execute, nodes included

    def timings_ms(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for t in self.trace:
            out[t.node] = round(out.get(t.node, 0.0) + t.ms, 3)
        return out

    def llm_json(self) -> dict[str, Any]:
        u = self.usage
        return {"calls": u.calls, "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                "by_stage": u.by_stage}

    def as_json(self) -> dict[str, Any]:
        from graphrag_dag.drivers.api.results import result_json

        return result_json(self)
