"""Column-building helpers of the synthetic index: ids, sizes, ranges and list columns built
with numpy and pyarrow, never row by row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def string_array(data: bytes, width: int, n: int) -> pa.Array:
    """`n` fixed-width ASCII strings packed in `data`, as a pyarrow string array (no Python loop)."""
    offsets = np.arange(n + 1, dtype=np.int32) * width
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data))


def uuids(rng: np.random.Generator, n: int, dashes: bool = True) -> pa.Array:
    """`n` random version-4 UUID strings (dashed like GraphRAG's entity ids, or 32 hex digits)."""
    raw = np.frombuffer(rng.bytes(16 * n), dtype=np.uint8).reshape(n, 16).copy()
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
    hexdigits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    digits = np.empty((n, 32), dtype=np.uint8)
    digits[:, 0::2] = hexdigits[raw >> 4]
    digits[:, 1::2] = hexdigits[raw & 0x0F]
    if not dashes:
        return string_array(digits.tobytes(), 32, n)
    out = np.full((n, 36), ord("-"), dtype=np.uint8)
    out[:, 0:8], out[:, 9:13], out[:, 14:18] = digits[:, 0:8], digits[:, 8:12], digits[:, 12:16]
    out[:, 19:23], out[:, 24:36] = digits[:, 16:20], digits[:, 20:32]
    return string_array(out.tobytes(), 36, n)


def random_sizes(rng: np.random.Generator, total: int, parts: int, minimum: int = 1) -> np.ndarray:
    """`parts` sizes >= `minimum` summing to `total`, from uniform cut points (Dirichlet(1) shares)."""
    extra = total - parts * minimum
    if parts <= 1:
        return np.array([total], dtype=np.int64)
    cuts = np.sort(rng.integers(0, extra + 1, parts - 1))
    return np.diff(np.concatenate(([0], cuts, [extra]))).astype(np.int64) + minimum


def ranges(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, flat indices) of the concatenated ranges [starts[i], ends[i])."""
    lengths = (ends - starts).astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1] - starts, lengths)
    return offsets, flat


def grouped(keys: np.ndarray, values: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, values) of `values` grouped by integer `keys` in 0..groups-1, stable within a group."""
    order = np.argsort(keys, kind="stable")
    offsets = np.zeros(groups + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=groups), out=offsets[1:])
    return offsets, values[order]


class Lists:
    """A list<string> column kept as numbers: row i holds strings[indices[offsets[i]:offsets[i+1]]].

    Only a slice of rows is ever turned into Arrow strings, so big list columns (text unit ids
    per community) never exist in memory all at once.
    """

    def __init__(self, offsets: np.ndarray, strings: pa.Array, indices: np.ndarray) -> None:
        self.offsets, self.strings, self.indices = offsets, strings, indices

    def __call__(self, lo: int, hi: int) -> pa.Array:
        a, b = int(self.offsets[lo]), int(self.offsets[hi])
        values = self.strings.take(pa.array(self.indices[a:b], type=pa.int64()))
        return pa.ListArray.from_arrays(pa.array((self.offsets[lo : hi + 1] - a).astype(np.int32)), values)


def column_slice(value: object, lo: int, hi: int) -> pa.Array:
    """Rows lo..hi of a column given as an Arrow array, numpy array, list of str/None or callable."""
    if isinstance(value, (pa.Array, pa.ChunkedArray)):
        return value.slice(lo, hi - lo)
    if isinstance(value, np.ndarray):
        return pa.array(value[lo:hi])
    if isinstance(value, list):
        return pa.array(value[lo:hi], type=pa.string())
    return value(lo, hi)  # type: ignore[operator]


def unique_pairs(a: np.ndarray, b: np.ndarray, b_count: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (a, b) pairs, sorted by a then b."""
    keys = np.unique(a.astype(np.int64) * b_count + b.astype(np.int64))
    return keys // b_count, keys % b_count




def pick_in(rng: np.random.Generator, start: np.ndarray, size: np.ndarray) -> np.ndarray:
    """A position inside each range, skewed towards the range's start (its local hubs)."""
    u = rng.random(len(start))
    return start + np.minimum((size * u * u).astype(np.int64), size - 1)


