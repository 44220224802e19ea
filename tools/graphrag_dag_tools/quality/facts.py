"""`graphrag-dag eval DIR` on a folder of ordinary documents with gold facts (the shape of
`graphrag-bench-medical/`): `documents/` and `questions.json` (`{id, question, answer,
question_type, evidence: [fact]}`).

Every system returns a ranked context; each is cut at the same budget of cl100k tokens (the last
passage cut at the budget), and scored by the share of gold facts it covers and by the share of
the reference answer's words it holds (the folder's README defines both; `fact_covered` and
`answer_recall` below are that definition). The systems:

- `local`: local search's `evidence`, in order (each item as its context line states it);
- `basic` and `drift`: their `evidence`, in order;
- `bm25`, `dense` and `hybrid`: the same namespace's evidence chunks ranked by BM25 (bm25s), by
  cosine similarity of their stored vectors to the question's, and by RRF of the two.

Creative Generation questions ask for a rewrite, not a fact, and are left out of the scores.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.textproc import STOP_WORDS
from graphrag_dag_tools.quality.tables import text_table

BUDGETS = (500, 1000, 2000)
COVERED = 0.70  # share of a fact's words the context must hold
SKIPPED_TYPES = frozenset({"Creative Generation"})
_WORD_RE = re.compile(r"[a-z0-9]+")
_SUFFIXES = ("ing", "edly", "ed", "es", "s", "ly")


@dataclass(frozen=True)
class FactQuestion:
    id: str
    question: str
    answer: str
    type: str
    evidence: tuple[str, ...]


def is_fact_benchmark(folder: str | Path) -> bool:
    root = Path(folder)
    return (root / "documents").is_dir() and (root / "questions.json").is_file()


def load_questions(folder: str | Path, limit: int | None = None) -> list[FactQuestion]:
    """The scored questions, checked before any work starts."""
    path = Path(folder) / "questions.json"
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(rows, list) or not rows:
        raise BadInput(f"{path} must be a non-empty list of questions")
    out = []
    for row in rows:
        ok = (isinstance(row, dict) and all(isinstance(row.get(k), str) for k in ("id", "question"))
              and isinstance(row.get("evidence"), list) and all(isinstance(e, str) for e in row["evidence"]))
        if not ok:
            raise BadInput(f"{path}: each question needs an id, a question and a list of evidence facts")
        kind = str(row.get("question_type") or "Unknown")
        if kind in SKIPPED_TYPES or not row["evidence"]:
            continue
        out.append(FactQuestion(str(row["id"]), row["question"], str(row.get("answer") or ""), kind,
                                tuple(row["evidence"])))
    if not out:
        raise BadInput(f"{path} has no question with evidence facts to score")
    return out[:limit] if limit else out


def words(text: str) -> list[str]:
    """The README's normalisation: lower case, runs of [a-z0-9], no stop words or one-letter words,
    one suffix stripped when more than three letters remain."""
    out = []
    for w in _WORD_RE.findall(text.lower()):
        if len(w) < 2 or w in STOP_WORDS:
            continue
        for suffix in _SUFFIXES:
            if w.endswith(suffix) and len(w) - len(suffix) > 3:
                w = w[: -len(suffix)]
                break
        out.append(w)
    return out


def fact_covered(fact: str, question_words: set[str], context_words: set[str]) -> bool:
    """At least 70% of the fact's words that the question does not hold (all of them when the
    question holds every one) occur in the context."""
    fw = set(words(fact))
    own = fw - question_words or fw
    if not own:
        return False
    return len(own & context_words) >= COVERED * len(own)


def answer_recall(answer: str, question_words: set[str], context_words: set[str]) -> float | None:
    aw = set(words(answer)) - question_words
    return len(aw & context_words) / len(aw) if aw else None


def cut(passages: Sequence[str], budget: int, encoding: Any) -> str:
    """The passages in order, joined by newlines, up to `budget` tokens (the last one cut)."""
    kept: list[str] = []
    left = budget
    for text in passages:
        ids = encoding.encode_ordinary(text + "\n")
        if len(ids) <= left:
            kept.append(text)
            left -= len(ids)
            continue
        if left > 0:
            kept.append(encoding.decode(ids[:left]))
        break
    return "\n".join(kept)


@dataclass
class FactRun:
    name: str
    contexts: dict[str, list[str]] = field(default_factory=dict)  # question id → ranked passages
    latencies_ms: list[float] = field(default_factory=list)


def score(run: FactRun, questions: Sequence[FactQuestion], encoding: Any) -> dict[str, Any]:
    """Coverage and answer-word recall at each budget, overall and per question type."""
    facts: dict[int, dict[str, list[int]]] = {b: {} for b in BUDGETS}
    recall: dict[int, list[float]] = {b: [] for b in BUDGETS}
    for q in questions:
        qw = set(words(q.question))
        passages = run.contexts.get(q.id, [])
        for b in BUDGETS:
            cw = set(words(cut(passages, b, encoding)))
            hits = [fact_covered(f, qw, cw) for f in q.evidence]
            for kind in ("all", q.type):
                covered, total = facts[b].setdefault(kind, [0, 0]), len(hits)
                covered[0] += sum(hits)
                covered[1] += total
            r = answer_recall(q.answer, qw, cw)
            if r is not None:
                recall[b].append(r)
    share = lambda c: round(c[0] / c[1], 4) if c[1] else None  # noqa: E731
    return {"system": run.name,
            **{f"facts_at_{b}": share(facts[b]["all"]) for b in BUDGETS},
            **{f"answer_recall_at_{b}": round(statistics.fmean(recall[b]), 4) if recall[b] else None for b in BUDGETS},
            "by_type": {kind: {f"facts_at_{b}": share(facts[b][kind]) for b in BUDGETS}
                        for kind in sorted(k for k in facts[BUDGETS[0]] if k != "all")},
            "p50_ms": round(statistics.median(run.latencies_ms), 2) if run.latencies_ms else None}


def _evidence_text(item: Any) -> str:
    """An evidence item as the context states it: a claim's statement and its quote, a chunk's text."""
    if item.kind == "claim":
        return f"{item.statement} {item.text}" if item.start is not None else item.statement
    return item.text


def ours(rag: Any, questions: Sequence[FactQuestion], namespace: str, method: str,
         say: Callable[[str], None]) -> FactRun:
    run = FactRun(f"graphrag-dag {method}")
    say(f"running {len(questions)} questions through {method} search")
    for q in questions:
        started = time.perf_counter()
        result = rag.run(method, q.question, namespace, offline=True).values[f"{method}_result"]
        run.latencies_ms.append((time.perf_counter() - started) * 1000)
        run.contexts[q.id] = [_evidence_text(e) for e in result.evidence]
    return run


EVIDENCE_CHUNKS = ("SELECT id, text, embedding FROM chunks WHERE namespace = %(ns)s AND kind = 'evidence' "
                   "ORDER BY id")


def baselines(rag: Any, questions: Sequence[FactQuestion], namespace: str, depth: int = 60) -> list[FactRun]:
    """BM25, dense and their RRF hybrid over the namespace's evidence chunks (its own vectors, and
    the question embedded by the model that made them)."""
    from graphrag_dag_tools.quality.baselines import Bm25, hybrid

    rows = rag.store.scoped(namespace).rows(EVIDENCE_CHUNKS, {"ns": namespace})
    if not rows:
        raise BadInput(f"namespace {namespace!r} has no evidence chunks")
    texts = [r[1] for r in rows]
    matrix = np.asarray([np.asarray(r[2].to_numpy() if hasattr(r[2], "to_numpy") else r[2], dtype=np.float32)
                         for r in rows])
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    bm25 = Bm25([{"title": "", "text": t} for t in texts])
    runs = {name: FactRun(name) for name in ("bm25", "dense", "hybrid (bm25 + dense, RRF)")}
    embedder = rag.embedder_for(namespace)  # the model that made the namespace's vectors
    for q in questions:
        started = time.perf_counter()
        b = bm25.rank(q.question, depth)
        runs["bm25"].latencies_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        vec = np.asarray(embedder.embed_queries([q.question]), dtype=np.float32)[0]
        d = [int(i) for i in np.argsort(-(matrix @ (vec / max(float(np.linalg.norm(vec)), 1e-12))), kind="stable")[:depth]]
        runs["dense"].latencies_ms.append((time.perf_counter() - started) * 1000)
        runs["hybrid (bm25 + dense, RRF)"].latencies_ms.append(runs["bm25"].latencies_ms[-1]
                                                               + runs["dense"].latencies_ms[-1])
        for name, ranked in (("bm25", b), ("dense", d), ("hybrid (bm25 + dense, RRF)", hybrid(b, d))):
            runs[name].contexts[q.id] = [texts[i] for i in ranked]
    return list(runs.values())


def run_fact_eval(rag: Any, folder: str | Path, *, namespace: str | None = None, limit: int | None = None,
                  methods: Sequence[str] = ("local", "basic", "drift"),
                  progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    import hashlib
    import os

    from graphrag_dag.drivers.ingest.indexer import index_corpus
    from graphrag_dag.drivers.llm.tokens import token_counter
    from graphrag_dag_tools import load_avg

    say = progress or (lambda _line: None)
    root = Path(folder)
    questions = load_questions(root, limit)
    encoding = token_counter().encoding  # the same cl100k encoding the searches budget with
    if encoding is None:
        raise BadInput("the gold-fact eval needs tiktoken's cl100k encoding, which did not load")
    scratch = None
    if namespace is not None:
        if not any(n["namespace"] == namespace for n in rag.store.namespaces()):
            raise BadInput(f"namespace {namespace!r} does not exist")
    else:
        digest = hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:8]
        scratch = namespace = f"eval-{digest}-{os.getpid()}"
        say(f"indexing {root / 'documents'} offline into scratch namespace {scratch!r}")
        index_corpus(rag, [str(root / "documents")], scratch, replace=True, offline=True)
    try:
        runs = [ours(rag, questions, namespace, m, say) for m in methods]
        say("ranking the namespace's evidence chunks by BM25, dense and hybrid")
        runs += baselines(rag, questions, namespace)
    finally:
        if scratch is not None:
            rag.store.drop(scratch)
    types: dict[str, int] = {}
    for q in questions:
        types[q.type] = types.get(q.type, 0) + 1
    return {"benchmark": root.name, "kind": "facts", "namespace": None if scratch else namespace,
            "questions": len(questions), "question_types": types, "budgets": list(BUDGETS),
            "load_avg": load_avg(), "systems": [score(r, questions, encoding) for r in runs]}


def format_fact_table(report: dict[str, Any]) -> str:
    head = ["system", *(f"facts@{b}" for b in BUDGETS), *(f"answer@{b}" for b in BUDGETS), "p50 ms"]
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    rows = [[s["system"], *(fmt(s[f"facts_at_{b}"]) for b in BUDGETS),
             *(fmt(s[f"answer_recall_at_{b}"]) for b in BUDGETS),
             "-" if s["p50_ms"] is None else f"{s['p50_ms']:.1f}"] for s in report["systems"]]
    for kind in report["question_types"]:
        rows += [[f"  {s['system']}: {kind}", *(fmt(s["by_type"].get(kind, {}).get(f"facts_at_{b}")) for b in BUDGETS),
                  "", "", "", ""] for s in report["systems"]]
    return text_table(f"gold-fact coverage of {report['questions']} questions", report, head, rows)
