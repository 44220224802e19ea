"""Rank fusion and set formulas from the design note (not a DAG module).

RRF(d) = sum over lists m of 1 / (k + r_m(d)), with 1-based ranks r_m; an item absent from a
list earns nothing from it. Fusing ranks, not raw scores, avoids weighting cosine similarities,
set ratios and unbounded edge weights against each other.
"""

from __future__ import annotations

from typing import Hashable, Iterable, Sequence


def reciprocal_rank_fusion(ranked_lists: Iterable[Sequence[Hashable]], k: float = 60) -> dict[Hashable, float]:
    if k < 0:
        raise ValueError("RRF k must be >= 0")
    scores: dict[Hashable, float] = {}
    for ranked in ranked_lists:
        seen: set[Hashable] = set()
        rank = 0
        for item in ranked:
            if item in seen:
                continue
            seen.add(item)
            rank += 1
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return scores


def jaccard(a: int, b: int, intersection: int) -> float:
    """|A ∩ B| / |A ∪ B| from set sizes, so SQL can count members without returning them."""
    union = a + b - intersection
    return intersection / union if union > 0 else 0.0


def rank_by(values: dict[Hashable, float], *, keep_zero: bool = False) -> list[Hashable]:
    """Ids sorted by value (descending, ties by id); zero or negative values are dropped unless kept."""
    items = [(v, i) for i, v in values.items() if keep_zero or v > 0]
    items.sort(key=lambda vi: (-vi[0], str(vi[1])))
    return [i for _, i in items]
