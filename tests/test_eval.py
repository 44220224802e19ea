"""`graphrag-dag eval` and the basic method: the metrics on hand-made rankings, a small benchmark
folder end to end (scratch namespace made and dropped), bad folders refused before any work, the
published figures of 2Wiki-51 reproduced by our scoring code, and `--method basic` (naive RAG:
the nearest evidence chunks, answered like local search)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from graphrag_dag_tools.quality.benchmark import Question
from graphrag_dag_tools.quality.metrics import score
from llm_server import Reply
from shared_data import PROJECT_ROOT, shared_data


def cli(env, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", *args], env=env, capture_output=True,
                          text=True, cwd=PROJECT_ROOT, timeout=timeout)


def test_metrics_on_hand_made_rankings():
    qs = [Question("a", "?", ("A", "B")), Question("b", "?", ("C",)), Question("c", "?", ("D", "E"))]
    ranked = {"a": ["X", "A", "A", "Y", "Z", "W", "V", "U", "B"],  # B is 9th distinct? no: A repeats
              "b": ["C"],
              "c": ["Q", "R", "S", "T", "U", "V", "W", "X", "D"]}  # D is 9th: outside the top 8
    s = score(qs, ranked)
    # a: distinct X A Y Z W V U B -> B is 8th: all found; recall@2 1/2, @5 1/2, @8 1; first gold at 2
    # b: C first; c: nothing in the top 8, first gold 9th
    assert s.all_recall_at_8 == pytest.approx(2 / 3)
    assert s.recall[2] == pytest.approx((0.5 + 1 + 0) / 3)
    assert s.recall[5] == pytest.approx((0.5 + 1 + 0) / 3)
    assert s.recall[8] == pytest.approx((1 + 1 + 0) / 3)
    assert s.mrr == pytest.approx((1 / 2 + 1 + 1 / 9) / 3)
    assert score(qs, {}).all_recall_at_8 == 0.0  # unanswered questions score zero


def _folder(tmp_path, passages, questions, published=None):
    (tmp_path / "corpus.json").write_text(json.dumps(passages), encoding="utf-8")
    (tmp_path / "questions.json").write_text(json.dumps(questions), encoding="utf-8")
    if published is not None:
        (tmp_path / "published_top8.json").write_text(json.dumps(published), encoding="utf-8")
    return tmp_path


PASSAGES = [
    {"id": "p0", "title": "Orla Venn", "text": "Orla Venn is a lighthouse keeper born in Kestrel Bay."},
    {"id": "p1", "title": "Kestrel Bay", "text": "Kestrel Bay is a fishing harbour on the Amber Coast."},
    {"id": "p2", "title": "Amber Coast", "text": "The Amber Coast is known for its cliffs and its storms."},
    {"id": "p3", "title": "Tomas Reed", "text": "Tomas Reed is a baker who has never seen the sea."},
]
QUESTIONS = [{"id": "q0", "question": "Where was Orla Venn born?", "gold_titles": ["Orla Venn", "Kestrel Bay"]},
             {"id": "q1", "question": "What does Tomas Reed do?", "gold_titles": ["Tomas Reed"]}]


@pytest.mark.slow
def test_eval_scores_every_system_and_drops_its_scratch_namespace(cli_env, rag, tmp_path):
    published = {"someone": [{"question_id": "q0", "top8_titles": ["Orla Venn", "Kestrel Bay"]},
                             {"question_id": "q1", "top8_titles": ["Amber Coast"]}]}
    folder = _folder(tmp_path, PASSAGES, QUESTIONS, published)
    before = {n["namespace"] for n in rag.store.namespaces()}
    proc = cli(cli_env, "eval", str(folder), "--json", "--variant", "ranking=weighted",
               "--variant", "decompose=on,ranking=weighted")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    systems = {s["system"]: s for s in report["systems"]}
    assert set(systems) == {"graphrag-dag local", "graphrag-dag basic", "bm25", "dense",
                            "hybrid (bm25 + dense, RRF)", "someone", "graphrag-dag local (ranking=weighted)",
                            "graphrag-dag local (ranking=weighted, decompose=on)"}
    assert systems["graphrag-dag local (ranking=weighted, decompose=on)"]["p50_ms"] > 0
    assert report["questions"] == 2 and report["namespace"] is None and len(report["load_avg"]) == 3
    assert systems["someone"]["all_recall_at_8"] == 0.5 and systems["someone"]["p50_ms"] is None
    for s in systems.values():
        for key in ("all_recall_at_8", "recall_at_2", "recall_at_5", "recall_at_8", "mrr"):
            assert 0.0 <= s[key] <= 1.0
    # BM25 returns only passages sharing a word with the question: not Kestrel Bay for q0; local
    # search reaches it from the page the question names (Orla Venn's page names Kestrel Bay)
    assert systems["bm25"]["recall_at_8"] == 0.75
    assert systems["graphrag-dag local"]["all_recall_at_8"] == 1.0
    assert systems["graphrag-dag local"]["p50_ms"] > 0
    assert {n["namespace"] for n in rag.store.namespaces()} == before  # the scratch index is gone
    table = cli(cli_env, "eval", str(folder))  # the default variant: both ranking methods side by side
    assert table.returncode == 0 and "all@8" in table.stdout
    assert "graphrag-dag local  " in table.stdout and "graphrag-dag local (ranking=weighted)" in table.stdout
    bad = cli(cli_env, "eval", str(folder), "--variant", "ranking=best")
    assert bad.returncode == 2 and "unknown ranking 'best'" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("case, message", [
    ("no-folder", "is not a folder"),
    ("no-questions", "questions.json is missing"),
    ("bad-gold", "is not a passage title"),
    ("bad-json", "is not valid JSON"),
    ("unknown-namespace", "does not exist"),
    ("python-without-graphrag", "cannot import Microsoft GraphRAG"),
    ("no-such-python", "--graphrag-python"),
])
@pytest.mark.slow
def test_eval_refuses_a_bad_benchmark_before_any_work(cli_env, rag, tmp_path, case, message):
    folder = tmp_path / "bench"
    folder.mkdir()
    args: list[str] = []
    if case == "no-folder":
        folder = tmp_path / "nowhere"
    elif case == "no-questions":
        (folder / "corpus.json").write_text(json.dumps(PASSAGES), encoding="utf-8")
    elif case == "bad-gold":
        _folder(folder, PASSAGES, [{"id": "q", "question": "?", "gold_titles": ["Nobody"]}])
    elif case == "bad-json":
        _folder(folder, PASSAGES, QUESTIONS)
        (folder / "questions.json").write_text("[{", encoding="utf-8")
    elif case == "unknown-namespace":
        _folder(folder, PASSAGES, QUESTIONS)
        args = ["--namespace", "no-such-namespace"]
    else:
        _folder(folder, PASSAGES, QUESTIONS)
        python = str(tmp_path / "nothing-here") if case == "no-such-python" else sys.executable
        args = ["--graphrag-python", python]  # the suite's Python has no Microsoft GraphRAG
    before = {n["namespace"] for n in rag.store.namespaces()}
    proc = cli(cli_env, "eval", str(folder), *args)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""
    assert {n["namespace"] for n in rag.store.namespaces()} == before


@pytest.mark.slow
def test_eval_on_2wiki_reproduces_the_published_figures(cli_env):
    folder = shared_data() / "benchmarks" / "2wiki-51"
    proc = cli(cli_env, "eval", str(folder), "--json", "--variant", "none", timeout=600)
    assert proc.returncode == 0, proc.stderr
    systems = {s["system"]: s for s in json.loads(proc.stdout)["systems"]}
    # the benchmark's README states these, measured by other code: our scoring must agree
    published = {"vector-db (text-embedding-3-small)": 0.490, "lightrag-local": 0.471,
                 "nano-graphrag-local": 0.745, "fast-graphrag": 0.961, "bm25": 0.353, "dense": 0.412}
    for name, figure in published.items():
        assert systems[name]["all_recall_at_8"] == pytest.approx(figure, abs=0.0006), name
    ours = systems["graphrag-dag local"]
    assert ours["all_recall_at_8"] > max(systems["bm25"]["all_recall_at_8"], systems["graphrag-dag basic"]["all_recall_at_8"])


@pytest.mark.skipif(not os.environ.get("GRAPHRAG_DAG_GRAPHRAG_PYTHON"),
                    reason="set GRAPHRAG_DAG_GRAPHRAG_PYTHON to a Python with Microsoft GraphRAG installed")
def test_eval_scores_microsoft_graphrag_local_context_on_the_exported_index(cli_env, tmp_path):
    folder = _folder(tmp_path, PASSAGES, QUESTIONS)
    proc = cli(cli_env | {"GRAPHRAG_DAG_GRAPHRAG_PYTHON": os.environ["GRAPHRAG_DAG_GRAPHRAG_PYTHON"]}, "eval",
               str(folder), "--json", timeout=900)
    assert proc.returncode == 0, proc.stderr
    ms = next(s for s in json.loads(proc.stdout)["systems"] if s["kind"] == "external")
    assert ms["system"] == "microsoft-graphrag local (context sources)" and ms["p50_ms"] > 0
    assert ms["recall_at_8"] > 0  # its context held some gold passage


@pytest.mark.slow
def test_basic_method_answers_from_the_nearest_chunks_in_the_local_shape(cli_env, rag):
    from test_cli import LOCAL_EXTENSIONS, LOCAL_KEYS

    proc = cli(cli_env, "query", "Who studies the storm surge?", "--namespace", "demo", "--method", "basic",
               "--basic-top-k", "5", "--json")
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert set(res) == LOCAL_KEYS | LOCAL_EXTENSIONS and res["method"] == "basic"
    assert res["status"] == "completed" and res["matched_entities"] == [] and res["communities"] == []
    assert len(res["evidence"]) == 5 and all(e["kind"] == "chunk" for e in res["evidence"])
    parents = dict(rag.store.scoped("demo").rows("SELECT id, parent_id FROM chunks WHERE namespace = %(ns)s",
                                                 {"ns": "demo"}))
    units = list(dict.fromkeys(parents[e["chunk_id"]] for e in res["evidence"]))
    assert [s["text_unit_id"] for s in res["sources"]] == units  # distinct units, nearest first
    assert all(s["signals"] == ["vector"] for s in res["sources"])
    assert [n["node"] for n in res["trace"]][-1] == "basic_result"


def test_basic_method_asks_the_llm_once_with_its_context(rag, llm_server, chat_config):
    llm_server.responder = lambda rec: Reply("From the passages: Mara Quill [x].")
    res = rag.run("basic", "Who studies the storm surge?", "demo", chat=chat_config).as_json()
    calls = llm_server.chat_requests()
    assert [r.stage for r in calls] == ["answer"]
    assert res["answer"] == "From the passages: Mara Quill [x]." and res["offline"] is False
    assert all(f"[{e['id']}]" in calls[0].prompt for e in res["evidence"][:3])
