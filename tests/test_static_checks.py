"""Static checks that guard security properties: no SQL built by string formatting (ruff's
flake8-bandit S608), no eval."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from shared_data import PROJECT_ROOT


def test_no_sql_built_by_string_formatting():
    ruff = shutil.which("ruff") or pytest.fail("ruff is part of the test extras")
    proc = subprocess.run([ruff, "check", "--select", "S608,S307", "--no-cache", "dataflows", "drivers"],
                          cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_check_catches_formatted_sql(tmp_path):
    """The rule must be able to fail: a formatted query is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text('def q(db, name):\n    return db.rows(f"SELECT * FROM entities WHERE name = \'{name}\'")\n')
    ruff = shutil.which("ruff") or sys.exit(1)
    proc = subprocess.run([ruff, "check", "--select", "S608", "--no-cache", str(bad)], capture_output=True, text=True)
    assert proc.returncode != 0 and "S608" in proc.stdout
