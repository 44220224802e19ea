"""Local search over the demo namespace, offline, on the real embedded PostgreSQL + pgvector and the
real Hamilton driver: match channels, community ranking signals (checked against SQL written
independently here), keyword recall with hostile text, evidence provenance, the JSON contract and
per-node timings, and options validation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.fusion import jaccard
from graphrag_dag.drivers.api import LocalOptions
from graphrag_dag.drivers.ingest.demo import demo_queries

NS = "demo"
DEMO_Q = demo_queries()["local"]  # Dr. Mara Quill, storm surge, Corran Sound, who funded it


def values(rag, query, *final_vars, **kwargs):
    return rag.run("local", query, NS, final_vars=list(final_vars), **kwargs).values


def ids(hits):
    return [h.id for h in hits]


# ----------------------------------------------------------------------------- exact channel


def test_exact_channel_matches_al_as_a_word(rag):
    hits = values(rag, "Where is Al today?", "exact_matches")["exact_matches"]
    assert "e-al" in ids(hits)
    assert next(h for h in hits if h.id == "e-al").via == "Al"


def test_exact_channel_does_not_match_al_inside_alice(rag):
    for q in ("Where is Alice?", "What does Alice Tern chair?", "Tell me about Albatross Point"):
        hits = values(rag, q, "exact_matches")["exact_matches"]
        assert "e-al" not in ids(hits), q
    hits = values(rag, "What does Alice Tern chair?", "exact_matches")["exact_matches"]
    assert ids(hits) == ["e-alice-tern"]


def test_exact_channel_finds_both_al_and_alice_tern_when_both_are_named(rag):
    hits = values(rag, "Did Al ever ferry Alice Tern to Skerry Point?", "exact_matches")["exact_matches"]
    assert {"e-al", "e-alice-tern", "e-skerry-point"} <= set(ids(hits))
    # longer matches rank first
    assert ids(hits).index("e-alice-tern") < ids(hits).index("e-al")


def test_exact_channel_matches_a_name_before_a_possessive(rag):
    hits = values(rag, "What was Mara Quill's discovery?", "exact_matches")["exact_matches"]
    assert "e-mara-quill" in ids(hits)


def test_exact_channel_matches_cjk_names_as_substrings(rag):
    hits = values(rag, "青岚茶社是谁成立的？", "exact_matches")["exact_matches"]
    assert ids(hits)[0] == "e-qinglan-tea"
    hits = values(rag, "林晓雨为什么回到村里", "exact_matches")["exact_matches"]
    assert "e-lin-xiaoyu" in ids(hits)
    # a CJK name inside a longer run with no spaces, next to other names
    hits = values(rag, "陈大山和周明在青岚山做什么", "exact_matches")["exact_matches"]
    assert {"e-chen-dashan", "e-zhou-ming", "e-qinglan-mountain"} <= set(ids(hits))


# ----------------------------------------------------------------------------- alias channel


def test_alias_channel_resolves_dr_quill(rag):
    v = values(rag, "What did Dr. Quill find?", "alias_matches", "exact_matches")
    hit = next(h for h in v["alias_matches"] if h.id == "e-mara-quill")
    assert hit.name == "Mara Quill" and hit.via == "Dr. Quill"
    assert "e-mara-quill" in ids(v["exact_matches"])


def test_alias_channel_uses_only_the_alias_table(rag):
    assert values(rag, "Where is Al today?", "alias_matches")["alias_matches"] == []  # Al is a name, not an alias
    assert ids(values(rag, "What does GLI do?", "alias_matches")["alias_matches"]) == ["e-greywick-institute"]
    # a CJK alias resolves to its canonical (English-named) entity
    assert "e-mara-quill" in ids(values(rag, "奎尔博士研究什么", "alias_matches")["alias_matches"])


# ----------------------------------------------------------------------------- fuzzy channel


def test_fuzzy_channel_finds_a_typo(rag):
    v = values(rag, "What does Alise Tern do?", "fuzzy_matches", "exact_matches")
    assert ids(v["fuzzy_matches"])[0] == "e-alice-tern"
    assert v["fuzzy_matches"][0].score >= 85
    assert "e-alice-tern" not in ids(v["exact_matches"])
    typo = values(rag, "Who leads the Greywik Lighthouse Institute?", "fuzzy_matches")["fuzzy_matches"]
    assert "e-greywick-institute" in ids(typo)


def test_fuzzy_channel_is_case_insensitive(rag):
    hits = values(rag, "WHAT DOES ALISE TERN DO?", "fuzzy_matches")["fuzzy_matches"]
    assert "e-alice-tern" in ids(hits)


def test_fuzzy_threshold_is_configurable(rag):
    q = "What does Alise Tern do?"
    score = values(rag, q, "fuzzy_matches")["fuzzy_matches"][0].score  # 90 for one substitution in 10
    strict = values(rag, q, "fuzzy_matches", options=LocalOptions(fuzzy_threshold=100))["fuzzy_matches"]
    assert strict == []
    above = values(rag, q, "fuzzy_matches", options=LocalOptions(fuzzy_threshold=score + 1))["fuzzy_matches"]
    assert "e-alice-tern" not in ids(above)
    at = values(rag, q, "fuzzy_matches", options=LocalOptions(fuzzy_threshold=score))["fuzzy_matches"]
    assert "e-alice-tern" in ids(at)


def test_fuzzy_threshold_100_still_matches_exact_spellings(rag):
    hits = values(rag, "What does Alice Tern do?", "fuzzy_matches",
                  options=LocalOptions(fuzzy_threshold=100))["fuzzy_matches"]
    assert ids(hits) == ["e-alice-tern"]


# -------------------------------------------------------------------------- semantic channel


def _stored_entity_vectors(rag):
    rows = rag.store.admin_rows(
        "SELECT id, embedding FROM entities WHERE namespace = %s AND embedding IS NOT NULL", (NS,))
    return {eid: np.asarray(vec.to_numpy() if hasattr(vec, "to_numpy") else vec, dtype=np.float64)
            for eid, vec in rows}


def test_semantic_channel_scores_are_cosines_against_stored_embeddings(rag):
    q = "storm warnings from buoys at sea"
    v = values(rag, q, "semantic_matches", "query_embedding")
    hits, qvec = v["semantic_matches"], np.asarray(v["query_embedding"], dtype=np.float64)
    assert hits, "the semantic channel found nothing"
    opts = LocalOptions()
    assert len(hits) <= opts.semantic_entity_top_k
    stored = _stored_entity_vectors(rag)
    assert len(stored) == rag.store.stats(NS)["entities"]  # every entity has a stored vector
    for h in hits:
        vec = stored[h.id]
        cosine = float(vec @ qvec / (np.linalg.norm(vec) * np.linalg.norm(qvec)))
        assert math.isclose(h.score, cosine, abs_tol=1e-4), h
        assert h.score >= opts.semantic_min_similarity
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # the best hit is the nearest stored vector of all
    nearest = max(stored, key=lambda i: stored[i] @ qvec / np.linalg.norm(stored[i]))
    assert hits[0].id == nearest


def test_semantic_channel_respects_top_k_and_min_similarity(rag):
    q = "storm warnings from buoys at sea"
    two = values(rag, q, "semantic_matches", options=LocalOptions(semantic_entity_top_k=2))["semantic_matches"]
    assert len(two) == 2
    none = values(rag, q, "semantic_matches", options=LocalOptions(semantic_min_similarity=1.01))["semantic_matches"]
    assert none == []


# --------------------------------------------------------------------------- fused matching


CHANNELS = ("exact", "alias", "fuzzy", "semantic", "intent")


def test_matched_entities_record_their_channels_and_rrf_scores(rag):
    v = values(rag, DEMO_Q, "matched_entities", *(f"{c}_matches" for c in CHANNELS))
    matched = v["matched_entities"]
    by_id = {m.id: m for m in matched}
    assert {"e-mara-quill", "e-corran-sound"} <= set(by_id)
    assert {"exact", "alias", "semantic", "intent"} <= set(by_id["e-mara-quill"].channels)
    assert "alias" not in by_id["e-corran-sound"].channels  # Corran Sound has no alias
    k = LocalOptions().rrf_k
    for m in matched:
        expected_channels, expected_score = [], 0.0
        for c in CHANNELS:
            lst = ids(v[f"{c}_matches"])
            if m.id in lst:
                expected_channels.append(c)
                expected_score += 1 / (k + lst.index(m.id) + 1)
        assert m.channels == expected_channels, m
        assert math.isclose(m.score, expected_score), m
    assert [m.score for m in matched] == sorted((m.score for m in matched), reverse=True)
    assert len(matched) <= LocalOptions().max_matched_entities


def test_an_empty_channel_can_be_switched_off_with_an_override(rag):
    run = rag.run("local", "What does Alise Tern do?", NS, final_vars=["matched_entities"],
                  overrides={"fuzzy_matches": []})
    assert all("fuzzy" not in m.channels for m in run.values["matched_entities"])
    assert "fuzzy_matches" not in {t.node for t in run.trace}


# ---------------------------------------------------------------------- community ranking


def _members(rag, cid):
    return {r[0] for r in rag.store.admin_rows(
        "SELECT entity_id FROM community_members WHERE namespace = %s AND community_id = %s", (NS, cid))}


def _names(rag, eids):
    return dict(rag.store.admin_rows("SELECT id, name FROM entities WHERE namespace = %s AND id = ANY(%s)",
                                     (NS, list(eids))))


def _structure_sql(rag, cid, eids):
    """Σ_{e∈Eq} Σ_{v∈Ec} weight(e, v), edges undirected: written here independently of dataflows.sql."""
    (total,) = rag.store.admin_rows(
        """
        SELECT coalesce((SELECT sum(e.weight) FROM edges e JOIN community_members m
                           ON m.namespace = e.namespace AND m.entity_id = e.target_id
                         WHERE e.namespace = %(ns)s AND m.community_id = %(cid)s AND e.source_id = ANY(%(eids)s)), 0)
             + coalesce((SELECT sum(e.weight) FROM edges e JOIN community_members m
                           ON m.namespace = e.namespace AND m.entity_id = e.source_id
                         WHERE e.namespace = %(ns)s AND m.community_id = %(cid)s AND e.target_id = ANY(%(eids)s)), 0)
        """,
        {"ns": NS, "cid": cid, "eids": list(eids)},
    )[0]
    return float(total)


def test_ranked_communities_list_their_own_matched_members(rag):
    v = values(rag, DEMO_Q, "matched_entities", "ranked_communities")
    matched_ids = {m.id for m in v["matched_entities"]}
    ranked = v["ranked_communities"]
    assert ranked
    names = _names(rag, matched_ids)
    for c in ranked:
        own = _members(rag, c.id) & matched_ids
        assert sorted(c.matched_entities) == sorted(names[i] for i in own), c.id
    # not every community lists the same entities (i.e. not the query's global match list)
    assert len({tuple(sorted(c.matched_entities)) for c in ranked}) > 1


def test_zero_overlap_or_zero_weight_earns_nothing_from_that_list(rag):
    v = values(rag, DEMO_Q, "ranked_communities", "community_signals")
    signals = {s.id: s for s in v["community_signals"]}
    ranked = v["ranked_communities"]
    zero = [c for c in ranked if not c.matched_entities]
    assert zero, "the demo query should rank at least one community with no matched member"
    k = LocalOptions().rrf_k
    for c in ranked:
        s = signals[c.id]
        assert ("overlap" in c.ranks) == (s.overlap > 0), c.id
        assert ("structure" in c.ranks) == (s.structure > 0), c.id
        assert ("semantic" in c.ranks) == (s.similarity is not None), c.id
        assert math.isclose(c.score, sum(1 / (k + r) for r in c.ranks.values())), c.id
    for c in zero:
        assert "overlap" not in c.ranks
    assert [c.score for c in ranked] == sorted((c.score for c in ranked), reverse=True)


def test_overlap_and_summed_edge_weight_match_direct_sql(rag):
    v = values(rag, DEMO_Q, "matched_entities", "community_signals")
    eids = [m.id for m in v["matched_entities"]]
    checked_weight = 0
    for s in v["community_signals"]:
        members = _members(rag, s.id)
        assert s.size == len(members)
        assert math.isclose(s.overlap, jaccard(len(eids), len(members), len(members & set(eids)))), s.id
        expected = _structure_sql(rag, s.id, eids)
        assert math.isclose(s.structure, expected, abs_tol=1e-9), (s.id, s.structure, expected)
        checked_weight += expected > 0
    assert checked_weight >= 2, "the check should cover communities with a non-zero summed weight"


def test_summed_weight_counts_each_query_entity_member_pair(rag):
    """Worked example on a single query entity: the signal is the plain sum of its edge weights to
    the community's members, from the edges table row by row (no SQL aggregation)."""
    overrides = {"matched_entities": values(rag, "Where is Al today?", "matched_entities")["matched_entities"]}
    assert [m.id for m in overrides["matched_entities"]] == ["e-al"]
    run = rag.run("local", "Where is Al today?", NS, final_vars=["community_signals"], overrides=overrides)
    edges = rag.store.admin_rows("SELECT source_id, target_id, weight FROM edges WHERE namespace = %s "
                                 "AND (source_id = 'e-al' OR target_id = 'e-al')", (NS,))
    assert edges
    for s in run.values["community_signals"]:
        members = _members(rag, s.id)
        expected = sum(w for a, b, w in edges if (a == "e-al" and b in members) or (b == "e-al" and a in members))
        assert math.isclose(s.structure, expected), s.id


def test_ranked_communities_keep_top_k(rag):
    full = values(rag, DEMO_Q, "ranked_communities")["ranked_communities"]
    assert len(full) <= LocalOptions().top_k
    three = values(rag, DEMO_Q, "ranked_communities", options=LocalOptions(top_k=3))["ranked_communities"]
    assert len(three) == 3
    assert [c.id for c in three] == [c.id for c in full[:3]]
    one = values(rag, DEMO_Q, "ranked_communities", options=LocalOptions(top_k=1))["ranked_communities"]
    assert [c.id for c in one] == [full[0].id]


# ------------------------------------------------------------------------- keyword recall


def _evidence_chunks(rag):
    return rag.store.admin_rows("SELECT id, text FROM chunks WHERE namespace = %s AND kind = 'evidence'", (NS,))


def _keyword_chunks(rag, terms, **kwargs):
    return values(rag, "anything", "keyword_chunks", overrides={"keyword_terms": terms}, **kwargs)["keyword_chunks"]


def test_keyword_chunks_treat_like_metacharacters_literally(rag):
    texts = [t for _, t in _evidence_chunks(rag)]
    assert texts and not any(ch in t for t in texts for ch in "%_\\")
    assert _keyword_chunks(rag, ["%"]) == []  # unescaped, '%%%' would match every chunk
    assert _keyword_chunks(rag, ["_"]) == []  # unescaped, '%_%' would match every chunk
    assert _keyword_chunks(rag, ["\\"]) == []
    assert _keyword_chunks(rag, ["Al_ce Tern"]) == []  # '_' is not a one-character wildcard
    assert _keyword_chunks(rag, ["Corran%Skerry"]) == []  # '%' is not a wildcard inside a term
    assert _keyword_chunks(rag, ["Alice Tern"])  # ...while the literal text is found


def _bm25(rag, terms, chunk_text):
    """BM25 with presence for term frequency, written here from its definition: a term found (as
    ILIKE finds it) weighs log(1 + (N - df + 0.5) / (df + 0.5)), df being the chunks whose words
    hold the term's first word (a one-word term: a word it begins), times the length norm."""
    import math

    n, mean = rag.store.admin_rows("SELECT count(*), avg(length(text)) FROM chunks WHERE namespace = %s "
                                   "AND kind = 'evidence'", (NS,))[0]
    score = 0.0
    for term in terms:
        if term.casefold() not in chunk_text.casefold():
            continue
        first = term.split()[0].casefold()
        df = rag.store.admin_rows(
            "SELECT count(*) FROM chunk_words WHERE namespace = %s AND (word = %s OR (%s AND word LIKE %s))",
            (NS, first, " " not in term, first + "%"))[0][0]
        score += math.log1p((n - df + 0.5) / (df + 0.5))
    k1, b = 1.2, 0.75
    return score * (k1 + 1) / (1 + k1 * (1 - b + b * len(chunk_text) / float(mean)))


def test_keyword_scores_are_bm25_of_the_ilike_hits(rag):
    """A chunk's score is BM25 over the terms ILIKE '%term%' finds in it, whatever the case of the
    term; the rarer term weighs more."""
    terms = ["ALICE TERN", "storm", "Surge", "quill", "stormwatch project"]
    found = _keyword_chunks(rag, terms)
    assert found
    for chunk in found:
        hits = rag.store.admin_rows(
            "SELECT count(*) FROM unnest(%s::text[]) t WHERE %s ILIKE '%%' || t || '%%'", (terms, chunk.text))[0][0]
        assert hits >= 1
        assert chunk.score == pytest.approx(_bm25(rag, terms, chunk.text)), chunk.id


def test_keyword_chunks_survive_quotes_and_sql_like_text(rag):
    hostile = ["O'Brien", '"quoted"', "'; DROP TABLE chunks; --", "100%", "a\\b_c", "\\%", "’curly’"]
    assert _keyword_chunks(rag, hostile) == []
    # and the same text through the whole query path
    q = "What about 100% of the_tide \\ O'Brien's \"lamp\" -- '; DROP TABLE chunks; --"
    before = rag.store.stats(NS)
    res = rag.local_search(q, NS)
    assert res["status"] in ("completed", "no_results")
    assert rag.store.stats(NS) == before


def test_keyword_chunks_rank_by_bm25_then_length(rag):
    terms = ["Corran Sound", "funnel"]
    got = _keyword_chunks(rag, terms)
    expected = {cid for cid, t in _evidence_chunks(rag) if any(term.casefold() in t.casefold() for term in terms)}
    assert got and {c.id for c in got} == expected
    keys = [(-c.score, len(c.text)) for c in got]
    assert keys == sorted(keys)
    for c in got:
        assert c.score == pytest.approx(_bm25(rag, terms, c.text))
        assert c.via == "keyword"
    assert _keyword_chunks(rag, terms, options=LocalOptions(keyword_chunk_limit=1)) == got[:1]


def test_recalled_chunks_put_vector_hits_first_without_duplicates(rag):
    v = values(rag, DEMO_Q, "vector_chunks", "keyword_chunks", "recalled_chunks")
    recalled = [c.id for c in v["recalled_chunks"]]
    assert len(recalled) == len(set(recalled))
    vec = [c.id for c in v["vector_chunks"]]
    assert recalled[: len(vec)] == vec
    assert set(recalled) == set(vec) | {c.id for c in v["keyword_chunks"]}


# ----------------------------------------------------------------------------- evidence


@pytest.mark.parametrize("query", [DEMO_Q, "青岚茶社是谁成立的？", "Who funds the Stormwatch Project?"])
def test_evidence_is_traceable_to_document_and_span(rag, query):
    items = values(rag, query, "evidence")["evidence"]
    assert items
    docs = dict(rag.store.admin_rows("SELECT id, text FROM documents WHERE namespace = %s", (NS,)))
    chunks = {r[0]: r[1:] for r in rag.store.admin_rows(
        "SELECT id, document_id, start_char, end_char FROM chunks WHERE namespace = %s", (NS,))}
    assert len({e.id for e in items}) == len(items)
    located = excerpts = 0
    for e in items:
        assert e.kind in ("claim", "chunk")
        assert e.document_id in docs, e
        assert e.chunk_id in chunks, e
        assert chunks[e.chunk_id][0] == e.document_id, e
        if e.start is not None:
            assert e.end is not None and 0 <= e.start < e.end <= len(docs[e.document_id])
            assert docs[e.document_id][e.start:e.end] == e.text, e.id
            located += 1
        if e.kind == "chunk" and not e.is_excerpt:
            assert (e.start, e.end) == tuple(chunks[e.id][1:])
        elif e.kind == "chunk":  # some sentences of the chunk: `<chunk id>#<start>-<end>` in its text
            a, b = map(int, e.id.removeprefix(e.chunk_id + "#").split("-"))
            assert e.id == f"{e.chunk_id}#{a}-{b}" and 0 <= a < b
            assert (e.start, e.end) == (chunks[e.chunk_id][1] + a, chunks[e.chunk_id][1] + b)
            excerpts += 1
    assert located >= 1 and excerpts >= 1


def test_candidate_evidence_puts_recalled_chunks_first_then_claims_and_chunks_by_source(rag):
    # few chunks, so that claims whose chunks are not evidence come through
    got = values(rag, DEMO_Q, "candidate_evidence", "sources", "chunk_units", "source_chunks", "recalled_chunks",
                 options=LocalOptions(evidence_chunk_cap=3))
    items, sources = got["candidate_evidence"], got["sources"]
    units = {**got["chunk_units"], **{c.id: c.parent_id for c in got["source_chunks"]}}
    recalled = {c.id for c in got["recalled_chunks"]}
    rank = {s.unit_id: n for n, s in enumerate(sources)}
    kinds = [e.kind for e in items]
    assert "claim" in kinds and "chunk" in kinds and sources
    keys = [(not (e.kind == "chunk" and e.id in recalled), rank.get(units.get(e.chunk_id), len(rank)),
             e.kind != "claim") for e in items]
    assert keys == sorted(keys)  # recalled chunks by source; then claims before chunks within a source
    assert sum(k == "claim" for k in kinds) <= LocalOptions().claim_cap
    assert sum(k == "chunk" for k in kinds) <= 3


def _claims_of_members(rag, cids):
    """(claim id, subject matched?, object matched?) of every claim whose subject is a member of the
    communities and names an entity, written here independently of dataflows.sql."""
    return rag.store.admin_rows(
        """
        SELECT DISTINCT cl.id, cl.subject_id, cl.object_id FROM claims cl
        JOIN community_members m ON m.namespace = cl.namespace AND m.entity_id = cl.subject_id
        WHERE cl.namespace = %s AND m.community_id = ANY(%s) AND cl.subject_name IS NOT NULL
        """, (NS, list(cids)))


def test_the_claims_read_are_those_about_then_naming_a_match_then_by_id(rag):
    """Within the candidate limit every member's claim is read (unsorted by the statement, ordered by
    the ranking); past it, the statement keeps the claims about a matched entity, then those naming
    one, then the lowest ids in code-point order. The limits cut at each boundary of that order,
    one short of the whole set, at it and past it."""
    def run(limit: int) -> dict:
        return values(rag, DEMO_Q, "ranked_claims", "selected_communities", "matched_entities",
                      options=LocalOptions(claim_candidate_limit=limit))

    v = run(400)
    matched = {m.id for m in v["matched_entities"]}
    found = _claims_of_members(rag, [c.id for c in v["selected_communities"].communities])
    about = sum(r[1] in matched for r in found)
    naming = sum(r[1] not in matched and r[2] in matched for r in found)
    assert about and naming and len(found) > about + naming  # every part of the order is there to cut
    order = sorted(found, key=lambda r: (r[1] not in matched, r[2] not in matched, r[0].encode()))
    for limit in (1, about, about + naming, about + naming + 1, len(found) - 1, len(found), 400):
        kept = run(limit)["ranked_claims"]
        assert {c.id for c in kept} == {r[0] for r in order[:limit]}, limit
        assert [(-c.score, c.id) for c in kept] == sorted((-c.score, c.id) for c in kept)

# --------------------------------------------------------------------- JSON and timings

LOCAL_KEYS = {"method", "namespace", "query", "status", "offline", "answer", "answer_method", "warnings",
              "parsed_query", "matched_entities", "communities", "evidence", "timings_ms", "llm"}
# Beyond the first JSON contract (docs/contract.md): the per-node trace (with the cache flag). Pinned so that any other
# drift from the contract fails.
LOCAL_EXTENSIONS = {"trace", "sources"}


def test_local_json_meets_the_contract(rag):
    res = rag.local_search(DEMO_Q, NS)
    json.dumps(res)  # serialisable as is
    assert set(res) == LOCAL_KEYS | LOCAL_EXTENSIONS
    assert res["method"] == "local" and res["namespace"] == NS and res["query"] == DEMO_Q
    assert res["status"] == "completed"
    assert res["offline"] is True
    assert isinstance(res["answer"], str) and res["answer"].strip()
    assert isinstance(res["warnings"], list) and all(isinstance(w, str) for w in res["warnings"])
    assert set(res["parsed_query"]) == {"entities", "keywords", "themes"}
    assert all(isinstance(x, str) for lst in res["parsed_query"].values() for x in lst)
    assert res["matched_entities"]
    for m in res["matched_entities"]:
        assert set(m) == {"id", "name", "score", "channels"}
        assert m["channels"] and set(m["channels"]) <= set(CHANNELS)
    assert res["communities"]
    for c in res["communities"]:
        assert set(c) == {"id", "level", "title", "score", "summary", "matched_entities"}
        assert isinstance(c["level"], int) and isinstance(c["score"], float)
    assert res["evidence"]
    for e in res["evidence"]:
        base = {"id", "kind", "text", "document_id", "chunk_id", "start", "end"}
        assert set(e) == (base | {"statement"} if e["kind"] == "claim" else base)
    assert set(res["llm"]) == {"calls", "prompt_tokens", "completion_tokens", "by_stage"}
    assert res["llm"]["calls"] == 0 and res["llm"]["by_stage"] == {}
    for key in ("level", "map_answers", "failed_batches"):
        assert key not in res  # global-only keys


def test_timings_have_one_entry_per_executed_node(rag):
    run = rag.run("local", DEMO_Q, NS)
    res = run.as_json()
    traced = [t.node for t in run.trace]
    assert len(traced) == len(set(traced)), "a node ran twice"
    dag_nodes = {v.name for v in run.driver.what_is_upstream_of("local_result") if not v.is_external_input}
    assert set(res["timings_ms"]) == set(traced) == dag_nodes
    assert {"parsed_query", "exact_matches", "ranked_communities", "evidence", "local_answer",
            "local_result"} <= set(res["timings_ms"])
    assert all(isinstance(ms, float) and ms >= 0 for ms in res["timings_ms"].values())
    assert [t["node"] for t in res["trace"]] == traced


def test_timings_cover_only_the_nodes_that_ran(rag):
    run = rag.run("local", "Where is Al today?", NS, final_vars=["exact_matches"])
    assert set(run.timings_ms()) == {"query_name_keys", "name_key_rows", "exact_matches"}
    run = rag.run("local", "Where is Al today?", NS, final_vars=["matched_entities"],
                  overrides={"semantic_matches": [], "query_embedding": np.zeros(256, dtype=np.float32)})
    nodes = set(run.timings_ms())
    assert "semantic_matches" not in nodes and "query_embedding" not in nodes
    assert "local_answer" not in nodes and "matched_entities" in nodes


def test_no_match_query_returns_a_contract_result(rag):
    res = rag.local_search("zzqx vrrrp", NS)
    assert set(res) == LOCAL_KEYS | LOCAL_EXTENSIONS
    assert res["status"] in ("completed", "no_results")
    assert res["matched_entities"] == [] or all(m["channels"] for m in res["matched_entities"])


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "options",
    [
        LocalOptions(top_k=0),
        LocalOptions(top_k=-3),
        LocalOptions(top_k=True),
        LocalOptions(vector_chunk_top_k=0),
        LocalOptions(fuzzy_threshold=101),
        LocalOptions(fuzzy_threshold=-1),
        LocalOptions(hops=3),
        LocalOptions(rrf_k=-1),
        LocalOptions(rrf_k="60"),
        LocalOptions(context_token_budget=0),
    ],
)
def test_bad_options_raise_bad_input(rag, options):
    with pytest.raises(BadInput):
        rag.run("local", "Where is Al?", NS, options=options)


def test_bad_requests_raise_bad_input(rag):
    with pytest.raises(BadInput, match="empty"):
        rag.local_search("   ", NS)
    with pytest.raises(BadInput, match="unknown namespace"):
        rag.local_search("Where is Al?", "no-such-namespace")
    with pytest.raises(BadInput, match="invalid namespace"):
        rag.local_search("Where is Al?", "Bad NS!")
    with pytest.raises(BadInput, match="unknown method"):
        rag.run("sideways", "Where is Al?", NS)
    with pytest.raises(BadInput, match="limit"):
        rag.local_search("x" * 5000, NS)
