"""The README's Python snippet runs as printed on a machine without graphviz's `dot` program."""

from __future__ import annotations

import pytest

import re
import subprocess
import sys

from shared_data import PROJECT_ROOT


def _snippet(heading: str) -> str:
    text = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index(f"\n## {heading}\n"):]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


@pytest.mark.slow
def test_the_python_api_snippet_runs_without_graphviz(cli_env, tmp_path):
    code = _snippet("Python API")
    assert "rag.draw(" in code
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {**cli_env, "PATH": str(empty)}  # no `dot` (nor anything else) on the PATH
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() and proc.stderr == ""
    drawn = list(tmp_path.glob("local.*"))
    assert drawn and "digraph" in drawn[0].read_text(encoding="utf-8")
