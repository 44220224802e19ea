"""The small interfaces the dataflows need from the outside world.

Nodes receive these as inputs (never construct them), so a driver can hand in a real pool, an
OpenAI client or an offline stand-in, and Hamilton's cache can ignore them. They are plain base
classes rather than typing.Protocols because Hamilton type-checks inputs with isinstance, which
Protocols with attributes do not support; implementations subclass them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np


class Embedder:
    model: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return a float32 array of shape (len(texts), dim)."""
        ...


class TokenCounter:
    def count(self, text: str) -> int: ...

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Counts for many texts; implementations may spread a large batch over threads."""
        return [self.count(t) for t in texts]


@dataclass
class ChatReply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatModel:
    """A chat model; `offline` models never make network calls and return no text."""

    offline: bool
    model: str

    def complete(self, stage: str, prompt: str, *, json_mode: bool = False, max_tokens: int | None = None) -> ChatReply:
        ...

    def record(self, stage: str, calls: int, prompt_tokens: int, completion_tokens: int) -> None:
        """Add usage of calls made elsewhere (e.g. by a copy of this model in a Ray task)."""
        self.usage.add(stage, calls, prompt_tokens, completion_tokens)  # type: ignore[attr-defined]


class Database:
    """Namespace-scoped, read-only SQL access for one request.

    Implementations set the namespace for every statement (and row-level security enforces it),
    so nodes pass the namespace as an ordinary parameter as well: defence in depth.
    """

    namespace: str

    def rows(self, query: Any, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple]: ...


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
