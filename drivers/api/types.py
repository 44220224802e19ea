"""The shapes of what `GraphRag` returns, as TypedDicts: a search result is still the JSON object of
docs/contract.md (`query --json`, the HTTP API), and a type checker or an IDE now knows its keys.
tests/test_api_types.py holds real results to these declarations, both ways."""

from __future__ import annotations

from typing import Any, Literal, TypedDict


class ParsedQuery(TypedDict, total=False):
    entities: list[str]
    keywords: list[str]
    themes: list[str]
    sub_questions: list[str]  # with the decompose switch
    expansions: list[str]


class MatchedEntity(TypedDict):
    id: str
    name: str
    score: float
    channels: list[str]


class CommunityHit(TypedDict):
    id: str
    level: int
    title: str
    score: float
    summary: str
    matched_entities: list[str]


class Evidence(TypedDict, total=False):
    id: str
    kind: Literal["claim", "chunk"]
    text: str
    document_id: str
    chunk_id: str | None
    start: int | None
    end: int | None
    statement: str  # a claim's


class Source(TypedDict):
    document_id: str
    title: str
    text_unit_id: str
    start: int
    end: int
    score: float
    signals: list[str]


class TraceEntry(TypedDict):
    node: str
    ms: float
    cached: bool


class LlmUsage(TypedDict):
    calls: int
    prompt_tokens: int
    completion_tokens: int
    by_stage: dict[str, dict[str, int]]


class _Result(TypedDict):
    method: Literal["local", "global", "basic", "drift"]
    namespace: str
    query: str
    status: Literal["completed", "partial", "no_results", "failed"]
    offline: bool
    answer: str
    answer_method: Literal["llm", "extractive", "none"]
    warnings: list[str]
    timings_ms: dict[str, float]
    trace: list[TraceEntry]
    llm: LlmUsage


class LocalResult(_Result, total=False):
    """Local search (and basic search, which has no entities or communities)."""

    parsed_query: ParsedQuery
    matched_entities: list[MatchedEntity]
    communities: list[CommunityHit]
    evidence: list[Evidence]
    sources: list[Source]


class MapAnswer(TypedDict):
    batch: int
    community_ids: list[str]
    usefulness: int
    answer: str


class GlobalResult(_Result, total=False):
    level: int | None
    map_answers: list[MapAnswer]
    failed_batches: int
    error: str | None
    selection: dict[str, Any]  # with dynamic selection


class DriftStep(TypedDict, total=False):
    depth: int
    question: str
    status: str
    answer: str
    answer_method: str
    matched_entities: list[str]
    communities: list[str]
    evidence: list[str]
    sources: list[str]
    warnings: list[str]
    error: str | None
    ms: float


class DriftResult(_Result, total=False):
    primer: dict[str, Any]
    steps: list[DriftStep]
    error: str | None
    evidence: list[Evidence]
    sources: list[Source]


class _Written(TypedDict, total=False):
    """Rows written per table."""

    documents: int
    chunks: int
    entities: int
    aliases: int
    edges: int
    communities: int
    community_summaries: int
    claims: int


class IndexReport(_Written, total=False):
    """What `GraphRag.index` wrote and how: row counts per table, the LLM's calls and tokens,
    extraction cache hits, each stage's time, and warnings (unread files, failed LLM calls)."""

    offline: bool
    extraction_cache_hits: int
    seconds: float
    warnings: list[str]
    llm: dict[str, Any]
    timings_ms: dict[str, float]
    update: dict[str, Any]  # with `update` and for `delete_documents`: what was kept, reused and redone
    deleted_documents: list[str]  # `delete_documents`: the ids removed


class ImportReport(_Written, total=False):
    """What `GraphRag.import_graphrag` wrote: rows per table, and what it could not take."""

    warnings: list[str]
