"""The Python API's typed results (drivers/api/types.py) hold real results, both ways: every key a
result has is declared, and every key declared required is there. GraphRag.index and
GraphRag.import_graphrag build namespaces as the CLI's commands do."""

from __future__ import annotations

import typing
from importlib import resources

import pytest

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes

QUESTION = "Who funded the Stormwatch Project?"


def _check(value: dict, shape: type, where: str) -> None:
    declared = typing.get_type_hints(shape)
    extra = set(value) - set(declared)
    missing = shape.__required_keys__ - set(value)
    assert not extra and not missing, (where, sorted(extra), sorted(missing))


def _items(value: dict, key: str) -> list:
    assert value.get(key), key  # the check must see at least one item
    return value[key]


def test_search_results_have_exactly_the_declared_keys(rag):
    from graphrag_dag.drivers.api import types

    local = rag.local_search(QUESTION, "demo")
    _check(local, types.LocalResult, "local")
    _check(local["parsed_query"], types.ParsedQuery, "parsed_query")
    for shape, key in ((types.MatchedEntity, "matched_entities"), (types.CommunityHit, "communities"),
                       (types.Evidence, "evidence"), (types.Source, "sources"), (types.TraceEntry, "trace")):
        for item in _items(local, key):
            _check(item, shape, key)
    _check(local["llm"], types.LlmUsage, "llm")
    _check(rag.basic_search(QUESTION, "demo"), types.LocalResult, "basic")
    glob = rag.global_search("What are the main themes?", "demo")
    _check(glob, types.GlobalResult, "global")
    for item in _items(glob, "map_answers"):
        _check(item, types.MapAnswer, "map_answers")
    drift = rag.drift_search(QUESTION, "demo")
    _check(drift, types.DriftResult, "drift")
    for step in _items(drift, "steps"):
        _check(step, types.DriftStep, "steps")


def test_a_stray_key_would_be_caught():
    from graphrag_dag.drivers.api import types

    with pytest.raises(AssertionError):
        _check({"id": "e1", "name": "x", "score": 1.0, "channels": [], "colour": "red"}, types.MatchedEntity, "x")
    with pytest.raises(AssertionError):
        _check({"id": "e1", "name": "x", "score": 1.0}, types.MatchedEntity, "x")


def test_index_and_import_through_the_python_api(rag, tmp_path):
    from graphrag_dag.drivers.api import types

    documents = resources.files("graphrag_dag.drivers.ingest.demo") / "documents"
    report = rag.index(str(documents), "api-index")
    try:
        _check(report, types.IndexReport, "index")
        assert report["documents"] == len(list(documents.iterdir())) and report["entities"] > 0
        assert "Mara Quill" in rag.local_search("Who is Mara Quill?", "api-index")["answer"]
        with pytest.raises(Exception, match="already exists"):
            rag.index(str(documents), "api-index")
        updated = rag.index([documents], "api-index", update=True)
        _check(updated, types.IndexReport, "index --update")
        assert updated["documents"] == report["documents"] and updated["update"]["rows"]["written"] == 0
        exported = tmp_path / "exported"
        from graphrag_dag.drivers.ingest.exporter import export_graphrag

        export_graphrag(rag, "api-index", exported)
        imported = rag.import_graphrag(exported, "api-import")
        _check(imported, types.ImportReport, "import")
        assert imported["entities"] == report["entities"]
    finally:
        for namespace in ("api-index", "api-import"):
            if any(n["namespace"] == namespace for n in rag.store.namespaces()):
                rag.store.drop(namespace)
