"""`graphrag-dag bench`: latency per stage and in total over generated queries, peak memory and
LLM calls, reproducible for a seed.

Queries are made from the namespace's own entities (a sample drawn once): plain mentions, typos
and paraphrases naming two entities, so every channel is exercised. The first `warmup` queries
load the per-version name index and warm the server's buffers; they are not counted.
"""

from __future__ import annotations

import os
import random
import resource
import statistics
import time
from typing import Any, Callable

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.drivers.llm.chat import ChatConfig
from graphrag_dag_tools import load_avg

SAMPLE_SQL = """
SELECT name FROM entities
WHERE namespace = %(ns)s AND NOT synthesized AND length(name) BETWEEN 3 AND 60
ORDER BY md5(id || %(seed)s) LIMIT %(n)s
"""


def _typo(name: str, rng: random.Random) -> str:
    letters = [i for i, ch in enumerate(name) if ch.isalpha()]
    if len(letters) < 4:
        return name
    i = rng.choice(letters[1:-1])
    return name[:i] + name[i + 1] + name[i] + name[i + 2:] if i + 1 < len(name) else name


def generate_queries(rag: Any, namespace: str, count: int, seed: int = 0) -> list[str]:
    names = [r[0] for r in rag.store.scoped(namespace).rows(SAMPLE_SQL, {"ns": namespace, "seed": str(seed),
                                                                         "n": max(2, count * 2)})]
    if not names:
        raise BadInput(f"namespace {namespace!r} has no entities to build queries from")
    rng = random.Random(seed)
    forms: list[Callable[[], str]] = [
        lambda: f"What is {rng.choice(names).title()} known for?",
        lambda: f"Tell me about {_typo(rng.choice(names).title(), rng)}",
        lambda: f"How are {rng.choice(names).title()} and {rng.choice(names).title()} connected?",
        lambda: f"what role does {rng.choice(names).lower()} play",
    ]
    return [forms[i % len(forms)]() for i in range(count)]


def percentile(values: list[float], q: float) -> float:
    """The q-quantile, linear between the two nearest ranks (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _summary(values: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 0.5), 3), "p95": round(percentile(values, 0.95), 3),
            "mean": round(statistics.fmean(values), 3) if values else 0.0}


def _busy_ms(trace: list[Any]) -> float:
    """How long at least one node was running: the union of the nodes' intervals."""
    spans = sorted((e.ended - e.ms / 1000, e.ended) for e in trace)
    busy, reach = 0.0, float("-inf")
    for start, end in spans:
        if end > reach:
            busy += end - max(start, reach)
            reach = end
    return busy * 1000


def run_bench(rag: Any, namespace: str, *, queries: int = 50, method: str = "local",
              llm_latency_ms: float | None = None, concurrency: int = 4, seed: int = 0, warmup: int = 5,
              progress: Callable[[str], None] | None = None, config: dict[str, str] | None = None,
              prewarm: bool = False) -> dict[str, Any]:
    from graphrag_dag.drivers.api import GlobalOptions, LocalOptions

    if method not in ("local", "global"):
        raise BadInput(f"unknown method {method!r}: use local or global")
    if queries <= 0:
        raise BadInput("--queries must be a positive integer")
    warmup = max(1, warmup)
    load_before = load_avg()
    texts = generate_queries(rag, namespace, queries + warmup, seed)
    chat = ChatConfig(stand_in_latency_ms=llm_latency_ms) if llm_latency_ms is not None else ChatConfig()

    def options() -> Any:
        return LocalOptions() if method == "local" else GlobalOptions(map_concurrency=concurrency, seed=seed)

    # A server that has just started (or served other namespaces) reads most pages from the OS;
    # `prewarm` measures one that has read this namespace into its buffers (`graphrag-dag warm`),
    # for local search after the in-memory indexes are built (GraphRag.warm_for_search).
    warmed = None
    if prewarm:
        warmed = rag.warm_for_search(namespace)[1] if method == "local" else rag.warm(namespace)
    for text in texts[:warmup]:  # load the name index and warm the buffers; not counted
        rag.run(method, text, namespace, options=options(), chat=chat, config=config)
    totals: list[float] = []
    stages: dict[str, list[float]] = {}
    overhead: list[float] = []
    hamilton: list[float] = []
    calls = 0
    tokens = {"prompt": 0, "completion": 0}
    by_stage: dict[str, dict[str, int]] = {}
    statements: dict[str, list[float]] = {}
    db_ms: dict[str, list[float]] = {}
    batches: list[int] = []
    for i, text in enumerate(texts[warmup:], 1):
        t0 = time.perf_counter()
        run = rag.run(method, text, namespace, options=options(), chat=chat, config=config)
        total = (time.perf_counter() - t0) * 1000
        totals.append(total)
        node_ms = run.timings_ms()
        for node, ms in node_ms.items():
            stages.setdefault(node, []).append(ms)
        busy = _busy_ms(run.trace)  # nodes of a task executor may run at once: count that time once
        overhead.append(max(0.0, total - busy))
        hamilton.append(max(0.0, run.execute_ms - busy))
        calls += run.usage.calls
        tokens["prompt"] += run.usage.prompt_tokens
        tokens["completion"] += run.usage.completion_tokens
        for stage, used in run.usage.by_stage.items():
            mine = by_stage.setdefault(stage, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
            for key in mine:
                mine[key] += used[key]
        for entry in run.trace:
            statements.setdefault(entry.node, []).append(entry.statements)
            db_ms.setdefault(entry.node, []).append(entry.db_ms)
        if method == "global":
            batches.append(len(run.values["global_result"].map_answers))
        if progress and i % max(1, queries // 10) == 0:
            progress(f"bench: {i}/{queries} queries")
    out: dict[str, Any] = {
        "method": method,
        "queries": queries,
        "total_ms": _summary(totals),
        "stages_ms": {node: {k: v for k, v in _summary(v).items() if k != "mean"} for node, v in stages.items()},
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "llm_calls": calls,
        # per query: tokens as the model's tokenizer counts them, and database statements
        "llm_tokens": {k: round(v / queries, 1) for k, v in tokens.items()},
        "llm_by_stage": {stage: {k: round(v / queries, 1) for k, v in used.items()} for stage, used in by_stage.items()},
        "config": dict(config or {}),
        "prewarm": {"read_mb": warmed.read_mb, "seconds": warmed.seconds} if warmed else None,
        "db_statements": round(sum(sum(v) for v in statements.values()) / queries, 2),
        "stages_db": {node: {"statements": round(statistics.fmean(statements[node]), 2),
                             "db_ms_p50": round(percentile(db_ms[node], 0.5), 3)}
                      for node in statements if any(statements[node]) or any(db_ms[node])},
        # Time outside the nodes (Hamilton plus our per-request setup), as a share of the total.
        "overhead_pct": round(100 * statistics.fmean(overhead) / max(statistics.fmean(totals), 1e-9), 2),
        # Hamilton's own share: time inside its execute that no node accounts for.
        "hamilton_overhead_pct": round(100 * statistics.fmean(hamilton) / max(statistics.fmean(totals), 1e-9), 2),
    }
    if method == "global":
        out["batches"] = _summary([float(b) for b in batches])
    # What the timings were taken on (the guide's rule: speed is reported with the machine's load,
    # and a shared machine's load changes within minutes, so both ends of the run are given).
    out["machine"] = {"cpus": os.cpu_count(), "load_avg_start": load_before, "load_avg": load_avg()}
    out["server"] = rag.store.memory_settings()
    return out
