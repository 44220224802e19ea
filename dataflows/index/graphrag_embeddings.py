"""Microsoft GraphRAG import, stage 5: the vectors GraphRAG left behind, and whether they can be
kept (only when the configured embedder made them). GraphRAG does not record its model, so the
user may declare it (`source_embedding_model`); otherwise the vectors are attributed to the
pseudo model "graphrag-source:<dim>d", which only an embedder of that exact name can match."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
import pyarrow as pa
import pyarrow.parquet as pq
from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.index.graphrag_values import EMBEDDING_MODES, EmbeddingChoice, SourceEmbeddings, as_text, community_key, table_rows


def _normalise_embedding_name(name: str) -> str:
    """'default-entity-description' / 'entity_description' / 'entity.description' -> one key."""
    key = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    return key.removeprefix("default_")


def _vectors_from_table(table: pa.Table) -> dict[str, list[float]]:
    names = table.column_names
    vec_col = "vector" if "vector" in names else "embedding" if "embedding" in names else None
    if "id" not in names or vec_col is None:
        return {}
    ids = table.column("id").to_pylist()
    vectors = table.column(vec_col).to_pylist()
    return {str(i): [float(x) for x in v] for i, v in zip(ids, vectors, strict=True) if i is not None and v}


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _read_lancedb(folder: Path, out: dict[str, dict[str, list[float]]], warnings: list[str],
                  unreadable: list[str]) -> None:
    tables = sorted(p for p in folder.glob("*.lance") if p.is_dir())
    if not tables:
        warnings.append(f"{folder} has no .lance tables; source embeddings there ignored")
        unreadable.append(f"{folder.name}/ has no .lance tables")
        return
    try:
        import lancedb  # optional dependency
    except ImportError:
        warnings.append(f"lancedb not installed; source embeddings in {folder} ignored (pip install 'graphrag-dag[lancedb]')")
        unreadable.append(f"{folder.name}/ needs the lancedb package (pip install 'graphrag-dag[lancedb]')")
        return
    try:
        db = lancedb.connect(str(folder))
    except Exception as exc:  # noqa: BLE001 - a broken store is a warning, never a crash
        warnings.append(f"cannot open {folder}: {exc}; source embeddings there ignored")
        unreadable.append(f"{folder.name}/ cannot be opened ({_first_line(exc)})")
        return
    for path in tables:
        name = path.name.removesuffix(".lance")
        try:
            vectors = _vectors_from_table(db.open_table(name).to_arrow())
        except Exception as exc:  # noqa: BLE001
            warnings.append(f"cannot read lancedb table {name}: {exc}; ignored")
            unreadable.append(f"{folder.name}/{path.name} cannot be read ({_first_line(exc)})")
            continue
        out.setdefault(_normalise_embedding_name(name), {}).update(vectors)


def embeddings_from_source(
    source_files: dict[str, Path],
    source_tables: dict[str, pa.Table],
    embeddings_mode: str,
    source_embedding_model: str | None = None,
) -> SourceEmbeddings:
    """Vectors GraphRAG left in `lancedb/`, `embeddings.*.parquet` or `*_embedding` columns.

    Nothing is read when the mode is "recompute". Community vectors are keyed by report id in
    GraphRAG and re-keyed by community number here. Problems reading them are warnings: the
    vectors are optional, the graph is not.
    """
    if embeddings_mode not in EMBEDDING_MODES:
        raise BadInput(
            f"embeddings mode must be one of {', '.join(EMBEDDING_MODES)}, not {embeddings_mode!r}"
        )
    found = SourceEmbeddings()
    if embeddings_mode == "recompute":
        return found
    folder = next(iter(source_files.values())).parent
    raw: dict[str, dict[str, list[float]]] = {}
    for path in sorted(folder.glob("embeddings.*.parquet")):
        key = _normalise_embedding_name(path.name.removeprefix("embeddings.").removesuffix(".parquet"))
        try:
            raw.setdefault(key, {}).update(_vectors_from_table(pq.read_table(path)))
        except (pa.ArrowException, OSError, ValueError) as exc:
            found.warnings.append(f"cannot read {path.name}: {exc}; ignored")
    if (folder / "lancedb").is_dir():
        _read_lancedb(folder / "lancedb", raw, found.warnings, found.unreadable)
    # v0/v1 kept vectors in columns of the tables themselves.
    for table_name, column, key in (
        ("entities", "description_embedding", "entity_description"),
        ("community_reports", "full_content_embedding", "community_full_content"),
        ("text_units", "text_embedding", "text_unit_text"),
    ):
        table = source_tables.get(table_name)
        if table is not None and column in table.column_names:
            sub = table.select(["id", column]).rename_columns(["id", "embedding"])
            raw.setdefault(key, {}).update(_vectors_from_table(sub))

    report_to_community = {
        as_text(r.get("id")): community_key(r.get("community"))
        for r in table_rows(source_tables, "community_reports", ("id", "community"))
    }
    found.entities = raw.get("entity_description", {})
    found.text_units = raw.get("text_unit_text", {})
    for rid, vec in raw.get("community_full_content", {}).items():
        cid = report_to_community.get(rid) or rid
        found.communities[cid] = vec
    dims = {len(v) for group in (found.entities, found.communities, found.text_units) for v in group.values()}
    if len(dims) > 1:
        found.warnings.append(f"source embeddings have mixed dimensions {sorted(dims)}; ignored")
        return SourceEmbeddings(warnings=found.warnings)
    if dims:
        found.dim = dims.pop()
        found.model = source_embedding_model or f"graphrag-source:{found.dim}d"
    return found


def embedding_choice(
    embeddings_from_source: SourceEmbeddings, embeddings_mode: str, embedder: Any
) -> EmbeddingChoice:
    """Keep source vectors only if the configured embedder made them; else leave them to be recomputed.

    The source vectors carry the declared model, or "graphrag-source:<dim>d"; an embedder reuses
    them only by carrying that exact model name and dimension. "keep" with a different embedder
    is an error (mixing vector spaces silently ruins retrieval); "auto" falls back to recomputing,
    with a warning.
    """
    source = embeddings_from_source
    warnings = list(source.warnings)
    if embeddings_mode == "recompute":
        return EmbeddingChoice(None, None, warnings)
    if not source.count:
        if embeddings_mode == "keep" and source.unreadable:
            raise BadInput(f"--embeddings keep: the source embeddings cannot be read: {source.unreadable[0]}")
        if embeddings_mode == "keep":
            raise BadInput(
                "--embeddings keep: no usable source embeddings found (no lancedb/ or embeddings.*.parquet)"
            )
        return EmbeddingChoice(None, None, warnings)
    if embedder is None:
        if embeddings_mode == "keep":
            warnings.append(f"no embedder to check against; keeping source embeddings as {source.model}")
            return EmbeddingChoice(source, source.model, warnings)
        warnings.append(f"source embeddings ({source.dim}-d) not reused: no embedder configured; recomputing")
        return EmbeddingChoice(None, None, warnings)
    model = getattr(embedder, "model", None)
    matches = model == source.model and getattr(embedder, "dim", source.dim) == source.dim
    if matches:
        return EmbeddingChoice(source, source.model, warnings)
    if embeddings_mode == "keep":
        declared = not source.model.startswith("graphrag-source:")
        raise BadInput(
            f"--embeddings keep: the source embeddings ({source.dim}-d, "
            + (f"declared as {source.model}" if declared else
               f"model not recorded by GraphRAG, treated as {source.model}")
            + f") were not made by the configured embedder {model} ({getattr(embedder, 'dim', '?')}-d); "
            + ("check the model name and its dimensions" if declared else
               "declare their model with --source-embedding-model, or use --embeddings auto or recompute")
        )
    warnings.append(f"source embeddings ({source.dim}-d) not reusable with {model}; recomputing")
    return EmbeddingChoice(None, None, warnings)
