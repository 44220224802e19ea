"""`graphrag-dag eval DIR`: every system on one benchmark, scored by the same code in one run.

Ours is the top of local search's `sources`; `basic` is our naive-RAG method over the same
namespace and embedder; BM25, dense and their hybrid rank the benchmark's passages directly; the
published systems are read from published_top8.json. Searches run offline: the sources do not
need an LLM, and an offline run is deterministic. A namespace is the benchmark's corpus indexed
offline into a scratch namespace (dropped afterwards), or the one `--namespace` names (say, an
imported Microsoft GraphRAG index of the same corpus).

A namespace's documents are matched to passage titles by their title, else by their first line
(Microsoft GraphRAG's input files start with the passage title and are named after files).
"""

from __future__ import annotations

import hashlib
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.drivers.tools.quality.baselines import Bm25, Dense, hybrid
from graphrag_dag.drivers.tools.quality.benchmark import Benchmark, load_benchmark
from graphrag_dag.drivers.tools.quality.metrics import KS, score

TOP = 8  # distinct passages each system is scored on, as published


@dataclass
class SystemRun:
    name: str
    kind: str  # "graphrag-dag", "baseline" or "published"
    ranked: dict[str, list[str]] = field(default_factory=dict)  # question id → titles, best first
    latencies_ms: list[float] = field(default_factory=list)

    def as_json(self, bench: Benchmark) -> dict[str, Any]:
        s = score(bench.questions, self.ranked)
        return {"system": self.name, "kind": self.kind, "all_recall_at_8": round(s.all_recall_at_8, 4),
                **{f"recall_at_{k}": round(s.recall[k], 4) for k in KS}, "mrr": round(s.mrr, 4),
                "p50_ms": round(statistics.median(self.latencies_ms), 2) if self.latencies_ms else None}


def _title_of_documents(rag: Any, namespace: str, titles: set[str]) -> dict[str, str]:
    rows = rag.store.scoped(namespace).rows("SELECT id, title, split_part(text, E'\\n', 1) FROM documents "
                                            "WHERE namespace = %(ns)s", {"ns": namespace})
    return {doc: (title if title in titles else first.strip() if first.strip() in titles else title)
            for doc, title, first in rows}


def _ours(rag: Any, bench: Benchmark, namespace: str, method: str, title_of: dict[str, str]) -> SystemRun:
    run = SystemRun(f"graphrag-dag {method}", "graphrag-dag")
    for q in bench.questions:
        started = time.perf_counter()
        out = rag.run(method, q.question, namespace, offline=True)
        run.latencies_ms.append((time.perf_counter() - started) * 1000)
        result = out.values[f"{method}_result"]
        run.ranked[q.id] = [title_of.get(s.document_id or "", "") for s in result.sources][:TOP * 4]
    return run


def _baselines(rag: Any, bench: Benchmark) -> list[SystemRun]:
    titles = [p["title"] for p in bench.passages]
    bm25, dense = Bm25(bench.passages), Dense(bench.passages, rag.embedder)
    runs = {name: SystemRun(name, "baseline") for name in ("bm25", "dense", "hybrid (bm25 + dense, RRF)")}
    for q in bench.questions:
        started = time.perf_counter()
        b = bm25.rank(q.question, len(titles))
        runs["bm25"].latencies_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        d = dense.rank(q.question, len(titles))
        runs["dense"].latencies_ms.append((time.perf_counter() - started) * 1000)
        runs["hybrid (bm25 + dense, RRF)"].latencies_ms.append(runs["bm25"].latencies_ms[-1] +
                                                               runs["dense"].latencies_ms[-1])
        for name, ranked in (("bm25", b), ("dense", d), ("hybrid (bm25 + dense, RRF)", hybrid(b, d))):
            runs[name].ranked[q.id] = [titles[i] for i in ranked[:TOP * 4]]
    return list(runs.values())


def run_eval(rag: Any, folder: str, *, namespace: str | None = None,
             progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    from graphrag_dag.drivers.indexer import IndexOptions, index_corpus

    say = progress or (lambda _line: None)
    bench = load_benchmark(folder)
    scratch = None
    if namespace is not None:
        if not any(n["namespace"] == namespace for n in rag.store.namespaces()):
            raise BadInput(f"namespace {namespace!r} does not exist")
    else:
        digest = hashlib.sha1(str(bench.corpus_path.resolve()).encode()).hexdigest()[:8]
        scratch = namespace = f"eval-{digest}-{os.getpid()}"
        say(f"indexing {len(bench.passages)} passages offline into scratch namespace {scratch!r}")
        index_corpus(rag, [str(bench.corpus_path)], scratch, replace=True, offline=True,
                     options=IndexOptions(text_field="text", title_field="title"))
    try:
        title_of = _title_of_documents(rag, namespace, {p["title"] for p in bench.passages})
        runs = []
        for method in ("local", "basic"):
            say(f"running {len(bench.questions)} questions through {method} search")
            runs.append(_ours(rag, bench, namespace, method, title_of))
        runs += _baselines(rag, bench)
        for system, answers in bench.published.items():
            runs.append(SystemRun(system, "published", {qid: titles[:TOP] for qid, titles in answers.items()}))
    finally:
        if scratch is not None:
            rag.store.drop(scratch)
    return {"benchmark": bench.name, "namespace": None if scratch else namespace, "questions": len(bench.questions),
            "load_avg": [round(x, 2) for x in os.getloadavg()], "systems": [r.as_json(bench) for r in runs]}


def format_table(report: dict[str, Any]) -> str:
    head = ["system", "all@8", "R@2", "R@5", "R@8", "MRR", "p50 ms"]
    rows = [[s["system"], f"{s['all_recall_at_8']:.3f}", f"{s['recall_at_2']:.3f}", f"{s['recall_at_5']:.3f}",
             f"{s['recall_at_8']:.3f}", f"{s['mrr']:.3f}", "-" if s["p50_ms"] is None else f"{s['p50_ms']:.1f}"]
            for s in report["systems"]]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    line = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    where = f"namespace {report['namespace']!r}" if report["namespace"] else "a scratch offline index"
    return "\n".join([f"{report['benchmark']}: {report['questions']} questions on {where} "
                      f"(load average {', '.join(map(str, report['load_avg']))})", line(head),
                      "  ".join("-" * w for w in widths), *map(line, rows)])
