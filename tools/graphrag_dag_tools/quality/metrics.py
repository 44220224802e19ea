"""The metrics, one implementation for every system: all-evidence recall@8 (the published metric:
a question counts when all its gold titles are among the first 8 distinct titles), mean
recall@2/@5/@8 of gold titles, and the mean reciprocal rank of the first gold title."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from graphrag_dag_tools.quality.benchmark import Question

KS = (2, 5, 8)


@dataclass(frozen=True)
class Scores:
    all_recall_at_8: float
    recall: dict[int, float]  # k → mean recall@k
    mrr: float
    questions: int


def distinct(titles: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(titles))


def score(questions: Sequence[Question], ranked: dict[str, Sequence[str]]) -> Scores:
    """`ranked` maps a question id to the titles a system returned, best first; a question the
    system did not answer scores zero."""
    all_hits = 0
    recall = {k: 0.0 for k in KS}
    mrr = 0.0
    for q in questions:
        titles = distinct(ranked.get(q.id, ()))
        gold = set(q.gold_titles)
        all_hits += gold <= set(titles[:8])
        for k in KS:
            recall[k] += len(gold & set(titles[:k])) / len(gold)
        first = next((n for n, t in enumerate(titles, 1) if t in gold), None)
        mrr += 1.0 / first if first else 0.0
    n = len(questions) or 1
    return Scores(all_hits / n, {k: v / n for k, v in recall.items()}, mrr / n, len(questions))
