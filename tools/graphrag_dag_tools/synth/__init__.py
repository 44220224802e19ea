"""A synthetic index in Microsoft GraphRAG v3 parquet format, for benchmarks at any scale.

`write_synthetic_index(out, entities=N, seed=S)` writes the seven v3 tables (entities,
relationships, communities, community_reports, covariates, text_units, documents) with the file
names, column names and column types of a real GraphRAG 3.x output, so both our importer and
GraphRAG itself can read them. The data is invented but shaped like real output:

- entity titles are unique, upper-case, pronounceable names built from syllables
  ("KARVEN TOLIS", "ORVADELL VALLEY", "MIRAN GUILD");
- about 3 relationships per entity with a power-law degree distribution: every entity links to
  a local hub of its community, further endpoints are drawn Zipf-weighted (global hubs) or from
  the same community (local structure); float weights in [1, 10], skewed low;
- a 3-4 level community hierarchy (level 0 coarsest) made by recursively splitting contiguous
  ranges of a hidden entity order, so members of a parent are exactly the union of its children
  and most relationships stay inside communities; about 1 community per 7 entities;
- one report per community (title, summary, findings, full_content as GraphRAG writes it, rank);
- about 1 claim per entity (subject/object hold entity titles, as in GraphRAG) whose
  `source_text` is an exact sentence of its text unit;
- about 2 text units per entity: sentences generated from templates that mention their
  entities (an introduction per entity, one sentence per relationship, one per claim), grouped
  so that neighbouring entities share units; each document's text is its units' texts joined
  by a blank line, so every unit can be located in its document.

Everything comes from one `numpy.random.Generator(seed)` and no clock, so the same seed gives
the same table contents (and, with the same pyarrow, byte-identical files). The bulk work is
numpy-vectorised and tables are built from columns: 100,000 entities take seconds.

    vocabulary.py  names and templates   arrays.py  column helpers   graph.py  hierarchy, edges
    world.py       everything drawn      tables.py  the v3 tables    reports.py  community reports
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag_tools.synth import tables
from graphrag_dag_tools.synth.constants import GENERATOR, MARKER, TABLES
from graphrag_dag_tools.synth.reports import report_table
from graphrag_dag_tools.synth.world import draw_world

__all__ = ["write_synthetic_index", "TABLES", "MARKER", "GENERATOR"]


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise BadInput(f"--out {out} is a non-empty folder not written by synth; choose an empty or new folder")


def _check_counts(entities: object, seed: object) -> None:
    if isinstance(entities, bool) or not isinstance(entities, (int, np.integer)) or entities <= 0:
        raise BadInput(f"entities must be a positive integer, not {entities!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise BadInput(f"seed must be an integer >= 0, not {seed!r}")


def write_synthetic_index(out: Path | str, entities: int, seed: int = 0,
                          progress: Callable[[str], None] | None = None) -> dict[str, int]:
    """Write a synthetic GraphRAG v3 index of `entities` entities to the folder `out`.

    Returns the row count of each table (keyed by table name, e.g. "entities"). `out` may be new,
    empty or an earlier synth output (overwritten); anything else is `BadInput`, as is a
    non-positive entity count.
    """
    _check_counts(entities, seed)
    n = int(entities)
    out = Path(out).expanduser()
    _check_out(out)
    say = progress or (lambda _msg: None)
    rng = np.random.default_rng(seed)
    w = draw_world(rng, n)
    h = w.graph.hierarchy
    say(f"synth: {n} entities, {w.graph.count} relationships, {h.count} communities on {h.levels} levels")
    # The marker goes first: from then on the folder is ours to overwrite.
    out.mkdir(parents=True, exist_ok=True)
    marker: dict[str, object] = {"generator": GENERATOR, "entities": n, "seed": seed}
    (out / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    em = tables.Emitter(out, say)
    doc_ids, unit_doc = tables.documents(em, w)
    tables.text_units(em, w, doc_ids, unit_doc)
    w.texts.unit_text.clear()  # the largest list; nothing after the text units reads it
    tables.entities(em, w)
    tables.relationships(em, w)
    tables.covariates(em, w)
    intra_edges, children = tables.communities(em, w)
    reports = report_table(rng, h, w.graph.degree_pos, w.entities.title_by_pos, w.entities.type_by_pos,
                           w.texts.intro, intra_edges, children)
    em.emit("community_reports", h.count, dict(zip(reports.column_names, reports.columns, strict=True)),
            batch=max(h.count, 1))
    counts = {name: em.counts[name] for name in TABLES}
    marker["counts"] = counts
    (out / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    return counts
