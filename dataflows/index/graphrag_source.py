"""Microsoft GraphRAG import, stage 1: find the output files, read the tables, tell the schema.

The import flow reads a GraphRAG output folder and normalises it into `IndexRecords`.

One node per stage: find the files, read the tables, turn each table into our records, derive
what GraphRAG does not store (small evidence chunks with document offsets, a community hierarchy
for old schemas, entities for dangling relationship endpoints and claim subjects), and decide
whether the source vectors can be kept. Writing to PostgreSQL is the store's job, not ours.

Every schema generation is handled by looking at which files and columns exist rather than by a
version switch, because GraphRAG changed names a little at a time:
- v0/v1 name files `create_final_<table>.parquet`; v2/v3 name them `<table>.parquet`;
- v0 communities have no `parent` (we derive it from membership); very old entities use `name`;
- v0-v2 text units carry `document_ids` lists, v3 a single `document_id`;
- v3 text units may start with prepended metadata ("title: x.txt.\\n") absent from the document;
- integer columns can be int32 and empty list columns `list<null>`; pandas may leave
  `__index_level_0__` columns behind. We read with pyarrow and never rely on exact types.

Inputs: `source_path` (str), `embeddings_mode` ("auto" | "keep" | "recompute"),
`source_embedding_model` (the model that made GraphRAG's vectors, if the user knows it), `embedder`
(an `Embedder` or None) and `progress` (a `Callable[[str], None]` or None). The last two are
typed `Any` because Hamilton 1.90's input validation rejects Protocol- and Callable-typed
inputs even when the value conforms.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
import pyarrow as pa
import pyarrow.parquet as pq
from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.index.graphrag_values import LEGACY_PREFIX, TABLES


def source_files(source_path: str) -> dict[str, Path]:
    """The GraphRAG tables present in the folder, by canonical name.

    v0/v1 write `create_final_<table>.parquet`, v2/v3 `<table>.parquet`; the newer name wins if
    both exist. A folder without entities (or nodes) and relationships is not GraphRAG output,
    and we say so instead of importing an empty namespace.
    """
    folder = Path(source_path).expanduser()
    if not folder.exists():
        raise BadInput(f"{folder} does not exist")
    if not folder.is_dir():
        raise BadInput(f"{folder} is not a GraphRAG output folder (not a directory)")
    found: dict[str, Path] = {}
    for name in TABLES:
        for candidate in (folder / f"{name}.parquet", folder / f"{LEGACY_PREFIX}{name}.parquet"):
            if candidate.is_file():
                found[name] = candidate
                break
    if "relationships" not in found or not ({"entities", "nodes"} & found.keys()):
        raise BadInput(f"{folder} is not a GraphRAG output folder (no entities/relationships parquet)")
    return found


# Cross-reference lists that repeat what another table already says (which units a community,
# relationship or document spans; which entities, relationships and claims a unit holds) and that
# no stage reads: the import takes membership from `entity_ids` and entity units from the entities'
# own `text_unit_ids`. Left on disk, they are nearly half of the decoded tables (most of it the
# communities' unit lists), which every later stage would carry.
UNREAD_COLUMNS: dict[str, frozenset[str]] = {
    "communities": frozenset({"text_unit_ids", "relationship_ids"}),
    "relationships": frozenset({"text_unit_ids"}),
    "documents": frozenset({"text_unit_ids"}),
    "text_units": frozenset({"entity_ids", "relationship_ids", "covariate_ids"}),
}


def _read(name: str, path: Path) -> pa.Table:
    skip = UNREAD_COLUMNS.get(name)
    if not skip:
        return pq.read_table(path)
    names = pq.read_schema(path).names
    return pq.read_table(path, columns=[c for c in names if c not in skip])


def source_tables(source_files: dict[str, Path], progress: Any) -> dict[str, pa.Table]:
    """Every table read with pyarrow, without its unread cross-reference lists (`UNREAD_COLUMNS`)
    and pandas index columns.

    A truncated or corrupt file is the user's problem to fix, so it becomes BadInput naming the
    file rather than a pyarrow traceback. `progress` (a callable or None) hears one line per table.
    """
    tables: dict[str, pa.Table] = {}
    for name, path in source_files.items():
        try:
            table = _read(name, path)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise BadInput(f"cannot read {path}: {exc}") from exc
        drop = [c for c in table.column_names if c.startswith("__index_level_")]
        if drop:
            table = table.drop_columns(drop)
        _check_columns(name, path, table)
        tables[name] = table
        if progress is not None:
            progress(f"read {name}: {table.num_rows} rows")
    return tables


# Columns whose type the import relies on, per table (present in some schema generation), and the
# id columns that must not repeat. A wrong type or a repeated id is bad input naming the file and
# column, caught before anything is written.
_TEXT = {"documents": ("id", "title", "text"), "text_units": ("id", "text"), "entities": ("id", "title", "name"),
         "relationships": ("id", "source", "target"), "covariates": ("id", "subject_id"),
         "communities": ("id", "title"), "community_reports": ("title", "summary")}
_NUMBER = {"relationships": ("weight",), "entities": ("degree",), "communities": ("community", "level"),
           "community_reports": ("community", "level", "rank")}
_UNIQUE = {"documents": "id", "text_units": "id", "entities": "id", "relationships": "id", "covariates": "id",
           "communities": "community", "community_reports": "community"}


def _check_columns(name: str, path: Path, table: pa.Table) -> None:
    import pyarrow.compute as pc

    for column in _TEXT.get(name, ()):
        if column in table.column_names:
            kind = table.schema.field(column).type
            if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)):
                raise BadInput(f"{path.name}: column {column} must be text, not {kind}")
    for column in _NUMBER.get(name, ()):
        if column in table.column_names:
            kind = table.schema.field(column).type
            if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_null(kind)):
                raise BadInput(f"{path.name}: column {column} must be a number, not {kind}")
    key = _UNIQUE.get(name)
    if key in table.column_names:
        values = table.column(key).drop_null()
        if pc.count_distinct(values).as_py() != len(values):
            counts = pc.value_counts(values)
            repeated = next(c["values"] for c in counts.to_pylist() if c["counts"] > 1)
            raise BadInput(f"{path.name}: column {key} repeats the value {repeated!r}; ids must be unique")


def schema_version(source_files: dict[str, Path], source_tables: dict[str, pa.Table]) -> str:
    """A coarse GraphRAG schema generation ("0", "1", "2" or "3"), for messages and diagnosis.

    The nodes below look at columns, not at this value; it only tells the user what we saw.
    """
    legacy = any(p.name.startswith(LEGACY_PREFIX) for p in source_files.values())
    if legacy:
        communities = source_tables.get("communities")
        has_parent = communities is not None and "parent" in communities.column_names
        return "1" if has_parent else "0"
    text_units = source_tables.get("text_units")
    if text_units is not None and "document_id" in text_units.column_names:
        return "3"
    return "2"
