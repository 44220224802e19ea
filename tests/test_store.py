"""Storage: migrations, the embedded server under concurrency, embedder bookkeeping, halfvec,
row-level security."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import psycopg
import pytest

from graphrag_dag.dataflows.common.errors import BadInput

from shared_data import PROJECT_ROOT


def test_migrations_are_versioned_and_idempotent(rag):
    from graphrag_dag.drivers.store import migrate, sql_files

    with psycopg.connect(rag.dsn, autocommit=True) as conn:
        migrate(conn)
        migrate(conn)
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
    assert versions == [v for v, _, _ in sql_files()]


def test_the_embedded_server_never_truncates_a_table_even_a_catalog(rag, home):
    # a truncating VACUUM locks the table: on pg_statistic's TOAST table it stalled every tenant's planning
    with psycopg.connect(rag.dsn, autocommit=True) as conn:
        major = int(conn.execute("SHOW server_version_num").fetchone()[0]) // 10000
        settings = dict(conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN ('jit', 'vacuum_truncate')").fetchall())
    assert settings["jit"] == "off"
    if major >= 18:
        assert settings["vacuum_truncate"] == "off"


def test_an_older_data_folder_gets_only_the_settings_it_lacks(tmp_path):
    from graphrag_dag.drivers.store.server import _TUNING_MARK, _tune

    (tmp_path / "PG_VERSION").write_text("18\n")
    conf = tmp_path / "postgresql.conf"
    conf.write_text(f"port = 5432\n\n{_TUNING_MARK}\nshared_buffers = '2GB'\njit = off\n")
    _tune(tmp_path)
    _tune(tmp_path)
    text = conf.read_text()
    assert text.count(_TUNING_MARK) == 1 and text.count("jit = ") == 1
    assert "shared_buffers = '2GB'" in text and text.count("shared_buffers") == 1
    assert text.count("vacuum_truncate = off") == 1
    (tmp_path / "PG_VERSION").write_text("16\n")
    conf.write_text("port = 5432\n")
    _tune(tmp_path)
    assert "vacuum_truncate" not in conf.read_text() and "jit = off" in conf.read_text()  # 16 would refuse to start


@pytest.mark.slow
def test_two_processes_start_the_embedded_server_at_once(tmp_path):
    script = textwrap.dedent("""
        import sys
        from graphrag_dag.drivers.store import Store, embedded_dsn
        from pathlib import Path
        store = Store(embedded_dsn(Path(sys.argv[1])))
        print(store.admin_rows("SELECT count(*) FROM schema_migrations")[0][0])
        store.close()
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "home")], cwd=PROJECT_ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=180) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert int(out.strip().splitlines()[-1]) >= 2


def test_mismatched_query_embedder_is_refused(rag, home, llm_server):
    from graphrag_dag.dataflows.common.errors import BadInput
    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.llm.chat import ChatConfig
    from graphrag_dag.drivers.llm.embedders import OpenAIEmbedder

    other = OpenAIEmbedder("test-embed", base_url=llm_server.base_url, api_key="test", dim=16)
    with GraphRag(rag.dsn, home=home, chat=ChatConfig(), embedder=other, pool_size=1) as g:
        with pytest.raises(BadInput, match="was built with embeddings from wordllama"):
            g.local_search("Who is Mara Quill?", "demo")


@pytest.mark.slow
def test_wide_vectors_use_halfvec_and_keep_source_embeddings(rag, home, llm_server):
    """3,072-d vectors kept from a GraphRAG lancedb folder are indexed as halfvec and searchable."""
    from shared_data import graphrag_output

    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.ingest.importer import import_graphrag
    from graphrag_dag.drivers.llm.chat import ChatConfig
    from graphrag_dag.drivers.llm.embedders import OpenAIEmbedder
    pytest.importorskip("lancedb")
    folder = graphrag_output("operation-dulce-3.1.2")
    embedder = OpenAIEmbedder("graphrag-source:3072d", base_url=llm_server.base_url, api_key="test", dim=3072)
    with GraphRag(rag.dsn, home=home, chat=ChatConfig(), embedder=embedder, pool_size=1) as g:
        report = import_graphrag(g, folder, "wide", embeddings="keep", replace=True)
        assert not any("recomput" in w for w in report["warnings"]), report["warnings"]
        indexdef = g.store.admin_rows("SELECT indexdef FROM pg_indexes WHERE indexname = %s",
                                      (g.store.vector_index("entities", "wide"),))[0][0]
        assert "halfvec(3072)" in indexdef and "WHERE (namespace = 'wide'::text)" in indexdef
        from graphrag_dag.drivers.api import LocalOptions

        res = g.local_search("Who is Alex Mercer?", "wide")
        assert res["communities"]
        # The loopback embedder's vectors are hashes, so similarities are noise: accept any.
        run = g.run("local", "Alex Mercer", "wide", final_vars=["semantic_matches", "semantic_communities"],
                    options=LocalOptions(semantic_min_similarity=-1.0))
        assert len(run.values["semantic_matches"]) == 8
        assert run.values["semantic_communities"]
        g.store.drop("wide")


def test_row_level_security_scopes_an_unscoped_select(rag):
    """SQL that forgets its namespace predicate still sees only the current namespace."""
    db = rag.store.scoped("demo")
    namespaces = {r[0] for r in db.rows("SELECT DISTINCT namespace FROM entities")}
    assert namespaces == {"demo"}
    assert db.rows("SELECT current_user")[0][0] == "graphrag_reader"
    total = rag.store.admin_rows("SELECT count(DISTINCT namespace) FROM entities")[0][0]
    assert total >= 1
    for table in ("documents", "chunks", "entity_aliases", "edges", "communities", "community_members",
                  "community_summaries", "claims", "namespaces"):
        assert {r[0] for r in db.rows(f"SELECT DISTINCT namespace FROM {table}")} <= {"demo"}, table


def test_vector_search_uses_the_namespace_own_hnsw_index(rag):
    """Each namespace has its own partial HNSW graph, and the vector query matches it (so another
    tenant's vectors can neither appear in nor crowd out its nearest neighbours). For a tiny
    namespace the planner may rightly prefer a sort, so sorting is disabled to show the match."""
    from graphrag_dag.dataflows.common import sql

    qvec = rag.embedder.embed(["storm surge"])[0].tolist()
    stmt = "EXPLAIN " + sql.nearest_entities(rag.embedder.dim)
    with rag.store.pool.connection() as conn, conn.transaction():
        conn.execute("SET LOCAL enable_sort = off")
        conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        plan = "\n".join(r[0] for r in conn.execute(stmt, {"ns": "demo", "qvec": qvec, "k": 8}).fetchall())
    index = rag.store.vector_index("entities", "demo")
    assert index and index in plan, plan
    indexdef = rag.store.admin_rows("SELECT indexdef FROM pg_indexes WHERE indexname = %s",
                                    (index,))[0][0]
    assert "WHERE (namespace = 'demo'::text)" in indexdef
    rows = rag.store.scoped("demo").rows(sql.nearest_entities(rag.embedder.dim), {"ns": "demo", "qvec": qvec, "k": 8})
    assert len(rows) == 8


def test_a_search_prepares_its_vector_statement_on_the_namespace_own_hnsw_index(rag):
    """A search's statements are prepared with generic plans (drivers/store/scoped.py): the
    namespace, written into the text, still selects its own partial HNSW graph."""
    import numpy as np
    from test_plans import _nodes, _plan

    from graphrag_dag.dataflows.common import sql

    qvec = rag.embedder.embed(["storm surge"])[0].astype(np.float32)
    index = rag.store.vector_index("entities", "demo")
    with rag.store.query_pool.connection() as conn:
        plan = _plan(conn, "demo", sql.nearest_entities(rag.embedder.dim), {"ns": "demo", "qvec": qvec, "k": 8},
                     enable_sort="off")
    assert [n.get("Index Name") for n in _nodes(plan) if n.get("Index Name")] == [index], plan
    assert plan["Actual Rows"] == 8


def test_query_vectors_are_sent_as_pgvector_writes_them():
    """The scoped handle renders a query vector once per request, as text: the same text
    pgvector's adapter writes, for float32 and float64 input alike."""
    import numpy as np
    from pgvector import Vector

    from graphrag_dag.drivers.store.statements import pgvector_text

    rng = np.random.default_rng(11)
    for vec in (rng.standard_normal(256).astype(np.float32), rng.standard_normal(7), np.zeros(3, dtype=np.float32)):
        assert pgvector_text(vec) == Vector(vec).to_text()


def test_a_search_sends_its_query_vector_in_binary_and_finds_the_rows_text_finds(rag):
    """In a snapshot, a query vector goes as a bound parameter in pgvector's binary form; outside
    one, as text written once per vector object. Both are the same float32 values."""
    import numpy as np

    from graphrag_dag.dataflows.common import sql

    vec = rag.embedder.embed(["lighthouse storm"])[0].astype(np.float32)
    params = {"ns": "demo", "qvec": vec, "k": 5}
    loose = rag.store.scoped("demo")
    texts = [loose.rows(sql.nearest_chunks(vec.shape[0]), params), loose.rows(sql.nearest_entities(vec.shape[0]), params)]
    assert len(loose._vector_texts) == 1  # one text per vector object, not per statement
    with rag.reading("demo") as db:
        binary = [db.rows(sql.nearest_chunks(vec.shape[0]), params), db.rows(sql.nearest_entities(vec.shape[0]), params)]
        assert not db._vector_texts
    assert binary == texts and len(texts[0]) == 5



def test_a_search_binds_its_lists_in_binary_and_finds_the_rows_text_finds(rag):
    """In a snapshot, list parameters (ids, name keys, terms) are bound in binary, including keys
    that text would have to quote (spaces, quotes, backslashes, braces, commas, NULL) and an empty
    list; outside one, psycopg writes them into the text. Both find the same rows."""
    from graphrag_dag.dataflows.common import sql
    from graphrag_dag.drivers.store.statements import bound_statement

    keys = ["mara quill", "storm orla", 'a "quoted" key', "back\\slash", "{brace}", "a,b", "NULL", "", "stormwatch"]
    statement = sql.ENTITIES_BY_KEY
    params = {"ns": "demo", "keys": keys}
    text, bound = bound_statement(statement, params, "demo")
    assert "%(keys)b" in text and "%(keys)s" not in text and bound == {"keys": keys}
    loose = rag.store.scoped("demo").rows(statement, params)
    with rag.reading("demo") as db:
        assert db.rows(statement, params) == loose and len(loose) >= 2
        assert db.rows(statement, {"ns": "demo", "keys": []}) == []

def test_a_search_s_statements_stay_prepared_for_the_next_request(rag, home):
    """A request ends its snapshot with COMMIT: on a ROLLBACK psycopg forgets (and deallocates)
    every statement prepared on the connection, and each request would plan its statements anew."""
    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.llm.chat import ChatConfig

    serial = GraphRag(rag.dsn, home=home, chat=ChatConfig(), pool_size=1)  # one connection
    try:
        for q in ["Who funded the Stormwatch Project?", "What did Dr. Mara Quill discover about the storm surge?",
                  "Tell me about Alice Tern and Storm Orla"]:
            serial.local_search(q, "demo", offline=True)
        with serial.store.query_pool.connection() as conn:
            rows = conn.execute("SELECT generic_plans, custom_plans, statement FROM pg_prepared_statements").fetchall()
    finally:
        serial.close()
    assert any("embedding" in statement for _, _, statement in rows), rows
    assert all(custom == 0 for _, custom, _ in rows), rows  # generic plans only
    assert max(generic for generic, _, _ in rows) == 3, rows  # planned once, run by all three requests


def test_prepare_off_sends_the_same_statements_unprepared_for_a_pooler(rag, home, monkeypatch):
    """GRAPHRAG_DAG_PREPARE=off, for a pooler that moves a session between server connections:
    nothing is left prepared on the connection, and the answers are those of prepared statements."""
    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.llm.chat import ChatConfig

    question = "What did Dr. Mara Quill discover about the storm surge?"
    want = rag.local_search(question, "demo", offline=True)
    monkeypatch.setenv("GRAPHRAG_DAG_PREPARE", "off")
    loose = GraphRag(rag.dsn, home=home, chat=ChatConfig(), pool_size=1)
    try:
        got = loose.local_search(question, "demo", offline=True)
        with loose.store.query_pool.connection() as conn:
            prepared = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0]
    finally:
        loose.close()
    assert prepared == 0
    for result in (want, got):
        for key in ("timings_ms", "trace", "run_id"):
            result.pop(key, None)
    assert got == want
    monkeypatch.setenv("GRAPHRAG_DAG_PREPARE", "sometimes")
    with pytest.raises(BadInput, match="GRAPHRAG_DAG_PREPARE must be on or off"):
        GraphRag(rag.dsn, home=home, chat=ChatConfig())


def test_a_search_learns_its_namespace_in_its_snapshot_and_never_through_the_writer(rag):
    """The namespace's embedder and index version come from the row the request's own snapshot
    reads as it begins (one round trip, not one more on the writer's login), so they cannot
    disagree with the rows the search reads; an unknown namespace is still a clear bad input."""
    from graphrag_dag.dataflows.common.errors import BadInput

    assert rag.store.pool is not rag.store.query_pool  # the embedded server has both logins
    rag.local_search("Who funded Stormwatch?", "demo")  # loads made once per namespace version
    writer, reader = rag.store.pool.lent(), rag.store.query_pool.lent()
    result = rag.local_search("Who funded Stormwatch?", "demo")
    assert result["evidence"]
    assert rag.store.pool.lent() == writer  # nothing went through the writer's login
    assert rag.store.query_pool.lent() > reader
    with pytest.raises(BadInput, match="unknown namespace 'no-such-ns'"):
        rag.local_search("Who funded Stormwatch?", "no-such-ns")

    info = rag.store.namespace_info("demo")
    db = rag.store.scoped("demo", snapshot=True)
    try:
        assert db.begin() == info
        assert db.index_version == info.index_version
    finally:
        db.close()
    missing = rag.store.scoped("no-such-ns", snapshot=True)
    try:
        assert missing.begin() is None
    finally:
        missing.close()
    assert rag.store.scoped("demo").begin() is None  # no snapshot: nothing to begin


_CLAIM_COPIES_DIFFER = """
SELECT count(*) FILTER (WHERE cl.subject_name IS DISTINCT FROM e.name),
       count(*) FILTER (WHERE cl.unit_id IS DISTINCT FROM coalesce(ch.parent_id, ch.id)),
       count(*), count(cl.subject_name), count(cl.unit_id)
FROM claims cl
LEFT JOIN entities e ON e.namespace = cl.namespace AND e.id = cl.subject_id
LEFT JOIN chunks ch ON ch.namespace = cl.namespace AND ch.id = cl.chunk_id
WHERE cl.namespace = %s
"""


def test_claims_carry_their_subject_name_and_unit_as_the_joins_give_them(rag):
    """Local search reads a claim's subject name and unit from copies made at write time
    (sql/011_claim_subjects.sql); they must be what the joins they replaced returned, both as the
    writer makes them and as the migration fills them in for claims written before it."""
    from graphrag_dag.drivers.store import sql_files

    name_diff, unit_diff, total, named, placed = rag.store.admin_rows(_CLAIM_COPIES_DIFFER, ("demo",))[0]
    assert total > 0 and named > 0 and placed > 0
    assert (name_diff, unit_diff) == (0, 0)
    migration = next(text for _, name, text in sql_files() if name == "011_claim_subjects.sql")
    with psycopg.connect(rag.dsn) as conn:  # rolled back on leaving: the demo stays as written
        conn.execute("UPDATE claims SET subject_name = NULL, unit_id = NULL WHERE namespace = 'demo'")
        assert conn.execute(_CLAIM_COPIES_DIFFER, ("demo",)).fetchone()[0] == named
        conn.execute(migration)
        assert conn.execute(_CLAIM_COPIES_DIFFER, ("demo",)).fetchone() == (0, 0, total, named, placed)
        conn.rollback()


_WORD_ROWS = """
SELECT w.word, c.id FROM chunk_words w JOIN chunks c ON c.namespace = w.namespace AND c.chunk_key = w.chunk_key
WHERE w.namespace = %s ORDER BY 1, 2
"""
_KEYS = "SELECT id, chunk_key FROM chunks WHERE namespace = %s AND kind = 'evidence' ORDER BY id COLLATE \"C\""


@pytest.mark.slow
def test_the_word_table_keys_chunks_in_id_order_as_written_and_as_migrated(rag):
    """Keyword recall's word table names chunks by integer key (sql/012_chunk_keys.sql). The keys
    must number the evidence chunks in id order, so that the per-term cap keeps the chunks it kept
    when rows held ids; and a database with the old table must get exactly the rows the writer
    writes."""
    from graphrag_dag.drivers.store import sql_files

    keys = rag.store.admin_rows(_KEYS, ("demo",))
    assert len(keys) > 10 and [k for _, k in keys] == list(range(1, len(keys) + 1))
    words = rag.store.admin_rows(_WORD_ROWS, ("demo",))
    assert len(words) > len(keys)
    migration = next(text for _, name, text in sql_files() if name == "012_chunk_keys.sql")
    with psycopg.connect(rag.dsn) as conn:  # rolled back on leaving: the demo stays as written
        # the layout of migration 004, as a database written before 012 has it
        conn.execute("ALTER TABLE chunks DROP COLUMN chunk_key")
        conn.execute("DROP TABLE chunk_words")
        conn.execute('CREATE TABLE chunk_words (namespace text NOT NULL, word text COLLATE "C" NOT NULL,'
                     ' chunk_id text NOT NULL, PRIMARY KEY (namespace, word, chunk_id))')
        conn.execute("INSERT INTO chunk_words SELECT DISTINCT c.namespace, w, c.id FROM chunks c,"
                     " unnest(tsvector_to_array(to_tsvector('simple', c.text))) AS w WHERE c.kind = 'evidence'")
        conn.execute(migration)
        assert conn.execute(_KEYS, ("demo",)).fetchall() == keys
        assert conn.execute(_WORD_ROWS, ("demo",)).fetchall() == words
        policies = conn.execute("SELECT count(*) FROM pg_policies WHERE tablename = 'chunk_words'").fetchone()[0]
        assert policies == 1
        conn.rollback()


def test_an_upgrade_of_an_existing_database_says_so_a_new_one_does_not(rag, capfd):
    """Migration 012 rewrites every evidence chunk and the word table: 465 s for 488k chunks. A
    first open after an upgrade must not look hung; a fresh database is set up silently."""
    from graphrag_dag.drivers.store import migrate

    with psycopg.connect(rag.dsn, autocommit=True) as conn:
        migrate(conn)
        assert capfd.readouterr().err == ""  # nothing pending
        conn.execute("DELETE FROM schema_migrations WHERE version = 12")
        words = conn.execute("SELECT count(*) FROM chunk_words").fetchone()[0]
        migrate(conn)  # 012 again: it converts the rows it finds, so the data is as before
        err = capfd.readouterr().err
        assert err.count("\n") == 1 and "012_chunk_keys.sql" in err and err.startswith("[graphrag-dag] ")
        assert conn.execute("SELECT count(*) FROM chunk_words").fetchone()[0] == words > 0
        assert conn.execute("SELECT count(*) FROM schema_migrations WHERE version = 12").fetchone()[0] == 1


@pytest.mark.slow
def test_an_hnsw_build_fits_in_the_memory_its_graph_is_sized_at_and_not_in_a_tenth_less(rag):
    """The writer sizes each HNSW build's maintenance_work_mem from the vectors it indexes
    (writer.build_memory_kb). The per-vector figure must hold for the server's pgvector: a build
    given the graph's size with the writer's tenth to spare stays in memory, and one given nine
    tenths of it says it no longer fits, so a figure a tenth too low or a sixth too high fails.
    pgvector counts the graph's memory in blocks of 1 MB: the graph here (7,500 vectors of 256
    dimensions, the embedder's) is some 13 MB, so that a tenth of it is more than a block."""
    import numpy as np

    from graphrag_dag.drivers.store.writer import hnsw_graph_kb

    vectors, dim = 7500, 256
    values = np.random.default_rng(7).standard_normal((vectors, dim)).astype(np.float32)
    notices: list[str] = []
    with rag.store.pool.connection() as conn:
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        with conn.transaction(force_rollback=True):
            conn.execute(f"CREATE TEMP TABLE build_memory_probe (id int, e vector({dim})) ON COMMIT DROP")
            with conn.cursor().copy("COPY build_memory_probe (id, e) FROM STDIN") as copy:
                for n, row in enumerate(values):
                    copy.write_row((n, "[" + ",".join(f"{v:.6g}" for v in row) + "]"))
            found = {}
            for tenths in (11, 9):
                notices.clear()
                with conn.transaction(force_rollback=True):
                    conn.execute("SELECT set_config('maintenance_work_mem', %s, true)",
                                 (f"{hnsw_graph_kb(vectors, dim) * tenths // 10}kB",))
                    conn.execute("CREATE INDEX ON build_memory_probe USING hnsw (e vector_cosine_ops)")
                found[tenths] = [n for n in notices if "no longer fits into maintenance_work_mem" in n]
    assert found[11] == [], found
    assert len(found[9]) == 1, found


def test_a_write_sizes_each_vector_build_unless_told_and_refuses_a_malformed_size(rag, home, monkeypatch):
    """Unset, GRAPHRAG_DAG_BUILD_MEMORY leaves each build its graph's size (at least 1 GB, as
    before); set, every build gets it; malformed, the store refuses to start (BadInput: exit 2 at
    the command line), before any write."""
    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.ingest.demo import demo_records
    from graphrag_dag.drivers.llm.chat import ChatConfig
    from graphrag_dag.drivers.store.writer import BUILD_MEMORY_FLOOR_KB, build_memory_kb

    def built(env: str | None) -> list[str]:
        if env is None:
            monkeypatch.delenv("GRAPHRAG_DAG_BUILD_MEMORY", raising=False)
        else:
            monkeypatch.setenv("GRAPHRAG_DAG_BUILD_MEMORY", env)
        said: list[str] = []
        with GraphRag(rag.dsn, home=home, chat=ChatConfig(), pool_size=1) as g:
            g.write("build-memory", demo_records(), replace=True, source="test", progress=said.append)
            g.store.drop("build-memory")
        return [line for line in said if line.startswith("indexing the vectors of ")]

    sized = built(None)
    assert [line.split(":")[0] for line in sized] == [
        "indexing the vectors of entities", "indexing the vectors of chunks", "indexing the vectors of community_summaries"]
    assert all(line.endswith(f"with {BUILD_MEMORY_FLOOR_KB}kB of build memory") for line in sized), sized
    assert all(line.endswith("with 64MB of build memory") for line in built("64MB"))
    monkeypatch.setenv("GRAPHRAG_DAG_BUILD_MEMORY", "lots")
    with pytest.raises(BadInput, match="GRAPHRAG_DAG_BUILD_MEMORY must be a size"):
        GraphRag(rag.dsn, home=home, chat=ChatConfig())
    # Past the floor, the graph's size with a tenth to spare, up to a quarter of the machine's memory.
    gb = 1 << 20
    assert build_memory_kb(2_000_000, 256, 24 * gb) == -(-2_000_000 * 1738 // 1024) * 11 // 10
    assert build_memory_kb(2_000_000, 256, 8 * gb) == 2 * gb
    assert build_memory_kb(2_000_000, 3072, 64 * gb) == -(-2_000_000 * (2 * 3072 + 714) // 1024) * 11 // 10
    assert build_memory_kb(1000, 256, 24 * gb) == build_memory_kb(1000, 256, 2 * gb) == gb


def test_the_compose_server_has_shared_memory_for_a_parallel_vector_build():
    """A parallel HNSW build puts its graph in /dev/shm, a segment of its build memory (at least
    the writer's floor of 1 GB). Docker gives a container 64 MB of /dev/shm unless its service says
    otherwise, so docker-compose.yml's server must, or any large import into it fails at its builds."""
    import re

    from graphrag_dag.drivers.store.writer import BUILD_MEMORY_FLOOR_KB

    compose = (PROJECT_ROOT / "docker-compose.yml").read_text(encoding="utf-8")
    service = compose.split("\n  postgres:\n", 1)[1].split("\nvolumes:", 1)[0]
    size = re.search(r"^    shm_size: ([0-9]+)([kmg])b$", service, re.MULTILINE)
    assert size is not None, service
    kb = int(size.group(1)) * {"k": 1, "m": 1 << 10, "g": 1 << 20}[size.group(2)]
    assert kb >= BUILD_MEMORY_FLOOR_KB


@pytest.mark.slow  # a process start
def test_a_process_start_logs_no_error_in_the_server_log(cli_env, home):
    """Every start runs the migrations' role check; the writer may not grant the reader role (it is
    a member already), and asking first leaves no "permission denied" ERROR in the server's log."""
    log = home / "pgdata" / "log"
    before = log.stat().st_size if log.exists() else 0
    done = subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", "namespaces"], env=cli_env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with log.open("rb") as f:
        f.seek(before)
        added = f.read().decode("utf-8", "replace")
    assert "permission denied" not in added and " ERROR: " not in added, added[-2000:]
