"""Watching processes from a test: whether a pid lives, the embedded server's postmaster, and a
bounded wait for a condition."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable


def postmaster_pid(home: Path) -> int | None:
    try:
        return int((home / "pgdata" / "postmaster.pid").read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None


def alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for(predicate: Callable[[], bool], limit_s: float) -> float:
    """Seconds until `predicate()` held; fails the test past `limit_s`."""
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < limit_s, f"still waiting after {limit_s} s"
        time.sleep(0.1)
    return time.monotonic() - start
