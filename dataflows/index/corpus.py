"""Indexer, stage 1: the user's documents, read from files and folders in every supported format.

A document's id is stable: its file path (or its record id) plus a hash of its text, so the same
text at the same place always has the same id, and a changed text gets a new one. Its title is
the title field, the first heading, or the file name. Unreadable or empty files are skipped and
listed in the warnings; a corpus with no readable text is bad input.
"""

from __future__ import annotations

import collections

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.records import Document
from graphrag_dag.dataflows.common.settings import INDEX
from graphrag_dag.dataflows.index import readers


@dataclass(frozen=True)
class SourceFile:
    path: Path
    name: str  # relative to the path the user gave, so ids do not depend on where the corpus lives
    readable: bool = True  # False: found in a folder, of a format no reader takes (it is reported)


@dataclass
class Corpus:
    documents: list[Document]
    warnings: list[str] = field(default_factory=list)
    record_titles: set[str] = field(default_factory=set)  # documents titled by a record's title field


def corpus_files(corpus_paths: list[str]) -> list[SourceFile]:
    """Files given, and the files anywhere under folders given (hidden ones left out), in name
    order. A file given by name in no format a reader takes is read as text unless it is binary,
    which is bad input (nothing is indexed); such files in a folder are kept as unreadable so that
    the corpus can say what it skipped."""
    out: list[SourceFile] = []
    for raw in corpus_paths:
        path = Path(raw).expanduser()
        if path.is_file():
            if path.suffix.lower() not in readers.SUFFIXES and readers.looks_binary(path):
                raise BadInput(f"{raw} is not a format graphrag-dag reads (it reads "
                               f"{', '.join(sorted(readers.SUFFIXES))} and plain text)")
            out.append(SourceFile(path, path.name))
        elif path.is_dir():
            for p in sorted(path.rglob("*")):
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts):
                    out.append(SourceFile(p, p.relative_to(path).as_posix(), p.suffix.lower() in readers.SUFFIXES))
        else:
            raise BadInput(f"{raw} does not exist")
    return out


def _unread(sources: list[SourceFile]) -> str | None:
    """One warning for the files of a folder no reader takes, by suffix."""
    if not sources:
        return None
    kinds = collections.Counter(s.path.suffix.lower() or "no suffix" for s in sources)
    listed = ", ".join(f"{kind} ({n})" for kind, n in kinds.most_common())
    return f"skipped {len(sources)} file(s) in formats graphrag-dag does not read: {listed}"


def _doc_id(key: str, text: str) -> str:
    slug = re.sub(r"[^\w.-]+", "-", key).strip("-")[:80] or "doc"
    return f"{slug}#{hashlib.sha1(text.encode('utf-8')).hexdigest()[:12]}"


def _read(source: SourceFile, text_field: str, title_field: str) -> list[tuple[str, str, str, bool]]:
    """(key, title, text, titled by a record field) of each document in the file."""
    suffix = source.path.suffix.lower()
    stem = source.path.stem
    if suffix in readers.RECORD_SUFFIXES:
        return [(f"{source.name}/{rid if rid else n}", title or f"{stem} {n}", text, title is not None)
                for n, (title, text, rid) in enumerate(readers.read_records(source.path, text_field, title_field))]
    reader = {".pdf": readers.read_pdf, ".docx": readers.read_docx, ".pptx": readers.read_pptx,
              **{s: readers.read_html for s in readers.HTML_SUFFIXES}}.get(suffix, readers.read_text)
    return [(source.name, title or stem, text, False) for title, text in reader(source.path)]


def corpus(corpus_files: list[SourceFile], text_field: str = INDEX.text_field,
           title_field: str = INDEX.title_field) -> Corpus:
    docs: dict[str, Document] = {}
    warnings: list[str] = []
    record_titles: set[str] = set()
    unread = _unread([s for s in corpus_files if not s.readable])
    if unread:
        warnings.append(unread)
    for source in (s for s in corpus_files if s.readable):
        try:
            found = _read(source, text_field, title_field)
        except (readers.Unreadable, OSError) as exc:
            warnings.append(f"skipped {source.name}: {exc}")
            continue
        empty = 0
        for key, title, text, from_field in found:
            if not text.strip():
                empty += 1
                continue
            doc_id = _doc_id(key, text)
            if doc_id not in docs:  # the same text under the same key is one document
                docs[doc_id] = Document(doc_id, title.strip(), text, from_field)
                if from_field:
                    record_titles.add(doc_id)
        if empty:
            warnings.append(f"skipped {empty} empty document(s) in {source.name}")
    if not docs:
        skipped = next((w for w in warnings if w.startswith("skipped ")), None)  # why the first one failed
        raise BadInput("no readable text in " + (", ".join(s.name for s in corpus_files[:5]) or "the given paths")
                       + (f" ({unread})" if unread else "") + (f": {skipped}" if skipped else ""))
    return Corpus(list(docs.values()), warnings, record_titles)
