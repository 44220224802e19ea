"""Turning files into document texts (not a DAG module), one reader per format.

Every reader returns (title, text) pairs; the text is what every span of the index points into,
so it is kept exactly as read (only line endings are normalised to "\\n"). A reader raises
`Unreadable` with a reason for a file it cannot read; the corpus node lists it in the warnings.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
import zipfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Iterator

TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".text"}
HTML_SUFFIXES = {".html", ".htm"}
RECORD_SUFFIXES = {".json", ".jsonl", ".csv"}
SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | RECORD_SUFFIXES | {".pdf", ".docx", ".pptx"}
# The first bytes of files that are not text whatever their name says: zip containers (Office,
# OpenDocument, EPUB), PDF, images, and the old binary Office formats.
_BINARY_MAGIC = (b"PK\x03\x04", b"%PDF", b"\x89PNG", b"GIF8", b"\xff\xd8\xff", b"\xd0\xcf\x11\xe0")
# pypdf logs what it repairs or gives up on ("EOF marker not found") at WARNING; with no logging set
# up Python would print that beside the one line a skipped file gets. An application's own logging
# still receives the records.
logging.getLogger("pypdf").addHandler(logging.NullHandler())
_HEADING_RE = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.M)


class Unreadable(Exception):
    """The file cannot be read as its format; the message says why."""


def _decode(data: bytes) -> str:
    for encoding in ("utf-8-sig", "utf-16"):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if "\x00" not in text:
            return text.replace("\r\n", "\n").replace("\r", "\n")
    raise Unreadable("not UTF-8 text")


def first_heading(text: str) -> str | None:
    m = _HEADING_RE.search(text)
    return m.group(1).strip() if m else None


def read_text(path: Path) -> Iterator[tuple[str | None, str]]:
    text = _decode(path.read_bytes())
    yield (first_heading(text) if path.suffix.lower() in (".md", ".markdown") else None), text


class _HtmlText(HTMLParser):
    """The visible text of a page: scripts and styles dropped, block elements on their own lines."""

    _BLOCKS = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "title"}
    _SKIP = {"script", "style", "noscript", "template"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: str | None = None
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self._SKIP:
            self._skip += 1
        elif tag in self._BLOCKS:
            self.parts.append("\n")
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self._skip:
            self._skip -= 1
        elif tag in self._BLOCKS:
            self.parts.append("\n")
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._in_title and not self.title:
            self.title = data.strip() or None
            return
        self.parts.append(data)


def read_html(path: Path) -> Iterator[tuple[str | None, str]]:
    parser = _HtmlText()
    parser.feed(_decode(path.read_bytes()))
    lines = [" ".join(line.split()) for line in "".join(parser.parts).split("\n")]
    yield parser.title, "\n".join(line for line in lines if line)


def read_pdf(path: Path) -> Iterator[tuple[str | None, str]]:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError as exc:  # a declared dependency, missing from a broken install
        raise Unreadable("pypdf is not installed") from exc
    try:
        reader = PdfReader(str(path))
        pages = [page.extract_text() or "" for page in reader.pages]
        title = (reader.metadata.title if reader.metadata else None) or None
    except (PdfReadError, ValueError, KeyError, OSError) as exc:
        raise Unreadable(f"not a readable PDF ({type(exc).__name__})") from exc
    yield title, "\n\n".join(p.strip() for p in pages if p.strip())


def read_docx(path: Path) -> Iterator[tuple[str | None, str]]:
    """A Word document's paragraphs, then its tables' rows (cells joined by " | "), through
    python-docx; its title from the document's properties."""
    try:
        import docx
        from docx.opc.exceptions import PackageNotFoundError
    except ImportError as exc:  # a declared dependency, missing from a broken install
        raise Unreadable("python-docx, which reads Word files, is not installed (pip install python-docx)") from exc
    try:
        document = docx.Document(str(path))
        parts = [p.text.strip() for p in document.paragraphs if p.text.strip()]
        for table in document.tables:
            for row in table.rows:
                cells = list(dict.fromkeys(c.text.strip() for c in row.cells if c.text.strip()))
                if cells:
                    parts.append(" | ".join(cells))
        title = document.core_properties.title or None
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise Unreadable(f"not a readable Word document ({type(exc).__name__})") from exc
    yield title, "\n\n".join(parts)


def read_pptx(path: Path) -> Iterator[tuple[str | None, str]]:
    """A presentation's text, slide by slide (each shape's text and table cells, then the notes),
    through python-pptx; its title from the file's properties."""
    try:
        from pptx import Presentation
        from pptx.exc import PackageNotFoundError
    except ImportError as exc:  # a declared dependency, missing from a broken install
        raise Unreadable("python-pptx, which reads PowerPoint files, is not installed (pip install python-pptx)") from exc
    try:
        deck = Presentation(str(path))
        slides: list[str] = []
        for slide in deck.slides:
            parts: list[str] = []
            for shape in slide.shapes:
                if shape.has_text_frame and shape.text_frame.text.strip():
                    parts.append(shape.text_frame.text.strip())
                if getattr(shape, "has_table", False) and shape.has_table:
                    for row in shape.table.rows:
                        cells = [c.text.strip() for c in row.cells if c.text.strip()]
                        if cells:
                            parts.append(" | ".join(cells))
            if slide.has_notes_slide and slide.notes_slide.notes_text_frame.text.strip():
                parts.append(slide.notes_slide.notes_text_frame.text.strip())
            if parts:
                slides.append("\n".join(parts))
        title = deck.core_properties.title or None
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise Unreadable(f"not a readable PowerPoint file ({type(exc).__name__})") from exc
    yield title, "\n\n".join(slides)


def looks_binary(path: Path) -> bool:
    """Whether a file of a suffix no reader claims is binary (then it cannot be read as text)."""
    with path.open("rb") as f:
        head = f.read(8192)
    return head.startswith(_BINARY_MAGIC) or b"\x00" in head


def _records(path: Path) -> list[Any]:
    text = _decode(path.read_bytes())
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        if suffix == ".csv":
            return list(csv.DictReader(io.StringIO(text)))
        data = json.loads(text)
    except (json.JSONDecodeError, csv.Error) as exc:
        raise Unreadable(f"not valid {suffix[1:].upper()} ({exc})") from exc
    return data if isinstance(data, list) else [data]


def read_records(path: Path, text_field: str, title_field: str) -> Iterator[tuple[str | None, str, str | None]]:
    """(title, text, record id) for each record; records without text are skipped by the caller."""
    for n, record in enumerate(_records(path)):
        if not isinstance(record, dict):
            raise Unreadable(f"record {n} is not an object with a {text_field!r} field")
        text = record.get(text_field)
        title = record.get(title_field)
        rid = record.get("id")
        yield (str(title) if title not in (None, "") else None,
               str(text).replace("\r\n", "\n") if text is not None else "",
               str(rid) if rid not in (None, "") else None)
