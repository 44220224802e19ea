"""Node values as JSON and back, for running any part of a DAG over HTTP (the lineage page).

`to_json` shows what a node returned: dataclasses as objects of their fields, sequences as lists, vectors as their shape and first numbers, and long text and long lists
cut, so a page can show any node. `from_json` turns an edited value back into the node's declared
type (dataclasses, lists, dicts, tuples, optionals, primitives), so a person can override a
node's output (drop a community, reorder the matches) and re-run what depends on it.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

import numpy as np

from graphrag_dag.dataflows.common.errors import BadInput

MAX_TEXT = 4000
MAX_ITEMS = 200
VECTOR_HEAD = 8


def to_json(value: Any, depth: int = 0) -> Any:
    if depth > 12:
        return repr(value)[:200]
    if value is None or isinstance(value, (bool, int, float)):
        return value if not (isinstance(value, float) and not np.isfinite(value)) else str(value)
    if isinstance(value, str):
        return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + f"… ({len(value)} characters)"
    if isinstance(value, np.ndarray):
        return {"array": list(value.shape), "dtype": str(value.dtype),
                "head": [round(float(x), 6) for x in value.ravel()[:VECTOR_HEAD]]}
    if isinstance(value, np.generic):
        return value.item()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # by field, so it reads back
        return {f.name: to_json(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)
                if not f.name.startswith("_")}
    if isinstance(value, dict):
        items = list(value.items())
        out = {str(k if not isinstance(k, tuple) else " — ".join(map(str, k))): to_json(v, depth + 1)
               for k, v in items[:MAX_ITEMS]}
        if len(items) > MAX_ITEMS:
            out["…"] = f"{len(items) - MAX_ITEMS} more"
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        seq = list(value)
        out = [to_json(v, depth + 1) for v in seq[:MAX_ITEMS]]
        return out + ([f"… {len(seq) - MAX_ITEMS} more"] if len(seq) > MAX_ITEMS else [])
    return {"type": type(value).__name__, "repr": repr(value)[:200]}


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_json(value: Any, hint: Any, where: str = "value") -> Any:
    """`value` (parsed JSON) as an instance of `hint`; BadInput names the first part that does not fit."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arm in (a for a in args if a is not type(None)):
            try:
                return from_json(value, arm, where)
            except BadInput:
                continue
        raise BadInput(f"{where} does not fit {hint}")
    if origin in (list, tuple, set, frozenset) or hint in (list, tuple):
        if not isinstance(value, list):
            raise BadInput(f"{where} must be a list")
        inner = args[0] if args else Any
        items = [from_json(v, inner, f"{where}[{i}]") for i, v in enumerate(value)]
        return (origin or hint)(items) if (origin or hint) is not list else items
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise BadInput(f"{where} must be an object")
        kt, vt = args if args else (Any, Any)
        return {from_json(k, kt, where): from_json(v, vt, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise BadInput(f"{where} must be an object with the fields of {hint.__name__}")
        hints = _hints(hint)
        names = {f.name for f in dataclasses.fields(hint) if f.init}
        unknown = set(value) - names
        if unknown:
            raise BadInput(f"{where} has fields {hint.__name__} lacks: {', '.join(sorted(unknown))}")
        try:
            return hint(**{k: from_json(v, hints[k], f"{where}.{k}") for k, v in value.items()})
        except TypeError as exc:
            raise BadInput(f"{where}: {exc}") from None
    if hint is np.ndarray:
        return np.asarray(value, dtype=np.float32)
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(hint, type) and isinstance(value, hint) and not (hint is int and isinstance(value, bool)):
        return value
    raise BadInput(f"{where} must be {getattr(hint, '__name__', hint)}, not {type(value).__name__}")
