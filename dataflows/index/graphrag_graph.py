"""Microsoft GraphRAG import, stage 3: entities (with entities invented for dangling relationship
endpoints and claim subjects), edges, the community hierarchy and the community reports."""

from __future__ import annotations

from dataclasses import replace
import pyarrow as pa
from graphrag_dag.dataflows.common.records import (
    Alias,
    Community,
    CommunitySummary,
    Edge,
    Entity,
)
from graphrag_dag.dataflows.index.graphrag_values import as_text, claim_object, claim_subject, clean, community_key, first_value, int_or_none, synthetic_entity_id, table_rows


def source_entities(source_tables: dict[str, pa.Table]) -> list[Entity]:
    """Entities as GraphRAG stored them, with our id = GraphRAG's entity id.

    Uses `entities` (v0 name `name`, later `title`); only when that table is missing, falls back
    to `nodes`, deduplicated (nodes repeat each entity once per community level). Degree comes
    from the source when present, else from relationship counts.
    """
    rows = table_rows(source_tables, "entities")
    if not rows:
        seen: set[str] = set()
        for row in table_rows(source_tables, "nodes"):
            key = as_text(first_value(row, "id", "title", "name"))
            if key and key not in seen:
                seen.add(key)
                rows.append(row)
    degrees = _relationship_degrees(source_tables)
    result: list[Entity] = []
    for row in rows:
        name = as_text(first_value(row, "title", "name"))
        entity_id = as_text(first_value(row, "id")) or synthetic_entity_id(name)
        degree = int_or_none(first_value(row, "degree"))
        result.append(
            Entity(
                id=entity_id,
                name=name,
                type=as_text(first_value(row, "type")),
                description=as_text(first_value(row, "description")),
                degree=degree if degree is not None else degrees.get(name, 0),
                unit_ids=tuple(as_text(u) for u in _list(row.get("text_unit_ids")) if as_text(u)),
            )
        )
    return result


def _list(value: object) -> list:
    return list(value) if isinstance(value, (list, tuple)) else []


def _relationship_degrees(source_tables: dict[str, pa.Table]) -> dict[str, int]:
    degrees: dict[str, int] = {}
    for row in table_rows(source_tables, "relationships", ("source", "target")):
        for key in ("source", "target"):
            title = as_text(row.get(key))
            degrees[title] = degrees.get(title, 0) + 1
    return degrees


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
            id=synthetic_entity_id(title),
            name=title,
            description=description,
            degree=degrees.get(title, 0),
            synthesized=True,
        )

    for row in table_rows(source_tables, "relationships", ("source", "target")):
        for key in ("source", "target"):
            add(as_text(row.get(key)), "Relationship endpoint missing from the GraphRAG entities.")
    for row in table_rows(source_tables, "covariates", ("subject_id", "object_id")):
        add(claim_subject(row), "Claim subject missing from the GraphRAG entities.")
        obj = claim_object(row)
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
    for row in table_rows(source_tables, "relationships", ("id", "source", "target", "weight", "description")):
        weight = clean(row.get("weight"))
        result.append(
            Edge(
                id=as_text(first_value(row, "id")),
                source_id=entity_ids_by_title[as_text(row.get("source"))],
                target_id=entity_ids_by_title[as_text(row.get("target"))],
                weight=float(weight) if weight is not None else 1.0,
                description=as_text(first_value(row, "description")),
            )
        )
    return result


def communities(source_tables: dict[str, pa.Table], entity_ids_by_title: dict[str, str]) -> list[Community]:
    """Communities keyed by their number (reports reference the number, not the uuid).

    The title is the community report's, when there is one. Members come from `entity_ids` (ids
    in every version seen; titles are resolved too); without
    that column, from `nodes` rows of the same community and level. Parents: the `parent`
    column when present (-1 means root); v0 has none, so each community's parent is the
    community one level up sharing most of its members.
    """
    rows = table_rows(source_tables, "communities", ("community", "id", "level", "entity_ids", "parent", "title"))
    nodes_members: dict[tuple[str, int], list[str]] = {}
    if rows and "entity_ids" not in rows[0]:
        for node in table_rows(source_tables, "nodes"):
            key = (community_key(node.get("community")), int_or_none(node.get("level")) or 0)
            member = entity_ids_by_title.get(as_text(first_value(node, "id"))) or entity_ids_by_title.get(
                as_text(first_value(node, "title", "name"))
            )
            if key[0] is not None and member is not None:
                nodes_members.setdefault(key, []).append(member)
    has_parent = bool(rows) and "parent" in rows[0]
    # GraphRAG titles a community "Community 89"; its report's title says what it is about.
    report_titles = {community_key(r.get("community")): as_text(first_value(r, "title")).strip()
                     for r in table_rows(source_tables, "community_reports", ("community", "title"))}
    result: list[Community] = []
    for row in rows:
        cid = community_key(first_value(row, "community", "id")) or as_text(first_value(row, "id"))
        level = int_or_none(row.get("level")) or 0
        if "entity_ids" in row:
            members = []
            for ref in row.get("entity_ids") or []:
                resolved = entity_ids_by_title.get(as_text(ref))
                if resolved is not None and resolved not in members:
                    members.append(resolved)
        else:
            members = list(dict.fromkeys(nodes_members.get((cid, level), [])))
        result.append(
            Community(
                id=cid,
                level=level,
                parent_id=community_key(row.get("parent")) if has_parent else None,
                title=report_titles.get(cid) or as_text(first_value(row, "title", default=f"Community {cid}")),
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
    for row in table_rows(source_tables, "community_reports"):
        rank = clean(row.get("rank"))
        findings = [
            dict(f) if isinstance(f, dict) else {"summary": as_text(f)} for f in row.get("findings") or []
        ]
        result.append(
            CommunitySummary(
                community_id=community_key(row.get("community")) or str(int_or_none(row.get("community"))),
                title=as_text(first_value(row, "title")),
                summary=as_text(first_value(row, "summary")),
                full_content=as_text(first_value(row, "full_content")),
                rank=float(rank) if rank is not None else None,
                findings=findings,
            )
        )
    return result


def aliases(source_tables: dict[str, pa.Table], entity_ids_by_title: dict[str, str]) -> list[Alias]:
    """GraphRAG has no alias table: titles are its only names. An `aliases` list column on the
    entities (which `graphrag-dag export` writes, and GraphRAG ignores) brings ours back."""
    out: list[Alias] = []
    for row in table_rows(source_tables, "entities", ("title", "name", "aliases")):
        entity = entity_ids_by_title.get(as_text(first_value(row, "title", "name")))
        names = row.get("aliases")
        if entity and isinstance(names, list):
            out += [Alias(entity, str(n)) for n in names if isinstance(n, str) and n.strip()]
    return out
