"""Pages the question names, and the pages they name: the `title` and `link` signals of the
ranked sources (see sources.py). A page is a document's first text unit; its names are its title
and its first line (imported GraphRAG documents are often titled by a file name), each also
without a trailing parenthetical qualifier ("Ian Barry (director)" names Ian Barry)."""

from __future__ import annotations

import re

from graphrag_dag.dataflows.common import sql
from graphrag_dag.dataflows.common.resources import Database
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.common.textproc import is_cjk, name_key, query_keys

_QUALIFIER_RE = re.compile(r"\s*\([^()]*\)\s*$")


def _title_keys(title: str) -> set[str]:
    keys = {name_key(title), name_key(_QUALIFIER_RE.sub("", title))}
    return {k for k in keys if len(k.split()) >= 2 or any(is_cjk(ch) for ch in k) and len(k) >= 2}


def _title_index(db: Database, namespace: str) -> dict[str, list[str]]:
    index: dict[str, list[str]] = {}
    for unit_id, title, first_line in db.rows(sql.FIRST_UNITS, {"ns": namespace}):
        for key in _title_keys(title) | _title_keys(first_line):
            index.setdefault(key, []).append(unit_id)
    return index


def titled_units(query_name_keys: list[str], db: Database, namespace: str) -> list[str]:
    """The first units of documents whose title (or first line) the question names, longest
    title first: the question asks about those documents whether or not the index made an
    entity of their title. Single words are left out ("Film" titles a page, but names nothing)."""
    index = db.memoized("title_index", lambda: _title_index(db, namespace))
    hits = sorted((k for k in set(query_name_keys) if k in index), key=lambda k: (-len(k.split()), -len(k), k))
    return list(dict.fromkeys(u for k in hits for u in index[k]))


def linked_units(titled_units: list[str], db: Database, namespace: str,
                 titled_unit_cap: int = LOCAL.titled_unit_cap) -> list[str]:
    """The first units of documents whose title a named page mentions, in page order and then in
    the order the page mentions them: the links of a hyperlinked corpus, found by title alone,
    so a question's second hop ("the director of film X") is reached even when the index made no
    entity of the director."""
    pages = titled_units[:titled_unit_cap]
    if not pages:
        return []
    index = db.memoized("title_index", lambda: _title_index(db, namespace))
    texts = dict(db.rows(sql.UNIT_TEXTS, {"ns": namespace, "ids": pages}))
    out: dict[str, None] = {}
    for page in pages:
        for key in query_keys(texts.get(page, "")):
            for unit in index.get(key, ()):
                if unit not in out and unit not in pages:
                    out[unit] = None
    return list(out)


def _about(entity_key: str, title: str) -> bool:
    title_key = name_key(title)
    return bool(entity_key) and (title_key == entity_key or name_key(_QUALIFIER_RE.sub("", title)) == entity_key)
