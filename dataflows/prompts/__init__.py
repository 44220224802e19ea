"""Prompt templates live in this folder as .txt files so they can be edited without touching code.

Templates use `{name}` placeholders filled by plain replacement (no str.format), so JSON braces in
a prompt need no escaping.
"""

from __future__ import annotations

import os
import re
from importlib import resources

from graphrag_dag.dataflows.common.errors import BadInput, Cancelled


_current: dict[str, tuple[float, str]] = {}


def current_template(name: str) -> str:
    """The template as it is on disk now: re-read only when the file's modification time changed,
    so an edited prompt is picked up without a restart and an unchanged one costs a stat."""
    path = resources.files(__package__) / f"{name}.txt"
    try:
        mtime = os.stat(str(path)).st_mtime
    except OSError:  # not a plain file (e.g. a zipped package): read it every time
        return path.read_text(encoding="utf-8")
    cached = _current.get(name)
    if cached is None or cached[0] != mtime:
        cached = (mtime, path.read_text(encoding="utf-8"))
        _current[name] = cached
    return cached[1]


def render(text: str, **values: str) -> str:
    """Fill `{name}` placeholders in one pass, so a value that itself contains `{query}` or
    `{context}` is never substituted again."""
    return _PLACEHOLDER_RE.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), text)


_PLACEHOLDER_RE = re.compile(r"\{([a-z_]+)\}")


_FENCE_RE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def strip_fences(text: str) -> str:
    """Models often wrap JSON in ``` fences; accept that, nothing looser."""
    m = _FENCE_RE.match(text or "")
    return m.group(1) if m else (text or "").strip()


# Errors an LLM-calling node must never swallow into a fallback.
PASSTHROUGH_ERRORS: tuple[type[BaseException], ...] = (Cancelled, BadInput)
