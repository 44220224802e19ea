"""The distribution installs exactly one top-level import name, `graphrag_dag`: `dataflows` and
`drivers` are names of unrelated PyPI distributions, so installing either would break an
environment that has it. Checked on a wheel built from a copy of the source tree and installed
into a fresh virtual environment, by reading the installed distribution's own file list."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from shared_data import PROJECT_ROOT

SOURCES = ["pyproject.toml", "README.md", "dataflows", "drivers"]


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("packaging")
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        path = PROJECT_ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, src / name)
    wheels = root / "wheels"
    # No build isolation: the test environment's setuptools builds it, so nothing is downloaded.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheels), str(src)], check=True, capture_output=True, text=True, timeout=300)
    (wheel,) = wheels.glob("graphrag_dag-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "-q", str(wheel)], check=True, capture_output=True, text=True, timeout=300)
    return python


def _in_venv(python: Path, code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    # Run outside the checkout: the current directory is on sys.path and holds dataflows/.
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)


@pytest.mark.slow
def test_the_installed_distribution_has_one_top_level_name(fresh_venv, tmp_path):
    code = (
        "import importlib.metadata as m\n"
        "files = m.distribution('graphrag-dag').files\n"
        "names = {f.parts[0] for f in files if not f.parts[0].endswith(('.dist-info', '.data'))}\n"
        "names -= {'..'}  # the console script lives in bin/\n"
        "print(sorted(names))\n"
        "print(sorted(str(f) for f in files if f.suffix in ('.txt', '.sql', '.json', '.svg', '.md', '.typed')))\n"
        "print(sorted(str(f) for f in files if f.suffix == '.py'))\n"
    )
    proc = _in_venv(fresh_venv, code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    names_line, data_line, code_line = proc.stdout.splitlines()
    assert names_line == "['graphrag_dag']"
    # Resources ship in the wheel: prompt texts, migrations, the demo corpus, the flows' pictures.
    for needed in ("graphrag_dag/dataflows/prompts/parse_query.txt", "graphrag_dag/drivers/store/sql/001_schema.sql",
                   "graphrag_dag/drivers/ingest/demo/corpus.json", "graphrag_dag/dataflows/local/local-dag.svg",
                   # PEP 561: type checkers read the annotations (a namespace package marks each part)
                   "graphrag_dag/dataflows/py.typed", "graphrag_dag/drivers/py.typed"):
        assert needed in data_line, needed
    # The development tools (benchmarks, generators, eval) are a distribution of their own.
    assert "graphrag_dag/drivers/api/graphrag.py" in code_line
    assert not [word for word in ("/tools/", "bench.py", "/synth/", "/quality/") if word in code_line]


def test_the_old_top_level_names_are_not_importable(fresh_venv, tmp_path):
    for name in ("dataflows", "drivers"):
        proc = _in_venv(fresh_venv, f"import {name}", tmp_path)
        assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr, (name, proc.stderr)
    proc = _in_venv(fresh_venv, "import graphrag_dag.dataflows.common.fusion as f; print(f.__name__)", tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "graphrag_dag.dataflows.common.fusion", proc.stderr


def test_every_package_folder_is_listed_in_pyproject():
    config = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    mapping = config["package-dir"]
    listed = set(config["packages"])
    found = set()
    for prefix, folder in mapping.items():
        base = PROJECT_ROOT / folder
        for init in base.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            rel = init.parent.relative_to(base)
            found.add(".".join([prefix, *rel.parts]))
    assert found == listed


def test_the_tools_are_a_distribution_of_their_own_that_adds_commands():
    """tools/ lists its packages and adds its commands through the CLI's entry point group."""
    config = tomllib.loads((PROJECT_ROOT / "tools" / "pyproject.toml").read_text(encoding="utf-8"))
    found = {".".join(init.parent.relative_to(PROJECT_ROOT / "tools").parts)
             for init in (PROJECT_ROOT / "tools").rglob("__init__.py") if "__pycache__" not in init.parts}
    assert found == set(config["tool"]["setuptools"]["packages"])
    from graphrag_dag.drivers.cli.main import PLUGIN_GROUP, TOOL_NAMES, _commands

    assert config["project"]["entry-points"][PLUGIN_GROUP] == {"tools": "graphrag_dag_tools.commands"}
    assert set(TOOL_NAMES) <= set(_commands())  # installed beside the package, as the test command does
