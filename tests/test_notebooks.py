"""The stage-by-stage notebooks execute top to bottom, offline, against the session's demo namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # end to end: processes, servers, browsers or large indexes


nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def execute(name: str, home: Path, tmp_path: Path, monkeypatch) -> tuple[str, list]:
    """Run a notebook in a fresh python3 kernel (a subprocess: it inherits os.environ)."""
    monkeypatch.setenv("GRAPHRAG_DAG_HOME", str(home))
    for var in ("GRAPHRAG_DAG_NOTEBOOK_NAMESPACE", "GRAPHRAG_DAG_NOTEBOOK_QUESTION", "GRAPHRAG_DAG_NOTEBOOK_OFFLINE",
                "GRAPHRAG_DAG_DSN", "OPENAI_API_KEY", "OPENAI_BASE_URL", "GRAPHRAG_DAG_CHAT_MODEL"):
        monkeypatch.delenv(var, raising=False)
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit notebooks without outputs"
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, errors
    text = "\n".join(o.text for o in outputs if o.output_type == "stream" and o.name == "stdout")
    stderr = "\n".join(o.text for o in outputs if o.output_type == "stream" and o.name == "stderr")
    assert "Traceback" not in stderr, stderr
    return text, outputs


def _has_picture(outputs: list) -> bool:
    return any("image/svg+xml" in o.get("data", {}) for o in outputs if o.output_type == "display_data") \
        or "digraph" in "\n".join(o.get("text", "") for o in outputs)


def test_local_search_notebook_runs_offline(rag, home, tmp_path, monkeypatch):
    text, outputs = execute("local_search_stages", home, tmp_path, monkeypatch)
    assert _has_picture(outputs)
    assert "namespace='demo' offline=True" in text
    for marker in ("parsed by: rules", "exact channel", "fuzzy channel", "semantic channel", "fused entities:",
                   "topology candidates:", "semantic candidates:", "fused ranking:", "selection method:",
                   "evidence (", "context:", "answer (extractive)", "fused without fuzzy:", "rrf_k=500",
                   "injected:", "score rule:", "recomputed after the override:"):
        assert marker in text, marker
    assert "ranks={'semantic'" in text  # each community's rank in each signal list
    assert "Mara Quill" in text
    rerun = re.search(r"^rerun:\s+Counter\((.*)\)$", text, flags=re.M).group(1)
    assert "'hit'" in rerun  # the identical rerun is served from the cache
    assert "(cached)" in text


def test_global_search_notebook_runs_offline(rag, home, tmp_path, monkeypatch):
    text, outputs = execute("global_search_stages", home, tmp_path, monkeypatch)
    assert _has_picture(outputs)
    for marker in ("summaries", "augmented summary of", "tokens per prompt", "usefulness", "kept (batch",
                   "status: completed", "answer (extractive)"):
        assert marker in text, marker
    # every batch fits its budget, and the smallest budget splits a summary into parts
    for tokens, limit in re.findall(r"batch \d+: (\d+) tokens \(<= (\d+)\)", text):
        assert int(tokens) <= int(limit)
    assert re.search(r"split summaries: \['", text)
    skipped = re.findall(r"^skipped \(batch, usefulness\): (.*)$", text, flags=re.M)
    assert skipped[0] == "[]" and skipped[-1] != "[]"  # the tight reduce budget skips answers


def test_retrieval_quality_notebook_runs_eval_plots_and_diagnoses(rag, home, tmp_path, monkeypatch):
    from shared_data import shared_data

    folder = shared_data() / "benchmarks" / "2wiki-51"
    monkeypatch.setenv("GRAPHRAG_DAG_NOTEBOOK_BENCHMARK", str(folder))
    monkeypatch.setenv("GRAPHRAG_DAG_NOTEBOOK_FACTS", str(shared_data() / "benchmarks" / "graphrag-bench-medical"))
    monkeypatch.setenv("GRAPHRAG_DAG_NOTEBOOK_FACT_LIMIT", "40")
    text, outputs = execute("retrieval_quality", home, tmp_path, monkeypatch)
    assert any("image/png" in o.get("data", {}) for o in outputs if o.output_type == "display_data")
    assert len(re.findall(r"^system\s+all@8", text, flags=re.M)) == 2  # a table per namespace: ours, imported
    for marker in ("graphrag-dag local", "graphrag-dag basic", "bm25", "fast-graphrag",
                   "quality-own: local search all-evidence recall@8", "quality-msgraphrag: local search"):
        assert marker in text, marker
    diagnosed = re.findall(r"; lost at: (\w+)", text)
    shown = [int(n) for n in re.findall(r"^quality-\w+: (\d) questions shown", text, flags=re.M)]
    assert len(shown) == 2 and sum(shown) >= 1 and len(diagnosed) >= sum(shown)
    assert set(diagnosed) <= {"matched", "walked", "candidate", "ranking"}
    # the medical guides: a table and a picture of the facts covered at each budget, then where misses were lost
    assert sum("image/png" in o.get("data", {}) for o in outputs if o.output_type == "display_data") == 2
    assert re.search(r"^graphrag-dag local\s", text, flags=re.M) and "hybrid (bm25 + dense, RRF)" in text
    fact_stages = re.findall(r"^  lost at: (\w+)$", text, flags=re.M)
    assert fact_stages and set(fact_stages) <= {"recalled", "candidate", "budget"}
    assert re.search(r"^quality-medical: facts missed at 1,000 tokens, by the stage that lost them: \{'", text, flags=re.M)
    assert not any(n["namespace"] == "quality-medical" for n in rag.store.namespaces())
    for ns in ("quality-own", "quality-msgraphrag"):
        rag.store.drop(ns)
