"""Where the shared test data lives, and what to do when it is absent.

Tests that need `../shared/data` skip when it is missing (a bare checkout), but fail when
GRAPHRAG_DAG_REQUIRE_SHARED=1 (CI and the acceptance run), so data loss cannot pass silently.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


def _missing(what: Path) -> None:
    message = f"shared test data not found at {what}"
    if os.environ.get("GRAPHRAG_DAG_REQUIRE_SHARED") == "1":
        pytest.fail(message + " (GRAPHRAG_DAG_REQUIRE_SHARED=1)", pytrace=False)
    pytest.skip(message)


def shared_data() -> Path:
    """`../shared/data`, or skip/fail the calling test when it is absent."""
    if not SHARED_DATA.is_dir():
        _missing(SHARED_DATA)
    return SHARED_DATA


def shared_outputs() -> Path:
    """`../shared/data/graphrag-outputs` (real Microsoft GraphRAG outputs), or skip/fail."""
    path = SHARED_DATA / "graphrag-outputs"
    if not path.is_dir():
        _missing(path)
    return path


def graphrag_output(name: str) -> Path:
    """One GraphRAG output folder by name, or skip/fail when it is absent."""
    path = shared_outputs() / name
    if not path.is_dir():
        _missing(path)
    return path
