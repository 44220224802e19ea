"""`graphrag-dag eval DIR`: every system on one benchmark, scored by the same code in one run.

Ours is the top of local search's `sources`; `basic` is our naive-RAG method over the same
namespace and embedder; BM25, dense and their hybrid rank the benchmark's passages directly; the
published systems are read from published_top8.json; with `--graphrag-python PY` (a Python that
has Microsoft GraphRAG, which is not our dependency), GraphRAG's own local-search context builder
runs on the namespace exported as GraphRAG v3, and the text units it puts in its context are its
ranking (graphrag_context_sources.py). Each `--variant` (default: ranking=weighted) is local search
once more under those config switches, so a switch is measured against the default in one run.
Searches run offline: the sources do not
need an LLM, and an offline run is deterministic. A namespace is the benchmark's corpus indexed
offline into a scratch namespace (dropped afterwards), or the one `--namespace` names (say, an
imported Microsoft GraphRAG index of the same corpus).

A namespace's documents are matched to passage titles by their title, else by their first line
(Microsoft GraphRAG's input files start with the passage title and are named after files).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import pyarrow.parquet as pq

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag_tools import load_avg
from graphrag_dag_tools.quality.baselines import Bm25, Dense, hybrid
from graphrag_dag_tools.quality.benchmark import Benchmark, load_benchmark
from graphrag_dag_tools.quality.metrics import KS, score
from graphrag_dag_tools.quality.tables import text_table

TOP = 8  # distinct passages each system is scored on, as published


@dataclass
class SystemRun:
    name: str
    kind: str  # "graphrag-dag", "baseline", "published" or "external"
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


DEFAULT_VARIANTS = ("ranking=weighted",)  # the "both ranking methods side by side"


def _ours(rag: Any, bench: Benchmark, namespace: str, method: str, title_of: dict[str, str],
          config: dict[str, str] | None = None) -> SystemRun:
    label = f" ({', '.join(f'{k}={v}' for k, v in config.items())})" if config else ""
    run = SystemRun(f"graphrag-dag {method}{label}", "graphrag-dag")
    for q in bench.questions:
        started = time.perf_counter()
        out = rag.run(method, q.question, namespace, offline=True, config=config)
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


def _check_graphrag(python: str) -> None:
    try:
        proc = subprocess.run([python, "-c", "import graphrag.query.structured_search.local_search.mixed_context"],
                              capture_output=True, text=True, timeout=120)
    except OSError as exc:
        raise BadInput(f"--graphrag-python {python}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise BadInput(f"--graphrag-python {python} cannot import Microsoft GraphRAG: {last}")


def _graphrag_local(rag: Any, bench: Benchmark, namespace: str, python: str, title_of: dict[str, str]) -> SystemRun:
    """Microsoft GraphRAG's LocalSearchMixedContext on the namespace, with our embedder's vectors."""
    from graphrag_dag.drivers.ingest.exporter import export_graphrag

    with tempfile.TemporaryDirectory(prefix="graphrag-dag-eval-") as tmp:
        index = Path(tmp) / "index"
        export_graphrag(rag, namespace, index)
        ents = pq.read_table(index / "entities.parquet", columns=["id", "title", "description"]).to_pylist()
        vecs = rag.embedder.embed([f"{e['title']}:{e['description'] or ''}" for e in ents])
        qvecs = rag.embedder.embed([q.question for q in bench.questions])
        vectors = {"dim": rag.embedder.dim, "entities": {e["id"]: [float(x) for x in v] for e, v in zip(ents, vecs, strict=True)},
                   "questions": [{"id": q.id, "question": q.question, "vector": [float(x) for x in v]}
                                 for q, v in zip(bench.questions, qvecs, strict=True)]}
        (Path(tmp) / "vectors.json").write_text(json.dumps(vectors), encoding="utf-8")
        script = Path(__file__).with_name("graphrag_context_sources.py")
        proc = subprocess.run([python, str(script), "--index", str(index), "--vectors", str(Path(tmp) / "vectors.json"),
                               "--out", str(Path(tmp) / "out.json")], capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"Microsoft GraphRAG's context builder failed: {last}")
        answers = json.loads((Path(tmp) / "out.json").read_text(encoding="utf-8"))
        units = pq.read_table(index / "text_units.parquet", columns=["id", "document_id"]).to_pylist()
    doc_of = {u["id"]: u["document_id"] for u in units}
    run = SystemRun("microsoft-graphrag local (context sources)", "external")
    for a in answers:
        run.ranked[a["question_id"]] = [title_of.get(doc_of.get(u, ""), "") for u in a["text_unit_ids"]][:TOP * 4]
        run.latencies_ms.append(float(a["ms"]))
    return run


def parse_variants(specs: Sequence[str]) -> list[tuple[str, dict[str, str]]]:
    """Each spec is a comma-separated KEY=VALUE list: one more system each, local search under
    those switches, or DRIFT (`method=drift`, its follow-ups under the other switches)."""
    from graphrag_dag.dataflows.common import switches

    out = []
    for spec in specs:
        pairs = switches.parse_pairs([p for p in spec.split(",") if p.strip()])
        method = pairs.pop("method", "local")
        if method not in ("local", "drift"):
            raise BadInput(f"--variant method must be local or drift, not {method!r}")
        cfg = switches.normalize(method, pairs)
        if not cfg and method == "local":
            raise BadInput(f"--variant {spec!r} is the default configuration")
        out.append((method, cfg))
    return out


def run_eval(rag: Any, folder: str, *, namespace: str | None = None, graphrag_python: str | None = None,
             progress: Callable[[str], None] | None = None,
             variants: Sequence[str] = DEFAULT_VARIANTS) -> dict[str, Any]:
    from graphrag_dag.drivers.ingest.indexer import IndexOptions, index_corpus

    say = progress or (lambda _line: None)
    configs = parse_variants(variants)
    bench = load_benchmark(folder)
    if graphrag_python:
        _check_graphrag(graphrag_python)
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
        for method, cfg in configs:
            say(f"running {len(bench.questions)} questions through {method} search with {cfg or 'defaults'}")
            runs.append(_ours(rag, bench, namespace, method, title_of, cfg))
        if graphrag_python:
            say("running Microsoft GraphRAG's local-search context builder on the exported namespace")
            runs.append(_graphrag_local(rag, bench, namespace, graphrag_python, title_of))
        runs += _baselines(rag, bench)
        for system, answers in bench.published.items():
            runs.append(SystemRun(system, "published", {qid: titles[:TOP] for qid, titles in answers.items()}))
    finally:
        if scratch is not None:
            rag.store.drop(scratch)
    return {"benchmark": bench.name, "namespace": None if scratch else namespace, "questions": len(bench.questions),
            "load_avg": load_avg(), "systems": [r.as_json(bench) for r in runs]}


def format_table(report: dict[str, Any]) -> str:
    head = ["system", "all@8", "R@2", "R@5", "R@8", "MRR", "p50 ms"]
    rows = [[s["system"], f"{s['all_recall_at_8']:.3f}", f"{s['recall_at_2']:.3f}", f"{s['recall_at_5']:.3f}",
             f"{s['recall_at_8']:.3f}", f"{s['mrr']:.3f}", "-" if s["p50_ms"] is None else f"{s['p50_ms']:.1f}"]
            for s in report["systems"]]
    return text_table(f"{report['questions']} questions", report, head, rows)
