"""OpenTelemetry spans for DAG runs (optional extra `otel`; nothing else imports this module).

`GraphRag(telemetry=True)` uses the global tracer provider, `GraphRag(telemetry=provider)` a given
one. Each run opens a span `graphrag_dag.<method>` and, under it, one span per executed node
named after the node, with the attributes

    graphrag.namespace, graphrag.method, hamilton.node.name, hamilton.run_id
    graphrag.llm.calls, gen_ai.usage.input_tokens, gen_ai.usage.output_tokens   (nodes that called an LLM)

The adapter is a plain Hamilton lifecycle adapter: it can also be passed to any Hamilton
`driver.Builder().with_adapters(...)`, taking namespace and method from its constructor when it
does not run inside a GraphRag request.
"""

from __future__ import annotations

import threading
from typing import Any

from hamilton.lifecycle import api as lifecycle

try:
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("telemetry needs OpenTelemetry: pip install 'graphrag-dag[otel]'") from exc

TRACER_NAME = "graphrag_dag"


class OtelAdapter(lifecycle.NodeExecutionHook, lifecycle.GraphExecutionHook):
    def __init__(self, tracer_provider: Any = None, *, namespace: str = "", method: str = "") -> None:
        self.tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
        self.namespace = namespace
        self.method = method
        self._lock = threading.Lock()
        self._roots: dict[str, Any] = {}
        self._spans: dict[tuple[str, str | None, str], tuple[Any, tuple[int, int, int] | None]] = {}

    # -- per-run context ---------------------------------------------------------------------------

    def _context(self) -> tuple[str, str, Any]:
        from graphrag_dag.drivers.runtime.engine import current_run

        state = current_run.get()
        if state is None:
            return self.namespace, self.method, None
        return state.namespace or self.namespace, state.flow or self.method, state.usage

    @staticmethod
    def _usage(usage: Any) -> tuple[int, int, int] | None:
        if usage is None:
            return None
        return usage.calls, usage.prompt_tokens, usage.completion_tokens

    # -- graph ---------------------------------------------------------------------------------

    def run_before_graph_execution(self, *, run_id: str, final_vars: Any = (), **kwargs: Any) -> None:
        namespace, method, _ = self._context()
        span = self.tracer.start_span(f"graphrag_dag.{method or 'run'}", attributes={
            "graphrag.namespace": namespace, "graphrag.method": method, "hamilton.run_id": run_id,
            "hamilton.final_vars": [str(v) for v in final_vars or ()],
        })
        with self._lock:
            self._roots[run_id] = span

    def run_after_graph_execution(self, *, run_id: str, success: bool = True, error: Exception | None = None,
                                  **kwargs: Any) -> None:
        with self._lock:
            span = self._roots.pop(run_id, None)
        if span is not None:
            _finish(span, success, error)

    # -- nodes ---------------------------------------------------------------------------------

    def run_before_node_execution(self, *, node_name: str, run_id: str, task_id: str | None = None,
                                  **kwargs: Any) -> None:
        namespace, method, usage = self._context()
        with self._lock:
            root = self._roots.get(run_id)
        parent = trace.set_span_in_context(root) if root is not None else None
        span = self.tracer.start_span(node_name, context=parent, attributes={
            "graphrag.namespace": namespace, "graphrag.method": method, "hamilton.node.name": node_name,
            "hamilton.run_id": run_id,
        })
        with self._lock:
            self._spans[(run_id, task_id, node_name)] = (span, self._usage(usage))

    def run_after_node_execution(self, *, node_name: str, run_id: str, task_id: str | None = None,
                                 success: bool = True, error: Exception | None = None, **kwargs: Any) -> None:
        with self._lock:
            span, before = self._spans.pop((run_id, task_id, node_name), (None, None))
        if span is None:
            return
        after = self._usage(self._context()[2])
        if before is not None and after is not None and after[0] > before[0]:
            span.set_attribute("graphrag.llm.calls", after[0] - before[0])
            span.set_attribute("gen_ai.usage.input_tokens", after[1] - before[1])
            span.set_attribute("gen_ai.usage.output_tokens", after[2] - before[2])
        _finish(span, success, error)


def _finish(span: Any, success: bool, error: Exception | None) -> None:
    if not success:
        if error is not None:
            span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, type(error).__name__ if error else "failed"))
    span.end()
