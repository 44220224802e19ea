"""Pages the question names, and the pages they name: the `title` and `link` signals of the
ranked sources (see sources.py). A page is a document's first text unit, named as
dataflows/common/titles.py says (its title or first line)."""

from __future__ import annotations

from dataclasses import dataclass, field

from graphrag_dag.dataflows.common import sql
from graphrag_dag.dataflows.common.resources import Database
from graphrag_dag.dataflows.common.settings import LOCAL
from graphrag_dag.dataflows.common.textproc import MAX_NAME_WORDS, name_key, query_keys
from graphrag_dag.dataflows.common.titles import FIRST_LINE_CHARS, title_keys


@dataclass
class TitleIndex:
    """Pages by the keys of their names. A name longer than the n-grams a text is cut into
    (MAX_NAME_WORDS words) is found by its first words, then checked against the whole text."""

    short: dict[str, list[str]] = field(default_factory=dict)  # key → page units
    long: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # first words → (key, unit)

    def add(self, key: str, unit: str) -> None:
        words = key.split()
        if len(words) <= MAX_NAME_WORDS:
            self.short.setdefault(key, []).append(unit)
        else:
            self.long.setdefault(" ".join(words[:MAX_NAME_WORDS]), []).append((key, unit))

    def named_in(self, text: str) -> list[str]:
        """The pages whose name occurs in `text`, longest name first."""
        keys = set(query_keys(text))
        hits = [(k, u) for k in keys for u in self.short.get(k, ())]
        if self.long:
            whole = f" {name_key(text)} "
            hits += [(full, u) for k in keys for full, u in self.long.get(k, ()) if f" {full} " in whole]
        hits.sort(key=lambda h: (-len(h[0].split()), -len(h[0]), h[0], h[1]))
        return list(dict.fromkeys(u for _, u in hits))


def _title_index(db: Database, namespace: str) -> TitleIndex:
    index = TitleIndex()
    for unit_id, title, first_line in db.rows(sql.FIRST_UNITS, {"ns": namespace, "chars": FIRST_LINE_CHARS}):
        for key in title_keys(title) | title_keys(first_line):
            index.add(key, unit_id)
    return index


def titled_units(query: str, db: Database, namespace: str) -> list[str]:
    """The first units of documents whose title (or first line) the question names, longest
    name first: the question asks about those documents whether or not the index made an entity
    of their title. Single words are left out ("Film" titles a page, but names nothing)."""
    return db.memoized("title_index", lambda: _title_index(db, namespace)).named_in(query)


def linked_units(titled_units: list[str], db: Database, namespace: str,
                 titled_unit_cap: int = LOCAL.titled_unit_cap) -> list[str]:
    """The first units of documents whose title a named page mentions, in page order, then
    longest name first: the links of a hyperlinked corpus, found by title alone, so a question's
    second hop ("the director of film X") is reached even when the index made no entity of the
    director."""
    pages = titled_units[:titled_unit_cap]
    if not pages:
        return []
    index = db.memoized("title_index", lambda: _title_index(db, namespace))
    texts = dict(db.rows(sql.UNIT_TEXTS, {"ns": namespace, "ids": pages}))
    out: dict[str, None] = {}
    for page in pages:
        for unit in index.named_in(texts.get(page, "")):
            if unit not in pages:
                out.setdefault(unit, None)
    return list(out)
