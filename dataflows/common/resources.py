"""The small interfaces the dataflows need from the outside world.

Nodes receive these as inputs (never construct them), so a driver can hand in a real pool, an
OpenAI client or an offline stand-in. They are plain base classes rather than typing.Protocols
because Hamilton type-checks inputs with isinstance, which Protocols with attributes do not
support; implementations subclass them.

Each resource has a `fingerprint`: what its results depend on (a namespace's index version, a
model's identity), registered with Hamilton's cache fingerprinting. So a cached node is keyed by
the data and model it read, no node needs a parameter that exists only to key the cache, and a
new DB-reading node cannot forget to recompute after an import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

import numpy as np
from hamilton.caching import fingerprinting

if TYPE_CHECKING:
    from graphrag_dag.dataflows.common.prompting import Prompt

T = TypeVar("T")


class Resource:
    """Something a node uses rather than a value it computes; the cache sees only its fingerprint."""

    @property
    def fingerprint(self) -> str:
        raise NotImplementedError


@fingerprinting.hash_value.register(Resource)
def _resource_fingerprint(obj: Resource, *args: Any, depth: int = 0, **kwargs: Any) -> str:
    return fingerprinting.hash_value(f"{type(obj).__name__}:{obj.fingerprint}", depth=depth + 1)


class Embedder(Resource):
    model: str
    dim: int

    @property
    def fingerprint(self) -> str:
        return f"{self.model}/{self.dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return a float32 array of shape (len(texts), dim)."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Questions, embedded as the model wants a question embedded: some models (E5) mark a
        query apart from a passage. By default, as any text."""
        return self.embed(texts)


class TokenCounter(Resource):
    name: str = "tokens"
    # True when a line that starts with a non-space character is always tokenised on its own:
    # count(a + b) == count(a) + count(b) whenever `a` ends with "\n" and `b` starts with a
    # non-space. tiktoken's encodings have it (their pre-tokeniser never joins a line break to
    # what follows it), and it lets prompt budgets be summed from remembered per-block counts
    # (dataflows/common/budget.py). A counter that does not declare it is asked for whole prompts.
    line_start_splits: bool = False

    @property
    def fingerprint(self) -> str:
        return self.name

    def count(self, text: str) -> int: ...

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Counts for many texts; implementations may spread a large batch over threads."""
        return [self.count(t) for t in texts]


@dataclass
class ChatReply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatModel(Resource):
    """A chat model; `offline` models never make network calls and return no text."""

    offline: bool
    model: str
    identity: str = "offline"  # what its replies depend on: endpoint and model, or "offline"

    @property
    def fingerprint(self) -> str:
        return self.identity

    def complete(self, stage: str, prompt: str, *, json_mode: bool = False, max_tokens: int | None = None) -> ChatReply:
        ...

    def send(self, prompt: "Prompt", *, json_mode: bool = False, max_tokens: int | None = None) -> ChatReply:
        """Send a rendered prompt (dataflows.common.prompting.ask is the one caller)."""
        return self.complete(prompt.stage, prompt.text, json_mode=json_mode, max_tokens=max_tokens)

    def record(self, stage: str, calls: int, prompt_tokens: int, completion_tokens: int) -> None:
        """Add usage of calls made elsewhere (e.g. by a copy of this model in a Ray task)."""
        self.usage.add(stage, calls, prompt_tokens, completion_tokens)  # type: ignore[attr-defined]


class Database(Resource):
    """Namespace-scoped, read-only SQL access for one request, to one version of the namespace.

    Implementations set the namespace for every statement (and row-level security enforces it),
    so nodes pass the namespace as an ordinary parameter as well: defence in depth.
    """

    namespace: str
    index_version: str

    @property
    def fingerprint(self) -> str:
        return f"{self.namespace}@{self.index_version}"

    def rows(self, query: Any, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple]: ...

    def columns(self, query: Any, params: dict[str, Any], types: Sequence[str]) -> list[np.ndarray]:
        """The columns of a statement whose values are fixed-width and never NULL (`types`: NumPy
        kinds "i4", "f8" or "?", or "vector(D)" for a float32 matrix of pgvector's vectors), for loads
        of a whole namespace: an implementation may move them in binary instead of as a tuple per row."""
        rows = self.rows(query, params)
        return [np.array([r[k] for r in rows], dtype=t) if vector_dim(t) is None else
                np.array([r[k].to_numpy() for r in rows], dtype="f4").reshape(len(rows), vector_dim(t))
                for k, t in enumerate(types)]

    def memoized(self, name: str, build: Callable[[], T]) -> T:
        """`build()`, kept in memory per namespace version where the implementation can (the
        fuzzy name index: loading every name per query would cost more than the query)."""
        return build()


class LocalSearcher(Resource):
    """Runs local search for one question inside the current request (DRIFT's follow-ups): the
    same snapshot, chat model, caps and cancellation, so a follow-up is part of the request."""

    config: dict[str, str] = {}

    @property
    def fingerprint(self) -> str:
        return "local:" + ",".join(f"{k}={v}" for k, v in sorted(self.config.items()))

    def search(self, question: str) -> Any:
        """The follow-up's LocalResult (dataflows/local/local_answer.py)."""
        raise NotImplementedError


class ExtractionCache(Resource):
    """Replies of the indexer's LLM kept by key (a hash of the prompt and the model), so text seen
    before costs no call. This base keeps nothing."""

    @property
    def fingerprint(self) -> str:
        return "extraction-cache"

    def get(self, key: str) -> str | None:
        return None

    def put(self, key: str, value: str) -> None:
        return None


@dataclass
class LlmUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    by_stage: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, stage: str, calls: int, prompt_tokens: int, completion_tokens: int, *,
            total_calls: bool = True) -> None:
        """Record calls and tokens for a stage (`total_calls=False` when the call was already
        counted in the total, as a capped model counts calls before making them)."""
        if total_calls:
            self.calls += calls
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        st = self.by_stage.setdefault(stage, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
        st["calls"] += calls
        st["prompt_tokens"] += prompt_tokens
        st["completion_tokens"] += completion_tokens


def vector_dim(kind: str) -> int | None:
    """D of a column kind "vector(D)" (`Database.columns`), None for a NumPy kind."""
    return int(kind[7:-1]) if kind.startswith("vector(") and kind.endswith(")") else None
