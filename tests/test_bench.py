"""`synth` + `import-graphrag` + `bench --json` at a tiny scale: outputs checked, not timed."""

from __future__ import annotations

import json
import math
import os
import re

import pytest

from synthetic import cli, synthetic_namespace

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes


_cli = cli


@pytest.fixture(scope="module")
def synth_namespace(cli_env, tmp_path_factory):
    counts = synthetic_namespace(cli_env, tmp_path_factory.mktemp("synth") / "index", "bench-tiny", 300, 3)
    assert counts["entities"] >= 300 and counts["edges"] >= 800 and counts["claims"] >= 250
    return "bench-tiny"


def _check_shape(report: dict, method: str, queries: int) -> None:
    assert report["method"] == method and report["queries"] == queries
    assert set(report["total_ms"]) == {"p50", "p95", "mean"}
    assert 0 < report["total_ms"]["p50"] <= report["total_ms"]["p95"]
    assert report["peak_rss_mb"] > 0
    # what the timings were taken on: the load at both ends, and the server's buffers as it reports them
    machine, server = report["machine"], report["server"]
    assert machine["cpus"] == os.cpu_count()
    for key in ("load_avg_start", "load_avg"):
        assert len(machine[key]) == 3 and all(x >= 0 for x in machine[key]), key
    assert server["shared_buffers_mb"] > 0 and server["huge_pages"] in {"on", "off", "try", "unknown"}
    # the pages a host would reserve: at least the buffers' size in 2 MB pages, where the server reports it
    needed = server["huge_pages_needed"]
    assert needed is None or needed * 2 >= server["shared_buffers_mb"], needed
    for node, stats in report["stages_ms"].items():
        assert set(stats) == {"p50", "p95"} and 0 <= stats["p50"] <= stats["p95"], node


def test_bench_local_json(cli_env, synth_namespace):
    proc = _cli(cli_env, "bench", "--namespace", synth_namespace, "--queries", "6", "--warmup", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    _check_shape(report, "local", 6)
    assert {"exact_matches", "fuzzy_matches", "semantic_matches", "ranked_communities", "local_answer"} <= set(
        report["stages_ms"])
    assert report["llm_calls"] == 0  # offline
    # every statement is counted in the node that sent it: the name look-ups are one; the walk reads
    # the in-memory graph, which the warm-up query loaded
    assert "entity_neighbourhood" not in report["stages_db"] and "graph_index" not in report["stages_db"]
    assert report["stages_db"]["name_key_rows"]["statements"] == 1
    assert report["stages_db"]["name_key_rows"]["db_ms_p50"] >= 0
    assert "exact_matches" not in report["stages_db"]  # it reads name_key_rows, not the database
    assert report["db_statements"] == sum(s["statements"] for s in report["stages_db"].values())
    assert report["prewarm"] is None


def test_bench_prewarm_reads_the_namespace_first(cli_env, synth_namespace):
    proc = _cli(cli_env, "bench", "--namespace", synth_namespace, "--queries", "2", "--warmup", "1", "--prewarm",
                "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    _check_shape(report, "local", 2)
    assert set(report["prewarm"]) == {"read_mb", "seconds"} and report["prewarm"]["read_mb"] >= 0


def test_bench_global_with_stand_in_llm(cli_env, synth_namespace):
    proc = _cli(cli_env, "bench", "--namespace", synth_namespace, "--queries", "2", "--warmup", "1", "--method",
                "global", "--llm-latency-ms", "20", "--concurrency", "4", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    _check_shape(report, "global", 2)
    batches = report["batches"]["mean"]
    assert batches >= 1
    # one map call per batch plus one reduce call, per query
    assert report["llm_calls"] == 2 * (batches + 1)
    assert report["llm_tokens"]["prompt"] > 100 * batches and report["llm_tokens"]["completion"] > 0
    assert report["stages_ms"]["map_answers"]["p50"] >= 20 * math.ceil(batches / 4) * 0.9


def test_bench_human_output_says_what_it_ran_on(cli_env, synth_namespace):
    proc = _cli(cli_env, "bench", "--namespace", synth_namespace, "--queries", "2", "--warmup", "1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("local search, 2 queries: total p50")
    assert re.fullmatch(rf"on {os.cpu_count()} CPUs, load average \[.+\] before and \[.+\] after; server: "
                        r"[0-9,]+ MB of shared buffers, huge pages (on|off|try|unknown)"
                        r"( \([0-9,]+ would hold its shared memory\))?", lines[1]), lines[1]


def test_bench_rejects_unknown_namespace(cli_env):
    proc = _cli(cli_env, "bench", "--namespace", "no-such-ns", "--queries", "2")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_time_outside_the_nodes_counts_overlapping_nodes_once():
    """With a task executor two nodes may run at once: the time no node ran is the wall time
    less the union of their intervals, not less their sum (which could exceed the wall time)."""
    from graphrag_dag.drivers.runtime.engine import TraceEntry
    from graphrag_dag_tools.bench import _busy_ms

    trace = [TraceEntry("a", 100.0, ended=1.0), TraceEntry("b", 50.0, ended=0.95), TraceEntry("c", 10.0, ended=1.5),
             TraceEntry("d", 20.0, ended=1.505)]
    # a: 0.90-1.00, b inside it, c: 1.49-1.50, d: 1.485-1.505 overlapping c
    assert math.isclose(_busy_ms(trace), 100.0 + 20.0)
    assert _busy_ms([]) == 0.0


def test_lockstep_runs_both_sides_on_the_same_queries_in_turn(cli_env, synth_namespace, tmp_path):
    """tests/benchmarks/lockstep.py: side A from this checkout's tree (through its links), side B
    the installed package; each answers every query once, and a tree without the packages is refused."""
    import subprocess
    import sys

    from shared_data import PROJECT_ROOT

    script = PROJECT_ROOT / "tests" / "benchmarks" / "lockstep.py"
    proc = subprocess.run([sys.executable, str(script), "--a", str(PROJECT_ROOT), "--namespace", synth_namespace,
                           "--queries", "4", "--warmup", "1"], capture_output=True, text=True, env=cli_env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["queries"] == 4 and out["a"]["tree"] == str(PROJECT_ROOT) and out["b"]["tree"] == "installed"
    for side in ("a", "b"):
        assert out[side]["namespace"] == synth_namespace
        assert 0 < out[side]["p50_ms"] <= out[side]["p95_ms"] and out[side]["cpu_ms"] > 0
    assert set(out["b_minus_a_median_ms"]) == {"wall", "cpu"} and len(out["load_avg"]) == 3
    refused = subprocess.run([sys.executable, str(script), "--a", str(tmp_path), "--namespace", synth_namespace,
                              "--queries", "1"], capture_output=True, text=True, env=cli_env, timeout=60)
    assert refused.returncode != 0 and "has no dataflows/ and drivers/" in refused.stderr
