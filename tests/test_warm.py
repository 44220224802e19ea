"""`warm` (drivers/store/warm.py): a namespace's rows, b-trees and HNSW graphs read into the shared
buffers, through the query login and the namespace's scope, on the real embedded server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.drivers.ingest.demo import demo_records
from graphrag_dag.drivers.store.warm import INDEX_ONLY, LOADED_WHOLE
from graphrag_dag.drivers.store.writer import INDEX_PREDICATES, NS_TABLES, VECTOR_TABLES

from synthetic import cli, synthetic_namespace

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes


OTHER = "warm-other"


@pytest.fixture(scope="module")
def two_namespaces(rag):
    """The demo and a second namespace holding the same rows, so that a warm of one that read the
    other's rows would count them twice."""
    rag.write(OTHER, demo_records(), replace=True, source="test")
    yield rag
    rag.store.drop(OTHER)


def _count(rag, table: str, where: str = "") -> int:
    return int(rag.store.admin_rows(f"SELECT count(*) FROM {table} WHERE namespace = %s{where}", ("demo",))[0][0])


def test_warm_reads_every_row_table_and_graph_of_its_namespace_and_nothing_else(two_namespaces):
    rag = two_namespaces
    report = rag.warm("demo")
    tables = {r.relation: r for r in report.relations if r.kind == "table"}
    # every table but those a search loads whole into its own memory (the graph's edges and units)
    # and those it reads through an index alone (the word table)
    assert set(tables) == set(NS_TABLES) - set(LOADED_WHOLE) - set(INDEX_ONLY)
    assert set(LOADED_WHOLE) | set(INDEX_ONLY) <= set(NS_TABLES)
    for table, read in tables.items():
        assert read.rows == _count(rag, table), table  # every row of the namespace, and only those
    graphs = [r for r in report.relations if r.kind == "hnsw"]
    assert len(graphs) == len(VECTOR_TABLES)
    for read in graphs:
        table = next(t for t in VECTOR_TABLES if read.relation.startswith(f"hnsw_{t}_"))
        vectors = _count(rag, table, " AND embedding IS NOT NULL" + INDEX_PREDICATES.get(table, ""))
        # the iterative scan visits the whole graph (an element the graph cannot reach is missed)
        assert 0.95 * vectors <= read.rows <= vectors, read
    btrees = [r for r in report.relations if r.kind == "btree"]
    warmed = {r.relation for r in btrees}
    assert {"chunk_words_pkey", "claims_subject_idx", "community_members_pkey", "chunks_parent_idx"} <= warmed
    assert not {"edges_source_idx", "edges_target_idx", "edges_pkey", "entity_units_pkey"} & warmed
    assert [r.kind for r in report.relations] == sorted((r.kind for r in report.relations),
                                                        key=["table", "btree", "hnsw"].index)  # graphs last
    assert report.shared_buffers_mb > 0 and report.seconds >= 0


def test_what_warm_read_stays_in_the_buffers(two_namespaces):
    rag = two_namespaces
    rag.warm("demo")
    again = rag.warm("demo")  # the demo is far smaller than the buffers: nothing is read twice
    assert again.read_mb == 0.0
    assert sum(r.hit_mb for r in again.relations) > 0


# Large enough that the b-trees searches look values up in have inner pages besides the root and
# the first one down, so that a warm which read only their leaves would leave some out.
INNER_PAGES_ENTITIES = 2000


def _own_home(home: Path) -> dict[str, str]:
    """The environment of a process whose embedded server is its own: no other process uses `home`."""
    env = {k: v for k, v in os.environ.items() if k not in ("GRAPHRAG_DAG_DSN", "GRAPHRAG_DAG_QUERY_DSN")}
    return {**env, "GRAPHRAG_DAG_HOME": str(home)}


def _inner_pages_child(home: Path, namespace: str, mode: str) -> dict[str, dict[str, int]]:
    child = Path(__file__).with_name("inner_pages.py")
    proc = subprocess.run([sys.executable, str(child), str(home), namespace, mode], capture_output=True, text=True,
                          env=_own_home(home), timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_after_warm_looking_up_any_key_reads_nothing_outside_the_buffers(tmp_path):
    """Each b-tree a search looks values up in, looked up at every value it holds, in a server
    started for the purpose (empty buffers): after `warm`, no look-up reads a block from outside
    the buffers. Reading the same b-trees' leaves in key order (what warm did alone before) is
    shown to leave inner pages out on this namespace, so the test would see a warm that did."""
    home = tmp_path / "home"
    synthetic_namespace(_own_home(home), tmp_path / "index", "inner", INNER_PAGES_ENTITIES, 3)
    leaves = _inner_pages_child(home, "inner", "leaves")
    warmed = _inner_pages_child(home, "inner", "warm")
    assert sum(r["read"] for r in leaves.values()) > 0, leaves  # the namespace has inner pages to miss
    for index, probe in warmed.items():
        assert probe["descents"] == leaves[index]["descents"] > 100, (index, probe)
        assert probe["read"] == 0, (index, probe, leaves[index])


def test_warm_refuses_an_unknown_namespace(rag):
    with pytest.raises(BadInput, match="unknown namespace"):
        rag.warm("no-such-namespace")


def test_warm_command_json_and_human_output(cli_env):
    proc = cli(cli_env, "warm", "--namespace", "demo", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert set(report) == {"namespace", "read_mb", "shared_buffers_mb", "seconds", "relations"}
    assert report["namespace"] == "demo"
    assert {r["kind"] for r in report["relations"]} == {"table", "btree", "hnsw"}
    assert set(report["relations"][0]) == {"relation", "kind", "rows", "read_mb", "hit_mb", "ms"}
    human = cli(cli_env, "warm", "--namespace", "demo")
    assert human.returncode == 0 and "warmed demo in" in human.stdout and "vector graphs: 3" in human.stdout


def test_shared_buffers_setting_resizes_an_existing_data_folder(tmp_path, monkeypatch):
    from graphrag_dag.drivers.store.server import _TUNING_MARK, _tune

    (tmp_path / "PG_VERSION").write_text("18\n")
    conf = tmp_path / "postgresql.conf"
    conf.write_text(f"port = 5432\nshared_buffers = 128MB\n\n{_TUNING_MARK}\nshared_buffers = '1GB'\njit = off\n")
    monkeypatch.setenv("GRAPHRAG_DAG_SHARED_BUFFERS", "3GB")
    _tune(tmp_path)
    ours = conf.read_text().partition(_TUNING_MARK)[2]
    assert "shared_buffers = '3GB'" in ours and ours.count("shared_buffers") == 1
    assert conf.read_text().startswith("port = 5432\nshared_buffers = 128MB\n")  # initdb's line is left alone
    monkeypatch.setenv("GRAPHRAG_DAG_SHARED_BUFFERS", "lots")
    with pytest.raises(BadInput, match="GRAPHRAG_DAG_SHARED_BUFFERS"):
        _tune(tmp_path)
    assert "shared_buffers = '3GB'" in conf.read_text()  # a bad value writes nothing
    monkeypatch.delenv("GRAPHRAG_DAG_SHARED_BUFFERS")
    _tune(tmp_path)
    assert "shared_buffers = '3GB'" in conf.read_text()  # unset: the folder keeps what it has


def test_huge_pages_setting_is_written_only_when_asked(tmp_path, monkeypatch):
    """Unset, the server keeps PostgreSQL's `try`; asked, it is written and later replaced; a
    malformed value exits 2 and writes nothing."""
    from graphrag_dag.drivers.store.server import _TUNING_MARK, _tune

    (tmp_path / "PG_VERSION").write_text("18\n")
    conf = tmp_path / "postgresql.conf"
    conf.write_text("port = 5432\n")
    monkeypatch.delenv("GRAPHRAG_DAG_HUGE_PAGES", raising=False)
    _tune(tmp_path)
    assert _TUNING_MARK in conf.read_text() and "huge_pages" not in conf.read_text()
    monkeypatch.setenv("GRAPHRAG_DAG_HUGE_PAGES", "on")
    _tune(tmp_path)
    assert conf.read_text().count("huge_pages = 'on'") == 1
    monkeypatch.setenv("GRAPHRAG_DAG_HUGE_PAGES", "off")
    _tune(tmp_path)
    ours = conf.read_text().partition(_TUNING_MARK)[2]
    assert "huge_pages = 'off'" in ours and ours.count("huge_pages") == 1
    before = conf.read_text()
    monkeypatch.setenv("GRAPHRAG_DAG_HUGE_PAGES", "yes please")
    with pytest.raises(BadInput, match="GRAPHRAG_DAG_HUGE_PAGES must be on, off or try"):
        _tune(tmp_path)
    assert conf.read_text() == before


def test_huge_pages_off_reaches_the_server(cli_env, tmp_path):
    """The setting is the server's, not just the file's: a new home started with it reports it,
    and bench shows it (a host without reserved huge pages can run `off` anywhere)."""
    env = {**cli_env, "GRAPHRAG_DAG_HOME": str(tmp_path / "home"), "GRAPHRAG_DAG_HUGE_PAGES": "off"}
    demo = cli(env, "demo", "--json")
    assert demo.returncode == 0, demo.stderr
    bench = cli(env, "bench", "--namespace", "demo", "--queries", "2", "--warmup", "1", "--json")
    assert bench.returncode == 0, bench.stderr
    assert json.loads(bench.stdout)["server"]["huge_pages"] == "off"


def test_load_indexes_builds_what_a_first_search_would_read(home, rag):
    """A first search in a new process reads the in-memory indexes' rows; after load_indexes it
    reads none of them, and answers the same."""
    from graphrag_dag.dataflows.local import MEMOIZED
    from graphrag_dag.drivers.api import GraphRag

    question = "What did Dr. Mara Quill discover about the storm surge?"
    results = []
    for load in (False, True):
        fresh = GraphRag(rag.dsn, home=home, pool_size=2)
        try:
            if load:
                assert fresh.load_indexes("demo") > 0
            run = fresh.run("local", question, "demo", offline=True)
        finally:
            fresh.close()
        statements = {t.node: t.statements for t in run.trace}
        results.append((sum(statements[n] for n in MEMOIZED), run.as_json()["sources"]))
    (cold, cold_sources), (loaded, loaded_sources) = results
    assert cold >= 5 and loaded == 0  # the graph alone is five statements
    assert loaded_sources == cold_sources


def _huge_pages_reserved() -> int | None:
    try:
        meminfo = open("/proc/meminfo", encoding="utf-8").read()
    except OSError:
        return None
    found = re.search(r"^HugePages_Total:\s+(\d+)", meminfo, re.M)
    return int(found.group(1)) if found else None


def test_huge_pages_on_without_reserved_pages_fails_in_one_line(cli_env, tmp_path):
    """`on` on a host that reserved no huge pages: the server cannot start, and the error is one
    line saying why and what to do, not the embedded library's many lines."""
    if _huge_pages_reserved() != 0:
        pytest.skip("this host reserves huge pages (or does not say), so `on` may start")
    env = {**cli_env, "GRAPHRAG_DAG_HOME": str(tmp_path / "home"), "GRAPHRAG_DAG_HUGE_PAGES": "on"}
    proc = cli(env, "namespaces")
    assert proc.returncode == 1, proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("graphrag-dag: error: could not start the embedded PostgreSQL")
    assert "shared memory" in proc.stderr and "vm.nr_hugepages" in proc.stderr
