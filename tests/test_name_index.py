"""The fuzzy channel's name index (dataflows/local/name_index.py): its character-count filter
must never drop a name that fuzz.ratio keeps, so its answers are exactly those of scoring every
name under the term's anchors and compatible lengths."""

from __future__ import annotations

import random

import numpy as np
import pytest
from rapidfuzz import fuzz

from graphrag_dag.dataflows.common.textproc import name_key
from graphrag_dag.dataflows.local.name_index import NameIndex, _char_counts, _mask

SYLLABLES = ["ma", "ra", "quil", "tern", "al", "ice", "grey", "wik", "lo", "an", "the", "sal", "mar", "ow",
             "zh", "ö", "é", "x", "9", "li", "ght", "house", "in", "sti", "tute", "na"]


def _names(rng: random.Random, count: int) -> list[tuple[str, str, str]]:
    pairs = []
    for i in range(count):
        words = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 3))]
        name = " ".join(w.capitalize() for w in words)
        pairs.append((f"e{i}", name, name))
        if rng.random() < 0.2:  # an alias, filed under the same entity
            pairs.append((f"e{i}", name, words[-1] + " " + rng.choice(SYLLABLES)))
    return pairs


def _typo(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(0, 3)):
        op, at = rng.randrange(3), rng.randrange(len(chars) + 1)
        if op == 0:
            chars.insert(at, rng.choice("aeiouxyz "))
        elif op == 1 and len(chars) > 1:
            del chars[min(at, len(chars) - 1)]
        elif chars:
            chars[min(at, len(chars) - 1)] = rng.choice("aeiouxyz")
    return "".join(chars).strip() or text


def _scan(pairs: list[tuple[str, str, str]], term: str, threshold: float, limit: int) -> list[tuple[str, str, float, str]]:
    """Every name sharing the term's first two or last two characters, of a compatible length,
    scored; the best `limit` by ratio, then name, then id (the index's answers before its filters)."""
    best: dict[str, tuple[str, str, float, str]] = {}
    n, ratio = len(term), threshold / 100
    lo, hi = int(np.floor(n * ratio / (2 - ratio))), int(np.ceil(n * (2 - ratio) / ratio))
    for entity_id, name, text in pairs:
        full = name_key(text)
        if len(full) < 3:
            continue
        variants = {full} | {full[len(a):] for a in ("the ", "a ", "an ") if full.startswith(a) and len(full) - len(a) >= 3}
        for key in sorted(variants):
            if not (key[:2] == term[:2] or key[-2:] == term[-2:]) or not max(lo, 3) <= len(key) <= hi:
                continue
            score = fuzz.ratio(term, key, processor=None)
            held = best.get(entity_id)
            if score >= threshold and (held is None or (-score, key) < (-held[2], held[3])):
                best[entity_id] = (entity_id, name, float(score), key)
    return sorted(best.values(), key=lambda h: (-h[2], h[1], h[0]))[:limit]


@pytest.mark.slow
@pytest.mark.parametrize("threshold", [70.0, 85.0, 92.5, 100.0])
def test_the_count_filter_keeps_every_name_the_ratio_keeps(threshold):
    rng = random.Random(int(threshold))
    pairs = _names(rng, 2000)
    index = NameIndex(pairs)
    terms = [name_key(_typo(rng, rng.choice(pairs)[2])) for _ in range(200)] + ["", "x"]
    found = 0
    for term, got in zip(terms, index.search(terms, threshold, 5), strict=True):  # one query's terms at once
        expected = _scan(pairs, term, threshold, 5) if term else []
        assert got == expected, term
        found += bool(expected)
    assert found >= 40  # the terms are near names (at 100, only the untouched ones match)


def _single_typos(text: str) -> list[str]:
    """Every text one insertion, deletion, substitution or swap of neighbours away."""
    out = set()
    for at in range(len(text) + 1):
        out.add(text[:at] + "q" + text[at:])
        if at < len(text):
            out.add(text[:at] + text[at + 1:])
            out.add(text[:at] + "q" + text[at + 1:])
        if at + 1 < len(text):
            out.add(text[:at] + text[at + 1] + text[at] + text[at + 2:])
    return sorted(out - {text})


def test_every_single_typo_of_a_name_finds_it_when_the_ratio_allows():
    """The pair anchors cost no single typo: one edit breaks at most one end of a term of four or
    more characters, so the name is still filed under the other."""
    rng = random.Random(11)
    pairs = _names(rng, 3000)
    index = NameIndex(pairs)
    checked = 0
    for entity_id, _, text in rng.sample(pairs, 60):
        key = name_key(text)
        typos = [t for t in _single_typos(key) if len(t) >= 4 and fuzz.ratio(t, key, processor=None) >= 85.0]
        for typo, hits in zip(typos, index.search(typos, 85.0, 3000), strict=True):
            assert entity_id in {h[0] for h in hits}, (key, typo)
            checked += 1
    assert checked > 300


def test_character_classes_and_counts_bound_the_indel_distance():
    rng = random.Random(7)
    texts = [name_key(n) for _, n, _ in _names(rng, 400)]
    counts = _char_counts(texts)
    masks = _mask(counts)
    counts = counts.astype(int)
    for _ in range(2000):
        i, j = rng.randrange(len(texts)), rng.randrange(len(texts))
        indel = len(texts[i]) + len(texts[j]) - 2 * _lcs(texts[i], texts[j])
        bag = np.abs(counts[i] - counts[j]).sum()
        levels = sum(int(((counts[i] >= k) != (counts[j] >= k)).sum()) for k in (1, 2))
        assert int(np.bitwise_count(masks[i] ^ masks[j])) == levels <= bag <= indel


def _lcs(a: str, b: str) -> int:
    row = [0] * (len(b) + 1)
    for ch in a:
        prev = 0
        for k, other in enumerate(b, 1):
            prev, row[k] = row[k], prev + 1 if ch == other else max(row[k], row[k - 1])
    return row[-1]



def test_names_load_in_id_order_whatever_the_physical_order(rag):
    """Among names of one ratio the scorer keeps the first it meets, so the load order decides
    ties: it must be the ids', not the heap's, or two processes could answer one query two ways."""
    from test_isolation import _tenant

    from graphrag_dag.dataflows.common import sql

    rag.write("name-order", _tenant("n-", "ORDER"), replace=True)
    try:
        ids = [r[0] for r in rag.store.admin_rows("SELECT id FROM entities WHERE namespace = 'name-order' ORDER BY id")]
        assert len(ids) > 3
        # A rewritten row moves to the end of the heap, where a sequential scan meets it last.
        rag.store.admin_rows("UPDATE entities SET name = name WHERE namespace = 'name-order' AND id = %s "
                             "RETURNING id", (ids[0],))
        info = rag.store.namespace_info("name-order")
        db = rag.store.scoped("name-order", index_version=info.index_version)
        try:
            loaded = [r[0] for r in db.rows(sql.ENTITY_NAMES, {"ns": "name-order"})]
            aliases = [tuple(r) for r in db.rows(sql.ALIAS_NAMES, {"ns": "name-order"})]
        finally:
            db.close()
        assert loaded == ids
        assert aliases and aliases == sorted(aliases)
    finally:
        rag.store.drop("name-order")
