"""Every community's title and report, with its summary vector, in memory once per namespace version
(as the graph is, graph_index.py), so that ranking the candidates reads no table.

The ranking needs, per candidate, its level, title, summary, report rank and the summary's cosine
similarity to the query. As a statement that was one round trip on the critical path of every
local search, after the walk and before the claims could be asked for. The similarity is computed
here as pgvector computes `1 - (a <=> b)`: dot / sqrt(|a|²·|b|²), clamped to [-1, 1], then
1 - (1 - s), on the same float32 values (float16 ones above 2,000 dimensions, where the search
casts to halfvec). pgvector adds float32 products where this adds float64 ones, so the last few of
a double's digits may differ: two candidates would have to lie within about 1e-6 of each other for
their order to change, and equal vectors still tie exactly.

The price: the vectors as float32 and the texts, loaded once per namespace version.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from hamilton.caching import fingerprinting

from graphrag_dag.dataflows.common.sql import HALFVEC_ABOVE

Report = tuple[str, int, str, str, float | None, float]  # id, level, title, summary, similarity, rank


class CommunityReports:
    """Communities by their place in id order; vectors for those whose summary has one."""

    def __init__(self, rows: Sequence[tuple[str, int, str, str, float]], vector_rows: np.ndarray,
                 vectors: np.ndarray, version: str = "") -> None:
        # rows: (id, level, title, summary, report rank) of every community; vector_rows: the
        # places of the communities whose vectors `vectors` holds, row for row.
        self.version = version
        self.pos: dict[str, int] = {r[0]: n for n, r in enumerate(rows)}
        self.rows = [(cid, int(level), title, summary, float(rank)) for cid, level, title, summary, rank in rows]
        self._vector_of = np.full(len(rows), -1, dtype=np.int64)
        self._vector_of[np.asarray(vector_rows, dtype=np.int64)] = np.arange(len(vector_rows))
        self._half = vectors.ndim == 2 and vectors.shape[1] > HALFVEC_ABOVE
        self._vectors = _as_searched(np.asarray(vectors, dtype=np.float32), self._half)
        self._squares = np.einsum("ij,ij->i", self._vectors, self._vectors, dtype=np.float64)

    def reports(self, communities: list[str], query: np.ndarray) -> list[Report]:
        """Each known community among `communities`, once, with its summary's similarity to the
        query (None without a vector)."""
        places = [self.pos[c] for c in dict.fromkeys(communities) if c in self.pos]
        at = self._vector_of[places] if places else np.zeros(0, dtype=np.int64)
        sims = self._similarities(at[at >= 0], query)
        out: list[Report] = []
        k = 0
        for place, row in zip(places, at.tolist(), strict=True):
            cid, level, title, summary, rank = self.rows[place]
            sim = None
            if row >= 0:
                sim, k = float(sims[k]), k + 1
            out.append((cid, level, title, summary, sim, rank))
        return out

    def _similarities(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        if not rows.size:
            return np.zeros(0)
        q = _as_searched(np.asarray(query, dtype=np.float32).reshape(1, -1), self._half)[0].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):  # a zero vector: NaN, as pgvector gives
            sims = (self._vectors[rows].astype(np.float64) @ q) / np.sqrt(self._squares[rows] * float(q @ q))
        return 1.0 - (1.0 - np.clip(sims, -1.0, 1.0))


def _as_searched(vectors: np.ndarray, half: bool) -> np.ndarray:
    """The values the database compares, as float32: rounded to float16 above HALFVEC_ABOVE
    dimensions. Sums are taken in float64, close enough to stand in for pgvector's."""
    return vectors.astype(np.float16).astype(np.float32) if half else vectors


@fingerprinting.hash_value.register(CommunityReports)
def _reports_fingerprint(obj: CommunityReports, *args: object, depth: int = 0, **kwargs: object) -> str:
    """What its namespace version holds, as for the graph index."""
    return fingerprinting.hash_value(f"CommunityReports:{obj.version}", depth=depth + 1)
