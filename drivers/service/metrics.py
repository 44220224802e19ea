"""Prometheus metrics of one service: requests, request latency, latency per stage node and LLM
usage. Each app has its own registry, so two apps in one process (tests) never share counts."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from graphrag_dag.drivers.service.runner import Observed

# Local stages take from a fraction of a millisecond to a few hundred; requests up to minutes.
STAGE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60)
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("graphrag_requests", "HTTP requests by route and status",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("graphrag_request_seconds", "HTTP request latency by route", ["route"],
                                 buckets=REQUEST_BUCKETS, registry=self.registry)
        self.stages = Histogram("graphrag_stage_seconds", "time per DAG node of a search", ["flow", "node"],
                                buckets=STAGE_BUCKETS, registry=self.registry)
        self.llm_calls = Counter("graphrag_llm_calls", "LLM calls by stage", ["stage"], registry=self.registry)
        self.llm_tokens = Counter("graphrag_llm_tokens", "LLM tokens by stage and kind", ["stage", "kind"],
                                  registry=self.registry)

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def search(self, observed: Observed) -> None:
        for node, ms in observed.stages:
            self.stages.labels(observed.flow, node).observe(ms / 1000.0)
        for stage, usage in observed.llm_by_stage.items():
            self.llm_calls.labels(stage).inc(usage.get("calls", 0))
            self.llm_tokens.labels(stage, "prompt").inc(usage.get("prompt_tokens", 0))
            self.llm_tokens.labels(stage, "completion").inc(usage.get("completion_tokens", 0))

    def text(self) -> bytes:
        return generate_latest(self.registry)
