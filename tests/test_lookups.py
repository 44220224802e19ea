"""The seeds' second and third retrieval interfaces and evidence auditing, on the demo: a
community's details, an entity's neighbours, and the source of every evidence id; through the
library and the command line. Expected values are computed from the stored tables here, not
copied from the code's output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from graphrag_dag.dataflows.common.errors import BadInput, NotFound

QUESTION = "What did Dr. Mara Quill discover about the storm surge in Corran Sound, and who funded the work?"


def _rows(rag, query, params=()):
    return rag.store.admin_rows(query, params)


def test_community_details_list_members_and_the_edges_between_them(rag):
    cid = "c2-1"
    members = {r[0] for r in _rows(rag, "SELECT entity_id FROM community_members WHERE namespace = 'demo' "
                                        "AND community_id = %s", (cid,))}
    internal = {r[0] for r in _rows(rag, "SELECT id FROM edges WHERE namespace = 'demo' AND source_id = ANY(%s) "
                                         "AND target_id = ANY(%s)", (list(members), list(members)))}
    d = rag.community_details("demo", cid)
    assert d["id"] == cid and d["title"] and d["summary"] and d["full_content"]
    assert {m["id"] for m in d["members"]} == members and d["member_count"] == len(members)
    assert {e["id"] for e in d["edges"] if e["internal"]} == internal and internal
    for e in d["edges"]:
        assert (e["source_id"] in members and e["target_id"] in members) == e["internal"]
        assert e["source_id"] in members or e["target_id"] in members
    weights = [e["weight"] for e in d["edges"] if e["internal"]]
    assert weights == sorted(weights, reverse=True)
    assert all(c["subject_id"] in members for c in d["claims"]) and d["claims"]
    for u in d["evidence"]:  # passages mentioning members, with spans that slice their document
        text = _rows(rag, "SELECT text FROM documents WHERE namespace = 'demo' AND id = %s", (u["document_id"],))[0][0]
        assert text[u["start"]:u["end"]].startswith(u["snippet"][:50])
    parent = rag.community_details("demo", d["parent_id"])
    assert cid in parent["children"] and members <= {m["id"] for m in parent["members"]}


def test_unknown_community_is_not_found(rag):
    with pytest.raises(NotFound, match="unknown community"):
        rag.community_details("demo", "c9-99")


def _hops_from(rag, start: str) -> dict[str, int]:
    """Breadth-first distances over the whole edge table (no caps)."""
    adj: dict[str, set[str]] = {}
    for s, t in _rows(rag, "SELECT source_id, target_id FROM edges WHERE namespace = 'demo'"):
        adj.setdefault(s, set()).add(t)
        adj.setdefault(t, set()).add(s)
    dist, frontier = {start: 0}, [start]
    while frontier:
        nxt = []
        for a in frontier:
            for b in adj.get(a, ()):
                if b not in dist:
                    dist[b] = dist[a] + 1
                    nxt.append(b)
        frontier = nxt
    return dist


def test_neighbors_at_depth_two_include_a_two_hop_entity(rag):
    dist = _hops_from(rag, "e-oren-pike")
    two_hop = {e for e, d in dist.items() if d == 2}
    assert two_hop
    res = rag.entity_neighbors("demo", "Oren Pike", depth=2, limit=200)
    assert res["entity"]["id"] == "e-oren-pike" and "exact" in res["resolved_by"]
    got = {n["id"]: n for n in res["neighbors"]}
    assert two_hop & set(got), "no two-hop entity among the neighbours"
    for n in res["neighbors"]:
        assert n["hops"] == dist[n["id"]]  # the walk's distance is the true shortest distance
        assert n["hops"] == 1 if n["via_id"] == "e-oren-pike" else got[n["via_id"]]["hops"] == n["hops"] - 1
        assert n["community"] and n["community"]["id"]
    one = rag.entity_neighbors("demo", "Oren Pike", depth=1, limit=200)
    assert {n["id"] for n in one["neighbors"]} == {e for e, d in dist.items() if d == 1}
    weights = [n["weight"] for n in one["neighbors"]]
    assert weights == sorted(weights, reverse=True)


def test_neighbors_resolve_typos_and_refuse_bad_input(rag):
    assert rag.entity_neighbors("demo", "Mara Quil")["entity"]["id"] == "e-mara-quill"
    assert rag.entity_neighbors("demo", "Mara Quill", limit=2)["truncated"] is True
    with pytest.raises(NotFound):
        rag.entity_neighbors("demo", "Zzyzx Qwertyuiop")
    with pytest.raises(BadInput, match="depth"):
        rag.entity_neighbors("demo", "Mara Quill", depth=4)


def test_source_of_every_evidence_id_equals_the_document_slice(rag):
    res = rag.local_search(QUESTION, "demo")
    assert res["evidence"]
    docs = dict(_rows(rag, "SELECT id, text FROM documents WHERE namespace = 'demo'"))
    for e in res["evidence"]:
        s = rag.source("demo", e["id"], context_chars=30)
        assert (s["document_id"], s["start"], s["end"]) == (e["document_id"], e["start"], e["end"])
        doc = docs[s["document_id"]]
        assert s["text"] == doc[s["start"]:s["end"]] == e["text"]
        assert s["before"] == doc[max(0, s["start"] - 30):s["start"]] and s["after"] == doc[s["end"]:s["end"] + 30]
        assert s["document_chars"] == len(doc) and s["title"]
    with pytest.raises(NotFound):
        rag.source("demo", "no-such-evidence")


def _cli(cli_env, *args):
    return subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", *args], env=cli_env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_cli_lookups_print_the_contract_json_and_refuse_unknown_ids(rag, cli_env):
    r = _cli(cli_env, "community", "c2-2", "--namespace", "demo", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == rag.community_details("demo", "c2-2")
    r = _cli(cli_env, "neighbors", "Oren Pike", "--namespace", "demo", "--depth", "2", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == rag.entity_neighbors("demo", "Oren Pike", depth=2)
    r = _cli(cli_env, "source", "cl-3", "--namespace", "demo")
    assert r.returncode == 0 and ">>>" in r.stdout and "Mara" in r.stdout
    for args in (("community", "nope"), ("source", "nope"), ("neighbors", "Zzyzx Qwertyuiop")):
        r = _cli(cli_env, *args, "--namespace", "demo")
        assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.slow
def test_the_shortened_ids_the_cli_prints_can_be_looked_up(rag, cli_env):
    """Long ids are printed as `head…tail` (an excerpt keeps its `#start-end`); `source` takes
    that form, through the library and the command line, and finds the one id it stands for."""
    from test_isolation import _tenant

    from graphrag_dag.drivers.cli.printing import short_ids

    rag.write("long-ids", _tenant("0123456789abcdef0123456789-", "LONG"), replace=True)
    try:
        res = rag.local_search(QUESTION, "long-ids")
        ids = [e["id"] for e in res["evidence"]]
        shown = short_ids(ids)
        assert len(shown) == len(ids) and all("…" in s for s in shown.values())
        assert any("#" in full and shown[full].endswith(full[full.rindex("#"):]) for full in ids)  # an excerpt
        for full, short in shown.items():
            assert rag.source("long-ids", short)["evidence_id"] == full
        stored = [r[0] for r in _rows(rag, "SELECT id FROM chunks WHERE namespace = 'long-ids'")]
        last = max(set(i[-1] for i in stored), key=lambda ch: sum(i.endswith(ch) for i in stored))
        with pytest.raises(BadInput, match="more than one id"):
            rag.source("long-ids", f"0123456789ab…{last}")  # a head and tail that several ids share
        full, short = next(iter(shown.items()))
        out = subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", "source", short, "--namespace",
                              "long-ids", "--json"], env=cli_env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and json.loads(out.stdout)["evidence_id"] == full, out.stderr
    finally:
        rag.store.drop("long-ids")
