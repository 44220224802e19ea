"""Embedders handed to the DAG as inputs: WordLlama, shipped in its wheel, offline by default;
an OpenAI-compatible embedding model when one is configured."""

from __future__ import annotations

import functools
import logging
import os
import threading
from typing import Any, Sequence

import numpy as np

from graphrag_dag.dataflows.common.errors import GraphRagError
from graphrag_dag.dataflows.common import resources as protocols



class _AsIfUnconfigured(logging.Handler):
    """What the root logger does with no handler: records at warning and above to stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        if logging.lastResort is not None and record.levelno >= logging.lastResort.level:
            logging.lastResort.handle(record)


class WordLlamaEmbedder(protocols.Embedder):
    """WordLlama ships its weights in the wheel, so it runs offline; they load once, on first use (a copy sent to a Ray task that never embeds never loads them)."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.model = f"wordllama-l2-supercat-{dim}"
        self._model: Any = None
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple:
        return (WordLlamaEmbedder, (self.dim,))

    def _load(self) -> Any:
        """Importing it calls `logging.basicConfig(level=INFO)`, which would make every library's INFO
        lines (an HTTP client's request log among them) appear on the user's stderr. Putting the
        root logger back afterwards is not enough: a parallel node's LLM call logs while the
        import runs. basicConfig does nothing to a root logger that has a handler, so one that
        does what an unconfigured root does stands in for the import."""
        root = logging.getLogger()
        stand_in = _AsIfUnconfigured() if not root.handlers else None
        if stand_in is not None:
            root.addHandler(stand_in)
        try:
            import wordllama
            from wordllama import WordLlama

            return WordLlama.load(dim=self.dim, cache_dir=os.path.dirname(wordllama.__file__), disable_download=True)
        finally:
            if stand_in is not None:
                root.removeHandler(stand_in)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            if self._model is None:
                self._model = self._load()
            vecs = self._model.embed(list(texts), norm=True)
        return np.asarray(vecs, dtype=np.float32)


class OpenAIEmbedder(protocols.Embedder):
    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 dim: int | None = None, timeout: float = 60.0) -> None:
        import openai

        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout,
                                     max_retries=2)
        self.model = model
        self._dimensions = dim
        self.dim = dim or len(self.embed(["dimension probe"])[0])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        kwargs: dict[str, Any] = {"model": self.model, "input": list(texts)}
        if self._dimensions:
            kwargs["dimensions"] = self._dimensions
        try:
            resp = self._client.embeddings.create(**kwargs)
        except Exception as exc:  # noqa: BLE001 - surfaced as one clear line
            raise GraphRagError(f"embedding request to {self.model} failed: {type(exc).__name__}: {exc}") from exc
        return np.asarray([d.embedding for d in sorted(resp.data, key=lambda d: d.index)], dtype=np.float32)


@functools.lru_cache(maxsize=4)
def default_embedder(model: str | None = None, base_url: str | None = None, api_key: str | None = None) -> Any:
    """One embedder per configuration per process: loading WordLlama or probing a dimension is not free."""
    if model:
        return OpenAIEmbedder(model, base_url=base_url, api_key=api_key)
    return WordLlamaEmbedder()


