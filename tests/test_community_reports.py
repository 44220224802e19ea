"""The community reports in memory (dataflows/local/community_reports.py): the similarity it
computes is pgvector's, asked of the database on the same vectors, at the dimensions that search
as vector and as halfvec. tests/test_plans.py checks the reports of a 20k-entity namespace."""

from __future__ import annotations

import math

import numpy as np
import pytest

from graphrag_dag.dataflows.common.sql import HALFVEC_ABOVE
from graphrag_dag.dataflows.local.community_reports import CommunityReports

PGVECTOR = """
SELECT 1 - ((v::vector::{kind}({dim})) <=> (%(q)s::vector::{kind}({dim})))
FROM unnest(%(vs)s::text[]) WITH ORDINALITY AS x(v, k) ORDER BY k
"""


def _text(vec: np.ndarray) -> str:
    return "[" + ",".join(map(str, vec.astype(np.float32).tolist())) + "]"


@pytest.mark.parametrize("dim", [3, 256, HALFVEC_ABOVE + 48])
def test_similarities_are_pgvectors(rag, dim):
    rng = np.random.default_rng(dim)
    vectors = rng.normal(size=(60, dim)).astype(np.float32)
    query = rng.normal(size=dim).astype(np.float32)
    vectors[1] = vectors[0]  # equal vectors must tie exactly, as they do in the database
    vectors[2] = 0.0  # no direction: NaN, as the database gives
    vectors[3] = query * 2  # the query's own direction: 1, clamped where the sums overshoot
    rows = [(f"c{n:03d}", n % 3, f"title {n}", f"summary {n}", float(n)) for n in range(len(vectors))]
    reports = CommunityReports(rows, np.arange(len(vectors)), vectors, "v")
    got = [sim for *_, sim, _ in reports.reports([r[0] for r in rows], query)]
    kind = "halfvec" if dim > HALFVEC_ABOVE else "vector"
    want = [r[0] for r in rag.store.admin_rows(PGVECTOR.format(kind=kind, dim=dim),
                                               {"q": _text(query), "vs": [_text(v) for v in vectors]})]
    assert math.isnan(got[2]) and math.isnan(want[2])
    assert got[0] == got[1]
    for n, (a, b) in enumerate(zip(got, want)):
        if n != 2:
            assert abs(a - b) < 1e-6, (n, a, b)
    order = sorted(range(len(got)), key=lambda n: (-got[n], n) if n != 2 else (0, n))
    assert order == sorted(range(len(want)), key=lambda n: (-want[n], n) if n != 2 else (0, n))


def test_reports_keep_each_known_community_once():
    """Unknown ids are left out (the statement it replaced joined the communities table), a
    repeated id comes once, and a report without a vector has no similarity."""
    rows = [("a", 0, "A", "about a", 2.0), ("b", 1, "B", "", 0.0), ("c", 1, "C", "about c", 1.5)]
    vectors = np.array([[1.0, 0.0], [0.6, 0.8]], dtype=np.float32)
    reports = CommunityReports(rows, np.array([0, 2]), vectors, "v")
    got = reports.reports(["c", "zzz", "b", "c", "a"], np.array([0.0, 2.0], dtype=np.float32))
    assert [r[:4] for r in got] == [("c", 1, "C", "about c"), ("b", 1, "B", ""), ("a", 0, "A", "about a")]
    assert [r[5] for r in got] == [1.5, 0.0, 2.0]
    assert got[1][4] is None and got[2][4] == 0.0 and abs(got[0][4] - 0.8) < 1e-7
    empty = CommunityReports(rows, np.zeros(0, dtype=np.int64), np.zeros((0, 2), dtype=np.float32), "v")
    assert [r[4] for r in empty.reports(["a", "b"], np.array([1.0, 0.0], dtype=np.float32))] == [None, None]
    assert reports.reports([], np.array([1.0, 0.0], dtype=np.float32)) == []
