"""What a document's names are, and which entity a document is about (not a DAG module).

A document is named by its title and by its first line (a heading; Microsoft GraphRAG's input
documents are often titled by a file name and start with the real title), each also without a
trailing parenthetical qualifier, so "Ian Barry (director)" names Ian Barry. Shared by the index
flows, which mark the text units each entity is the subject of, and by local search, which finds
the pages a question names.
"""

from __future__ import annotations

import re

from graphrag_dag.dataflows.common.textproc import is_cjk, name_key

_QUALIFIER_RE = re.compile(r"\s*\([^()]*\)\s*$")
FIRST_LINE_CHARS = 200  # a first line longer than this is a paragraph, not a heading


def first_line(text: str) -> str:
    return text.split("\n", 1)[0][:FIRST_LINE_CHARS]


def title_keys(title: str) -> set[str]:
    """The keys a title is found by in a question. Single words are left out: "Film" titles a
    page, but names nothing a question could be about."""
    keys = {name_key(title), name_key(_QUALIFIER_RE.sub("", title))}
    return {k for k in keys if len(k.split()) >= 2 or any(is_cjk(ch) for ch in k) and len(k) >= 2}


def names_entity(entity_key: str, title: str) -> bool:
    """Whether `title` names the entity whose name key is `entity_key`, qualifier or not."""
    return bool(entity_key) and entity_key in (name_key(title), name_key(_QUALIFIER_RE.sub("", title)))
