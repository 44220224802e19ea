"""The fuzzy channel's names (dataflows/local/entity_matching.py), filed so that a query term is
scored only against the few names that could reach the threshold.

fuzz.ratio is 100·(1 − indel/(a+b)) for texts of lengths a and b, so a ratio of t needs
indel ≤ (1 − t/100)·(a+b). Three bounds of the indel distance, each cheaper than the ratio, decide
which names are scored:

- **Length and anchor.** indel ≥ |a−b|, and a name is filed under its first two and its last two
  characters: a term is compared only with names of a compatible length that share its first
  pair or its last pair. One typo (an insertion, deletion, substitution or swap of neighbours)
  can break only one end of a term of four or more characters, so every single typo is still
  found; two typos are missed only when one falls in each end pair. A one-character anchor kept
  the single typos too, but a letter heads a twenty-sixth of all names, so its span grew with
  the namespace, where a pair keeps it to a few thousand names.
- **Character classes present, and present twice** (two bits per class, code point modulo 32).
  For counts c and d, |c − d| is the number of k ≥ 1 with exactly one of c ≥ k and d ≥ k, so the
  bits that differ at k = 1 and k = 2 never outnumber the count distance below: a popcount per
  name. The second bit costs four bytes a row (one 64-bit word instead of a 32-bit one) and no
  time, and it is what makes the bound bite: at 1M entities it lets about 1,000 of a query's 62k
  span rows through, where presence alone let 8,800 through, each to a 32-byte read of its counts.
- **Character counts by class.** Each insertion or deletion changes one count by one, so the L1
  distance of the count vectors is at most the indel distance.

Merging characters into classes and capping counts only lowers the last two bounds, so no name the
ratio would keep is dropped: the answers are those of scoring every name under the anchors and
lengths, and ranking them by ratio, then name. The class bound runs on a view of each span (no
copy of the namespace's rows, which in a thread pool's malloc arenas stayed resident); the count
bound and the scorer see only its survivors, all of a query's terms at once.
"""

from __future__ import annotations

import itertools

import numpy as np

from graphrag_dag.dataflows.common.textproc import name_key

Hit = tuple[str, str, float, str]  # entity id, display name, ratio, the text that matched

_ANCHOR = 2  # characters of each end a name is filed under (module docstring)
_CLASSES = 32  # code point modulo 32: a-z stay apart
_SLICE = 8192  # texts counted at once: a few MB of scratch


class NameIndex:
    """Fuzzy-matching candidates for one namespace version, loaded once and shared by requests.

    Rows are ordered by anchor, then by length, so that a term's candidates under one anchor are
    one slice."""

    def __init__(self, pairs: list[tuple[str, str, str]], version: str = "") -> None:
        # pairs: (entity_id, display name, text to compare); version: the namespace version read
        self.version = version
        # per anchor: the names' lengths, texts and owners, in parallel lists (no tuple per name)
        filed: dict[str, tuple[list[int], list[str], list[tuple[str, str]]]] = {}
        self.size = 0
        for entity_id, name, text in pairs:
            full = name_key(text)
            if len(full) < 3:
                continue
            self.size += 1
            variants = {full}
            for article in ("the ", "a ", "an "):  # "Saltmarow Lantern" should find "The Saltmarrow Lantern"
                if full.startswith(article) and len(full) - len(article) >= 3:
                    variants.add(full[len(article):])
            owner = (entity_id, name)
            for key in variants:
                for anchor in _anchors(key):
                    lengths, keys, owners = filed.setdefault(anchor, ([], [], []))
                    lengths.append(len(key))
                    keys.append(key)
                    owners.append(owner)
        self._keys: list[str] = []
        self._owners: list[tuple[str, str]] = []
        self._spans: dict[str, tuple[int, int]] = {}  # anchor: its first row and the row after its last
        ordered: list[np.ndarray] = []
        for anchor in list(filed):
            lengths, keys, owners = filed.pop(anchor)
            by_length = np.array(lengths, dtype=np.int32)
            order = np.argsort(by_length, kind="stable").tolist()
            self._spans[anchor] = (len(self._keys), len(self._keys) + len(order))
            ordered.append(by_length[order])
            self._keys += [keys[i] for i in order]
            self._owners += [owners[i] for i in order]
        self._lengths = np.concatenate(ordered) if ordered else np.zeros(0, dtype=np.int32)
        self._counts = _char_counts(self._keys)
        self._masks = _mask(self._counts)

    def search(self, terms: list[str], threshold: float, limit: int) -> list[list[Hit]]:
        """Each term's best `limit` names at a ratio of at least `threshold`, one entity once, by
        ratio, then display name, then id: an order no row order or tie can change."""
        from rapidfuzz import fuzz, process

        spans = self._candidate_spans(terms, threshold)
        rows_of: dict[int, list[int]] = {}
        for (term_at, _), rows in self._survivors(terms, spans, threshold):
            rows_of.setdefault(term_at, []).extend(rows)
        found: list[list[Hit]] = [[] for _ in terms]
        for term_at, rows in rows_of.items():
            best: dict[str, Hit] = {}
            for key, score, at in process.extract(terms[term_at], [self._keys[r] for r in rows], scorer=fuzz.ratio,
                                                  score_cutoff=threshold, limit=None, processor=None):
                entity_id, name = self._owners[rows[at]]
                held = best.get(entity_id)
                if held is None or (-score, key) < (-held[2], held[3]):  # its best text; of equals, the first by text
                    best[entity_id] = (entity_id, name, float(score), key)
            found[term_at] = sorted(best.values(), key=lambda h: (-h[2], h[1], h[0]))[:limit]
        return found

    def _candidate_spans(self, terms: list[str], threshold: float) -> list[tuple[int, int, int]]:
        """(term, first row, end row) of the names under each of a term's anchors whose length
        is compatible with it."""
        ratio = threshold / 100.0
        spans = []
        for term_at, term in enumerate(terms):
            n = len(term)
            if n == 0:
                continue
            lo = max(3, int(np.floor(n * ratio / (2 - ratio))) if ratio < 2 else n)
            hi = int(np.ceil(n * (2 - ratio) / ratio)) if ratio > 0 else n * 10
            for anchor in _anchors(term):
                if anchor in self._spans:
                    first, end = self._spans[anchor]
                    lengths = self._lengths[first:end]
                    a, b = int(np.searchsorted(lengths, lo, "left")), int(np.searchsorted(lengths, hi, "right"))
                    if a < b:
                        spans.append((term_at, first + a, first + b))
        return spans

    def _survivors(self, terms: list[str], spans: list[tuple[int, int, int]],
                   threshold: float) -> list[tuple[tuple[int, int], list[int]]]:
        """Per span, in span order, the rows the class and count bounds let through, ascending.
        On a span's view the class bound is taken at the allowance of its longest name (looser,
        so still safe); each survivor is then held to its own."""
        if not spans:
            return []
        term_counts = _char_counts(terms)
        term_masks = _mask(term_counts)
        share = (100.0 - threshold) / 100.0
        near_rows: list[np.ndarray] = []
        near_spans: list[np.ndarray] = []
        for at, (term_at, a, b) in enumerate(spans):
            loosest = share * (len(terms[term_at]) + int(self._lengths[b - 1])) + 1e-9
            found = np.flatnonzero(np.bitwise_count(self._masks[a:b] ^ term_masks[term_at]) <= loosest) + a
            near_rows.append(found)
            near_spans.append(np.full(len(found), at, dtype=np.int32))
        rows, span_of_row = np.concatenate(near_rows), np.concatenate(near_spans)
        term_of_row = np.array([t for t, _, _ in spans], dtype=np.int32)[span_of_row]
        term_len = np.array([len(t) for t in terms], dtype=np.int64)
        allowed = share * (term_len[term_of_row] + self._lengths[rows]) + 1e-9
        block, theirs = self._counts[rows], term_counts[term_of_row]
        pop = np.bitwise_count(self._masks[rows] ^ term_masks[term_of_row])
        bag = (np.maximum(block, theirs) - np.minimum(block, theirs)).sum(axis=1, dtype=np.int32)
        kept = np.flatnonzero((pop <= allowed) & (bag <= allowed))
        return [((spans[span][0], span), [row for _, row in group]) for span, group in
                itertools.groupby(zip(span_of_row[kept].tolist(), rows[kept].tolist(), strict=True),
                                  key=lambda p: p[0])]


def _anchors(text: str) -> set[str]:
    """The anchors a text is filed or looked up under: its first and its last two characters."""
    return {"^" + text[:_ANCHOR], "$" + text[-_ANCHOR:]}


def _char_counts(texts: list[str]) -> np.ndarray:
    """Each text's character counts by class, capped at 255, a slice of texts at a time."""
    out = np.zeros((len(texts), _CLASSES), dtype=np.uint8)
    for at in range(0, len(texts), _SLICE):
        part = texts[at:at + _SLICE]
        points = np.frombuffer("".join(part).encode("utf-32-le"), dtype=np.uint32)
        cells = np.repeat(np.arange(len(part)) * _CLASSES, [len(t) for t in part]) + points % _CLASSES
        counts = np.bincount(cells, minlength=len(part) * _CLASSES).reshape(len(part), _CLASSES)
        out[at:at + len(part)] = np.minimum(counts, 255)
    return out


def _mask(counts: np.ndarray) -> np.ndarray:
    """The classes present, then those present at least twice, one bit each in a 64-bit word:
    packed a slice of names at a time, so the scratch is a few MB, not 64 bytes per name."""
    out = np.zeros(len(counts), dtype=np.uint64)
    for at in range(0, len(counts), _SLICE):
        part = counts[at:at + _SLICE]
        levels = np.concatenate([part > 0, part > 1], axis=-1)
        out[at:at + len(part)] = np.packbits(levels, axis=-1, bitorder="little").view(np.uint64)[:, 0]
    return out
