"""Prompt templates live in this folder as .txt files, so they can be edited without touching code.

Templates use `{name}` placeholders, filled by `dataflows.common.prompting.render`.
"""

from __future__ import annotations

import functools
import os
from importlib import resources
from importlib.resources.abc import Traversable

_current: dict[str, tuple[float, str]] = {}


@functools.cache
def _location(name: str) -> tuple[Traversable, str]:
    """Where a template lies: finding it through importlib costs more than the stat, several times
    a search, and it does not move while the process runs."""
    path = resources.files(__package__) / f"{name}.txt"
    return path, str(path)


def current_template(name: str) -> str:
    """The template as it is on disk now: re-read only when the file's modification time changed,
    so an edited prompt is picked up without a restart and an unchanged one costs a stat."""
    path, where = _location(name)
    try:
        mtime = os.stat(where).st_mtime
    except OSError:  # not a plain file (e.g. a zipped package): read it every time
        return path.read_text(encoding="utf-8")
    cached = _current.get(name)
    if cached is None or cached[0] != mtime:
        cached = (mtime, path.read_text(encoding="utf-8"))
        _current[name] = cached
    return cached[1]
