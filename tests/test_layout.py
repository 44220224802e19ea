"""The shape of the code: each flow's driver builds and its node set and inputs are pinned, no
public function of a flow module is a node by accident, no node parameter exists only to key
the cache, settings have one home, dataflows never import drivers, and no file grows past 400
lines. Static checks, so each one is also shown to fail on a counter-example."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest
from hamilton import driver

from graphrag_dag.dataflows import basic, drift, global_search, index, local
from graphrag_dag.dataflows.common.settings import (
    BASIC_SETTINGS, DRIFT_OWN_SETTINGS, DRIFT_SETTINGS, GLOBAL_SETTINGS, INDEX_SETTINGS, LOCAL_SETTINGS,
)
from graphrag_dag.drivers.runtime import engine
from graphrag_dag.drivers.api.options import BasicOptions, DriftOptions, GlobalOptions, IndexOptions, LocalOptions
from shared_data import PROJECT_ROOT

LOCAL_NODES = {
    "parse_template", "parse_prompt", "parsed_query", "query_embedding", "query_name_keys", "intent_name_keys",
    "name_key_rows", "fuzzy_terms", "name_index", "exact_matches", "alias_matches", "intent_matches", "fuzzy_matches", "semantic_matches",
    "matched_entities", "named_entities", "graph_index", "entity_neighbourhood", "reached_entities", "topology_communities", "semantic_communities",
    "candidate_communities", "keyword_terms", "keyword_chunks", "vector_chunks", "recalled_chunks",
    "community_reports", "community_signals", "ranked_communities", "selection_template", "selection_prompt", "selected_communities",
    "ranked_claims", "titled_units", "linked_units", "unit_total", "seed_weights", "walked_entities",
    "entity_graph", "entity_ranks", "entity_units", "graph_rankings", "chunk_units",
    "source_rankings", "ranked_units", "source_rows", "sources", "source_chunks", "candidate_evidence", "evidence", "local_context",
    "answer_template", "answer_prompt", "local_answer", "local_result",
}
WEIGHTED = {"ranking_alpha", "ranking_beta", "ranking_gamma"}  # read by the weighted ranking only
LOCAL_INPUTS = {"query", "namespace", "db", "chat_model", "embedder", "token_counter", "embed_dim",
                *(s.name for s in LOCAL_SETTINGS if s.name not in WEIGHTED)}
SWITCHED = {"ranking": "weighted", "decompose": "on"}
SWITCHED_NODES = LOCAL_NODES | {"sub_question_embeddings", "sub_question_matches"}
SWITCHED_INPUTS = LOCAL_INPUTS | WEIGHTED | {"channels"}  # `channels` is the config's, when it has one
GLOBAL_NODES = {
    "global_summaries", "augmented_summaries", "map_template", "summary_batches", "map_prompts", "map_jobs",
    "map_answers", "reduce_template", "reduce_input", "reduce_prompt", "global_answer", "global_result",
}
GLOBAL_TASK_NODES = (GLOBAL_NODES - {"map_answers"}) | {"map_job", "map_task_answer", "map_answers"}
GLOBAL_INPUTS = {"query", "namespace", "db", "chat_model", "embedder", "token_counter", "map_executor",
                 *(s.name for s in GLOBAL_SETTINGS if s.name not in ("map_fanout", "rating_threshold"))}
DYNAMIC_NODES = GLOBAL_NODES | {"rating_template", "query_embedding", "community_ratings"}
DYNAMIC_INPUTS = GLOBAL_INPUTS | {"embed_dim", "rating_threshold"}
BASIC_NODES = {"query_embedding", "basic_chunks", "basic_sources", "basic_evidence", "basic_context",
               "answer_template", "basic_prompt", "basic_answer", "basic_result"}
BASIC_INPUTS = {"query", "namespace", "db", "chat_model", "embedder", "token_counter", "embed_dim",
                *(s.name for s in BASIC_SETTINGS)}
DRIFT_NODES = {"query_embedding", "primer_reports", "primer_template", "primer_prompt", "drift_primer",
               "follow_up_template", "drift_steps", "drift_reduce_template", "reduce_findings", "drift_reduce_prompt",
               "drift_answer", "drift_result"}
# DRIFT's local settings are its follow-ups', handed on by the local searcher, not read by its nodes
DRIFT_INPUTS = {"query", "namespace", "db", "chat_model", "embedder", "token_counter", "embed_dim", "local_searcher",
                *(s.name for s in DRIFT_OWN_SETTINGS)}
PREPARE_NODES = {"vectors", "leaf_communities", "claim_places", "subject_units", "chunk_tokens", "claim_tokens",
                 "write_set"}
PREPARE_INPUTS = {"index_records", "embedder", "progress", "token_counter"}
INDEXER_NODES = {"corpus_files", "corpus", "documents", "text_units", "evidence_chunks", "word_cases", "corpus_concepts",
                 "acronym_aliases",
                 "title_mentions", "chunk_mentions", "entity_index", "entities", "aliases", "sentences", "edges",
                 "entity_degrees", "claims", "communities", "community_summaries", "index_records",
                 "extraction_template", "gleaning_template", "extraction_prompts", "extraction_jobs", "extractions", "extractive_reports", "report_template",
                 "report_prompts", "community_reports", "description_template", "described_entities"}
INDEXER_INPUTS = {"corpus_paths", "token_counter", "progress", "chat_model", "extraction_cache", "prior_graph",
                  *(s.name for s in INDEX_SETTINGS if s.name != "extraction_fanout")}
INDEXER_TASK_NODES = INDEXER_NODES | {"extraction_job", "unit_extraction"}
CACHE_ONLY = {"index_version", "llm_identity", "embed_model"}


def _graph(modules: list, config: dict | None = None) -> tuple[set[str], set[str], dict]:
    dr = driver.Builder().with_modules(*modules).with_config(config or {}).build()
    nodes = {v.name: v for v in dr.list_available_variables()}
    inputs = {n for n, v in nodes.items() if v.is_external_input} - set(config or {})  # config keys are not inputs
    return set(nodes) - inputs - set(config or {}), inputs, dr.graph.nodes


VARIANTS = {
    "local": (local.MODULES, {}),
    "local, channels and LLM selector off": (local.MODULES, {"channels": "", "selector": "score"}),
    "local, weighted ranking and decomposition": (local.MODULES, SWITCHED),
    "global": (global_search.MODULES, {}),
    "basic": (basic.MODULES, {}),
    "drift": (drift.MODULES, {}),
    "global, map as tasks": (global_search.MODULES, {"map_fanout": "tasks"}),
    "global, dynamic selection": (global_search.MODULES, {"global_selection": "dynamic"}),
    "import": (index.IMPORT_MODULES, {}),
    "prepare": (index.PREPARE_MODULES, {}),
    "indexer": (index.INDEX_MODULES, {}),
    "indexer, extraction as tasks": (index.INDEX_MODULES, {"extraction_fanout": "tasks"}),
}


def test_each_flow_builds_with_its_pinned_nodes_and_inputs():
    nodes, inputs, _ = _graph(local.MODULES)
    assert nodes == LOCAL_NODES and inputs == LOCAL_INPUTS
    nodes, inputs, _ = _graph(local.MODULES, SWITCHED)
    assert nodes == SWITCHED_NODES and inputs == SWITCHED_INPUTS
    nodes, inputs, _ = _graph(global_search.MODULES)
    assert nodes == GLOBAL_NODES and inputs == GLOBAL_INPUTS
    nodes, inputs, _ = _graph(global_search.MODULES, {"global_selection": "dynamic"})
    assert nodes == DYNAMIC_NODES and inputs == DYNAMIC_INPUTS
    nodes, inputs, _ = _graph(global_search.MODULES, {"map_fanout": "tasks"})
    assert nodes == GLOBAL_TASK_NODES and inputs == GLOBAL_INPUTS - {"map_executor", "map_concurrency"}
    nodes, inputs, _ = _graph(basic.MODULES)
    assert nodes == BASIC_NODES and inputs == BASIC_INPUTS
    nodes, inputs, _ = _graph(drift.MODULES)
    assert nodes == DRIFT_NODES and inputs == DRIFT_INPUTS
    nodes, inputs, _ = _graph(index.PREPARE_MODULES)
    assert nodes == PREPARE_NODES and inputs == PREPARE_INPUTS
    nodes, inputs, _ = _graph(index.INDEX_MODULES)
    assert nodes == INDEXER_NODES and inputs == INDEXER_INPUTS
    nodes, inputs, _ = _graph(index.INDEX_MODULES, {"extraction_fanout": "tasks"})
    assert nodes == INDEXER_TASK_NODES and inputs == INDEXER_INPUTS
    nodes, inputs, _ = _graph([*index.INDEX_MODULES, *index.PREPARE_MODULES])  # as the engine runs it
    assert nodes == INDEXER_NODES | PREPARE_NODES and inputs == INDEXER_INPUTS | {"embedder"}
    # The engine builds the same graphs it draws.
    assert {v.name for v in engine.builder("local").build().list_available_variables()} == LOCAL_NODES | LOCAL_INPUTS


@pytest.mark.parametrize(("flow", "config"), [
    ("local", {}), ("local", {"decompose": "on", "ranking": "weighted", "selector": "score"}),
    ("local", {"channels": "exact,semantic"}), ("global", {}), ("global", {"global_selection": "dynamic"}),
])
def test_every_node_falls_in_a_seed_stage_and_no_edge_runs_back(flow, config):
    """The lineage page folds the DAG by the seed's stages: each computed node has one, a switched
    implementation keeps its default's, and every edge runs from a stage to the same or a later one
    (else a folded stage would feed an earlier one)."""
    from graphrag_dag.drivers.service.lineage import flow_graph

    graph = flow_graph(flow, config)
    stage = {n["name"]: n["stage"] for n in graph["nodes"] if not n["input"]}
    expected = {"local": ["parse", "match", "recall", "rank", "select", "answer"],
                "global": ["summaries", "batch", "map", "reduce"]}[flow]
    assert graph["stages"] == expected and set(stage.values()) == set(expected), stage
    back = [(a, b) for a, b in graph["edges"] if a in stage and expected.index(stage[a]) > expected.index(stage[b])]
    assert not back, back
    default = {n["name"]: n["stage"] for n in flow_graph(flow, None)["nodes"] if not n["input"]}
    assert all(stage[name] == default[name] for name in stage.keys() & default.keys())
    if flow == "local":
        assert (stage["parsed_query"], stage["matched_entities"], stage["ranked_communities"],
                stage["selected_communities"], stage["local_answer"]) == ("parse", "match", "rank", "select", "answer")
        assert stage["selection_prompt"] == "select" and stage["answer_prompt"] == "answer"  # prompts join their consumer
    assert all(n["stage"] is None for n in flow_graph("basic", None)["nodes"])  # a flow that names no stages


def _public_functions(module) -> set[str]:
    return {name for name, fn in inspect.getmembers(module, inspect.isfunction)
            if fn.__module__ == module.__name__ and not name.startswith("_")}


@pytest.mark.parametrize("flow", ["local", "global", "basic", "drift", "index"])
def test_no_public_function_of_a_flow_module_is_a_node_by_accident(flow):
    """Every public function is a node of some configuration, and no node takes an input its
    flow does not declare (a helper made public, like a map helper taking `batch` and `stop`,
    would show up as a dangling input)."""
    variants = [v for k, v in VARIANTS.items()
                if k.startswith(flow) or (flow == "index" and k.startswith(("import", "prepare", "indexer")))]
    all_nodes: set[str] = set()
    declared = {"local": SWITCHED_INPUTS, "global": DYNAMIC_INPUTS, "basic": BASIC_INPUTS, "drift": DRIFT_INPUTS,
                "index": PREPARE_INPUTS | INDEXER_INPUTS | {"source_path", "embeddings_mode", "source_embedding_model"}}[flow]
    for modules, config in variants:
        nodes, inputs, _ = _graph(modules, config)
        assert inputs <= declared, inputs - declared
        all_nodes |= nodes
    modules = {m for mods, _ in variants for m in mods}
    for module in modules:
        for name in _public_functions(module):
            assert name.split("__")[0] in all_nodes, f"{module.__name__}.{name} is public but no node"


def test_a_stray_public_helper_would_be_caught(tmp_path, monkeypatch):
    import importlib

    (tmp_path / "stray_flow.py").write_text("def helper(batch: int, stop: bool) -> int:\n    return batch\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    stray = importlib.import_module("stray_flow")
    _, inputs, _ = _graph([*local.MODULES, stray])
    assert {"batch", "stop"} <= inputs and not inputs <= LOCAL_INPUTS


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_no_node_parameter_exists_only_to_key_the_cache(variant):
    modules, config = VARIANTS[variant]
    _, _, graph_nodes = _graph(modules, config)
    for node in graph_nodes.values():
        params = set(node.input_types)
        assert not params & CACHE_ONLY, (node.name, params & CACHE_ONLY)


@pytest.mark.parametrize("flow, settings, options", [("local", LOCAL_SETTINGS, LocalOptions),
                                                      ("global", GLOBAL_SETTINGS, GlobalOptions),
                                                      ("basic", BASIC_SETTINGS, BasicOptions),
                                                      ("drift", DRIFT_SETTINGS, DriftOptions)])
def test_settings_have_one_home(flow, settings, options):
    """Node defaults, option defaults and CLI defaults all come from the settings table."""
    modules = {"local": local.MODULES, "global": global_search.MODULES, "basic": basic.MODULES,
               "drift": drift.MODULES}[flow]
    _, inputs, graph_nodes = _graph(modules)
    if flow in ("local", "global"):
        _, switched, switched_nodes = _graph(modules, SWITCHED if flow == "local" else {"global_selection": "dynamic"})
        inputs, graph_nodes = inputs | switched, {**graph_nodes, **switched_nodes}
    own = DRIFT_OWN_SETTINGS if flow == "drift" else settings  # DRIFT hands its local ones on
    expected = {s.name: s.default for s in own if s.name != "map_fanout"}
    assert set(expected) <= inputs
    for node in graph_nodes.values():
        for name, default in node.default_parameter_values.items():
            if name in expected:
                assert default == expected[name], (node.name, name, default)
    from graphrag_dag.drivers.cli.main import build_parser

    query = build_parser()._subparsers._group_actions[0].choices["query"]
    helps = {a.dest: a.help for a in query._actions}
    for s in settings:
        assert s.name in helps and "(default: " in helps[s.name], s.name


@pytest.mark.parametrize("options, settings", [(LocalOptions, LOCAL_SETTINGS), (GlobalOptions, GLOBAL_SETTINGS),
                                               (BasicOptions, BASIC_SETTINGS), (DriftOptions, DRIFT_SETTINGS),
                                               (IndexOptions, INDEX_SETTINGS)])
def test_options_are_typed_dataclasses_whose_fields_are_the_settings_rows(options, settings):
    """Each field is written out in the class (a type checker sees it, `make_dataclass` hides it), in
    the table's order, with its row's default and the row itself (help, bounds) as metadata."""
    import dataclasses
    import typing

    fields = dataclasses.fields(options)
    assert [f.name for f in fields] == [s.name for s in settings]
    assert all(f.metadata["setting"] is s and f.default == s.default for f, s in zip(fields, settings, strict=True))
    hints = typing.get_type_hints(options)
    for s in settings:
        want = s.kind | None if s.optional else s.kind
        assert hints[s.name] == want, (s.name, hints[s.name])
    tree = ast.parse(inspect.getsource(options))
    written = [n.target.id for n in ast.walk(tree) if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
    inherited = {f.name for base in options.__mro__[1:] if dataclasses.is_dataclass(base) for f in dataclasses.fields(base)}
    assert set(written) == {s.name for s in settings} - inherited


def _drivers_imports(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [n for n in names if n.split(".")[:2] == ["graphrag_dag", "drivers"] or n.split(".")[0] == "drivers"]
    return found


def test_nothing_under_dataflows_imports_drivers():
    assert _drivers_imports("def f():\n    from graphrag_dag.drivers.store import Store\n") == \
        ["graphrag_dag.drivers.store"]  # the check can fail
    for path in (PROJECT_ROOT / "dataflows").rglob("*.py"):
        assert _drivers_imports(path.read_text(encoding="utf-8")) == [], path


def test_no_source_file_is_over_400_lines():
    sizes = {p: len(p.read_text(encoding="utf-8").splitlines())
             for folder in ("dataflows", "drivers") for p in (PROJECT_ROOT / folder).rglob("*.py")}
    assert len(sizes) > 40
    too_big = {str(p.relative_to(PROJECT_ROOT)): n for p, n in sizes.items() if n > 400}
    assert too_big == {}


def test_flow_folders_have_a_readme_naming_every_node_and_a_picture():
    for folder, nodes in (("local", SWITCHED_NODES), ("global_search", DYNAMIC_NODES | GLOBAL_TASK_NODES),
                          ("basic", BASIC_NODES), ("drift", DRIFT_NODES),
                          ("index", PREPARE_NODES | INDEXER_TASK_NODES | _graph(index.IMPORT_MODULES)[0])):
        base = PROJECT_ROOT / "dataflows" / folder
        readme = (base / "README.md").read_text(encoding="utf-8")
        missing = {n for n in nodes if f"`{n}`" not in readme}
        assert missing == set(), (folder, missing)
        assert list(base.glob("*-dag.svg")), folder


def test_the_contract_is_in_the_repository_and_nothing_cites_outside_it():
    assert (PROJECT_ROOT / "docs" / "contract.md").is_file()
    for path in [*PROJECT_ROOT.glob("*.md"), *(PROJECT_ROOT / "docs").glob("*.md"),
                 *(PROJECT_ROOT / "dataflows").rglob("*.py"), *(PROJECT_ROOT / "drivers").rglob("*.py")]:
        assert "ARCHITECTURE.md" not in path.read_text(encoding="utf-8"), path


def test_pictures_match_the_flows(tmp_path):
    """The committed pictures show today's nodes (regenerate with `graphrag-dag dag FLOW --out`)."""
    for flow, config, picture, nodes in (
            ("local", {}, "local/local-dag.svg", LOCAL_NODES),
            ("local", SWITCHED, "local/local-decompose-weighted-dag.svg", SWITCHED_NODES),
            ("global", {}, "global_search/global-dag.svg", GLOBAL_NODES),
            ("global", {"global_selection": "dynamic"}, "global_search/global-dynamic-dag.svg", DYNAMIC_NODES),
            ("basic", {}, "basic/basic-dag.svg", BASIC_NODES),
            ("drift", {}, "drift/drift-dag.svg", DRIFT_NODES)):
        svg = (PROJECT_ROOT / "dataflows" / picture).read_text(encoding="utf-8")
        drawn = set(re.findall(r'class="node">\s*<title>([^<]+)</title>', svg))
        # less the legend and the boxes that group a node's inputs
        drawn = {d for d in drawn if not (d.startswith("_") and d.endswith("_inputs"))} - {"config", "function", "input", "output"}
        inputs = {v.name for v in engine.builder(flow, config).build().list_available_variables() if v.is_external_input}
        assert nodes <= drawn <= nodes | inputs, (picture, drawn - nodes - inputs, nodes - drawn)
        assert Path(picture).suffix == ".svg"


def _scheduling_nodes(names: set[str]) -> set[str]:
    """Nodes that schedule I/O rather than compute a step of the algorithm: a statement's reply read
    later, a guess made to prefetch, counts made ahead."""
    return {n for n in names if n.endswith(("_reply", "_line_tokens")) or n.startswith("provisional_")}


def test_every_node_is_a_step_of_the_algorithm():
    assert _scheduling_nodes({"claim_reply", "provisional_units", "summary_line_tokens", "ranked_claims"}) == \
        {"claim_reply", "provisional_units", "summary_line_tokens"}  # the check can fail
    for flow, configs in (("local", [{}, SWITCHED]), ("global", [{}, {"global_selection": "dynamic"}]),
                          ("basic", [{}]), ("drift", [{}])):
        for config in configs:
            nodes = {n.name for n in engine.builder(flow, config).build().list_available_variables()}
            assert _scheduling_nodes(nodes) == set(), (flow, config)


def _hamilton_assignments(source: str, names: set[str]) -> list[str]:
    """Assignments to attributes named as a Hamilton driver's or graph's are, on anything but
    `self`, and setattr calls naming one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value in names):
            found.append(ast.unparse(node))
        for target in targets:
            found += [ast.unparse(t) for t in ast.walk(target) if isinstance(t, ast.Attribute) and t.attr in names
                      and not (isinstance(t.value, ast.Name) and t.value.id == "self")]
    return found


def test_nothing_assigns_to_a_hamilton_driver_or_graph():
    """Hamilton runs the DAGs through its public API: no executor set on a built driver, no method
    of its graph replaced."""
    dr = engine.builder("local").build()
    names = {n for obj in (dr, dr.graph) for n in {*vars(obj), *dir(type(obj))} if not n.startswith("__")}
    assert _hamilton_assignments("dr.graph_executor = X()\nsetattr(dr.graph, 'get_upstream_nodes', f)\n", names) \
        == ["dr.graph_executor", "setattr(dr.graph, 'get_upstream_nodes', f)"]  # the check can fail
    for folder in ("dataflows", "drivers", "tests"):
        for path in (PROJECT_ROOT / folder).rglob("*.py"):
            assert _hamilton_assignments(path.read_text(encoding="utf-8"), names) == [], path


def test_the_engine_keeps_a_bounded_number_of_drivers_and_no_module_state():
    e = engine.Engine(max_drivers=2)
    a = e.driver("local")
    b = e.driver("local", config={"selector": "score"})
    assert e.driver("local") is a  # reused, and now the most recently used
    e.driver("local", config={"channels": "exact"})  # a third: the least recently used (b) goes
    assert e.driver("local") is a
    assert e.driver("local", config={"selector": "score"}) is not b
    other = engine.Engine()
    assert other.driver("local") is not a and other.hooks is not e.hooks
    assert not [n for n, v in vars(engine).items()
                if isinstance(v, (dict, list)) and n.startswith("_") and not n.startswith("__")]
