"""What a model's prose reply must satisfy before it is returned, and which of its citations hold.

A model can only cite what it was shown: an id is citable when it stands as a bracketed label in
the context the prompt carried (`[d1-ev3]`, `[community 12]`). A citation to anything else was
made up. It is removed from the reply and reported, and a reply whose every citation was made up
is not used at all. Brackets that hold no id-like token (`[sic]`, `[Evidence]`, markdown links)
are prose and stay as they are; an id has a digit or one of - _ : in it.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field

from graphrag_dag.dataflows.common.prompting import ReplyInvalid

_BRACKET_RE = re.compile(r"([ \t]*)\[([^\[\]\n]{1,300})\](?!\()")
_ID_RE = re.compile(r"(?:community )?[^\s\[\],;\x00-\x1f\x7f]+")  # ids hold no control characters
_SEPARATOR_RE = re.compile(r"\s*[,;]\s*")
_COMMUNITY = "community "
# Share of a reply's visible characters that may be other than letters and digits (punctuation,
# brackets, symbols, control and replacement characters) before the reply counts as noise, not
# prose. Prose, citations included, is mostly letters; a run of brackets and control characters is
# not, though brackets are "punctuation".
MAX_NOISE = 0.5


def _parts(inner: str) -> list[str] | None:
    """The ids inside one bracket, or None when the bracket is prose."""
    parts = [p for p in _SEPARATOR_RE.split(inner.strip()) if p]
    if not parts or not all(_ID_RE.fullmatch(p) and re.search(r"[0-9_:-]", p) for p in parts):
        return None
    return parts


def citable_ids(context: str) -> set[str]:
    """Every id labelled in `context`; a community can be cited as `community 12` or `12`."""
    out: set[str] = set()
    for m in _BRACKET_RE.finditer(context):
        for part in _parts(m.group(2)) or []:
            out.add(part)
            if part.startswith(_COMMUNITY):
                out.add(part[len(_COMMUNITY):])
    return out


@dataclass
class CheckedReply:
    text: str
    cited: list[str] = field(default_factory=list)  # citations that hold, in order of appearance
    removed: list[str] = field(default_factory=list)  # citations to ids that were never in the context

    def warning(self, what: str) -> list[str]:
        if not self.removed:
            return []
        shown = ", ".join(self.removed[:5]) + (", ..." if len(self.removed) > 5 else "")
        return [f"{what} cited {len(self.removed)} id(s) that were not in its context, removed: {shown}"]


def checked_citations(text: str, allowed: set[str]) -> CheckedReply:
    """`text` without its made-up citations (a bracket that loses all its ids goes, with the space
    before it)."""
    out = CheckedReply("")

    def fix(m: re.Match[str]) -> str:
        parts = _parts(m.group(2))
        if parts is None:
            return m.group(0)
        good = [p for p in parts if p in allowed]
        out.cited += good
        out.removed += [p for p in parts if p not in allowed]
        return f"{m.group(1)}[{', '.join(good)}]" if good else ""

    out.text = _BRACKET_RE.sub(fix, text).strip()
    return out


def _noise(text: str) -> float:
    """The share of the characters that are not letters, digits or marks, spaces left out."""
    visible = [ch for ch in text if not ch.isspace()]
    words = sum(1 for ch in visible if unicodedata.category(ch)[0] in "LNM")
    return 1.0 - words / max(1, len(visible))


def usable_prose(text: str, allowed: set[str]) -> CheckedReply:
    """A prose reply checked against its context, or ReplyInvalid saying why it cannot be used."""
    stripped = (text or "").strip()
    if not stripped:
        raise ReplyInvalid("returned an empty answer")
    if stripped[0] in "{[":
        try:
            json.loads(stripped)
        except ValueError:
            pass
        else:
            raise ReplyInvalid("returned JSON instead of an answer")
    if _noise(stripped) > MAX_NOISE:
        raise ReplyInvalid("returned text that is mostly not words")
    checked = checked_citations(stripped, allowed)
    if checked.removed and not checked.cited:
        raise ReplyInvalid(f"cited only ids that were not in its context ({', '.join(checked.removed[:3])})")
    if not checked.text:
        raise ReplyInvalid("returned an empty answer")
    return checked
