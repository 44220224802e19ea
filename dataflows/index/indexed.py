"""Indexer, last stage: the records of the new namespace, and what the user should know."""

from __future__ import annotations

from typing import Any

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
from graphrag_dag.dataflows.index.corpus import Corpus
from graphrag_dag.dataflows.index.llm_extraction import Extractions
from graphrag_dag.dataflows.index.reports import Reports


def index_records(corpus: Corpus, documents: list[Document], text_units: list[Chunk], evidence_chunks: list[Chunk],
                  entity_degrees: list[Entity], aliases: list[Alias], edges: list[Edge],
                  communities: list[Community], community_summaries: list[CommunitySummary], claims: list[Claim],
                  extractions: Extractions, community_reports: Reports, progress: Any = None) -> IndexRecords:
    titles = {s.community_id: s.title for s in community_summaries}
    titled = [Community(c.id, c.level, c.parent_id, titles.get(c.id, c.title), c.member_ids) for c in communities]
    warnings = [*corpus.warnings, *extractions.warnings, *community_reports.warnings]
    unplaced = sum(1 for e in entity_degrees if e.degree == 0)
    if unplaced:
        warnings.append(f"{unplaced} entities share no passage with another entity, so they belong to no community")
    records = IndexRecords(documents, text_units + evidence_chunks, entity_degrees, aliases, edges, titled,
                           community_summaries, claims, None, warnings)
    if progress is not None:
        progress("indexed: " + ", ".join(f"{k} {v}" for k, v in records.counts().items()))
    return records
