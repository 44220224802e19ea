"""`graphrag-dag eval` on a folder of documents with gold facts: the README's metric on hand-made
contexts (normalisation, the 70% rule, words the question already holds, the budget cut), a small
folder end to end through the command line, and a slice of GraphRAG-Bench Medical."""

from __future__ import annotations

import re

import json
import subprocess
import sys

import pytest

from graphrag_dag.drivers.llm.tokens import token_counter
from graphrag_dag_tools.quality.facts import (
    FactQuestion, FactRun, answer_recall, cut, fact_covered, load_questions, score, words,
)
from shared_data import PROJECT_ROOT, shared_data


def cli(env, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", *args], env=env, capture_output=True,
                          text=True, cwd=PROJECT_ROOT, timeout=timeout)


def test_words_are_normalised_as_the_readme_says():
    assert words("The Tumours were spreading quickly, in 2 of 10 cases (BCC)!") == \
        ["tumour", "spread", "quick", "10", "case", "bcc"]
    assert words("Is it a cell?") == ["cell"]  # stop words and one-letter words go; "cell" keeps its ll


def test_a_fact_is_covered_by_70_percent_of_its_own_words():
    q = set(words("Where does basal cell carcinoma start?"))
    fact = "Basal cell carcinoma starts in the basal cells of the lower epidermis layer."
    own = set(words(fact)) - q  # lower, epidermis, layer (the question holds the rest)
    assert own == {"lower", "epidermi", "layer"}
    assert fact_covered(fact, q, set(words("the lower epidermis layer")))
    assert not fact_covered(fact, q, set(words("epidermis layer and more")))  # 2 of 3 is under 70%
    assert not fact_covered(fact, q, set(words("the epidermis only")))
    # a fact whose every word the question holds needs all of them in the context
    assert fact_covered("basal cell carcinoma", q, set(words("basal cell carcinoma")))
    assert not fact_covered("basal cell carcinoma", q, set(words("basal cell")))
    assert answer_recall("The basal layer of the epidermis", q, set(words("epidermis"))) == pytest.approx(1 / 2)


def test_the_context_is_cut_at_the_budget_and_every_system_alike():
    enc = token_counter().encoding
    passages = ["alpha beta gamma " * 400, "delta epsilon " * 20, "zeta"]
    whole = cut(passages, 10_000, enc)
    assert whole.split("\n") == passages
    short = cut(passages, 30, enc)
    assert len(enc.encode_ordinary(short)) == 30 and short.startswith("alpha") and "delta" not in short
    second = cut(passages, len(enc.encode_ordinary(passages[0] + "\n")) + 3, enc)
    assert "delta" in second and "zeta" not in second  # the second passage is cut at the budget
    q = FactQuestion("q1", "What comes last?", "zeta", "Fact Retrieval", ("zeta comes last",))
    deep = score(FactRun("x", {"q1": passages}), [q], enc)
    assert (deep["facts_at_500"], deep["facts_at_1000"], deep["facts_at_2000"]) == (0.0, 0.0, 1.0)
    assert deep["by_type"] == {"Fact Retrieval": {"facts_at_500": 0.0, "facts_at_1000": 0.0, "facts_at_2000": 1.0}}
    assert deep["answer_recall_at_2000"] == 1.0 and deep["answer_recall_at_500"] == 0.0


def _folder(tmp_path):
    docs = tmp_path / "bench" / "documents"
    docs.mkdir(parents=True)
    (docs / "a.txt").write_text(
        "Basal cell carcinoma (BCC) is a skin cancer. Basal cell carcinoma starts in the basal cells of the "
        "lower epidermis. Radiation therapy can treat basal cell carcinoma when surgery is not possible.\n",
        encoding="utf-8")
    (docs / "b.txt").write_text(
        "Lung cancer starts in the cells that line the airways. Smoking causes most lung cancers. "
        "Chemotherapy and radiation therapy treat lung cancer.\n", encoding="utf-8")
    questions = [
        {"id": "q1", "question": "Where does basal cell carcinoma start?", "answer": "In the lower epidermis.",
         "question_type": "Fact Retrieval", "evidence": ["Basal cell carcinoma starts in the lower epidermis."]},
        {"id": "q2", "question": "What causes most lung cancers?", "answer": "Smoking.",
         "question_type": "Complex Reasoning", "evidence": ["Smoking causes most lung cancers."]},
        {"id": "q3", "question": "Write a poem about skin.", "answer": "…", "question_type": "Creative Generation",
         "evidence": ["Basal cell carcinoma is a skin cancer."]},
    ]
    (tmp_path / "bench" / "questions.json").write_text(json.dumps(questions), encoding="utf-8")
    return tmp_path / "bench"


def test_a_small_folder_end_to_end(cli_env, tmp_path):
    folder = _folder(tmp_path)
    assert [q.id for q in load_questions(folder)] == ["q1", "q2"]  # Creative Generation is left out
    proc = cli(cli_env, "eval", str(folder), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["kind"] == "facts" and report["questions"] == 2
    assert report["question_types"] == {"Fact Retrieval": 1, "Complex Reasoning": 1}
    systems = {s["system"]: s for s in report["systems"]}
    assert set(systems) == {"graphrag-dag local", "graphrag-dag basic", "graphrag-dag drift", "bm25", "dense",
                            "hybrid (bm25 + dense, RRF)"}
    for s in systems.values():
        assert 0.0 <= s["facts_at_500"] <= s["facts_at_1000"] <= s["facts_at_2000"] <= 1.0
        assert set(s["by_type"]) == {"Fact Retrieval", "Complex Reasoning"}
    # two tiny documents fit any budget: every system that returns both finds every fact
    assert systems["bm25"]["facts_at_2000"] == 1.0 and systems["graphrag-dag local"]["facts_at_2000"] == 1.0
    assert systems["graphrag-dag local"]["p50_ms"] > 0
    table = cli(cli_env, "eval", str(folder))
    assert table.returncode == 0 and "facts@1000" in table.stdout and "Complex Reasoning" in table.stdout
    assert not any(n["namespace"].startswith("eval-") for n in json.loads(cli(cli_env, "namespaces", "--json").stdout))


def test_a_folder_without_facts_is_refused_before_any_work(cli_env, tmp_path):
    folder = _folder(tmp_path)
    (folder / "questions.json").write_text(json.dumps([{"id": "q", "question": "?", "evidence": "not a list"}]))
    proc = cli(cli_env, "eval", str(folder))
    assert proc.returncode == 2 and "evidence" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_medical_slice(cli_env):
    folder = shared_data() / "benchmarks" / "graphrag-bench-medical"
    proc = cli(cli_env, "eval", str(folder), "--limit", "12", "--json", timeout=900)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["questions"] == 12
    systems = {s["system"]: s for s in report["systems"]}
    assert all(s["facts_at_2000"] is not None for s in systems.values())
    assert systems["hybrid (bm25 + dense, RRF)"]["facts_at_2000"] > 0.3  # the baselines find evidence here


@pytest.mark.slow
def _check_extractive_answer(answer: str, question: str) -> None:
    """An offline answer: at most 5 bullets, each one whole sentence ending as a sentence ends and
    cited, none said twice, none a file name, a numbered heading or the tail of a sentence."""
    bullets = [ln[2:] for ln in answer.splitlines() if ln.startswith("- ")]
    assert 1 <= len(bullets) <= 5, (question, answer)
    texts = [re.sub(r" \[[^\]]+\]$", "", b) for b in bullets]
    assert all(re.search(r" \[[^\]]+\]$", b) for b in bullets), answer
    assert len({t.casefold() for t in texts}) == len(texts), answer
    assert all(re.search(r"[.!?。！？][\"'”’)\]」』]*$", t) and not re.search(r"\.(txt|md|pdf)$", t) for t in texts), answer
    assert not any(t[:1].islower() or re.match(r"\d{1,3}\.? +[A-Z][a-z]", t) for t in texts), answer  # no fragment, no heading


def test_offline_answers_on_the_demo_are_short_whole_and_say_nothing_twice(rag):
    questions = ["Who funded the Stormwatch Project?", "What did Dr. Mara Quill discover about the storm surge?",
                 "How did the tea trade between Saltmarrow and Yunwuling begin?", "What is the Herring Fair?",
                 "青兰茶社和盐港有什么关系？"]
    for q in questions:
        _check_extractive_answer(rag.local_search(q, "demo")["answer"], q)


def test_no_sentence_twice_in_the_local_contexts_of_a_medical_slice(rag, tmp_path):
    """Guides and their questions, as the eval runs them: each local context and each evidence list
    holds every sentence once (a chunk's excerpts, the claims quoting them, overlapping chunks), and
    each offline answer is at most 5 whole sentences, none twice."""
    from graphrag_dag.dataflows.common.textproc import sentence_spans
    from graphrag_dag.drivers.ingest.indexer import index_corpus

    folder = shared_data() / "benchmarks" / "graphrag-bench-medical"
    guides = sorted((folder / "documents").glob("*.txt"))[:4]
    index_corpus(rag, [str(g) for g in guides], "medslice", replace=True, offline=True)
    try:
        asked = [q for q in load_questions(folder) if any(w in q.question.lower() for w in ("cancer", "cell", "tumour"))]
        assert len(asked) >= 12
        lines_checked = 0
        for q in asked[:12]:
            result = rag.run("local", q.question, "medslice", offline=True).values["local_result"]
            evidence = [" ".join(e.text.split()).casefold() for e in result.evidence if e.kind == "chunk"]
            assert evidence and len(evidence) == len(set(evidence)), q.question
            bodies = [line.split(") ", 1)[1] for line in result.context.text.splitlines()
                      if line.startswith("[") and ("(chunk;" in line or "(claim;" in line)]
            said = [" ".join(b[s:e].split()).casefold() for b in bodies for s, e in sentence_spans(b)]
            assert len(said) == len(set(said)), q.question
            lines_checked += len(bodies)
            _check_extractive_answer(result.answer.text, q.question)
        assert lines_checked >= 12
    finally:
        rag.store.drop("medslice")
