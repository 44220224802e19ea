"""Names as the indexer compares them (not a DAG module): the key that merges the spellings of
one name, and the stable entity id made from it."""

from __future__ import annotations

import hashlib
import unicodedata

from graphrag_dag.dataflows.common.textproc import name_key

_ARTICLES = ("the ", "a ", "an ")


def resolution_key(surface: str) -> str:
    folded = "".join(ch for ch in unicodedata.normalize("NFKD", surface) if not unicodedata.combining(ch))
    key = name_key(folded)
    for suffix in (" s", "'s", "’s"):
        if key.endswith(suffix) and len(key) > len(suffix) + 1:
            key = key[: -len(suffix)]
    for article in _ARTICLES:
        if key.startswith(article) and len(key) > len(article) + 1:
            key = key[len(article):]
    return key


def entity_id(key: str) -> str:
    return "ent-" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:16]
