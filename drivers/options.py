"""Per-request options of the two searches, made from the one settings table
(dataflows/common/settings.py): a knob added there is an option here and a CLI flag at once."""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.settings import (
    BASIC_SETTINGS, DRIFT_SETTINGS, GLOBAL_SETTINGS, LOCAL_SETTINGS, Setting,
)


MAX_QUERY_CHARS = 4000
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def checked_query(query: Any) -> str:
    """The question as a search reads it, or BadInput saying why it cannot be one (no store or DAG
    needed, so the command line checks it before it imports either)."""
    if not isinstance(query, str):
        raise BadInput("the query is empty")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError:  # bytes that were not UTF-8 reach Python as lone surrogates
        raise BadInput("the query is not valid UTF-8 text") from None
    query = _CONTROL_RE.sub(" ", query)  # NUL cannot be stored or compared in PostgreSQL text
    if not query.strip():
        raise BadInput("the query is empty (or only control characters)")
    if len(query) > MAX_QUERY_CHARS:
        raise BadInput(f"the query is {len(query)} characters long; the limit is {MAX_QUERY_CHARS}")
    return query



def options_class(name: str, settings: tuple[Setting, ...], doc: str) -> type:
    cls = dataclasses.make_dataclass(
        name, [(s.name, Any, dataclasses.field(default=s.default)) for s in settings],
        namespace={"SETTINGS": settings, "validate": _validate, "__doc__": doc},
    )
    cls.__module__ = __name__
    return cls


def _validate(self: Any) -> None:
    """Coerce and check every value (a fresh instance per request, so defaults are read per
    request), then the rules that tie two settings together."""
    for s in self.SETTINGS:
        setattr(self, s.name, s.check(getattr(self, s.name)))
    for budget, reserve in (("map_budget", "map_output_reserve"), ("reduce_budget", "reduce_output_reserve")):
        if hasattr(self, budget) and getattr(self, reserve) >= getattr(self, budget):
            raise BadInput(f"{reserve.replace('_', ' ')} must be smaller than the {budget.replace('_', ' ')}")


def option_values(options: Any) -> dict[str, Any]:
    """The options as node inputs, by field name. Every value is a checked scalar, so this is
    `dataclasses.asdict` without its deep copy."""
    return {name: getattr(options, name) for name in _field_names(type(options))}


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


LocalOptions = options_class("LocalOptions", LOCAL_SETTINGS, "Local-search knobs, one field per setting.")
GlobalOptions = options_class("GlobalOptions", GLOBAL_SETTINGS, "Global-search knobs, one field per setting.")
BasicOptions = options_class("BasicOptions", BASIC_SETTINGS, "Basic-search knobs, one field per setting.")
DriftOptions = options_class("DriftOptions", DRIFT_SETTINGS, "DRIFT-search knobs: its own, then its follow-ups' local ones.")
OPTIONS = {"local": LocalOptions, "global": GlobalOptions, "basic": BasicOptions, "drift": DriftOptions}
