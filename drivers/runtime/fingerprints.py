"""Fingerprints the cache can trust.

Hamilton's cache keeps a node's result under the fingerprint of the value alone, so two different
values with one fingerprint hand a node a value that is not its own. Its default fingerprints do
not name a value's type (an empty dict and an empty list, the string "1" and the integer 1, two
record classes with equal fields, a float32 and an int32 array of the same bytes all coincide), and
past a nesting depth they put one constant in place of whatever is there, so values that differ
only deep inside coincide too.

Its mappings ignore order, but a dict's order is part of its value: a node that walks a dict builds
its lists in that order.

The fingerprints registered here, through Hamilton's public `hash_value.register`, name each
value's type at every level and see the whole value, a dict's order included. A value that cannot
be fingerprinted whole (nested deeper than MAX_DEPTH, or of an unhashable kind) is UNHASHABLE,
which Hamilton's cache never stores, rather than fingerprinted in part. Resources keep their own registrations (a
database's namespace and index version, a model's identity: dataflows/common/resources.py); they
are more specific than `object`, so they win.

Importing this module registers them; the engine imports it before it builds a cached driver.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from collections.abc import Mapping, Sequence, Set
from typing import Any

import numpy as np
from hamilton.caching import fingerprinting

UNHASHABLE = fingerprinting.UNHASHABLE
MAX_DEPTH = 64  # deeper than any result of ours; a deeper value is simply not cached
_fallback = fingerprinting.hash_value.dispatch(object)  # Hamilton's own, for objects we do not know


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha224()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))  # lengths first: ("ab", "c") is not ("a", "bc")
        h.update(data)
    return base64.urlsafe_b64encode(h.digest()).decode()


def _kind(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _of_all(obj: Any, hashes: list[str]) -> str:
    return UNHASHABLE if UNHASHABLE in hashes else _digest(_kind(obj), *hashes)


def _hash(obj: Any, depth: int) -> str:
    return fingerprinting.hash_value(obj, depth=depth + 1)


@fingerprinting.hash_value.register(str)
@fingerprinting.hash_value.register(int)
@fingerprinting.hash_value.register(float)
@fingerprinting.hash_value.register(bool)
@fingerprinting.hash_value.register(complex)
def _primitive(obj: Any, *args: Any, depth: int = 0, **kwargs: Any) -> str:
    return _digest(_kind(obj), repr(obj))


@fingerprinting.hash_value.register(bytes)
@fingerprinting.hash_value.register(bytearray)
def _bytes(obj: Any, *args: Any, depth: int = 0, **kwargs: Any) -> str:
    return _digest(_kind(obj), bytes(obj))


@fingerprinting.hash_value.register(Sequence)
def _sequence(obj: Sequence, *args: Any, depth: int = 0, **kwargs: Any) -> str:
    if depth > MAX_DEPTH:
        return UNHASHABLE
    return _of_all(obj, [_hash(x, depth) for x in obj])


@fingerprinting.hash_value.register(Mapping)
def _mapping(obj: Mapping, *args: Any, depth: int = 0, **kwargs: Any) -> str:
    """In insertion order, unlike Hamilton's: a dict's order is part of its value (a node that
    walks a dict of reached entities builds lists in that order)."""
    if depth > MAX_DEPTH:
        return UNHASHABLE
    return _of_all(obj, [h for k, v in obj.items() for h in (_hash(k, depth), _hash(v, depth))])


@fingerprinting.hash_value.register(Set)
def _set(obj: Set, *args: Any, depth: int = 0, **kwargs: Any) -> str:
    if depth > MAX_DEPTH:
        return UNHASHABLE
    return _of_all(obj, sorted(_hash(x, depth) for x in obj))


@fingerprinting.hash_value.register(np.ndarray)
def _array(obj: np.ndarray, *args: Any, depth: int = 0, **kwargs: Any) -> str:
    if obj.dtype == object:
        return UNHASHABLE
    return _digest(_kind(obj), obj.dtype.str, repr(obj.shape), np.ascontiguousarray(obj).tobytes())


@fingerprinting.hash_value.register(np.generic)
def _scalar(obj: np.generic, *args: Any, depth: int = 0, **kwargs: Any) -> str:
    return _digest(_kind(obj), obj.dtype.str, repr(obj.item()))


@fingerprinting.hash_value.register(object)
def _object(obj: Any, *args: Any, depth: int = 0, **kwargs: Any) -> str:
    """A dataclass by its type and fields; anything else by its type and Hamilton's fingerprint."""
    if depth > MAX_DEPTH:
        return UNHASHABLE
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = [f.name for f in dataclasses.fields(obj)]
        return _of_all(obj, [h for name in fields for h in (_digest(name), _hash(getattr(obj, name), depth))])
    inner = _fallback(obj, depth=depth)
    return UNHASHABLE if inner == UNHASHABLE else _digest(_kind(obj), inner)
