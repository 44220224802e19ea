"""Lineage and observability: `query --trace` draws exactly the executed nodes with their times,
`--verbose` logs one line per stage, the OpenTelemetry adapter yields one span per executed node,
and config switches (`channels`, `selector`) replace implementations."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.switches import CHANNELS
from graphrag_dag.drivers.ingest.demo import demo_queries
from llm_server import Recorded, Reply

CLI = [sys.executable, "-m", "graphrag_dag.drivers.cli"]
QUERY = demo_queries()["local"]
NODE_RE = re.compile(r'^\s*(\w+) \[label="([^"]*)"', flags=re.MULTILINE)


def cli(env, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=timeout)


def _dot_nodes(dot: str) -> dict[str, str]:
    return {name: label for name, label in NODE_RE.findall(dot)}


# ---------------------------------------------------------------------------------- --trace


@pytest.mark.slow
def test_trace_dot_draws_exactly_the_executed_nodes_with_their_times(cli_env, tmp_path):
    out = tmp_path / "trace.dot"
    proc = cli(cli_env, "query", QUERY, "--namespace", "demo", "--json", "--trace", str(out))
    assert proc.returncode == 0, proc.stderr
    trace = json.loads(proc.stdout)["trace"]
    nodes = _dot_nodes(out.read_text(encoding="utf-8"))
    assert set(nodes) == {t["node"] for t in trace}
    for t in trace:
        lines = re.split(r"\\n|\n", nodes[t["node"]])
        assert lines[0] == t["node"] and re.fullmatch(r"[0-9]+\.[0-9] ms", lines[1]), lines
        assert abs(float(lines[1][:-3]) - t["ms"]) <= 0.06, (t, lines)
        assert "(cached)" not in lines  # no cache in this run
    edges = re.findall(r"^\s*(\w+) -> (\w+)", out.read_text(encoding="utf-8"), flags=re.MULTILINE)
    assert edges and all(a in nodes and b in nodes for a, b in edges)
    assert ("matched_entities", "ranked_communities") not in edges  # only direct dependencies
    assert ("exact_matches", "matched_entities") in edges


@pytest.mark.slow
def test_trace_of_a_partial_run_draws_only_that_path(cli_env, tmp_path):
    out = tmp_path / "partial.dot"
    proc = cli(cli_env, "query", QUERY, "--namespace", "demo", "--context-only", "--trace", str(out))
    assert proc.returncode == 0, proc.stderr
    nodes = set(_dot_nodes(out.read_text(encoding="utf-8")))
    assert "local_context" in nodes and "local_answer" not in nodes and "local_result" not in nodes


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz 'dot' is not installed")
def test_trace_svg_nodes_are_the_executed_ones_each_with_its_time(cli_env, tmp_path):
    out = tmp_path / "trace.svg"
    proc = cli(cli_env, "query", QUERY, "--namespace", "demo", "--json", "--trace", str(out))
    assert proc.returncode == 0, proc.stderr
    trace = json.loads(proc.stdout)["trace"]
    svg = out.read_text(encoding="utf-8")
    groups = re.findall(r'<g id="node\d+" class="node">\s*<title>([^<]+)</title>(.*?)</g>', svg, flags=re.S)
    assert {title for title, _ in groups} == {t["node"] for t in trace}
    ms = {t["node"]: t["ms"] for t in trace}
    for title, body in groups:
        texts = re.findall(r"<text[^>]*>([^<]*)</text>", body)
        assert texts[0] == title and re.fullmatch(r"[0-9]+\.[0-9] ms", texts[1]), (title, texts)
        assert abs(float(texts[1][:-3]) - ms[title]) <= 0.06, (title, texts, ms[title])  # JSON ms is rounded


@pytest.mark.slow
def test_trace_marks_cached_nodes(cli_env, tmp_path):
    env = cli_env
    first = tmp_path / "first.dot"
    second = tmp_path / "second.dot"
    # a question of its own, so no other test's cache entries are involved
    q = "Who funded the Stormwatch tide study at Corran Sound?"
    assert cli(env, "query", q, "--namespace", "demo", "--cache", "--trace", str(first)).returncode == 0
    proc = cli(env, "query", q, "--namespace", "demo", "--cache", "--json", "--trace", str(second))
    assert proc.returncode == 0, proc.stderr
    trace = json.loads(proc.stdout)["trace"]
    nodes = _dot_nodes(second.read_text(encoding="utf-8"))
    cached = {t["node"] for t in trace if t["cached"]}
    assert {"parsed_query", "exact_matches", "matched_entities"} <= cached
    assert {n for n, label in nodes.items() if "(cached)" in label} == cached


# -------------------------------------------------------------------------------- --verbose


@pytest.mark.slow
def test_verbose_logs_one_line_per_stage(cli_env):
    proc = cli(cli_env, "query", QUERY, "--namespace", "demo", "--json", "--verbose")
    assert proc.returncode == 0, proc.stderr
    trace = json.loads(proc.stdout)["trace"]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("[stage] ")]
    assert len(lines) == len(trace)
    for line, t in zip(lines, trace):
        assert re.fullmatch(rf"\[stage\] {t['node']}: [0-9.]+ ms", line), line
    assert "Traceback" not in proc.stderr


def test_verbose_callback_in_the_api(rag):
    lines: list[str] = []
    run = rag.run("local", QUERY, "demo", final_vars=["matched_entities"], verbose=lines.append)
    assert [line.split(":")[0] for line in lines] == [t.node for t in run.trace]


# --------------------------------------------------------------------------- OpenTelemetry


@pytest.fixture()
def otel(home, rag):
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.llm.chat import ChatConfig

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instance = GraphRag(rag.dsn, home=home, chat=ChatConfig(), telemetry=provider, pool_size=2)
    yield instance, exporter
    instance.close()
    provider.shutdown()


def _responder(rec: Recorded) -> Reply:
    if rec.stage == "parse":
        return Reply(json.dumps({"entities": ["Mara Quill"], "keywords": ["storm"], "themes": []}))
    if rec.stage == "select":
        return Reply(json.dumps({"community_ids": re.findall(r"^- id: (\S+) \|", rec.prompt, flags=re.M)[:1]}))
    return Reply("Quill found the rising-tide trap [cl-14].")


def _node_spans(exporter):
    return [s for s in exporter.get_finished_spans() if "hamilton.node.name" in (s.attributes or {})]


@pytest.mark.parametrize("flow,question", [("local", QUERY), ("global", "What are the main themes?")])
def test_otel_one_span_per_executed_node(otel, flow, question):
    rag, exporter = otel
    run = rag.run(flow, question, "demo")
    spans = _node_spans(exporter)
    assert sorted(s.name for s in spans) == sorted(t.node for t in run.trace)
    roots = [s for s in exporter.get_finished_spans() if s.name == f"graphrag_dag.{flow}"]
    assert len(roots) == 1
    root = roots[0]
    assert root.attributes["graphrag.namespace"] == "demo" and root.attributes["hamilton.run_id"] == run.run_id
    for s in spans:
        assert s.attributes["graphrag.namespace"] == "demo"
        assert s.attributes["graphrag.method"] == flow
        assert s.attributes["hamilton.node.name"] == s.name
        assert s.parent is not None and s.parent.span_id == root.context.span_id
        assert s.context.trace_id == root.context.trace_id
        assert "gen_ai.usage.input_tokens" not in s.attributes  # offline: no LLM calls


def test_otel_spans_carry_llm_token_counts(otel, llm_server, chat_config):
    rag, exporter = otel
    llm_server.responder = _responder
    run = rag.run("local", QUERY, "demo", chat=chat_config)
    by_name = {s.name: s for s in _node_spans(exporter)}
    by_stage = run.usage.by_stage
    for node, stage in (("parsed_query", "parse"), ("selected_communities", "select"), ("local_answer", "answer")):
        attrs = by_name[node].attributes
        assert attrs["graphrag.llm.calls"] == by_stage[stage]["calls"] == 1
        assert attrs["gen_ai.usage.input_tokens"] == by_stage[stage]["prompt_tokens"] > 0
        assert attrs["gen_ai.usage.output_tokens"] == by_stage[stage]["completion_tokens"]
    assert "gen_ai.usage.input_tokens" not in by_name["exact_matches"].attributes


def test_otel_records_a_failed_node(otel):
    from opentelemetry.trace import StatusCode

    from graphrag_dag.drivers.api import GlobalOptions

    rag, exporter = otel
    with pytest.raises(BadInput):
        rag.run("global", "What are the main themes?", "demo",
                options=GlobalOptions(level=99))
    failed = [s for s in _node_spans(exporter) if s.status.status_code == StatusCode.ERROR]
    assert [s.name for s in failed] == ["global_summaries"]
    root = [s for s in exporter.get_finished_spans() if s.name == "graphrag_dag.global"]
    assert len(root) == 1 and root[0].status.status_code == StatusCode.ERROR


@pytest.mark.slow
def test_core_runs_without_importing_opentelemetry(cli_env):
    code = ("import sys; from graphrag_dag.drivers.api import GraphRag\n"
            "with GraphRag() as rag: rag.run('local', 'Who is Mara Quill?', 'demo', offline=True)\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    proc = subprocess.run([sys.executable, "-c", code], env=cli_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


# -------------------------------------------------------------------------- config switches


def test_a_channel_switched_off_by_config_contributes_nothing(rag):
    run = rag.run("local", QUERY, "demo", final_vars=["exact_matches", "fuzzy_matches", "matched_entities"],
                  config={"channels": "fuzzy,semantic,intent"})
    assert run.values["exact_matches"] == []
    assert run.values["fuzzy_matches"]  # still on
    matched = run.values["matched_entities"]
    assert matched and all({"exact", "alias"}.isdisjoint(m.channels) for m in matched)
    ran = {t.node for t in run.trace}
    assert "exact_matches" in ran and "alias_matches" in ran  # their off variants, which read nothing
    # intent, still on, reads the query's own keys through the one name look-up
    assert {"query_name_keys", "name_key_rows"} <= ran
    run = rag.run("local", QUERY, "demo", final_vars=["matched_entities"], config={"channels": "fuzzy,semantic"})
    assert {"query_name_keys", "name_key_rows"}.isdisjoint({t.node for t in run.trace})  # no name look-up at all


def test_all_channels_off_and_channel_lists(rag):
    run = rag.run("local", QUERY, "demo", final_vars=["matched_entities"], config={"channels": ""})
    assert run.values["matched_entities"] == []
    ran = {t.node for t in run.trace}
    assert {"query_embedding", "fuzzy_terms", "parsed_query", "query_name_keys"}.isdisjoint(ran)
    listed = rag.run("local", QUERY, "demo", final_vars=["matched_entities"], config={"channels": ["semantic"]})
    assert {c for m in listed.values["matched_entities"] for c in m.channels} == {"semantic"}


def test_default_config_shares_the_default_driver(rag):
    run = rag.run("local", QUERY, "demo", final_vars=["matched_entities"],
                  config={"channels": ",".join(reversed(CHANNELS)), "selector": "llm"})
    assert run.driver is rag.engine.driver("local")


def test_score_selector_never_calls_the_llm_for_selection(rag, llm_server, chat_config):
    run = rag.run("local", QUERY, "demo", chat=chat_config, config={"selector": "score"})
    result = run.values["local_result"]
    assert result.selection.method == "score-rule" and result.selection.communities
    stages = [r.stage for r in llm_server.chat_requests()]
    assert "select" not in stages and "parse" in stages and "answer" in stages
    best = result.selection.communities[0].score
    ranked = rag.run("local", QUERY, "demo", final_vars=["ranked_communities"], chat=chat_config,
                     config={"selector": "score"}).values["ranked_communities"]
    expected = [c.id for c in ranked if c.score >= best * 0.5]
    assert [c.id for c in result.selection.communities] == expected


@pytest.mark.parametrize("config,message", [
    ({"channels": "exact,typo"}, "unknown channel"),
    ({"selector": "random"}, "unknown selector"),
    ({"colour": "red"}, "unknown config key"),
])
def test_bad_config_is_bad_input(rag, config, message):
    with pytest.raises(BadInput, match=message):
        rag.run("local", QUERY, "demo", config=config)


def test_global_search_takes_only_its_own_switches(rag):
    with pytest.raises(BadInput, match="unknown config key"):
        rag.run("global", "What are the main themes?", "demo", config={"selector": "score"})
    with pytest.raises(BadInput, match="unknown global selection 'all'"):
        rag.run("global", "What are the main themes?", "demo", config={"global_selection": "all"})
    run = rag.run("global", "What are the main themes?", "demo", config={"global_selection": "static"},
                  final_vars=["global_summaries"])
    assert run.driver is rag.engine.driver("global")  # the default, spelled out, shares its driver


def test_switching_a_channel_off_with_the_cache_recomputes_only_its_descendants(home, rag, tmp_path):
    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.runtime.engine import cached_nodes

    with GraphRag(rag.dsn, home=home, cache=tmp_path / "cache", pool_size=2) as cached:
        cached.run("local", QUERY, "demo", offline=True)
        off = cached.run("local", QUERY, "demo", offline=True,
                         config={"channels": ",".join(c for c in CHANNELS if c != "fuzzy")})
        status = cached_nodes(off.driver, off.run_id)
        descendants = {n.name for n in off.driver.what_is_downstream_of("fuzzy_matches")} | {"fuzzy_matches"}
        for node in ("parsed_query", "exact_matches", "semantic_matches", "query_embedding", "vector_chunks"):
            assert status.get(node) == "hit", (node, status.get(node))
        executed = {n for n, s in status.items() if s == "executed"}
        assert {"fuzzy_matches", "matched_entities"} <= executed
        assert executed - {"parse_template", "selection_template", "answer_template"} <= descendants


def test_driver_level_adapters_see_every_node(home, rag):
    """How the Hamilton UI tracker plugs in: any Hamilton adapter given to GraphRag(adapters=...)."""
    from hamilton.lifecycle import api as lifecycle

    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.llm.chat import ChatConfig

    class Recorder(lifecycle.NodeExecutionHook):
        def __init__(self):
            self.nodes = []

        def run_before_node_execution(self, *, node_name, **kwargs):
            self.nodes.append(node_name)

        def run_after_node_execution(self, **kwargs):
            pass

    recorder = Recorder()
    with GraphRag(rag.dsn, home=home, chat=ChatConfig(), adapters=[recorder], pool_size=2) as tracked:
        run = tracked.run("local", QUERY, "demo", final_vars=["matched_entities"])
    # (in the order they started)
    assert sorted(recorder.nodes) == sorted(t.node for t in run.trace) and len(recorder.nodes) == len(run.trace)
    seen = list(recorder.nodes)
    plain = rag.run("local", QUERY, "demo", final_vars=["matched_entities"])
    assert plain.driver is not run.driver and recorder.nodes == seen  # not shared
