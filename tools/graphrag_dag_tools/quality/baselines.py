"""Text-retrieval baselines over the benchmark's passages (title + text), outside the database:
BM25 (bm25s, English stop words), dense cosine top-k with our embedder, and their RRF hybrid.
They rank whole passages, as the published figures of these baselines were measured."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from graphrag_dag.dataflows.common.fusion import reciprocal_rank_fusion


class Bm25:
    def __init__(self, passages: Sequence[dict[str, str]]) -> None:
        import logging

        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs each index build at DEBUG
        self._bm25s = bm25s
        self.titles = [p["title"] for p in passages]
        self.index = bm25s.BM25()
        self.index.index(bm25s.tokenize([f"{p['title']} {p['text']}" for p in passages], stopwords="en",
                                        show_progress=False), show_progress=False)

    def rank(self, question: str, k: int) -> list[int]:
        tokens = self._bm25s.tokenize([question], stopwords="en", show_progress=False)
        if not tokens.vocab:  # only stop words
            return []
        docs, scores = self.index.retrieve(tokens, k=min(k, len(self.titles)), show_progress=False)
        return [int(d) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


class Dense:
    def __init__(self, passages: Sequence[dict[str, str]], embedder: Any) -> None:
        self.embedder = embedder
        self.matrix = _unit(np.asarray(embedder.embed([f"{p['title']} {p['text']}" for p in passages]),
                                       dtype=np.float32))

    def rank(self, question: str, k: int) -> list[int]:
        q = _unit(np.asarray(self.embedder.embed([question]), dtype=np.float32))[0]
        return [int(i) for i in np.argsort(-(self.matrix @ q), kind="stable")[:k]]


def _unit(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)


def hybrid(bm25: list[int], dense: list[int], k: float = 60.0) -> list[int]:
    fused = reciprocal_rank_fusion([bm25, dense], k=k)
    return sorted(fused, key=lambda i: (-fused[i], i))
