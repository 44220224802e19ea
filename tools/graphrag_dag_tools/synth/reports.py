"""One GraphRAG-style community report per community of the synthetic index."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from graphrag_dag_tools.synth.arrays import uuids
from graphrag_dag_tools.synth.constants import PERIOD
from graphrag_dag_tools.synth.graph import Hierarchy
from graphrag_dag_tools.synth.vocabulary import THEMES


def report_table(
    rng: np.random.Generator,
    h: Hierarchy,
    degree_pos: np.ndarray,
    title_by_pos: list[str],
    type_by_pos: np.ndarray,
    intro: list[str],
    intra_edges: np.ndarray,
    children: pa.Array,
) -> pa.Table:
    """One GraphRAG-style report per community, about its highest-degree members."""
    cc = h.count
    sizes = (h.end - h.start).astype(np.int64)
    themes = rng.integers(0, len(THEMES), cc)
    noise = rng.normal(0.0, 0.8, cc)
    finding_count = rng.integers(2, 5, cc)
    biggest = max(int(sizes.max()), 2)
    rank = np.clip(np.round(2.0 + 6.0 * np.log(np.maximum(sizes, 1)) / np.log(biggest) + noise, 1), 1.0, 10.0)
    titles, summaries, contents, explanations, jsons = [], [], [], [], []
    f_summary: list[str] = []
    f_explanation: list[str] = []
    f_offsets = [0]
    for c in range(cc):
        s, e = int(h.start[c]), int(h.end[c])
        k = int(min(finding_count[c], e - s))
        local = degree_pos[s:e]
        top = (s + np.argsort(-local, kind="stable")[:k]).tolist()
        names = [title_by_pos[p] for p in top]
        title = f"{names[0]} {THEMES[themes[c]]}"
        others = ", ".join(names[1:3])
        summary = (f"This community of {e - s} entities centres on {names[0]}"
                   f"{', with ' + others if others else ''}. Its members are linked by {int(intra_edges[c])} "
                   f"relationships{' and it is divided into ' + str(len(h.children[c])) + ' sub-communities' if h.children[c] else ''}.")
        explanation = (f"The impact rating of {rank[c]:.1f} reflects the community's size and the "
                       f"influence of {names[0]}.")
        findings = []
        for p in top:
            findings.append({
                "summary": f"{title_by_pos[p]} is a central {str(type_by_pos[p]).lower()} in the community",
                "explanation": f"{intro[p]} {title_by_pos[p]} has {int(degree_pos[p])} relationships in the index.",
            })
        f_summary.extend(f["summary"] for f in findings)
        f_explanation.extend(f["explanation"] for f in findings)
        f_offsets.append(len(f_summary))
        body = "\n\n".join(f"## {f['summary']}\n\n{f['explanation']}" for f in findings)
        titles.append(title)
        summaries.append(summary)
        explanations.append(explanation)
        contents.append(f"# {title}\n\n{summary}\n\n{body}")
        jsons.append(json.dumps({"title": title, "summary": summary, "rating": float(rank[c]),
                                 "rating_explanation": explanation, "findings": findings}, indent=4))
    finding_values = pa.StructArray.from_arrays(
        [pa.array(f_explanation, type=pa.string()), pa.array(f_summary, type=pa.string())],
        names=["explanation", "summary"],
    )
    return pa.table({
        "id": uuids(rng, cc, dashes=False),
        "human_readable_id": pa.array(np.arange(cc, dtype=np.int64)),
        "community": pa.array(np.arange(cc, dtype=np.int64)),
        "level": pa.array(h.level),
        "parent": pa.array(h.parent),
        "children": children,
        "title": pa.array(titles),
        "summary": pa.array(summaries),
        "full_content": pa.array(contents),
        "rank": pa.array(rank.astype(np.float64)),
        "rating_explanation": pa.array(explanations),
        "findings": pa.ListArray.from_arrays(pa.array(np.array(f_offsets, dtype=np.int32)), finding_values),
        "full_content_json": pa.array(jsons),
        "period": pa.array([PERIOD] * cc),
        "size": pa.array(sizes),
    })

