"""The documentation speaks to users of the project as it is: a README of at most 200 lines, guides
in docs/, and no development history anywhere (issue numbers, commit hashes, dated notes) in the
README, docs/, the flows' READMEs, or the docstrings and comments of the code. Measured figures
live in docs/benchmarks.md, one table per benchmark, each with its date and load."""

from __future__ import annotations

import ast
import io
import re
import tokenize

from shared_data import PROJECT_ROOT

HISTORY = {
    "issue number": re.compile(r"\b[Ii]ssues? #?\d+|(?<![\w&\[])#\d{1,4}\b"),
    "commit hash": re.compile(r"(?<![\w/.-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])"),
    "date": re.compile(r"\b20\d\d-\d\d-\d\d\b"),
    "work session": re.compile(r"\b(?:first|second|third|\w+th|this|one|that) (?:session|sitting)\b", re.I),
}
GUIDES = ["index", "querying", "page", "cli", "configuration", "python-api", "indexing", "importing", "serving", "storage", "evaluation",
          "architecture", "contract", "benchmarks"]


def history(text: str) -> list[str]:
    return [f"{kind}: {m.group(0)}" for kind, pattern in HISTORY.items() for m in pattern.finditer(text)]


def _code_prose(source: str) -> list[str]:
    """A module's docstrings and comments."""
    tree = ast.parse(source)
    texts = [ast.get_docstring(n, clean=False) or "" for n in ast.walk(tree)
             if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    texts += [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    return texts


def test_the_history_check_can_fail():
    assert history("as issue 16 asked, 2cbd1c5 measured it (2026-12-07, a tenth session); see #54") == [
        "issue number: issue 16", "issue number: #54", "commit hash: 2cbd1c5", "date: 2026-12-07",
        "work session: tenth session"]
    assert history("a span [#3] of 64 bytes, sha-like a3f2 and the chunk id c7e41b0-2") == []


def test_the_readme_is_short_and_links_every_guide():
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    for guide in GUIDES:
        assert (PROJECT_ROOT / "docs" / f"{guide}.md").is_file(), guide
        assert f"docs/{guide}.md" in readme, guide
    for target in re.findall(r"\]\(([^)#]+)", readme):  # relative links point at files that exist
        if "://" not in target:
            assert (PROJECT_ROOT / target).exists(), target


def test_guides_link_only_to_files_that_exist():
    for path in (PROJECT_ROOT / "docs").glob("*.md"):
        for target in re.findall(r"\]\(([^)#]+)", path.read_text(encoding="utf-8")):
            if "://" not in target:
                assert (path.parent / target).exists(), (path.name, target)


def test_no_development_history_in_the_docs():
    pages = [PROJECT_ROOT / "README.md", *(PROJECT_ROOT / "docs").glob("*.md"),
             *(PROJECT_ROOT / "dataflows").rglob("README.md")]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        if page.name == "benchmarks.md":  # its tables are dated, in their heading lines only
            text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("Measured on "))
        assert history(text) == [], page


def test_no_development_history_in_docstrings_and_comments():
    assert _code_prose('"""A doc."""\nX = "2026-01-01"  # a note\n') == ["A doc.", "# a note"]
    files = [p for folder in ("dataflows", "drivers", "tools") for p in (PROJECT_ROOT / folder).rglob("*.py")]
    assert len(files) > 80
    for path in files:
        for text in _code_prose(path.read_text(encoding="utf-8")):
            assert history(text) == [], (path, text[:200])


def test_every_benchmark_is_one_table_with_its_date_and_load():
    text = (PROJECT_ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    sections = re.split(r"\n## ", text)[1:]
    assert len(sections) >= 5
    for section in sections:
        title = section.splitlines()[0]
        heads = [ln for ln in section.splitlines() if ln.startswith("| ") and "|---" not in ln]
        rules = [ln for ln in section.splitlines() if ln.startswith("|---")]
        assert len(rules) == 1, title  # one table
        assert heads, title
        assert re.search(r"^Measured on 20\d\d-\d\d-\d\d\b.*\bload\b", section, re.M), title
