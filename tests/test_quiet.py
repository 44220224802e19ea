"""A user's script that opens a GraphRag and searches prints nothing but its own output: no
embedded-server INFO lines, no RuntimeDirWarning, no HTTP client request log (WordLlama's loading
turns the root logger to INFO), at start or at exit."""

from __future__ import annotations

import pytest

import json
import logging
import os
import subprocess
import sys

from shared_data import PROJECT_ROOT

SCRIPT = """
from graphrag_dag.drivers.api import GraphRag
rag = GraphRag()
print(len(rag.local_search("Who is Mara Quill?", "demo")["communities"]) > 0)
"""


@pytest.mark.slow
def test_searches_with_an_llm_print_nothing_on_stderr(cli_env, tmp_path, llm_server):
    env = {**cli_env, "PYTHONWARNINGS": "default", "OPENAI_BASE_URL": llm_server.base_url, "OPENAI_API_KEY": "t",
           "GRAPHRAG_DAG_CHAT_MODEL": "test-model"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert llm_server.chat_requests(), "the script did not call the model"
    assert proc.stderr == "", proc.stderr


@pytest.mark.slow
def test_library_use_prints_nothing_on_stderr(cli_env, tmp_path):
    env = {**cli_env, "PYTHONWARNINGS": "default"}  # show every warning that is not filtered on purpose
    env.pop("XDG_RUNTIME_DIR", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"
    assert proc.stderr == "", proc.stderr
    assert os.path.isdir(PROJECT_ROOT / "dataflows")  # the script ran outside the checkout, on the install


def test_loading_the_embedder_never_turns_the_root_logger_to_info(tmp_path):
    """WordLlama's import calls logging.basicConfig(level=INFO). Restoring the level afterwards was
    not enough once nodes ran in parallel: an LLM call's request log, written during the import,
    reached stderr. The root logger must stay as it was throughout."""
    script = """
import json, logging
during = []
original = logging.basicConfig
def spy(**kwargs):
    original(**kwargs)
    during.append(logging.getLogger().getEffectiveLevel())
logging.basicConfig = spy
from graphrag_dag.drivers.llm.embedders import WordLlamaEmbedder
WordLlamaEmbedder().embed(["a lighthouse"])
root = logging.getLogger()
print(json.dumps({"during": during, "after": root.getEffectiveLevel(), "handlers": len(root.handlers)}))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["during"] and set(seen["during"]) == {logging.WARNING}, seen  # never INFO, even for a moment
    assert seen["after"] == logging.WARNING and seen["handlers"] == 0, seen
