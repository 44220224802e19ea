"""Prompt templates live in this folder as .txt files so they can be edited without touching code.

Templates use `{name}` placeholders filled by plain replacement (no str.format), so JSON braces in
a prompt need no escaping.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

from dataflows.errors import BadInput, Cancelled


@functools.lru_cache(maxsize=None)
def template(name: str) -> str:
    return (resources.files(__package__) / f"{name}.txt").read_text(encoding="utf-8")


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
