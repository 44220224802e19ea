"""Ranked sources: personalised PageRank checked against its closed form, the title rules, the
order of the tiers on hand-made rankings, and `sources` on the demo and on an index whose pages
the question names but whose entities do not (an import whose extractor missed the names)."""

from __future__ import annotations

import numpy as np
import pytest

from graphrag_dag.dataflows.local.entity_matching import MatchedEntity
from graphrag_dag.dataflows.local.entity_walk import _specificity, entity_ranks
from graphrag_dag.dataflows.local.graph_index import EntityUnits
from graphrag_dag.dataflows.common.titles import names_entity, title_keys
from graphrag_dag.dataflows.local.pages import TitleIndex
from graphrag_dag.dataflows.local.sources import (
    SIGNALS, graph_rankings,
)
from graphrag_dag.drivers.ingest.demo import demo_queries

DEMO_Q = demo_queries()["local"]

GRAPH = {"a": {"b": 2.0, "c": 1.0}, "b": {"a": 2.0, "d": 1.0}, "c": {"a": 1.0}, "d": {"b": 1.0}, "e": {}}


def _closed_form(seeds: dict[str, float], graph: dict[str, dict[str, float]], d: float) -> dict[str, float]:
    """r = (1 - d) s + d (Pᵀ r + (dangling mass) s), solved directly."""
    ids = list(graph)
    n = len(ids)
    s = np.array([seeds.get(i, 0.0) for i in ids])
    s = s / s.sum()
    w = np.array([[graph[i].get(j, 0.0) for j in ids] for i in ids])
    out = w.sum(axis=1)
    p = np.divide(w, out[:, None], out=np.zeros_like(w), where=out[:, None] > 0)
    dangling = (out == 0).astype(float)
    m = d * (p.T + np.outer(s, dangling))
    r = np.linalg.solve(np.eye(n) - m, (1 - d) * s)
    return dict(zip(ids, r, strict=True))


@pytest.mark.parametrize("d", [0.0, 0.5, 0.85])
def test_personalised_pagerank_matches_its_closed_form(d):
    seeds = {"a": 2.0, "e": 1.0}
    got = entity_ranks(seeds, GRAPH, ppr_damping=d)
    want = _closed_form(seeds, GRAPH, d)
    assert set(got) == {k for k, v in want.items() if v > 0}
    for k, v in got.items():
        assert v == pytest.approx(want[k], abs=1e-6)
    assert sum(got.values()) == pytest.approx(1.0, abs=1e-6)


def test_rank_falls_with_distance_and_follows_edge_weight():
    ranks = entity_ranks({"a": 1.0}, GRAPH, ppr_damping=0.5)
    assert ranks["a"] > ranks["b"] > ranks["d"]  # seed, one hop, two hops
    assert ranks["b"] > ranks["c"]  # the heavier edge carries more
    assert "e" not in ranks  # unreachable
    assert entity_ranks({}, GRAPH) == {} and entity_ranks({"zz": 1.0}, GRAPH) == {}


def test_title_rules():
    assert names_entity("ian barry", "Ian Barry (director)") and names_entity("ian barry", "Ian Barry")
    assert not names_entity("barry", "Ian Barry (director)") and not names_entity("", "Ian Barry")
    assert title_keys("Film") == set()  # a single word names nothing
    assert title_keys("Dark River (2017 film)") == {"dark river 2017 film", "dark river"}
    index = TitleIndex()
    long_title = "The Blue Collar Worker and the Hairdresser in a Whirl of Sex and Politics"
    for key, unit in (("dark river", "u1"), ("wrong turn", "u2"), (title_keys(long_title).pop(), "u3")):
        index.add(key, unit)
    # equally long names in a stable order
    assert index.named_in("Did Wrong Turn and Dark River share a director?") == ["u1", "u2"]
    assert index.named_in(f"Who directed {long_title}?") == ["u3"]  # longer than any n-gram
    assert index.named_in("The Blue Collar Worker and the Hairdresser") == []  # only its first words


def _values(rag, ns: str, query: str, *names: str, **kwargs):
    return rag.run("local", query, ns, final_vars=list(names), **kwargs).values


def test_demo_sources_are_placed_ranked_and_lead_with_the_named_entities(rag):
    got = _values(rag, "demo", DEMO_Q, "sources", "matched_entities", "entity_units")
    sources = got["sources"]
    assert sources
    db = rag.store.scoped("demo")
    units = {r[0]: r[1:] for r in db.rows("SELECT id, document_id, start_char, end_char, text FROM chunks "
                                         "WHERE namespace = %(ns)s AND kind = 'text_unit'", {"ns": "demo"})}
    docs = dict(db.rows("SELECT id, text FROM documents WHERE namespace = %(ns)s", {"ns": "demo"}))
    for s in sources:
        doc, start, end, text = units[s.unit_id]
        assert s.document_id == doc and (s.start, s.end) == (start, end) and docs[doc][start:end] == text
        assert s.signals and set(s.signals) <= set(SIGNALS)
    scores = [s.score for s in sources]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)
    assert len({s.unit_id for s in sources}) == len(sources)
    # the question names entities and no page, so the walk leads: the first source mentions a
    # matched entity
    matched = {m.id for m in got["matched_entities"]}
    assert sources[0].unit_id in {u for e, u, _, _ in got["entity_units"].rows() if e in matched}
    assert sources[0].signals[0] == "graph"


def test_sources_json_is_in_the_local_result(rag):
    res = rag.local_search(DEMO_Q, "demo")
    assert res["sources"] and set(res["sources"][0]) == {"document_id", "title", "text_unit_id", "start", "end",
                                                         "score", "signals"}
    first_units = [s["text_unit_id"] for s in res["sources"]]
    chunk_unit = dict(rag.store.scoped("demo").rows("SELECT id, parent_id FROM chunks WHERE namespace = %(ns)s",
                                                    {"ns": "demo"}))
    candidates = rag.run("local", DEMO_Q, "demo", final_vars=["candidate_evidence"]).values["candidate_evidence"]
    seen = [first_units.index(chunk_unit[e.chunk_id]) for e in candidates if chunk_unit.get(e.chunk_id) in first_units]
    # the candidate evidence follows the sources: what a signal found, then the sources' other chunks
    descents = sum(1 for a, b in zip(seen, seen[1:]) if b < a)
    assert seen and descents <= 1, seen


def _semantic(entity_id: str) -> MatchedEntity:
    return MatchedEntity(entity_id, entity_id, 0.02, ["semantic"])


def test_tiers_named_pages_then_links_and_walk_then_the_rest(rag):
    """On hand-made rankings over real demo units: which signal leads depends on what the
    question names, exactly as the module docstring says."""
    db = rag.store.scoped("demo")
    u = [r[0] for r in db.rows("SELECT id FROM chunks WHERE namespace = %(ns)s AND kind = 'text_unit' ORDER BY id",
                               {"ns": "demo"})]
    assert len(u) >= 8
    rankings = {"title": [u[0]], "link": [u[1]], "graph": [u[2], u[1]], "entity": [u[3]],
                "vector": [u[4], u[5]], "keyword": [u[5]], "claim": []}
    exact = [MatchedEntity("x", "x", 0.03, ["exact"])]

    def order(rk, matched):
        return [s.unit_id for s in _values(rag, "demo", "q", "sources", overrides={"source_rankings": rk,
                                                                                   "matched_entities": matched})["sources"]]

    # named: the page, then link and walk fused (u1 is in both), then the rest fused (u5 in two lists)
    assert order(rankings, exact) == [u[0], u[1], u[2], u[5], u[3], u[4]]
    # only embedding guesses and no named page: neither the walk nor the entity signal counts
    guessed = {**rankings, "title": [], "link": []}
    assert order(guessed, [_semantic("x")]) == [u[5], u[4]]
    # a named page lets its walk count even when no entity was named
    assert order({**rankings, "link": []}, [_semantic("x")]) == [u[0], u[2], u[1], u[5], u[4]]


def test_a_page_the_question_names_leads_even_without_an_entity(rag):
    """An index whose extractor missed a title's name (as Microsoft GraphRAG's fast indexer does)
    still finds the page the question names, and the page it links to, by title."""
    from graphrag_dag.dataflows.common.records import Chunk, Document, Entity, IndexRecords

    texts = {"Playing Wild Things": "Playing Wild Things\nPlaying Wild Things is a 1924 film directed by Ada Quorn.",
             "Ada Quorn": "Ada Quorn\nAda Quorn was a director born in Leeds.",
             "Other Page": "Other Page\nA film about wild things and playing, with no director named."}
    docs, chunks = [], []
    for n, (title, text) in enumerate(texts.items()):
        docs.append(Document(f"d{n}", f"{n:04d}__{title}.txt", text))
        chunks.append(Chunk(f"u{n}", f"d{n}", text, "text_unit", None, 0, len(text)))
        chunks.append(Chunk(f"u{n}:ev0", f"d{n}", text, "evidence", f"u{n}", 0, len(text)))
    rag.write("titled", IndexRecords(docs, chunks, [Entity("e-leeds", "Leeds", unit_ids=("u1",))]),
              replace=True, source="test")
    try:
        res = rag.local_search("Where was the director of film Playing Wild Things born?", "titled")
        order = [s["text_unit_id"] for s in res["sources"]]
        assert order[:2] == ["u0", "u1"]
        assert res["sources"][0]["signals"][0] == "title" and "link" in res["sources"][1]["signals"]
    finally:
        rag.store.drop("titled")


def test_source_rows_are_the_statement_s_rows_for_the_ranked_units(rag):
    """The sources' rows are exactly the rows SOURCE_ROWS returns for the ranked units, read in one
    statement."""
    from graphrag_dag.dataflows.common import sql

    run = rag.run("local", DEMO_Q, "demo", offline=True, final_vars=["ranked_units", "source_rows"])
    ranked = run.values["ranked_units"]
    assert len(ranked) >= 3
    with rag.reading("demo") as db:
        want = db.rows(sql.SOURCE_ROWS, {"ns": "demo", "ids": ranked})
    assert run.values["source_rows"] == want and len({r[0] for r in want}) == len(ranked)
    assert {t.node: t.statements for t in run.trace}["source_rows"] == 1


def _row_by_row(rows: list[tuple[str, str, bool, int]], ranks: dict[str, float], seeds: dict[str, float],
                unit_total: int) -> tuple[list[str], list[str]]:
    """The `graph` and `entity` rankings as the module docstring says them, one row at a time."""
    about: dict[str, float] = {}
    mentioned: dict[str, float] = {}
    summed: dict[str, float] = {}
    for entity, unit, is_about, count in rows:
        if ranks.get(entity, 0.0) > 0:
            w = ranks[entity] * _specificity(count, unit_total)
            mentioned[unit] = mentioned.get(unit, 0.0) + w
            if is_about:
                about[unit] = max(about.get(unit, 0.0), w)
        if seeds.get(entity, 0.0) > 0:
            summed[unit] = summed.get(unit, 0.0) + seeds[entity]
    return (sorted(mentioned, key=lambda u: (-about.get(u, 0.0), -mentioned[u], u)),
            sorted(summed, key=lambda u: (-summed[u], u)))


@pytest.mark.parametrize("seed", range(30))
def test_the_graph_and_entity_rankings_over_columns_are_the_row_by_row_ones(seed):
    """`graph_rankings` works on the units' columns; it must order exactly as the row-by-row
    rule does: ties (equal ranks from a small set of values, unranked and zero-weight entities)
    broken by unit id, sums added in row order."""
    rng = np.random.default_rng(seed)
    entities = sorted({f"e{n}" for n in rng.integers(0, 40, size=12)})
    units = sorted({f"u{n:03d}" for n in rng.integers(0, 200, size=25)})
    n_rows = int(rng.integers(0, 60))
    table = EntityUnits(entities, units, rng.integers(0, len(entities), size=n_rows), rng.integers(0, len(units), size=n_rows),
                        rng.random(n_rows) < 0.3, rng.integers(1, 50, size=len(entities)))
    values = [0.0, 0.25, 0.5, 1.0]
    ranks = {e: float(rng.choice(values)) for e in entities if rng.random() < 0.8}
    seeds = {e: float(rng.choice(values)) for e in entities if rng.random() < 0.5}
    got = graph_rankings(seeds, ranks, 500, table, [], [])
    assert (got["graph"], got["entity"]) == _row_by_row(table.rows(), ranks, seeds, 500)
