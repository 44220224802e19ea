"""Microsoft GraphRAG import, last stage: what the user should be warned about, and the records."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
import pyarrow as pa
from graphrag_dag.dataflows.common.records import (
    Alias,
    Chunk,
    Claim,
    Community,
    CommunitySummary,
    Document,
    Edge,
    Entity,
    IndexRecords,
)
from graphrag_dag.dataflows.index.graphrag_values import EmbeddingChoice, as_text, table_rows


def import_warnings(
    source_tables: dict[str, pa.Table],
    synthesized_entities: list[Entity],
    text_units: list[Chunk],
    communities: list[Community],
    community_summaries: list[CommunitySummary],
    embedding_choice: EmbeddingChoice,
) -> list[str]:
    """What the user should know about the import: data we had to invent, skip or could not place."""
    warnings: list[str] = []
    synth = {e.name for e in synthesized_entities}
    rel_rows = table_rows(source_tables, "relationships", ("source", "target"))
    dangling = sum(1 for r in rel_rows if as_text(r.get("source")) in synth or as_text(r.get("target")) in synth)
    rel_titles = {as_text(r.get(k)) for r in rel_rows for k in ("source", "target")} & synth
    if dangling:
        warnings.append(
            f"{dangling} relationships referenced {len(rel_titles)} endpoints missing from entities; "
            "added as entities"
        )
    claim_only = len(synth - rel_titles)
    if claim_only:
        warnings.append(f"{claim_only} claim subjects/objects were missing from entities; added as entities")
    unplaced = [u for u in text_units if u.start is None]
    if unplaced:
        warnings.append(
            f"{len(unplaced)} of {len(text_units)} text units could not be placed in their document text; "
            "their evidence chunks have no offsets"
        )
    orphans = sum(1 for u in text_units if u.document_id is None)
    if orphans:
        warnings.append(f"{orphans} text units name no known document")
    known = {c.id for c in communities}
    stray = sorted({s.community_id for s in community_summaries} - known)
    if stray:
        warnings.append(f"community reports reference communities not in communities: {', '.join(stray)}")
    warnings.extend(embedding_choice.warnings)
    return warnings


def index_records(
    documents: list[Document],
    text_units: list[Chunk],
    evidence_chunks: list[Chunk],
    entities: list[Entity],
    aliases: list[Alias],
    edges: list[Edge],
    communities: list[Community],
    community_summaries: list[CommunitySummary],
    claims: list[Claim],
    embedding_choice: EmbeddingChoice,
    import_warnings: list[str],
    schema_version: str,
    progress: Any,
) -> IndexRecords:
    """The normalised index: text units before their evidence chunks, kept vectors attached.

    Records from upstream nodes are copied, not mutated, so cached node results stay valid.
    """
    vectors = embedding_choice.vectors
    chunks = text_units + evidence_chunks
    summaries = community_summaries
    ents = entities
    if vectors is not None:
        ents = [replace(e, embedding=vectors.entities.get(e.id)) for e in entities]
        chunks = [
            replace(c, embedding=vectors.text_units.get(c.id)) if c.kind == "text_unit" else c for c in chunks
        ]
        summaries = [
            replace(s, embedding=vectors.communities.get(s.community_id)) for s in community_summaries
        ]
    records = IndexRecords(
        documents=documents,
        chunks=chunks,
        entities=ents,
        aliases=aliases,
        edges=edges,
        communities=communities,
        summaries=summaries,
        claims=claims,
        embedding_model=embedding_choice.model,
        warnings=import_warnings,
    )
    if progress is not None:
        counts = ", ".join(f"{k} {v}" for k, v in records.counts().items())
        progress(f"normalised GraphRAG v{schema_version} output: {counts}")
    return records
