"""The `graphrag-dag` command line (docs/contract.md), run as real subprocesses that share
the session's embedded PostgreSQL: the query JSON contract, DAG drawing, stats, namespaces, and
exit code 2 with exactly one stderr line (no traceback) for bad input."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from graphrag_dag.drivers.runtime import engine
from graphrag_dag.drivers.ingest.demo import demo_queries

CLI = [sys.executable, "-m", "graphrag_dag.drivers.cli"]
CONSOLE_SCRIPT = Path(sys.executable).with_name("graphrag-dag")
QUERY = demo_queries()["local"]
LOCAL_KEYS = {"method", "namespace", "query", "status", "offline", "answer", "answer_method", "warnings",
              "parsed_query", "matched_entities", "communities", "evidence", "timings_ms", "llm"}
LOCAL_EXTENSIONS = {"trace", "sources"}  # beyond section 6: the per-node trace and ranked sources; pinned so other drift fails
STATS_KEYS = {"documents", "chunks", "entities", "aliases", "edges", "communities", "community_summaries", "claims"}
STAGE_NODES = ["parsed_query", "query_embedding", "exact_matches", "alias_matches", "fuzzy_matches",
               "semantic_matches", "matched_entities", "topology_communities", "semantic_communities",
               "keyword_chunks", "vector_chunks", "recalled_chunks", "ranked_communities", "selected_communities",
               "evidence", "local_context", "local_answer", "local_result"]


def cli(env, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=timeout)


def local_dag_nodes() -> set[str]:
    dr = engine.builder("local").build()
    return {v.name for v in dr.what_is_upstream_of("local_result") if not v.is_external_input}


# ------------------------------------------------------------------------------------ query


@pytest.fixture(scope="module")
def query_json(cli_env):
    proc = cli(cli_env, "query", QUERY, "--namespace", "demo", "--json")
    return proc


@pytest.mark.slow
def test_query_json_meets_the_contract(query_json):
    proc = query_json
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    res = json.loads(proc.stdout)
    assert set(res) == LOCAL_KEYS | LOCAL_EXTENSIONS
    assert res["method"] == "local" and res["namespace"] == "demo" and res["query"] == QUERY
    assert res["status"] == "completed" and res["offline"] is True
    assert res["answer"].strip()
    assert set(res["parsed_query"]) == {"entities", "keywords", "themes"}
    assert res["matched_entities"] and all(set(m) == {"id", "name", "score", "channels"}
                                           for m in res["matched_entities"])
    assert res["communities"] and all(set(c) == {"id", "level", "title", "score", "summary", "matched_entities"}
                                      for c in res["communities"])
    assert res["evidence"]
    for e in res["evidence"]:
        assert {"id", "kind", "text", "document_id", "chunk_id", "start", "end"} <= set(e)
        assert e["kind"] in ("claim", "chunk") and e["document_id"] and e["chunk_id"]
    assert set(res["llm"]) == {"calls", "prompt_tokens", "completion_tokens", "by_stage"}
    assert res["llm"]["calls"] == 0


def test_query_json_timings_have_one_entry_per_executed_stage(query_json):
    res = json.loads(query_json.stdout)
    traced = [t["node"] for t in res["trace"]]
    assert len(traced) == len(set(traced))
    assert set(res["timings_ms"]) == set(traced) == local_dag_nodes()
    assert set(STAGE_NODES) <= set(res["timings_ms"])
    assert all(isinstance(v, (int, float)) and v >= 0 for v in res["timings_ms"].values())


@pytest.mark.slow
def test_query_top_k_limits_the_communities(cli_env):
    proc = cli(cli_env, "query", QUERY, "--namespace", "demo", "--top-k", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["communities"]) == 1


@pytest.mark.slow
def test_every_setting_flag_reaches_its_node(cli_env, query_json):
    """Flags made from the settings table change what the nodes do, not only the options."""
    default = json.loads(query_json.stdout)
    assert len(default["matched_entities"]) > 1 and len(default["evidence"]) > 2
    proc = cli(cli_env, "query", QUERY, "--namespace", "demo", "--json", "--max-matched-entities", "1",
               "--claim-cap", "1", "--evidence-chunk-cap", "1")
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert len(res["matched_entities"]) == 1
    assert len([e for e in res["evidence"] if e["kind"] == "claim"]) <= 1
    assert len({e["chunk_id"] for e in res["evidence"] if e["kind"] == "chunk"}) <= 1  # one chunk, maybe as excerpts


@pytest.mark.slow
def test_query_readable_output_and_context_only(cli_env):
    proc = cli(cli_env, "query", "青岚茶社是谁成立的？", "--namespace", "demo")
    assert proc.returncode == 0, proc.stderr
    assert "Answer (offline)" in proc.stdout and "Communities:" in proc.stdout and "Evidence:" in proc.stdout
    assert re.search(r"\n  \S+ \((claim|chunk)\) .+ \[\d+:\d+\]: \S", proc.stdout)  # id (kind) document [span]: text
    proc = cli(cli_env, "query", QUERY, "--namespace", "demo", "--context-only")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("[Community summaries]") and "\n[Evidence]\n" in proc.stdout


# -------------------------------------------------------------------------------------- dag


@pytest.mark.slow
def test_dag_local_dot_contains_every_local_node(cli_env, tmp_path):
    out = tmp_path / "local.dot"
    proc = cli(cli_env, "dag", "local", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    dot = out.read_text(encoding="utf-8")
    assert dot.lstrip().startswith("//") or "digraph" in dot
    declared = set(re.findall(r"^\s*(\w+) \[", dot, flags=re.MULTILINE))
    assert local_dag_nodes() <= declared
    assert set(STAGE_NODES) <= declared
    assert "map_answers" not in declared  # a global node


@pytest.mark.slow
def test_dag_local_without_out_prints_dot(cli_env):
    proc = cli(cli_env, "dag", "local")
    assert proc.returncode == 0, proc.stderr
    assert "digraph" in proc.stdout and "ranked_communities" in proc.stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz 'dot' is not installed")
def test_dag_local_svg_draws_every_stage(cli_env, tmp_path):
    out = tmp_path / "local.svg"
    proc = cli(cli_env, "dag", "local", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    svg = out.read_text(encoding="utf-8")
    assert "<svg" in svg
    for name in local_dag_nodes():
        assert name in svg, name


@pytest.mark.skipif(shutil.which("dot") is not None, reason="graphviz 'dot' is installed")
def test_dag_svg_without_graphviz_is_a_clear_usage_error(cli_env, tmp_path):
    out = tmp_path / "local.svg"
    proc = cli(cli_env, "dag", "local", "--out", str(out))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "dot" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


# ------------------------------------------------------------------------ stats, namespaces


def _corpus_counts() -> dict[str, int]:
    from importlib import resources

    data = json.loads((resources.files("graphrag_dag.drivers.ingest.demo") / "corpus.json").read_text(encoding="utf-8"))
    return {"documents": len(data["documents"]), "chunks": len(data["chunks"]), "entities": len(data["entities"]),
            "aliases": len(data["aliases"]), "edges": len(data["edges"]), "communities": len(data["communities"]),
            "community_summaries": len(data["summaries"]), "claims": len(data["claims"])}


@pytest.mark.slow
def test_stats_json_counts(cli_env):
    proc = cli(cli_env, "stats", "--namespace", "demo", "--json")
    assert proc.returncode == 0, proc.stderr
    counts = json.loads(proc.stdout)
    assert set(counts) == STATS_KEYS
    assert counts == _corpus_counts()


@pytest.mark.slow
def test_namespaces_json_lists_demo(cli_env):
    proc = subprocess.run([str(CONSOLE_SCRIPT), "namespaces", "--json"], env=cli_env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    demo = next(r for r in rows if r["namespace"] == "demo")
    assert demo["embed_dim"] == 256 and demo["embed_model"].startswith("wordllama")
    assert demo["index_version"]


# ------------------------------------------------------------------------------- bad input

BAD_INPUT = {
    "empty-query": ["query", "", "--namespace", "demo"],
    "blank-query": ["query", "   ", "--namespace", "demo", "--json"],
    "control-characters-only": ["query", "\x01\x02\x03", "--namespace", "demo", "--json"],
    "query-not-utf8": ["query", "caf\udce9 in Saltmarrow", "--namespace", "demo", "--json"],  # argv bytes caf\xe9
    "unknown-namespace": ["query", "Where is Al?", "--namespace", "no-such-namespace"],
    "bad-namespace": ["query", "Where is Al?", "--namespace", "Bad NS!"],
    "top-k-zero": ["query", "Where is Al?", "--namespace", "demo", "--top-k", "0"],
    "top-k-negative": ["query", "Where is Al?", "--namespace", "demo", "--top-k", "-3"],
    "top-k-not-a-number": ["query", "Where is Al?", "--namespace", "demo", "--top-k", "many"],
    "unknown-method": ["query", "Where is Al?", "--namespace", "demo", "--method", "sideways"],
    "global-level-99": ["query", "What are the main themes?", "--namespace", "demo", "--method", "global",
                        "--level", "99"],
    "missing-namespace-option": ["query", "Where is Al?"],
    "dag-gif": ["dag", "local", "--out", "{tmp}/local.gif"],
    "dag-unknown-flow": ["dag", "sideways"],
    "stats-unknown-namespace": ["stats", "--namespace", "no-such-namespace", "--json"],
    "warm-unknown-namespace": ["warm", "--namespace", "no-such-namespace", "--json"],
    "drop-unknown-namespace": ["drop", "--namespace", "no-such-namespace"],
    "drop-bad-namespace": ["drop", "--namespace", "Bad NS!"],
    "no-command": [],
    "query-too-long": ["query", "storm " * 1000, "--namespace", "demo"],
    "trace-gif": ["query", "Where is Al?", "--namespace", "demo", "--trace", "{tmp}/trace.gif"],
    "import-not-graphrag": ["import-graphrag", "{tmp}", "--namespace", "nothing-here"],
    "import-bad-embeddings": ["import-graphrag", "{tmp}", "--namespace", "x", "--embeddings", "sometimes"],
    "timeout-negative": ["query", "Where is Al?", "--namespace", "demo", "--timeout", "-1"],
    "timeout-infinite": ["query", "Where is Al?", "--namespace", "demo", "--timeout", "inf"],
    "rrf-k-negative": ["query", "Where is Al?", "--namespace", "demo", "--rrf-k", "-1"],
    "fuzzy-threshold-above-100": ["query", "Where is Al?", "--namespace", "demo", "--fuzzy-threshold", "101"],
    "map-fanout-unknown": ["query", "Themes?", "--namespace", "demo", "--method", "global", "--map-fanout", "gpu"],
    "reserve-not-below-budget": ["query", "Themes?", "--namespace", "demo", "--method", "global",
                                 "--map-budget", "100", "--map-output-reserve", "100"],
    "namespace-trailing-newline": ["query", "Where is Al?", "--namespace", "demo\n"],
}


@pytest.fixture(scope="module")
def bad_input_runs(cli_env, tmp_path_factory):
    """All bad-input invocations, run concurrently (each is an independent process)."""
    tmp = tmp_path_factory.mktemp("cli-bad")
    cases = {name: [a.replace("{tmp}", str(tmp)) for a in args] for name, args in BAD_INPUT.items()}
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = {name: pool.submit(cli, cli_env, *args) for name, args in cases.items()}
        results = {name: f.result() for name, f in futures.items()}
    return results, tmp


@pytest.mark.slow
@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_exits_2_with_one_line(bad_input_runs, case):
    results, tmp = bad_input_runs
    proc = results[case]
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("graphrag-dag: error: ")
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    if case == "dag-gif":
        assert not (tmp / "local.gif").exists()


def test_bad_input_messages_say_what_is_wrong(bad_input_runs):
    results, _ = bad_input_runs
    assert "empty" in results["empty-query"].stderr
    assert "no-such-namespace" in results["unknown-namespace"].stderr
    assert "Bad NS!" in results["bad-namespace"].stderr
    assert "--top-k" in results["top-k-zero"].stderr and "--top-k" in results["top-k-negative"].stderr
    assert "sideways" in results["unknown-method"].stderr
    assert "99" in results["global-level-99"].stderr
    assert ".gif" in results["dag-gif"].stderr
    assert "no-such-namespace" in results["drop-unknown-namespace"].stderr


def test_debug_shows_the_traceback(cli_env):
    proc = cli(cli_env, "--debug", "query", "", "--namespace", "demo")
    assert proc.returncode == 2
    assert "Traceback" in proc.stderr and "the query is empty" in proc.stderr


@pytest.mark.slow
def test_demo_namespace_survives_the_bad_input_runs(cli_env, bad_input_runs):
    proc = cli(cli_env, "stats", "--namespace", "demo", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout) == _corpus_counts()


@pytest.mark.slow
def test_human_output_strips_terminal_control_sequences(cli_env, llm_server):
    """An answer is a model's text: printed for a person it cannot drive the terminal; the JSON
    keeps it as it came."""
    from llm_server import Reply

    hostile = "Fine \x1b[2J\x1b[31mred\x1b[0m\x1b]0;owned\x07 text\x1b[1A\x00 end"

    def responder(rec):
        if rec.stage == "parse":
            return Reply(json.dumps({"entities": ["Mara Quill"], "keywords": ["storm"], "themes": []}))
        if rec.stage == "select":
            return Reply(json.dumps({"community_ids": []}))
        return Reply(hostile)

    llm_server.responder = responder
    env = {**cli_env, "OPENAI_BASE_URL": llm_server.base_url, "OPENAI_API_KEY": "test",
           "GRAPHRAG_DAG_CHAT_MODEL": "test-model"}
    proc = cli(env, "query", "What did Mara Quill find?", "--namespace", "demo")
    assert proc.returncode == 0, proc.stderr
    assert "Fine red text end" in proc.stdout
    assert not any(ch in proc.stdout for ch in "\x1b\x07\x00")
    as_json = cli(env, "query", "What did Mara Quill find?", "--namespace", "demo", "--json")
    assert json.loads(as_json.stdout)["answer"] == hostile


@pytest.mark.slow
def test_a_closed_output_pipe_ends_quietly(cli_env):
    """`... | head` that exits before we write: the reader is gone before the first line."""
    from shared_data import PROJECT_ROOT

    proc = subprocess.Popen([sys.executable, "-m", "graphrag_dag.drivers.cli", "query", "What did Mara Quill find?",
                             "--namespace", "demo", "--context-only"], env=cli_env, cwd=PROJECT_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # long before the interpreter has started, let alone answered
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, err
    assert b"BrokenPipe" not in err and b"Traceback" not in err


def test_every_option_of_every_command_says_what_it_does_and_its_default():
    import argparse

    from graphrag_dag.drivers.cli.main import build_parser

    missing = []

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    walk(child, f"{name} {sub}")
            elif action.option_strings and not isinstance(action, argparse._HelpAction):
                text = action.help or ""
                if not text.split("(")[0].strip() or not ("default" in text or "required" in text):
                    missing.append(f"{name} {action.option_strings[-1]}: {text!r}")
        parser.format_help()  # every help string formats

    walk(build_parser(), "graphrag-dag")
    assert not missing, missing


@pytest.mark.slow
def test_global_search_whose_every_map_call_fails_exits_1_with_one_line(cli_env, llm_server):
    from llm_server import Reply

    llm_server.responder = lambda rec: Reply("boom", status=500)
    env = {**cli_env, "OPENAI_BASE_URL": llm_server.base_url, "OPENAI_API_KEY": "test",
           "GRAPHRAG_DAG_CHAT_MODEL": "test-model"}
    proc = cli(env, "query", "What are the main themes?", "--namespace", "demo", "--method", "global", "--json",
               "--level", "0")  # the few top communities: one batch, so the client's retries stay short
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "failed" and out["answer_method"] == "none"
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("graphrag-dag: error: every map call failed"), proc.stderr
    assert "InternalServerError" in lines[0]


def test_bad_input_is_refused_before_the_dag_code_loads(cli_env):
    """Parsing the command line and checking a query need neither Hamilton's DAG machinery (a
    second and a half of imports, pandas and matplotlib among them) nor a store, so a usage error
    is refused at once."""
    code = ("import sys\nfrom graphrag_dag.drivers.cli.main import main\ncode = main(['query', '', '--namespace', 'demo'])\n"
            "print(code, 'hamilton.function_modifiers' in sys.modules, 'graphrag_dag.drivers.api.graphrag' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], env=cli_env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["2", "False", "False"], (proc.stdout, proc.stderr)
    assert proc.stderr.strip() == "graphrag-dag: error: the query is empty (or only control characters)"


def test_version_prints_the_package_metadatas_version(capsys):
    from importlib.metadata import version

    from graphrag_dag.drivers.cli.main import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["--version"])
    assert capsys.readouterr().out.strip() == f"graphrag-dag {version('graphrag-dag')}"


@pytest.mark.slow
@pytest.mark.parametrize("json_out", [False, True])
def test_an_unreachable_llm_is_one_line_on_stderr_and_nothing_in_the_answer(cli_env, json_out):
    """With an endpoint configured on a closed port, the search still answers (offline, exit 0)
    and says so in exactly one stderr line: which endpoint, what error, what was done instead."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**cli_env, "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "OPENAI_API_KEY": "test"}
    out = subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", "query", "Who funded the Stormwatch Project?",
                          "--namespace", "demo", *(["--json"] if json_out else [])],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("graphrag-dag: warning: the LLM at "), out.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "APIConnectionError" in lines[0] and "extractive answer" in lines[0]
    if json_out:
        res = json.loads(out.stdout)
        assert res["answer_method"] == "extractive" and any("by LLM failed" in w for w in res["warnings"])
    else:
        assert not re.search(r"(?im)^\s*warning:|by LLM failed", out.stdout)  # none mixed into the answer


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_bar_with_rate_and_time_left_on_a_terminal_and_few_lines_elsewhere(capsys, monkeypatch):
    from graphrag_dag.drivers.cli.console import progress

    progress("reading")
    for i in range(201):
        progress(f"mentions: {i}/200")
    progress("written")
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["[graphrag-dag] reading", *[f"[graphrag-dag] mentions: {n}/200" for n in (0, 50, 100, 150, 200)],
                     "[graphrag-dag] written"]
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    for i in range(201):
        progress(f"vectors: {i}/200")
    drawn = terminal.getvalue()
    assert "[graphrag-dag] vectors" in drawn and "200/200" in drawn and "it/s" in drawn and "<" in drawn  # rate, ETA
