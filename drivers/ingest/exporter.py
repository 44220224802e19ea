"""`graphrag-dag export --format graphrag`: a namespace as Microsoft GraphRAG v3 parquet.

The seven tables with the column names and types of GraphRAG 3.x output (documents, text_units,
entities, relationships, communities, community_reports, covariates), so GraphRAG's own query
API and our importer both read them. Names stand where GraphRAG puts titles (relationship
endpoints, claim subjects); claims point at the text unit of their evidence chunk. Entities carry
one extra list column, `aliases`, which GraphRAG ignores and our importer reads back, so an
export and an import give the same counts. Nothing GraphRAG does not record is invented: lists
of text units per entity or relationship are left empty.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.drivers.store import validate_namespace

_STR_LIST = pa.list_(pa.string())
_INT_LIST = pa.list_(pa.int64())
_FINDINGS = pa.list_(pa.struct([("explanation", pa.string()), ("summary", pa.string())]))
_Q = {  # one statement per table, namespace-scoped like every read
    "documents": "SELECT id, title, text FROM documents WHERE namespace = %(ns)s ORDER BY id",
    "units": "SELECT id, document_id, text FROM chunks WHERE namespace = %(ns)s AND kind = 'text_unit' ORDER BY id",
    "evidence": "SELECT id, parent_id FROM chunks WHERE namespace = %(ns)s AND kind = 'evidence'",
    "entities": "SELECT id, name, type, description, degree FROM entities WHERE namespace = %(ns)s ORDER BY id",
    "aliases": "SELECT entity_id, alias FROM entity_aliases WHERE namespace = %(ns)s ORDER BY entity_id, alias",
    "edges": "SELECT id, source_id, target_id, description, weight FROM edges WHERE namespace = %(ns)s ORDER BY id",
    "communities": "SELECT id, level, parent_id, title FROM communities WHERE namespace = %(ns)s ORDER BY level, id",
    "members": "SELECT community_id, entity_id FROM community_members WHERE namespace = %(ns)s ORDER BY entity_id",
    "summaries": "SELECT community_id, title, summary, full_content, rank, findings FROM community_summaries"
                 " WHERE namespace = %(ns)s",
    "entity_units": "SELECT entity_id, unit_id FROM entity_units WHERE namespace = %(ns)s ORDER BY entity_id, unit_id",
    "claims": "SELECT id, subject_id, object_id, type, status, description, start_date, end_date,"
              " coalesce(quote, source_text), chunk_id FROM claims WHERE namespace = %(ns)s ORDER BY id",
}


def _read(rag: Any, namespace: str) -> dict[str, list[tuple]]:
    db = rag.store.scoped(namespace)
    return {name: db.rows(q, {"ns": namespace}) for name, q in _Q.items()}


def _tables(rows: dict[str, list[tuple]], counter: Any) -> dict[str, pa.Table]:
    names = {i: n for i, n, *_ in rows["entities"]}
    unit_of = {c: p for c, p in rows["evidence"]}
    units_of: dict[str, list[str]] = {}
    for uid, did, _ in rows["units"]:
        units_of.setdefault(did, []).append(uid)
    units_by_entity: dict[str, list[str]] = {}
    entities_by_unit: dict[str, list[str]] = {}
    for eid, uid in rows["entity_units"]:
        units_by_entity.setdefault(eid, []).append(uid)
        entities_by_unit.setdefault(uid, []).append(eid)
    aliases: dict[str, list[str]] = {}
    for eid, alias in rows["aliases"]:
        aliases.setdefault(eid, []).append(alias)
    number = {cid: n for n, (cid, *_rest) in enumerate(rows["communities"])}
    members: dict[str, list[str]] = {}
    for cid, eid in rows["members"]:
        members.setdefault(cid, []).append(eid)
    children: dict[str, list[int]] = {}
    for cid, _lvl, parent, _t in rows["communities"]:
        if parent in number:
            children.setdefault(parent, []).append(number[cid])
    degree = {i: d for i, _n, _t, _d, d in rows["entities"]}
    community_cols = lambda cid, level, parent: {  # noqa: E731 - shared by communities and reports
        "community": number[cid], "level": level, "parent": number.get(parent, -1),
        "children": sorted(children.get(cid, [])), "size": len(members.get(cid, [])), "period": ""}
    communities = [{"id": cid, "human_readable_id": number[cid], **community_cols(cid, level, parent), "title": title,
                    "entity_ids": members.get(cid, []), "relationship_ids": [], "text_unit_ids": []}
                   for cid, level, parent, title in rows["communities"]]
    level_of = {cid: (level, parent) for cid, level, parent, _t in rows["communities"]}
    reports = []
    for n, (cid, title, summary, full, rank, findings) in enumerate(rows["summaries"]):
        if cid not in number:
            continue
        items = findings if isinstance(findings, list) else json.loads(findings or "[]")
        found = [{"explanation": str(f.get("explanation") or ""), "summary": str(f.get("summary") or "")}
                 for f in items if isinstance(f, dict)]
        reports.append({"id": f"report-{cid}", "human_readable_id": n, **community_cols(cid, *level_of[cid]),
                        "title": title, "summary": summary, "full_content": full or "", "rank": float(rank or 0),
                        "rating_explanation": "", "findings": found,
                        "full_content_json": json.dumps({"title": title, "summary": summary, "findings": found},
                                                        ensure_ascii=False)})
    tables = {
        "documents": [{"id": i, "human_readable_id": n, "title": t, "text": x, "text_unit_ids": units_of.get(i, []),
                       "creation_date": "", "raw_data": None} for n, (i, t, x) in enumerate(rows["documents"])],
        "text_units": [{"id": i, "human_readable_id": n, "text": x, "n_tokens": counter.count(x), "document_id": d,
                        "entity_ids": entities_by_unit.get(i, []), "relationship_ids": [], "covariate_ids": []}
                       for n, (i, d, x) in enumerate(rows["units"])],
        "entities": [{"id": i, "human_readable_id": n, "title": name, "type": t, "description": desc,
                      "text_unit_ids": units_by_entity.get(i, []), "frequency": len(units_by_entity.get(i, [])),
                      "degree": d, "aliases": aliases.get(i, [])}
                     for n, (i, name, t, desc, d) in enumerate(rows["entities"])],
        "relationships": [{"id": i, "human_readable_id": n, "source": names[s], "target": names[t], "description": desc,
                           "weight": float(w), "combined_degree": degree.get(s, 0) + degree.get(t, 0),
                           "text_unit_ids": []} for n, (i, s, t, desc, w) in enumerate(rows["edges"])],
        "communities": communities,
        "community_reports": reports,
        "covariates": [{"id": i, "human_readable_id": n, "covariate_type": "claim", "type": t, "description": desc,
                        "subject_id": names.get(s, s), "object_id": names.get(o, o) if o else "NONE",
                        "status": st, "start_date": sd, "end_date": ed, "source_text": src,
                        "text_unit_id": unit_of.get(c)} for n, (i, s, o, t, st, desc, sd, ed, src, c)
                       in enumerate(rows["claims"])],
    }
    return {name: pa.Table.from_pylist(items, schema=SCHEMAS[name]) for name, items in tables.items()}


def _schema(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema(list(fields))


_COMMUNITY = [("community", pa.int64()), ("level", pa.int64()), ("parent", pa.int64()), ("children", _INT_LIST)]
SCHEMAS = {
    "documents": _schema(("id", pa.string()), ("human_readable_id", pa.int64()), ("title", pa.string()),
                         ("text", pa.string()), ("text_unit_ids", _STR_LIST), ("creation_date", pa.string()),
                         ("raw_data", pa.null())),
    "text_units": _schema(("id", pa.string()), ("human_readable_id", pa.int64()), ("text", pa.string()),
                          ("n_tokens", pa.int64()), ("document_id", pa.string()), ("entity_ids", _STR_LIST),
                          ("relationship_ids", _STR_LIST), ("covariate_ids", _STR_LIST)),
    "entities": _schema(("id", pa.string()), ("human_readable_id", pa.int64()), ("title", pa.string()),
                        ("type", pa.string()), ("description", pa.string()), ("text_unit_ids", _STR_LIST),
                        ("frequency", pa.int64()), ("degree", pa.int64()), ("aliases", _STR_LIST)),
    "relationships": _schema(("id", pa.string()), ("human_readable_id", pa.int64()), ("source", pa.string()),
                             ("target", pa.string()), ("description", pa.string()), ("weight", pa.float64()),
                             ("combined_degree", pa.int64()), ("text_unit_ids", _STR_LIST)),
    "communities": _schema(("id", pa.string()), ("human_readable_id", pa.int64()), *_COMMUNITY, ("title", pa.string()),
                           ("entity_ids", _STR_LIST), ("relationship_ids", _STR_LIST), ("text_unit_ids", _STR_LIST),
                           ("period", pa.string()), ("size", pa.int64())),
    "community_reports": _schema(("id", pa.string()), ("human_readable_id", pa.int64()), *_COMMUNITY,
                                 ("title", pa.string()), ("summary", pa.string()), ("full_content", pa.string()),
                                 ("rank", pa.float64()), ("rating_explanation", pa.string()), ("findings", _FINDINGS),
                                 ("full_content_json", pa.string()), ("period", pa.string()), ("size", pa.int64())),
    "covariates": _schema(("id", pa.string()), ("human_readable_id", pa.int64()), ("covariate_type", pa.string()),
                          ("type", pa.string()), ("description", pa.string()), ("subject_id", pa.string()),
                          ("object_id", pa.string()), ("status", pa.string()), ("start_date", pa.string()),
                          ("end_date", pa.string()), ("source_text", pa.string()), ("text_unit_id", pa.string())),
}


def export_graphrag(rag: Any, namespace: str, out: str | Path) -> dict[str, int]:
    """Write the namespace to `out` (a new or empty folder); returns the row count per table. The
    files are written to a temporary folder first and moved in whole, so a failure leaves `out`
    as it was."""
    from graphrag_dag.drivers.llm.tokens import token_counter

    validate_namespace(namespace)
    rag.store.namespace_info(namespace)  # unknown namespace: BadInput
    target = Path(out).expanduser()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise BadInput(f"--out {target} must be a new or empty folder")
    tables = _tables(_read(rag, namespace), token_counter())
    staging = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent if target.parent.exists() else None))
    try:
        for name, table in tables.items():
            pq.write_table(table, staging / f"{name}.parquet")
        target.mkdir(parents=True, exist_ok=True)
        for f in staging.iterdir():
            shutil.move(str(f), target / f.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {name: t.num_rows for name, t in tables.items()}
