"""Reading GraphRAG table values whatever their schema generation (not a DAG module): missing and
NaN values, renamed columns, community numbers, and the shapes the import stages pass on."""

from __future__ import annotations

import hashlib
import math
import sys
from dataclasses import dataclass, field
from typing import Any, Sequence
import pyarrow as pa


# Canonical table names; v0/v1 prefix them with "create_final_".
TABLES = (
    "documents",
    "text_units",
    "entities",
    "relationships",
    "communities",
    "community_reports",
    "covariates",
    "nodes",
)


LEGACY_PREFIX = "create_final_"


EMBEDDING_MODES = ("auto", "keep", "recompute")


# Placeholder name for claims whose subject is empty.
_UNKNOWN_SUBJECT = "UNKNOWN"


# Object values GraphRAG uses to mean "no object".
_NO_OBJECT = {"", "NONE", "N/A", "NULL", "UNKNOWN"}


@dataclass
class SourceEmbeddings:
    """Vectors found in the source folder, keyed by our record ids.

    `model` is the model the user declared, or a pseudo model name ("graphrag-source:<dim>d"),
    because GraphRAG output does not record which embedding model made the vectors.
    """

    model: str | None = None
    dim: int | None = None
    entities: dict[str, list[float]] = field(default_factory=dict)
    communities: dict[str, list[float]] = field(default_factory=dict)  # keyed by community id
    text_units: dict[str, list[float]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # vector stores present but not readable, and why

    @property
    def count(self) -> int:
        return len(self.entities) + len(self.communities) + len(self.text_units)


@dataclass
class EmbeddingChoice:
    """Which source vectors go onto the records (none when `vectors` is None)."""

    vectors: SourceEmbeddings | None
    model: str | None
    warnings: list[str] = field(default_factory=list)


def clean(value: Any) -> Any:
    """None for NaN / missing, else the value (pyarrow gives None, but floats can be NaN)."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def first_value(row: dict[str, Any], *names: str, default: Any = None) -> Any:
    """First non-missing value among `names` (columns were renamed across versions)."""
    for name in names:
        value = clean(row.get(name))
        if value is not None:
            return value
    return default


def as_text(value: Any) -> str:
    value = clean(value)
    return "" if value is None else str(value)


def int_or_none(value: Any) -> int | None:
    value = clean(value)
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def community_key(value: Any) -> str | None:
    """Our community id: the community number as a string; -1 / NaN / None mean "none"."""
    number = int_or_none(value)
    if number is None:
        value = clean(value)
        return None if value in (None, "") else str(value)
    return None if number < 0 else str(number)


# Columns of ids and labels that repeat, within a table (a unit's document, a claim's type) or
# across tables (a unit's id in its entities' and claims' lists). Arrow makes a new string per
# cell; one shared string per value keeps an import's records about a tenth smaller (100k).
SHARED_VALUE_COLUMNS = frozenset({"id", "document_id", "document_ids", "text_unit_id", "text_unit_ids",
                                  "subject_id", "object_id", "type", "status", "start_date", "end_date"})


def _shared(value: Any) -> Any:
    if type(value) is str:
        return sys.intern(value)
    if type(value) is list:
        return [sys.intern(v) if type(v) is str else v for v in value]
    return value


def table_rows(tables: dict[str, pa.Table], name: str, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The table's rows as dicts. `columns` keeps only those of them the table has, so a node
    reading two columns does not turn every list column of a large table into Python objects
    (at 100k entities, a community lists ~11k text units across its levels). Values of
    `SHARED_VALUE_COLUMNS` are shared strings."""
    table = tables.get(name)
    if table is None:
        return []
    if columns is not None:
        kept = [c for c in table.column_names if c in columns]
        if not kept:  # rows without the columns read as rows with those values missing
            return [{} for _ in range(table.num_rows)]
        table = table.select(kept)
    rows = table.to_pylist()
    shared = [c for c in table.column_names if c in SHARED_VALUE_COLUMNS]
    for row in rows:
        for column in shared:
            row[column] = _shared(row[column])
    return rows


def synthetic_entity_id(title: str) -> str:
    return "graphrag-synth-" + hashlib.sha1(title.encode("utf-8")).hexdigest()[:20]


def claim_subject(row: dict[str, Any]) -> str:
    return as_text(first_value(row, "subject_id")).strip() or _UNKNOWN_SUBJECT


def claim_object(row: dict[str, Any]) -> str | None:
    value = as_text(first_value(row, "object_id")).strip()
    return None if value.upper() in _NO_OBJECT else value
