"""Rank fusion and set formulas from the design note (not a DAG module).

RRF(d) = sum over lists m of 1 / (k + r_m(d)), with 1-based ranks r_m; an item absent from a
list earns nothing from it. Fusing ranks, not raw scores, avoids weighting cosine similarities,
set ratios and unbounded edge weights against each other.
"""

from __future__ import annotations

from typing import Hashable, Iterable, Sequence


def reciprocal_rank_fusion(ranked_lists: Iterable[Sequence[Hashable]], k: float = 60,
                           scores: dict[Hashable, float] | None = None) -> dict[Hashable, float]:
    """`scores`: the fused scores of earlier lists, which the given lists are added to (in place),
    as if all had been fused at once."""
    if k < 0:
        raise ValueError("RRF k must be >= 0")
    scores = {} if scores is None else scores
    get = scores.get
    for ranked in ranked_lists:
        # An item's first place is its rank; dict.fromkeys drops the later ones and keeps the order.
        for rank, item in enumerate(dict.fromkeys(ranked), 1):
            scores[item] = get(item, 0.0) + 1.0 / (k + rank)
    return scores


def jaccard(a: int, b: int, intersection: int) -> float:
    """|A ∩ B| / |A ∪ B| from set sizes, so SQL can count members without returning them."""
    union = a + b - intersection
    return intersection / union if union > 0 else 0.0


def rank_by(values: dict[Hashable, float], *, keep_zero: bool = False) -> list[Hashable]:
    """Ids sorted by value (descending, ties by id); zero or negative values are dropped unless kept."""
    ids = [i for i, v in values.items() if keep_zero or v > 0]
    # Two stable sorts with built-in keys, the tie order first: a local search ranks about 1,400
    # ids a query this way, and a key function of our own cost a Python call per id.
    ids.sort(key=str)
    ids.sort(key=values.__getitem__, reverse=True)  # reverse keeps equal values in id order
    return ids
