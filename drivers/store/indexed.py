"""What an indexed namespace holds that its next update reuses: the settings it was indexed with,
its documents, its communities, its vectors by the text they embed, and its evidence lines with
their token counts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from graphrag_dag.dataflows.common.line_tokens import chunk_line, claim_line, claim_statement
from graphrag_dag.dataflows.common.records import Community, Document, PriorGraph
from graphrag_dag.drivers.store.pool import Pool


@dataclass
class IndexedState:
    settings: dict[str, Any] | None  # None: written before settings were kept, or imported
    source: str | None  # "index", "import", "demo"
    embed_model: str
    documents: list[Document]  # with their text only when asked for


DOCUMENTS = "SELECT id, title, '', record_title FROM documents WHERE namespace = %s ORDER BY id"
DOCUMENTS_WITH_TEXT = "SELECT id, title, text, record_title FROM documents WHERE namespace = %s ORDER BY id"


def indexed_state(pool: Pool, namespace: str, *, texts: bool = False) -> IndexedState | None:
    with pool.connection() as conn:
        row = conn.execute("SELECT index_settings, source, embed_model FROM namespaces WHERE namespace = %s",
                           (namespace,)).fetchone()
        if row is None:
            return None
        docs = conn.execute(DOCUMENTS_WITH_TEXT if texts else DOCUMENTS, (namespace,)).fetchall()
    settings = row[0] if isinstance(row[0], dict) or row[0] is None else json.loads(row[0])
    return IndexedState(settings, row[1], row[2], [Document(*d) for d in docs])


# Per table: the stored columns that make the text its vectors embed (dataflows/index/prepare.py).
_COLUMNS = {
    "entities": ("SELECT name, description, embedding FROM entities WHERE namespace = %s AND embedding IS NOT NULL",
                 ("name", "description")),
    "community_summaries": ("SELECT title, summary, embedding FROM community_summaries "
                            "WHERE namespace = %s AND embedding IS NOT NULL", ("title", "summary")),
    "chunks": ("SELECT text, embedding FROM chunks WHERE namespace = %s AND kind = 'evidence' "
               "AND embedding IS NOT NULL", ("text",)),
}


def known_vectors(pool: Pool, namespace: str, model: str) -> dict[str, dict[str, np.ndarray]]:
    """Table → the text each stored vector embeds → the vector, when `model` made the namespace's
    vectors (else nothing: another model's vectors are no use)."""
    from graphrag_dag.dataflows.index.prepare import EMBEDDED  # the index flow's modules, loaded only for an update

    out: dict[str, dict[str, np.ndarray]] = {}
    with pool.connection() as conn:
        row = conn.execute("SELECT embed_model FROM namespaces WHERE namespace = %s", (namespace,)).fetchone()
        if row is None or row[0] != model:
            return out
        for table, (query, fields) in _COLUMNS.items():
            text_of = EMBEDDED[table][3]
            known: dict[str, np.ndarray] = {}
            with conn.cursor(binary=True) as cur:
                for values in cur.execute(query, (namespace,)):
                    item = SimpleNamespace(**dict(zip(fields, values[:-1], strict=True)))
                    vector = values[-1]
                    known[text_of(item) or " "] = np.asarray(
                        vector.to_numpy() if hasattr(vector, "to_numpy") else vector, dtype=np.float32)
            out[table] = known
    return out


def stored_graph(pool: Pool, namespace: str) -> PriorGraph:
    """The namespace's communities with their members and its edges' weights: what an update's
    communities start from (dataflows/index/leiden.py)."""
    with pool.connection() as conn:
        rows = conn.execute("SELECT id, level, parent_id, title FROM communities WHERE namespace = %s ORDER BY level, id",
                            (namespace,)).fetchall()
        members: dict[str, list[str]] = {}
        for cid, eid in conn.execute("SELECT community_id, entity_id FROM community_members WHERE namespace = %s "
                                     "ORDER BY community_id, entity_id", (namespace,)):
            members.setdefault(cid, []).append(eid)
        weights: dict[tuple[str, str], float] = {}
        for a, b, w in conn.execute("SELECT source_id, target_id, weight FROM edges WHERE namespace = %s", (namespace,)):
            key = (min(a, b), max(a, b))
            weights[key] = weights.get(key, 0.0) + float(w)
    return PriorGraph([Community(cid, level, parent, title, members.get(cid, [])) for cid, level, parent, title in rows],
                      weights)


def known_line_tokens(pool: Pool, namespace: str) -> dict[str, int]:
    """The namespace's evidence lines (dataflows/common/line_tokens.py) with the counts stored with
    them, made from the stored columns by the same functions that made them when they were written."""
    out: dict[str, int] = {}
    with pool.connection() as conn:
        for cid, doc, text, n in conn.execute(
                "SELECT id, document_id, text, line_tokens FROM chunks WHERE namespace = %s AND kind = 'evidence' "
                "AND line_tokens IS NOT NULL", (namespace,)):
            out[chunk_line(cid, doc, text)] = n
        for cid, doc, chunk, subject, kind, status, description, quote, n in conn.execute(
                "SELECT id, document_id, chunk_id, subject_name, type, status, description, quote, line_tokens "
                "FROM claims WHERE namespace = %s AND line_tokens IS NOT NULL AND subject_name IS NOT NULL",
                (namespace,)):
            out[claim_line(cid, doc, chunk, claim_statement(subject, kind, status, description), quote or None)] = n
    return out
