"""graphrag-dag.toml, .env and the environment under the flags: each layer overrides the one below
it, `config show` names each value's source, secrets never come from the file, and the file's
[search] values become the defaults of the search flags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared_data import PROJECT_ROOT

FILE = """
home = "/from/file"
[llm]
chat_model = "model-from-file"
[server]
shared_buffers = "2GB"
[search]
top_k = 5
rrf_k = 30
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHRAG_DAG_", "OPENAI_"))}
    env["PYTHONPATH"] = str(PROJECT_ROOT.parent)
    return {**env, **extra}


def _cli(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    home = cwd / "user-home"
    home.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", *args], cwd=cwd, capture_output=True,
                          text=True, env=_env(HOME=str(home), **env), timeout=60)


def _show(cwd: Path, *flags: str, **env: str) -> dict:
    proc = _cli(cwd, *flags, "config", "show", "--json", **env)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def test_each_layer_overrides_the_one_below_and_show_names_the_source(tmp_path):
    shown = _show(tmp_path)
    assert shown["file"] is None
    assert shown["settings"]["home"] == {"value": None, "source": "default", "env": "GRAPHRAG_DAG_HOME",
                                         "default": "the platform's user data folder"}
    assert shown["search"]["top_k"] == {"value": 8, "source": "default"}

    (tmp_path / "graphrag-dag.toml").write_text(FILE)
    shown = _show(tmp_path)
    where = f"file {tmp_path / 'graphrag-dag.toml'}"
    assert shown["file"] == str(tmp_path / "graphrag-dag.toml")
    assert shown["settings"]["home"]["value"] == "/from/file" and shown["settings"]["home"]["source"] == where
    assert shown["settings"]["server.shared_buffers"]["value"] == "2GB"
    assert shown["search"]["top_k"] == {"value": 5, "source": where}
    assert shown["search"]["rrf_k"] == {"value": 30.0, "source": where}

    (tmp_path / ".env").write_text("GRAPHRAG_DAG_CHAT_MODEL=model-from-dotenv\n")
    shown = _show(tmp_path)
    assert shown["settings"]["llm.chat_model"]["value"] == "model-from-dotenv"
    assert shown["settings"]["llm.chat_model"]["source"] == ".env GRAPHRAG_DAG_CHAT_MODEL"

    shown = _show(tmp_path, GRAPHRAG_DAG_HOME="/from/env", GRAPHRAG_DAG_CHAT_MODEL="model-from-env")
    assert shown["settings"]["home"] == {"value": "/from/env", "source": "environment GRAPHRAG_DAG_HOME",
                                         "env": "GRAPHRAG_DAG_HOME"}
    assert shown["settings"]["llm.chat_model"]["source"] == "environment GRAPHRAG_DAG_CHAT_MODEL"

    shown = _show(tmp_path, "--home", "/from/flag", GRAPHRAG_DAG_HOME="/from/env")
    assert shown["settings"]["home"]["value"] == "/from/flag" and shown["settings"]["home"]["source"] == "flag --home"

    # the file in the home folder is found when the working folder has none
    (tmp_path / "elsewhere").mkdir()
    home_file = tmp_path / "elsewhere" / "user-home" / "graphrag-dag.toml"
    home_file.parent.mkdir()
    home_file.write_text('embedder = "e5"\n')
    shown = _show(tmp_path / "elsewhere")
    assert shown["settings"]["embedder"] == {"value": "e5", "source": f"file {home_file}", "env": "GRAPHRAG_DAG_EMBEDDER"}
    # GRAPHRAG_DAG_CONFIG names a file, or, empty, reads none (nor .env)
    assert _show(tmp_path / "elsewhere", GRAPHRAG_DAG_CONFIG=str(tmp_path / "graphrag-dag.toml"))["search"]["top_k"]["value"] == 5
    shown = _show(tmp_path, GRAPHRAG_DAG_CONFIG="")
    assert shown["file"] is None and shown["settings"]["llm.chat_model"]["source"] == "default"


def test_a_secret_is_shown_as_set_and_only_from_the_environment_or_dotenv(tmp_path):
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-in-dotenv\n")
    proc = _cli(tmp_path, "config", "show")
    assert proc.returncode == 0 and "sk-in-dotenv" not in proc.stdout
    assert any(line.startswith("llm.api_key") and "(set)" in line and "(.env OPENAI_API_KEY)" in line
               for line in proc.stdout.splitlines()), proc.stdout


@pytest.mark.parametrize(("text", "message"), [
    ('[llm]\napi_key = "sk-1"\n', "llm.api_key holds a secret, which belongs in the environment or .env (OPENAI_API_KEY)"),
    ('dsn = "postgresql://w:pw@db/graphrag"\n', "dsn holds a secret"),
    ('query_dsn = "host=db password=pw"\n', "query_dsn holds a secret"),
    ('colour = "blue"\n', "unknown setting 'colour'"),
    ("[search]\ntop_k = 0\n", "[search] top-k must be >= 1, got 0"),
    ("[search]\nbest = 1\n", "[search] has no setting 'best'"),
    ("home = \n", "Invalid value"),
], ids=["api-key", "dsn-password", "query-dsn-password", "unknown", "bad-search-value", "unknown-search", "malformed"])
def test_a_bad_file_is_one_line_and_exit_2(tmp_path, text, message):
    (tmp_path / "graphrag-dag.toml").write_text(text)
    proc = _cli(tmp_path, "namespaces")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"graphrag-dag: error: {tmp_path / 'graphrag-dag.toml'}: ") and message in lines[0]


def test_search_values_of_the_file_are_the_flags_defaults(tmp_path, monkeypatch):
    from graphrag_dag.drivers.cli.main import _configure, build_parser

    (tmp_path / "graphrag-dag.toml").write_text(FILE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GRAPHRAG_DAG_CONFIG", str(tmp_path / "graphrag-dag.toml"))
    for name in ("GRAPHRAG_DAG_HOME", "GRAPHRAG_DAG_CHAT_MODEL"):  # unset now, and as they were afterwards
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    args = build_parser().parse_args(["query", "q", "--namespace", "demo"])
    _configure(args)
    assert (args.top_k, args.rrf_k, args.hops) == (5, 30.0, None)  # hops: not in the file, the flow's default
    assert os.environ["GRAPHRAG_DAG_HOME"] == "/from/file" and os.environ["GRAPHRAG_DAG_CHAT_MODEL"] == "model-from-file"
    args = build_parser().parse_args(["query", "q", "--namespace", "demo", "--top-k", "3"])
    _configure(args)
    assert args.top_k == 3
