"""One driver and one pool serve many threads at once with the same results as serial runs."""

from __future__ import annotations

import pytest

from concurrent.futures import ThreadPoolExecutor

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes


QUERIES = ["What did Dr. Mara Quill discover?", "Who funded the Stormwatch Project?", "Tell me about Alice Tern",
           "青岚茶社和林晓雨是什么关系？", "Who is Al?", "What happened during Storm Orla?", "Greywik Lighthouse Institute",
           "What is the Salt and Leaf Exchange?"]


def _essence(res: dict) -> tuple:
    return (res["answer"], [c["id"] for c in res["communities"]], [e["id"] for e in res["evidence"]],
            [m["id"] for m in res["matched_entities"]])


def test_32_threads_match_serial_results(rag):
    serial = {q: _essence(rag.local_search(q, "demo")) for q in QUERIES}
    work = [QUERIES[i % len(QUERIES)] for i in range(32)]
    with ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(lambda q: (q, _essence(rag.local_search(q, "demo"))), work))
    assert len(results) == 32
    for q, essence in results:
        assert essence == serial[q], q


def test_two_namespaces_written_at_once_take_turns_and_both_land(rag, cli_env, tmp_path):
    """Two imports of different namespaces at once: each CREATE INDEX would wait for the other's
    uncommitted COPY (PostgreSQL then aborts one as a deadlock), so writes (and drops) take turns on
    one lock. The test holds that lock, sees both imports and a drop wait at it before writing
    anything, then lets go."""
    import subprocess
    import sys
    import threading
    import time

    from synthetic import cli

    from graphrag_dag.drivers.store.writer import SHARED_WRITE_LOCK

    folder = tmp_path / "index"
    assert cli(cli_env, "synth", "--entities", "300", "--seed", "8", "--out", str(folder)).returncode == 0
    names = ["turns-a", "turns-b"]
    with rag.store.pool.connection() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (SHARED_WRITE_LOCK,))
        procs = [subprocess.Popen([sys.executable, "-m", "graphrag_dag.drivers.cli", "import-graphrag", str(folder),
                                   "--namespace", ns, "--json"], env=cli_env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for ns in names]
        dropping = threading.Thread(target=rag.store.drop, args=("turns-c",))  # a delete takes its turn too
        dropping.start()
        deadline = time.monotonic() + 240
        waiting = 0
        while waiting < 3 and time.monotonic() < deadline and all(p.poll() is None for p in procs):
            time.sleep(0.2)
            waiting = rag.store.admin_rows("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                                           " AND objid = hashtext(%s)::oid", (SHARED_WRITE_LOCK,))[0][0]
        assert waiting == 3, [p.poll() for p in procs]
        assert rag.store.admin_rows("SELECT count(*) FROM chunks WHERE namespace = ANY(%s)", (names,))[0][0] == 0
    outs = [p.communicate(timeout=240) for p in procs]
    dropping.join(timeout=240)
    assert not dropping.is_alive()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "waiting for another namespace's write to finish" in err
    for ns in names:
        assert rag.store.admin_rows("SELECT count(*) FROM entities WHERE namespace = %s", (ns,))[0][0] >= 300
        rag.store.drop(ns)


def test_vector_text_is_each_value_to_six_significant_digits():
    import numpy as np

    from graphrag_dag.drivers.store.writer import _vec_text

    rng = np.random.default_rng(3)
    vectors = [(rng.standard_normal(256) * 0.1).astype(np.float32), np.array([0.0, -0.0, 1e-9, 123456789.0, -2.5]),
               [0.125, 3, np.float32(0.1)], []]
    for vec in vectors:
        assert _vec_text(vec) == "[" + ",".join(f"{float(x):.6g}" for x in vec) + "]"
    assert _vec_text(None) is None
