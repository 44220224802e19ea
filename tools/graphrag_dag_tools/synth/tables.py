"""The seven GraphRAG v3 tables of the synthetic index, each written as soon as it is built, in
row groups whose columns are made only then, so memory stays bounded by the largest group."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from graphrag_dag_tools.synth.arrays import Lists, column_slice, grouped, ranges, unique_pairs
from graphrag_dag_tools.synth.constants import CREATION_DATE, PERIOD
from graphrag_dag_tools.synth.vocabulary import CLAIM_TEMPLATES
from graphrag_dag_tools.synth.world import World


class Emitter:
    def __init__(self, out: Path, say: Callable[[str], None]) -> None:
        self.out = out
        self.say = say
        self.counts: dict[str, int] = {}

    def emit(self, name: str, rows: int, columns: dict[str, object], batch: int) -> None:
        """Write `rows` rows in row groups of `batch` rows, building each group's columns only then."""
        writer = None
        try:
            for lo in range(0, max(rows, 1), batch):
                hi = min(lo + batch, rows)
                table = pa.table({key: column_slice(value, lo, hi) for key, value in columns.items()})
                if writer is None:
                    writer = pq.ParquetWriter(self.out / f"{name}.parquet", table.schema, compression="snappy")
                writer.write_table(table)
        finally:
            if writer is not None:
                writer.close()
        self.counts[name] = rows
        self.say(f"synth: wrote {name}.parquet ({rows} rows)")


def documents(em: Emitter, w: World) -> tuple[pa.Array, np.ndarray]:
    """Each document's text is its units' texts joined by a blank line; its id is the sha512 of
    that text, as GraphRAG makes it. Returns the document ids and each unit's document."""
    unit_text, sizes = w.texts.unit_text, w.ids.doc_sizes
    d_count, u_count = len(sizes), len(unit_text)
    doc_bounds = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    bounds = doc_bounds.tolist()
    hashes = []
    for d in range(d_count):  # without building the text
        digest = hashlib.sha512()
        for u in range(bounds[d], bounds[d + 1]):
            digest.update(unit_text[u].encode() if u == bounds[d] else b"\n\n" + unit_text[u].encode())
        hashes.append(digest.hexdigest())
    doc_ids = pa.array(hashes, type=pa.string())

    def doc_text(lo: int, hi: int) -> pa.Array:
        return pa.array(["\n\n".join(unit_text[bounds[d]:bounds[d + 1]]) for d in range(lo, hi)], type=pa.string())

    em.emit("documents", d_count, {
        "id": doc_ids,
        "human_readable_id": np.arange(d_count, dtype=np.int64),
        "title": [f"synthetic-{d:05d}.txt" for d in range(d_count)],
        "text": doc_text,
        "text_unit_ids": Lists(doc_bounds, w.ids.units, np.arange(u_count, dtype=np.int64)),
        "creation_date": [CREATION_DATE] * d_count,
        "raw_data": lambda lo, hi: pa.nulls(hi - lo),
    }, batch=250)
    return doc_ids, np.repeat(np.arange(d_count, dtype=np.int64), sizes)


def text_units(em: Emitter, w: World, doc_ids: pa.Array, unit_doc: np.ndarray) -> None:
    mt, unit_text = w.mentions, w.texts.unit_text
    u_count, m, c_count = len(unit_text), w.graph.count, w.claims.count
    ue_unit, ue_row = unique_pairs(mt.unit, mt.row, w.entities.count)
    ue_offsets = np.zeros(u_count + 1, dtype=np.int64)
    np.cumsum(np.bincount(ue_unit, minlength=u_count), out=ue_offsets[1:])
    ur_offsets, ur_values = grouped(mt.rel_unit, np.arange(m, dtype=np.int64), u_count)
    uc_offsets, uc_values = grouped(mt.claim_unit, np.arange(c_count, dtype=np.int64), u_count)
    em.emit("text_units", u_count, {
        "id": w.ids.units,
        "human_readable_id": np.arange(u_count, dtype=np.int64),
        "text": unit_text,
        "n_tokens": np.array([len(t) // 4 for t in unit_text], dtype=np.int64),
        "document_id": lambda lo, hi: doc_ids.take(pa.array(unit_doc[lo:hi], type=pa.int64())),
        "entity_ids": Lists(ue_offsets, w.entities.ids, ue_row),
        "relationship_ids": Lists(ur_offsets, w.ids.relationships, ur_values),
        "covariate_ids": Lists(uc_offsets, w.ids.claims, uc_values),
    }, batch=20_000)


def entities(em: Emitter, w: World) -> None:
    ents, mt = w.entities, w.mentions
    n = ents.count
    e_row, e_unit = unique_pairs(mt.row, mt.unit, w.texts.unit_count)
    e_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(e_row, minlength=n), out=e_offsets[1:])
    degree_row = np.empty(n, dtype=np.int64)
    degree_row[ents.perm] = w.graph.degree_pos
    intro_row = [""] * n
    for p, r in enumerate(ents.perm.tolist()):
        intro_row[r] = w.texts.intro[p]
    em.emit("entities", n, {
        "id": ents.ids,
        "human_readable_id": np.arange(n, dtype=np.int64),
        "title": ents.titles,
        "type": ents.types.tolist(),
        "description": [f"{text} It appears in {c} relationships in the records." if c else text
                        for text, c in zip(intro_row, degree_row.tolist(), strict=True)],
        "text_unit_ids": Lists(e_offsets, w.ids.units, e_unit),
        "frequency": np.diff(e_offsets),
        "degree": degree_row,
    }, batch=20_000)


def _title_of(w: World, positions: np.ndarray) -> Callable[[int, int], pa.Array]:
    titles = pa.array(w.entities.title_by_pos, type=pa.string())
    return lambda lo, hi: titles.take(pa.array(positions[lo:hi], type=pa.int64()))


def relationships(em: Emitter, w: World) -> None:
    g = w.graph
    em.emit("relationships", g.count, {
        "id": w.ids.relationships,
        "human_readable_id": np.arange(g.count, dtype=np.int64),
        "source": _title_of(w, g.src),
        "target": _title_of(w, g.tgt),
        "description": w.texts.rel_text,
        "weight": g.weight.astype(np.float64),
        "combined_degree": (g.degree_pos[g.src] + g.degree_pos[g.tgt]).astype(np.int64),
        "text_unit_ids": Lists(np.arange(g.count + 1, dtype=np.int64), w.ids.units, w.mentions.rel_unit),
    }, batch=100_000)


def covariates(em: Emitter, w: World) -> None:
    c = w.claims
    dated, years = c.dated.tolist(), c.year.tolist()
    units, claim_unit = w.ids.units, w.mentions.claim_unit
    em.emit("covariates", c.count, {
        "id": w.ids.claims,
        "human_readable_id": np.arange(c.count, dtype=np.int64),
        "covariate_type": ["claim"] * c.count,
        "type": [CLAIM_TEMPLATES[k][0] for k in c.kind.tolist()],
        "description": w.texts.claim_desc,
        "subject_id": _title_of(w, c.subj),
        "object_id": [w.entities.title_by_pos[o] if o >= 0 else "NONE" for o in c.obj.tolist()],
        "status": c.status.tolist(),
        "start_date": [f"{y}-{mo:02d}-01T00:00:00" if d else None
                       for y, mo, d in zip(years, c.month.tolist(), dated, strict=True)],
        "end_date": [f"{y}-12-31T00:00:00" if d else None for y, d in zip(years, dated, strict=True)],
        "source_text": w.texts.claim_source,
        "text_unit_id": lambda lo, hi: units.take(pa.array(claim_unit[lo:hi], type=pa.int64())),
    }, batch=100_000)


def communities(em: Emitter, w: World) -> tuple[np.ndarray, pa.Array]:
    """Members, intra-community relationships and text units per community, at every level.
    Returns each community's intra-community relationship count and its children (for reports)."""
    h, g, mt = w.graph.hierarchy, w.graph, w.mentions
    cc, u_count = h.count, w.texts.unit_count
    cr_keys, cr_edges, ct_keys, ct_units = [], [], [], []
    for lv in range(h.levels):
        at = h.at_level[lv]
        cs, ctg = at[g.src], at[g.tgt]
        intra = np.flatnonzero((cs == ctg) & (cs >= 0))
        cr_keys.append(cs[intra])
        cr_edges.append(intra)
        cm = at[mt.pos]
        inside = cm >= 0
        k, u = unique_pairs(cm[inside], mt.unit[inside], u_count)
        ct_keys.append(k)
        ct_units.append(u)
    cr_offsets, cr_values = grouped(np.concatenate(cr_keys), np.concatenate(cr_edges), cc)
    ct_offsets, ct_values = grouped(np.concatenate(ct_keys), np.concatenate(ct_units), cc)
    c_offsets, c_members = ranges(h.start, h.end)
    child_offsets = np.zeros(cc + 1, dtype=np.int64)
    np.cumsum([len(c) for c in h.children], out=child_offsets[1:])
    child_values = np.array([c for cs in h.children for c in cs], dtype=np.int64)
    children = pa.ListArray.from_arrays(pa.array(child_offsets.astype(np.int32)),
                                        pa.array(child_values, type=pa.int64()))
    em.emit("communities", cc, {
        "id": w.ids.communities,
        "human_readable_id": np.arange(cc, dtype=np.int64),
        "community": np.arange(cc, dtype=np.int64),
        "level": h.level,
        "parent": h.parent,
        "children": children,
        "title": [f"Community {c}" for c in range(cc)],
        "entity_ids": Lists(c_offsets, w.entities.ids_by_pos, c_members),
        "relationship_ids": Lists(cr_offsets, w.ids.relationships, cr_values),
        "text_unit_ids": Lists(ct_offsets, w.ids.units, ct_values),
        "period": [PERIOD] * cc,
        "size": (h.end - h.start).astype(np.int64),
    }, batch=1_000)
    return np.diff(cr_offsets), children
