"""A scoped statement's text and parameters (drivers/store/scoped.py): the scope's parameter, the
constants a generic plan needs written into the text, and vectors in pgvector's text form."""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np
from psycopg import sql


def scoped_params(params: Sequence[Any] | dict[str, Any], namespace: str,
                vector_text: Callable[[np.ndarray], str] | None = None) -> dict[str, Any]:
    if not isinstance(params, dict):
        if params:
            raise TypeError("scoped queries take named parameters")
        params = {}
    if vector_text is not None:
        params = {k: vector_text(v) if isinstance(v, np.ndarray) and v.ndim == 1 else v for k, v in params.items()}
    return {**params, "_scope_ns": namespace}


def bound_statement(query: Any, params: Sequence[Any] | dict[str, Any], namespace: str) -> tuple[str, dict[str, Any]]:
    """A statement as a snapshot prepares it: the namespace and every integer parameter written
    into its text as literals, the other parameters (arrays, vectors, text) left to bind.

    A snapshot's statements are prepared on their connection and run on a generic plan, parsed and
    planned once per connection rather than at every call (at 100k entities, a quarter of the time
    a local search waited on its statements). A generic plan knows only what the text says. The
    namespace has to be there for the planner to pick that namespace's partial HNSW index, and
    the integers are the LIMITs, caps and levels, from the settings: known, they plan as the
    custom plans did. The namespace has been validated (a-z, 0-9, _ and -) and is quoted as a
    literal all the same.

    Lists (ids, name keys, terms) are bound in binary (`%(name)b`). In text, psycopg writes an array
    in Python element by element, testing each with a regular expression for quotes; in binary,
    each element is its length and bytes."""
    if not isinstance(params, dict):
        if params:
            raise TypeError("scoped queries take named parameters")
        params = {}
    constants: list[tuple[str, str]] = []
    lists: list[str] = []
    bound: dict[str, Any] = {}
    for name, value in params.items():
        if name == "ns":
            if value != namespace:
                raise RuntimeError(f"namespace scope mismatch: statement {value!r}, handle {namespace!r}")
            constants.append((name, sql.Literal(value).as_string(None)))
        elif type(value) is int:  # not bool, not a NumPy integer
            constants.append((name, str(value)))
        else:
            bound[name] = value
            if type(value) is list:
                lists.append(name)
    text = query if isinstance(query, str) else query.as_string(None)
    return _with_constants(text, tuple(constants), tuple(lists)), bound


@functools.lru_cache(maxsize=1024)
def _with_constants(text: str, constants: tuple[tuple[str, str], ...], lists: tuple[str, ...] = ()) -> str:
    for name, literal in constants:
        text = text.replace(f"%({name})s", literal)
    for name in lists:
        text = text.replace(f"%({name})s", f"%({name})b")
    return text


def pgvector_text(vec: np.ndarray) -> str:
    """pgvector's text form of a float32 vector, as its psycopg adapter writes it (each value's
    float32 widened to a double and printed exactly), so the server reads the same numbers."""
    return "[" + ",".join(map(str, np.asarray(vec, dtype=np.float32).tolist())) + "]"
