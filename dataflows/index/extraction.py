"""Indexer, stage 3: what each evidence chunk mentions (offline: dataflows/index/extract.py).

Extraction runs per evidence chunk, so that co-occurrence (relationships) and claims stay within
a few sentences, and every mention keeps its exact span in its document.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from graphrag_dag.dataflows.common.records import Chunk, Document
from graphrag_dag.dataflows.index.corpus import Corpus
from graphrag_dag.dataflows.index.concepts import Concepts, acronyms, concept_spans, mine
from graphrag_dag.dataflows.index.extract import (
    Mention, WordCases, at_sentence_start, located, longest_first, mentions_in,
)
from graphrag_dag.dataflows.index.names import resolution_key
from graphrag_dag.dataflows.index.llm_extraction import Extractions

_LOWER_RE = re.compile(r"(?<![\w'’])[a-z][a-z'’-]+")
_CAPITAL_RE = re.compile(r"(?<![\w'’])[^\W\d_][\w'’-]*")
_HEADING_RE = re.compile(r"^#.*$", re.M)
_FILE_NAME_RE = re.compile(r"\.[A-Za-z0-9]{1,5}$")  # "companyInfo.txt" names a file, not a subject


@dataclass(frozen=True)
class ChunkMentions:
    chunk: Chunk
    mentions: tuple[Mention, ...]


def word_cases(documents: list[Document]) -> WordCases:
    """Words the corpus writes in lower case somewhere, and words it capitalises inside a sentence:
    a capitalised word at the start of a sentence is a name only if it is of the second kind, and
    a one-word name that the corpus writes in lower case at least as often is an ordinary word."""
    lower = Counter(w for d in documents for w in _LOWER_RE.findall(d.text))
    capitalised = Counter(m.group() for d in documents for m in _CAPITAL_RE.finditer(d.text)
                          if m.group()[0].isupper() and not at_sentence_start(d.text, m.start()))
    folded = Counter()
    for word, n in capitalised.items():
        folded[word.casefold()] += n
    common = frozenset(w for w, n in folded.items() if lower.get(w, 0) >= n)
    return WordCases(frozenset(lower), frozenset(capitalised), common)


def corpus_concepts(documents: list[Document], extractions: Extractions) -> Concepts:
    """The terms the corpus is about, lower case included (concepts.py says how they are found).
    With a model, its extraction names them, so none are mined."""
    if extractions.used_llm:
        return Concepts(frozenset())
    return mine(d.text for d in documents)


def acronym_aliases(documents: list[Document]) -> dict[str, str]:
    """Each acronym the corpus defines ("basal cell carcinoma (BCC)"), as a resolution key, with
    the key of its expansion: the acronym is an alias of the expanded name."""
    out: dict[str, str] = {}
    for d in documents:
        for short, words in acronyms(d.text).items():
            out.setdefault(resolution_key(short), resolution_key(" ".join(words)))
    return out


def title_mentions(corpus: Corpus) -> dict[str, Mention]:
    """A record's title (a title field, as in an encyclopedia's passages) names what the record is
    about: it is a mention of the record's first passage. Headings and file names are not."""
    out: dict[str, Mention] = {}
    for d in corpus.documents:
        title = d.title.strip()
        if d.id in corpus.record_titles and title and len(title) <= 120 and not _FILE_NAME_RE.search(title):
            out[d.id] = Mention(title, "ENTITY", -1, -1)
    return out


HEADER_LINES = 3  # the first lines of a document, where a header built from its file name stands


def _file_name_headers(text: str, start: int, end: int, title: str | None) -> list[tuple[int, int]]:
    """Spans in [start, end) of the document's first lines that say its file's name: a header an
    export or a transcript tool wrote ("acme_q4_2023_call.txt", "ACME Q4 2023 Call"), not text.
    A file's document is titled by its first heading or else by its file name, so a line that is
    the title, separators, case and an extension aside, names the document as a heading does;
    its capitalised words ("ACME", "Call") are not mentions."""
    if not title:
        return []
    name = _folded(_FILE_NAME_RE.sub("", title))
    if len(name) < 4:
        return []
    out: list[tuple[int, int]] = []
    pos = 0
    for line in text.split("\n", HEADER_LINES)[:HEADER_LINES]:
        if pos >= end:
            break
        if _folded(_FILE_NAME_RE.sub("", line.strip())) == name and pos + len(line) > start:
            out.append((pos, pos + len(line)))
        pos += len(line) + 1
    return out


def _folded(text: str) -> str:
    """Words only, lower case, one space apart: "ACME_Q4-2023 Call.txt" → "acme q4 2023 call txt"."""
    return " ".join(re.findall(r"[^\W_]+", text.casefold()))


def _llm_mentions(chunk: Chunk, extractions: Extractions) -> list[tuple[Mention, str]]:
    """The names (and aliases) the LLM found in the chunk's text unit, where they stand in the
    chunk, each with the entity name it stands for."""
    found = []
    extraction = extractions.by_unit.get(chunk.parent_id or "")
    for e in extraction.entities if extraction else []:
        for name in [e["name"], *e["aliases"]]:
            for s, end in located(name, chunk.text):
                found.append((Mention(chunk.text[s:end], str(e.get("type") or "ENTITY"), (chunk.start or 0) + s,
                                      (chunk.start or 0) + end), e["name"]))
    found.sort(key=lambda f: (f[0].start, -(f[0].end - f[0].start)))
    return [f for n, f in enumerate(found) if not n or f[0].start >= found[n - 1][0].end]


def _offline_mentions(text: str, start: int, word_cases: WordCases, concepts: Concepts) -> list[Mention]:
    """Names by the rules and the corpus's concepts, the longer one where two overlap."""
    names = mentions_in(text, start, word_cases)
    found = [Mention(text[s:e], "CONCEPT", start + s, start + e) for s, e in concept_spans(text, concepts)]
    return longest_first([*names, *found]) if found else names


def chunk_mentions(evidence_chunks: list[Chunk], documents: list[Document], word_cases: WordCases,
                   title_mentions: dict[str, Mention], extractions: Extractions, corpus_concepts: Concepts,
                   progress: Any = None) -> list[ChunkMentions]:
    """The rules' names and the corpus's concepts offline; the LLM's names, placed in the chunk,
    with a model. A name the LLM gave that stands nowhere in its unit's chunks is a mention of the
    unit's first chunk."""
    texts = {d.id: d.text for d in documents}
    titles = {d.id: d.title for d in documents if d.id not in title_mentions}  # a file's: its heading or name
    out: list[ChunkMentions] = []
    first_chunk: set[str] = set()
    placed: set[tuple[str, str]] = set()
    step = max(1, len(evidence_chunks) // 50)
    for n, chunk in enumerate(evidence_chunks, 1):
        if progress is not None and (n % step == 0 or n == len(evidence_chunks)):
            progress(f"mentions: {n}/{len(evidence_chunks)}")
        doc_text = texts.get(chunk.document_id or "", "")
        start = chunk.start or 0
        headings = [(m.start(), m.end()) for m in _HEADING_RE.finditer(doc_text, start, chunk.end or start)]
        candidates = (_llm_mentions(chunk, extractions) if extractions.used_llm
                      else [(m, "") for m in _offline_mentions(doc_text[start:chunk.end], start, word_cases,
                                                                corpus_concepts)])
        headings += _file_name_headers(doc_text, start, chunk.end or start, titles.get(chunk.document_id or ""))
        kept = [(m, name) for m, name in candidates
                if not any(s <= m.start < e for s, e in headings)]  # a heading names; it does not mention
        placed.update((chunk.parent_id or "", name) for _, name in kept)
        found = [m for m, _ in kept]
        title = title_mentions.get(chunk.document_id or "")
        if title and chunk.document_id not in first_chunk:
            found = [title, *found]  # a title has no span: it names the document, not a place in it
        first_chunk.add(chunk.document_id or "")
        out.append(ChunkMentions(chunk, tuple(found)))
    if extractions.used_llm:
        first_of_unit: dict[str, int] = {}
        for n, cm in enumerate(out):
            first_of_unit.setdefault(cm.chunk.parent_id or "", n)
        for unit_id, extraction in extractions.by_unit.items():
            missing = [Mention(e["name"], str(e.get("type") or "ENTITY"), -1, -1) for e in extraction.entities
                       if (unit_id, e["name"]) not in placed]
            if missing and unit_id in first_of_unit:
                n = first_of_unit[unit_id]
                out[n] = ChunkMentions(out[n].chunk, (*out[n].mentions, *missing))
    return out
