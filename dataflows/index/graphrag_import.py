"""Read a Microsoft GraphRAG output folder and normalise it into `IndexRecords`.

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

Inputs: `source_path` (str), `embeddings_mode` ("auto" | "keep" | "recompute"), `embedder`
(an `Embedder` or None) and `progress` (a `Callable[[str], None]` or None). The last two are
typed `Any` because Hamilton 1.90's input validation rejects Protocol- and Callable-typed
inputs even when the value conforms.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from graphrag_dag.dataflows.common.errors import BadInput
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

# Canonical table names; v0/v1 prefix them with "create_final_".
_TABLES = (
    "documents",
    "text_units",
    "entities",
    "relationships",
    "communities",
    "community_reports",
    "covariates",
    "nodes",
)
_LEGACY_PREFIX = "create_final_"
_EMBEDDING_MODES = ("auto", "keep", "recompute")
# Evidence chunk size: pack whole sentences up to _EVIDENCE_MAX characters; a last chunk
# shorter than _EVIDENCE_TINY joins its predecessor if that stays within _EVIDENCE_SLACK * max.
_EVIDENCE_MAX = 600
_EVIDENCE_TINY = 120
_EVIDENCE_SLACK = 1.25
# Leading lines of prepended metadata we are willing to skip when placing a text unit.
_MAX_HEADER_LINES = 5
_MAX_HEADER_CHARS = 400
# Placeholder name for claims whose subject is empty.
_UNKNOWN_SUBJECT = "UNKNOWN"
# Object values GraphRAG uses to mean "no object".
_NO_OBJECT = {"", "NONE", "N/A", "NULL", "UNKNOWN"}


@dataclass
class SourceEmbeddings:
    """Vectors found in the source folder, keyed by our record ids.

    `model` is a pseudo model name ("graphrag-source:<dim>d") because GraphRAG output does not
    record which embedding model made the vectors.
    """

    model: str | None = None
    dim: int | None = None
    entities: dict[str, list[float]] = field(default_factory=dict)
    communities: dict[str, list[float]] = field(default_factory=dict)  # keyed by community id
    text_units: dict[str, list[float]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.entities) + len(self.communities) + len(self.text_units)


@dataclass
class EmbeddingChoice:
    """Which source vectors go onto the records (none when `vectors` is None)."""

    vectors: SourceEmbeddings | None
    model: str | None
    warnings: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# small helpers


def _clean(value: Any) -> Any:
    """None for NaN / missing, else the value (pyarrow gives None, but floats can be NaN)."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _get(row: dict[str, Any], *names: str, default: Any = None) -> Any:
    """First non-missing value among `names` (columns were renamed across versions)."""
    for name in names:
        value = _clean(row.get(name))
        if value is not None:
            return value
    return default


def _text(value: Any) -> str:
    value = _clean(value)
    return "" if value is None else str(value)


def _int_or_none(value: Any) -> int | None:
    value = _clean(value)
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _community_key(value: Any) -> str | None:
    """Our community id: the community number as a string; -1 / NaN / None mean "none"."""
    number = _int_or_none(value)
    if number is None:
        value = _clean(value)
        return None if value in (None, "") else str(value)
    return None if number < 0 else str(number)


def _rows(tables: dict[str, pa.Table], name: str) -> list[dict[str, Any]]:
    table = tables.get(name)
    return [] if table is None else table.to_pylist()


def _synthetic_entity_id(title: str) -> str:
    return "graphrag-synth-" + hashlib.sha1(title.encode("utf-8")).hexdigest()[:20]


def _split_sentences_spans(text: str) -> list[tuple[int, int]]:
    """Sentence spans [start, end) of `text`, whitespace trimmed, in order, never overlapping.

    A sentence ends after `.`, `!` or `?` (plus closing quotes/brackets) followed by whitespace,
    after the CJK stops `。！？` (which need no following space), or at a blank line. The pieces
    between sentences are only whitespace, so joining consecutive spans loses no text.
    """
    boundaries = re.compile(
        r"[.!?]+[\"'”’)\]»]*(?=\s|$)"  # western stop, then space or end
        r"|[。！？]+[”’」』）》]*"  # CJK stop
        r"|\n[ \t]*\n"  # paragraph break
    )
    spans: list[tuple[int, int]] = []
    start = 0
    for match in boundaries.finditer(text):
        end = match.end() if not match.group().startswith("\n") else match.start()
        spans.append((start, end))
        start = match.end()
    spans.append((start, len(text)))
    trimmed: list[tuple[int, int]] = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            trimmed.append((s, e))
    return trimmed


def _cut_long_span(text: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """Cut one over-long sentence at newlines, then whitespace, then hard, into <= limit pieces."""
    pieces: list[tuple[int, int]] = []
    while end - start > limit:
        window = text[start : start + limit]
        cut = window.rfind("\n")
        if cut < limit // 3:
            cut = max(window.rfind(" "), window.rfind("\t"), window.rfind("\u3000"))
        if cut < limit // 3:
            cut = limit
        piece_end = start + cut
        while piece_end > start and text[piece_end - 1].isspace():
            piece_end -= 1
        if piece_end > start:
            pieces.append((start, piece_end))
        start += cut
        while start < end and text[start].isspace():
            start += 1
    if end > start:
        pieces.append((start, end))
    return pieces


def _evidence_spans(text: str, limit: int = _EVIDENCE_MAX) -> list[tuple[int, int]]:
    """Group whole sentences into spans of at most `limit` characters (a few sentences each).

    Greedy packing gives chunks of roughly limit/2..limit characters; a lone sentence longer than
    the limit is cut at a newline or space instead. A tiny leftover (the last short sentence of
    a unit) joins its predecessor rather than standing alone as a useless citation.
    """
    units: list[tuple[int, int]] = []
    for s, e in _split_sentences_spans(text):
        units.extend(_cut_long_span(text, s, e, limit) if e - s > limit else [(s, e)])
    packed: list[tuple[int, int]] = []
    for s, e in units:
        if packed and e - packed[-1][0] <= limit:
            packed[-1] = (packed[-1][0], e)
        else:
            packed.append((s, e))
    if len(packed) > 1:
        (s0, _), (s1, e1) = packed[-2], packed[-1]
        if e1 - s1 < _EVIDENCE_TINY and e1 - s0 <= limit * _EVIDENCE_SLACK:
            packed[-2:] = [(s0, e1)]
    return packed


def _locate(document_text: str, unit_text: str, cursor: int) -> tuple[int, int] | None:
    """Where `unit_text` sits in the document: (document offset, offset inside the unit).

    Text units overlap, so searching starts at the previous unit's start (the cursor), then the
    whole document. GraphRAG v3 can prepend metadata lines ("title: x.txt.") that are not in the
    document; we skip up to a few leading lines and place the rest.
    """
    if not document_text or not unit_text:
        return None
    skip = 0
    for _ in range(_MAX_HEADER_LINES + 1):
        body = unit_text[skip:]
        if body.strip():
            pos = document_text.find(body, cursor)
            if pos < 0:
                pos = document_text.find(body)
            if pos >= 0:
                return pos, skip
        newline = unit_text.find("\n", skip)
        if newline < 0 or newline + 1 > _MAX_HEADER_CHARS:
            return None
        skip = newline + 1
    return None


# --------------------------------------------------------------------------------------------
# READ


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
    for name in _TABLES:
        for candidate in (folder / f"{name}.parquet", folder / f"{_LEGACY_PREFIX}{name}.parquet"):
            if candidate.is_file():
                found[name] = candidate
                break
    if "relationships" not in found or not ({"entities", "nodes"} & found.keys()):
        raise BadInput(f"{folder} is not a GraphRAG output folder (no entities/relationships parquet)")
    return found


def source_tables(source_files: dict[str, Path], progress: Any) -> dict[str, pa.Table]:
    """Every table read with pyarrow, pandas index columns dropped.

    A truncated or corrupt file is the user's problem to fix, so it becomes BadInput naming the
    file rather than a pyarrow traceback. `progress` (a callable or None) hears one line per table.
    """
    tables: dict[str, pa.Table] = {}
    for name, path in source_files.items():
        try:
            table = pq.read_table(path)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise BadInput(f"cannot read {path}: {exc}") from exc
        drop = [c for c in table.column_names if c.startswith("__index_level_")]
        if drop:
            table = table.drop_columns(drop)
        tables[name] = table
        if progress is not None:
            progress(f"read {name}: {table.num_rows} rows")
    return tables


def schema_version(source_files: dict[str, Path], source_tables: dict[str, pa.Table]) -> str:
    """A coarse GraphRAG schema generation ("0", "1", "2" or "3"), for messages and diagnosis.

    The nodes below look at columns, not at this value; it only tells the user what we saw.
    """
    legacy = any(p.name.startswith(_LEGACY_PREFIX) for p in source_files.values())
    if legacy:
        communities = source_tables.get("communities")
        has_parent = communities is not None and "parent" in communities.column_names
        return "1" if has_parent else "0"
    text_units = source_tables.get("text_units")
    if text_units is not None and "document_id" in text_units.column_names:
        return "3"
    return "2"


# --------------------------------------------------------------------------------------------
# NORMALISE


def documents(source_tables: dict[str, pa.Table]) -> list[Document]:
    """One Document per documents row (never more, never fewer), text "" when absent.

    v0 called the text `raw_content`. Stale `text_unit_ids` (operation-dulce) are ignored: text
    units say which document they belong to.
    """
    result: list[Document] = []
    for row in _rows(source_tables, "documents"):
        doc_id = _text(_get(row, "id"))
        result.append(
            Document(
                id=doc_id,
                title=_text(_get(row, "title", default=doc_id)),
                text=_text(_get(row, "text", "raw_content")),
            )
        )
    return result


def text_units(source_tables: dict[str, pa.Table], documents: list[Document]) -> list[Chunk]:
    """Text units as chunks (kind="text_unit"), placed in their document when possible.

    Placement uses `str.find` from a running cursor per document (units overlap). When placed,
    the chunk text is exactly `document.text[start:end]` (metadata lines GraphRAG prepended are
    dropped); otherwise start/end are None and the text is kept as GraphRAG stored it.
    A document id that names no document becomes None so the store's foreign keys hold.
    """
    docs = {d.id: d for d in documents}
    rows = _rows(source_tables, "text_units")
    # Place units in reading order; GraphRAG numbers them in that order.
    order = sorted(range(len(rows)), key=lambda i: (_int_or_none(rows[i].get("human_readable_id")) or 0, i))
    cursors: dict[str, int] = {}
    placed: dict[int, Chunk] = {}
    for i in order:
        row = rows[i]
        doc_id = _get(row, "document_id")
        if doc_id is None:
            ids = _get(row, "document_ids") or []
            doc_id = next((str(x) for x in ids if x is not None), None)
        doc_id = str(doc_id) if doc_id is not None and str(doc_id) in docs else None
        text = _text(_get(row, "text", "chunk"))
        start = end = None
        if doc_id is not None:
            where = _locate(docs[doc_id].text, text, cursors.get(doc_id, 0))
            if where is not None:
                pos, skip = where
                text = text[skip:]
                start, end = pos, pos + len(text)
                cursors[doc_id] = pos + 1
        placed[i] = Chunk(
            id=_text(_get(row, "id")),
            document_id=doc_id,
            text=text,
            kind="text_unit",
            parent_id=None,
            start=start,
            end=end,
        )
    return [placed[i] for i in range(len(rows))]


def evidence_chunks(text_units: list[Chunk]) -> list[Chunk]:
    """Each text unit cut into small chunks of a few whole sentences (kind="evidence").

    Text units (~1,200 tokens) are too coarse to cite; evidence chunks are what an answer quotes.
    Offsets are document offsets whenever the unit was placed, so `doc.text[start:end] == text`.
    """
    result: list[Chunk] = []
    for unit in text_units:
        for n, (s, e) in enumerate(_evidence_spans(unit.text)):
            placed = unit.start is not None
            result.append(
                Chunk(
                    id=f"{unit.id}:ev{n}",
                    document_id=unit.document_id,
                    text=unit.text[s:e],
                    kind="evidence",
                    parent_id=unit.id,
                    start=unit.start + s if placed else None,
                    end=unit.start + e if placed else None,
                )
            )
    return result


def source_entities(source_tables: dict[str, pa.Table]) -> list[Entity]:
    """Entities as GraphRAG stored them, with our id = GraphRAG's entity id.

    Uses `entities` (v0 name `name`, later `title`); only when that table is missing, falls back
    to `nodes`, deduplicated (nodes repeat each entity once per community level). Degree comes
    from the source when present, else from relationship counts.
    """
    rows = _rows(source_tables, "entities")
    if not rows:
        seen: set[str] = set()
        for row in _rows(source_tables, "nodes"):
            key = _text(_get(row, "id", "title", "name"))
            if key and key not in seen:
                seen.add(key)
                rows.append(row)
    degrees = _relationship_degrees(source_tables)
    result: list[Entity] = []
    for row in rows:
        name = _text(_get(row, "title", "name"))
        entity_id = _text(_get(row, "id")) or _synthetic_entity_id(name)
        degree = _int_or_none(_get(row, "degree"))
        result.append(
            Entity(
                id=entity_id,
                name=name,
                type=_text(_get(row, "type")),
                description=_text(_get(row, "description")),
                degree=degree if degree is not None else degrees.get(name, 0),
            )
        )
    return result


def _relationship_degrees(source_tables: dict[str, pa.Table]) -> dict[str, int]:
    degrees: dict[str, int] = {}
    for row in _rows(source_tables, "relationships"):
        for key in ("source", "target"):
            title = _text(row.get(key))
            degrees[title] = degrees.get(title, 0) + 1
    return degrees


def _claim_subject(row: dict[str, Any]) -> str:
    return _text(_get(row, "subject_id")).strip() or _UNKNOWN_SUBJECT


def _claim_object(row: dict[str, Any]) -> str | None:
    value = _text(_get(row, "object_id")).strip()
    return None if value.upper() in _NO_OBJECT else value


def synthesized_entities(source_entities: list[Entity], source_tables: dict[str, pa.Table]) -> list[Entity]:
    """Entities GraphRAG references but never defined: relationship endpoints, claim parties.

    GraphRAG v3 keeps relationships whose endpoint was pruned from entities, and claim extraction
    names subjects freely. Edges and claims need both ends in our entity table, so each distinct
    missing title becomes an entity flagged `synthesized=True`.
    """
    known_titles = {e.name for e in source_entities}
    known_ids = {e.id for e in source_entities}
    degrees = _relationship_degrees(source_tables)
    result: dict[str, Entity] = {}

    def add(title: str, description: str) -> None:
        if title in known_titles or title in known_ids or title in result:
            return
        result[title] = Entity(
            id=_synthetic_entity_id(title),
            name=title,
            description=description,
            degree=degrees.get(title, 0),
            synthesized=True,
        )

    for row in _rows(source_tables, "relationships"):
        for key in ("source", "target"):
            add(_text(row.get(key)), "Relationship endpoint missing from the GraphRAG entities.")
    for row in _rows(source_tables, "covariates"):
        add(_claim_subject(row), "Claim subject missing from the GraphRAG entities.")
        obj = _claim_object(row)
        if obj is not None:
            add(obj, "Claim object missing from the GraphRAG entities.")
    return list(result.values())


def entities(source_entities: list[Entity], synthesized_entities: list[Entity]) -> list[Entity]:
    """All entities: the source's, then the synthesized ones."""
    return source_entities + synthesized_entities


def entity_ids_by_title(entities: list[Entity]) -> dict[str, str]:
    """Title -> entity id; ids also map to themselves, since a few tables hold ids, not titles."""
    lookup = {e.id: e.id for e in entities}
    for e in entities:
        lookup.setdefault(e.name, e.id)
    return lookup


def edges(source_tables: dict[str, pa.Table], entity_ids_by_title: dict[str, str]) -> list[Edge]:
    """Relationships as edges; endpoints (titles in GraphRAG) resolved to entity ids."""
    result: list[Edge] = []
    for row in _rows(source_tables, "relationships"):
        weight = _clean(row.get("weight"))
        result.append(
            Edge(
                id=_text(_get(row, "id")),
                source_id=entity_ids_by_title[_text(row.get("source"))],
                target_id=entity_ids_by_title[_text(row.get("target"))],
                weight=float(weight) if weight is not None else 1.0,
                description=_text(_get(row, "description")),
            )
        )
    return result


def communities(source_tables: dict[str, pa.Table], entity_ids_by_title: dict[str, str]) -> list[Community]:
    """Communities keyed by their number (reports reference the number, not the uuid).

    Members come from `entity_ids` (ids in every version seen; titles are resolved too); without
    that column, from `nodes` rows of the same community and level. Parents: the `parent`
    column when present (-1 means root); v0 has none, so each community's parent is the
    community one level up sharing most of its members.
    """
    rows = _rows(source_tables, "communities")
    nodes_members: dict[tuple[str, int], list[str]] = {}
    if rows and "entity_ids" not in rows[0]:
        for node in _rows(source_tables, "nodes"):
            key = (_community_key(node.get("community")), _int_or_none(node.get("level")) or 0)
            member = entity_ids_by_title.get(_text(_get(node, "id"))) or entity_ids_by_title.get(
                _text(_get(node, "title", "name"))
            )
            if key[0] is not None and member is not None:
                nodes_members.setdefault(key, []).append(member)
    has_parent = bool(rows) and "parent" in rows[0]
    result: list[Community] = []
    for row in rows:
        cid = _community_key(_get(row, "community", "id")) or _text(_get(row, "id"))
        level = _int_or_none(row.get("level")) or 0
        if "entity_ids" in row:
            members = []
            for ref in row.get("entity_ids") or []:
                resolved = entity_ids_by_title.get(_text(ref))
                if resolved is not None and resolved not in members:
                    members.append(resolved)
        else:
            members = list(dict.fromkeys(nodes_members.get((cid, level), [])))
        result.append(
            Community(
                id=cid,
                level=level,
                parent_id=_community_key(row.get("parent")) if has_parent else None,
                title=_text(_get(row, "title", default=f"Community {cid}")),
                member_ids=members,
            )
        )
    if not has_parent:
        result = _derive_parents(result)
    return _check_parents(result)


def _derive_parents(items: list[Community]) -> list[Community]:
    """Parent = the community one level up with the largest member overlap (ties: first)."""
    by_level: dict[int, list[Community]] = {}
    for c in items:
        by_level.setdefault(c.level, []).append(c)
    result: list[Community] = []
    for c in items:
        best, best_overlap = None, 0
        members = set(c.member_ids)
        for candidate in by_level.get(c.level - 1, []):
            overlap = len(members & set(candidate.member_ids))
            if overlap > best_overlap:
                best, best_overlap = candidate.id, overlap
        result.append(replace(c, parent_id=best))
    return result


def _check_parents(items: list[Community]) -> list[Community]:
    """Drop parent links that point nowhere or skip levels, so the hierarchy is a clean tree."""
    levels = {c.id: c.level for c in items}
    return [
        c if c.parent_id is None or levels.get(c.parent_id) == c.level - 1 else replace(c, parent_id=None)
        for c in items
    ]


def community_summaries(source_tables: dict[str, pa.Table]) -> list[CommunitySummary]:
    """One summary per community report, keyed by the community number (as a string)."""
    result: list[CommunitySummary] = []
    for row in _rows(source_tables, "community_reports"):
        rank = _clean(row.get("rank"))
        findings = [
            dict(f) if isinstance(f, dict) else {"summary": _text(f)} for f in row.get("findings") or []
        ]
        result.append(
            CommunitySummary(
                community_id=_community_key(row.get("community")) or str(_int_or_none(row.get("community"))),
                title=_text(_get(row, "title")),
                summary=_text(_get(row, "summary")),
                full_content=_text(_get(row, "full_content")),
                rank=float(rank) if rank is not None else None,
                findings=findings,
            )
        )
    return result


def claims(
    source_tables: dict[str, pa.Table],
    entity_ids_by_title: dict[str, str],
    text_units: list[Chunk],
    evidence_chunks: list[Chunk],
) -> list[Claim]:
    """Covariates as claims, with provenance as precise as the text allows.

    Subject/object titles resolve to entity ids (missing ones were synthesized). The claim's
    chunk is the evidence chunk holding (most of) its source text, else its text unit; its span
    is the source text's position in the document when the text unit was placed and the quote
    could be found (see `_find_quote`).
    """
    units = {u.id: u for u in text_units}
    children: dict[str, list[Chunk]] = {}
    for chunk in evidence_chunks:
        children.setdefault(chunk.parent_id or "", []).append(chunk)
    result: list[Claim] = []
    for row in _rows(source_tables, "covariates"):
        unit = units.get(_text(_get(row, "text_unit_id")))
        source_text = _text(_get(row, "source_text"))
        chunk_id = unit.id if unit is not None else None
        start = end = None
        span = _find_quote(unit.text, source_text) if unit is not None else None
        if unit is not None and span is not None:
            chunk_id = _best_child(unit, children.get(unit.id, []), span) or unit.id
            if unit.start is not None:
                start, end = unit.start + span[0], unit.start + span[1]
        obj = _claim_object(row)
        result.append(
            Claim(
                id=_text(_get(row, "id")),
                subject_id=entity_ids_by_title[_claim_subject(row)],
                object_id=entity_ids_by_title.get(obj) if obj is not None else None,
                type=_text(_get(row, "type", "covariate_type")),
                description=_text(_get(row, "description")),
                status=_text(_get(row, "status")),
                start_date=_text(_get(row, "start_date")) or None,
                end_date=_text(_get(row, "end_date")) or None,
                source_text=source_text,
                document_id=unit.document_id if unit is not None else None,
                chunk_id=chunk_id,
                start=start,
                end=end,
            )
        )
    return result


_QUOTE_CLASSES = {"'": "['‘’`]", "‘": "['‘’`]", "’": "['‘’`]", '"': '["“”]', "“": '["“”]', "”": '["“”]'}


def _quote_pattern(quote: str) -> str:
    """Regex for `quote` that tolerates different whitespace and straight/curly quote marks."""
    words = quote.split()
    return r"\s+".join("".join(_QUOTE_CLASSES.get(ch, re.escape(ch)) for ch in w) for w in words)


def _find_quote(text: str, quote: str) -> tuple[int, int] | None:
    """Span of a claim's source text inside `text`, or of its longest locatable part.

    Claim extraction quotes the text but re-flows line breaks, straightens quote marks and
    sometimes joins several quotes with ";" or "...". We try the whole quote verbatim, then
    whitespace/quote-insensitively, then each part of at least 30 characters (longest first).
    """
    quote = quote.strip()
    if not quote or not text:
        return None
    pos = text.find(quote)
    if pos >= 0:
        return pos, pos + len(quote)
    parts = [quote] + sorted(
        (p.strip() for p in re.split(r";|\.\.\.|…", quote) if len(p.strip()) >= 30),
        key=len,
        reverse=True,
    )
    for part in parts:
        match = re.search(_quote_pattern(part), text)
        if match:
            return match.start(), match.end()
    return None


def _best_child(unit: Chunk, children: list[Chunk], span: tuple[int, int]) -> str | None:
    """The evidence chunk (of `unit`) overlapping the unit-relative `span` most; None if none."""
    best, best_overlap = None, 0
    offset = 0
    for child in children:
        if unit.start is not None and child.start is not None:
            c_start = child.start - unit.start
        else:  # unplaced unit: children are in order, recover offsets by search
            c_start = unit.text.find(child.text, offset)
        offset = max(c_start, 0)
        overlap = min(span[1], c_start + len(child.text)) - max(span[0], c_start)
        if overlap > best_overlap:
            best, best_overlap = child.id, overlap
    return best


def aliases() -> list[Alias]:
    """GraphRAG has no alias table; titles are the only names."""
    return []


# --------------------------------------------------------------------------------------------
# EMBED


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


def _read_lancedb(folder: Path, out: dict[str, dict[str, list[float]]], warnings: list[str]) -> None:
    tables = sorted(p for p in folder.glob("*.lance") if p.is_dir())
    if not tables:
        warnings.append(f"{folder} has no .lance tables; source embeddings there ignored")
        return
    try:
        import lancedb  # optional dependency
    except ImportError:
        warnings.append(f"lancedb not installed; source embeddings in {folder} ignored (pip install lancedb)")
        return
    try:
        db = lancedb.connect(str(folder))
    except Exception as exc:  # noqa: BLE001 - a broken store is a warning, never a crash
        warnings.append(f"cannot open {folder}: {exc}; source embeddings there ignored")
        return
    for path in tables:
        name = path.name.removesuffix(".lance")
        try:
            vectors = _vectors_from_table(db.open_table(name).to_arrow())
        except Exception as exc:  # noqa: BLE001
            warnings.append(f"cannot read lancedb table {name}: {exc}; ignored")
            continue
        out.setdefault(_normalise_embedding_name(name), {}).update(vectors)


def embeddings_from_source(
    source_files: dict[str, Path],
    source_tables: dict[str, pa.Table],
    embeddings_mode: str,
) -> SourceEmbeddings:
    """Vectors GraphRAG left in `lancedb/`, `embeddings.*.parquet` or `*_embedding` columns.

    Nothing is read when the mode is "recompute". Community vectors are keyed by report id in
    GraphRAG and re-keyed by community number here. Problems reading them are warnings: the
    vectors are optional, the graph is not.
    """
    if embeddings_mode not in _EMBEDDING_MODES:
        raise BadInput(
            f"embeddings mode must be one of {', '.join(_EMBEDDING_MODES)}, not {embeddings_mode!r}"
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
        _read_lancedb(folder / "lancedb", raw, found.warnings)
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
        _text(r.get("id")): _community_key(r.get("community"))
        for r in _rows(source_tables, "community_reports")
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
        found.model = f"graphrag-source:{found.dim}d"
    return found


def embedding_choice(
    embeddings_from_source: SourceEmbeddings, embeddings_mode: str, embedder: Any
) -> EmbeddingChoice:
    """Keep source vectors only if the configured embedder made them; else leave them to be recomputed.

    GraphRAG does not record its embedding model, so source vectors are attributed to the
    pseudo model "graphrag-source:<dim>d"; an embedder reuses them only by carrying that exact
    model name. "keep" with a different embedder is an error (mixing vector spaces silently
    ruins retrieval); "auto" falls back to recomputing, with a warning.
    """
    source = embeddings_from_source
    warnings = list(source.warnings)
    if embeddings_mode == "recompute":
        return EmbeddingChoice(None, None, warnings)
    if not source.count:
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
        raise BadInput(
            f"--embeddings keep: the source embeddings ({source.dim}-d, model not recorded by GraphRAG, "
            f"treated as {source.model}) were not made by the configured embedder {model}; "
            "use --embeddings auto or recompute"
        )
    warnings.append(f"source embeddings ({source.dim}-d) not reusable with {model}; recomputing")
    return EmbeddingChoice(None, None, warnings)


# --------------------------------------------------------------------------------------------
# ASSEMBLE


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
    rel_rows = _rows(source_tables, "relationships")
    dangling = sum(1 for r in rel_rows if _text(r.get("source")) in synth or _text(r.get("target")) in synth)
    rel_titles = {_text(r.get(k)) for r in rel_rows for k in ("source", "target")} & synth
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
