"""The normalised shape of a GraphRAG index, independent of where it came from.

Both the demo corpus loader and the Microsoft GraphRAG importer produce an `IndexRecords`; one
writer (drivers.store) turns it into rows. Keeping a single in-memory shape means the importer
and the demo can never disagree about what a complete namespace is.

Embeddings are optional per record: `None` means "embed me with the configured embedder".

The per-row records have slots: a large import holds millions of them, and an instance dict
would add about 100 bytes to each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Document:
    id: str
    title: str
    text: str
    record_title: bool = False  # titled by a record's title field (dataflows/index/corpus.py)


@dataclass(slots=True)
class Chunk:
    """A text unit (kind="text_unit") or a small evidence chunk (kind="evidence").

    `start`/`end` are character offsets into the document text ([start, end)), or None when the
    source does not let us place the chunk (then document_id may still be known).
    """

    id: str
    document_id: str | None
    text: str
    kind: str = "evidence"
    parent_id: str | None = None
    start: int | None = None
    end: int | None = None
    embedding: list[float] | None = None


@dataclass(slots=True)
class Entity:
    id: str
    name: str
    type: str = ""
    description: str = ""
    degree: int = 0
    # True when the entity only appeared as a relationship endpoint in the source index.
    synthesized: bool = False
    embedding: list[float] | None = None
    # The text units that mention the entity (GraphRAG's `text_unit_ids`): where its evidence is.
    unit_ids: tuple[str, ...] = ()


@dataclass(slots=True)
class Alias:
    entity_id: str
    alias: str


@dataclass(slots=True)
class Edge:
    id: str
    source_id: str
    target_id: str
    weight: float = 1.0
    description: str = ""


@dataclass(slots=True)
class Community:
    id: str
    level: int
    parent_id: str | None
    title: str
    member_ids: list[str] = field(default_factory=list)


@dataclass
class PriorGraph:
    """What an update's communities start from: the namespace's communities and the weight of
    each of its edges, by its two entities in sorted order (dataflows/index/leiden.py)."""

    communities: list[Community]
    weights: dict[tuple[str, str], float]


@dataclass(slots=True)
class CommunitySummary:
    community_id: str
    title: str
    summary: str
    full_content: str = ""
    rank: float | None = None
    findings: list[dict[str, Any]] = field(default_factory=list)
    embedding: list[float] | None = None


@dataclass(slots=True)
class Claim:
    id: str
    subject_id: str
    object_id: str | None
    type: str
    description: str
    status: str = ""
    start_date: str | None = None
    end_date: str | None = None
    source_text: str = ""
    document_id: str | None = None
    chunk_id: str | None = None
    start: int | None = None
    end: int | None = None


@dataclass
class IndexRecords:
    documents: list[Document] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    entities: list[Entity] = field(default_factory=list)
    aliases: list[Alias] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    communities: list[Community] = field(default_factory=list)
    summaries: list[CommunitySummary] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    # Model that produced any embeddings carried on the records (None: none carried).
    embedding_model: str | None = None
    warnings: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "documents": len(self.documents),
            "chunks": len(self.chunks),
            "entities": len(self.entities),
            "aliases": len(self.aliases),
            "edges": len(self.edges),
            "communities": len(self.communities),
            "community_summaries": len(self.summaries),
            "claims": len(self.claims),
        }


@dataclass
class WriteSet:
    """An index ready to be written: the records plus what the index flow decided about them, so
    the store's writer only writes (dataflows/index/prepare.py makes it)."""

    records: IndexRecords
    vectors: dict[str, dict[str, Any]]  # "entities" | "chunks" | "community_summaries" → id → vector
    leaf_communities: dict[str, str]  # entity id → its deepest community
    claim_places: dict[str, tuple[int | None, int | None, str | None]]  # claim id → start, end, quote
    embed_model: str
    embed_dim: int
    # (entity id, unit id): the unit's document is named after the entity (dataflows/common/titles.py)
    subject_units: set[tuple[str, str]] = field(default_factory=set)
    # evidence chunk id → the cl100k count of its evidence line (dataflows/common/line_tokens.py)
    chunk_tokens: dict[str, int] = field(default_factory=dict)
    claim_tokens: dict[str, int] = field(default_factory=dict)  # claim id → the same for its line
