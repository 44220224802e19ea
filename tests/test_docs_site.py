"""The documentation site builds in strict mode (a broken link, a missing anchor or a page left out
of the navigation fails it), and every command of `graphrag-dag --help` has a section in the
command-line page."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from shared_data import PROJECT_ROOT


def test_the_docs_site_builds_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for page in ("index", "querying", "page", "cli", "configuration", "contract", "python-api", "serving"):
        assert (tmp_path / "site" / page / "index.html").is_file() or page == "index"
    assert (tmp_path / "site" / "index.html").is_file()


def test_a_broken_link_would_fail_the_build(tmp_path):
    """The same build over a copy of the docs with one bad link: strict mode must refuse it."""
    import shutil

    shutil.copytree(PROJECT_ROOT / "docs", tmp_path / "docs")
    shutil.copy(PROJECT_ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "docs" / "querying.md").write_text((PROJECT_ROOT / "docs" / "querying.md").read_text()
                                                    + "\n[gone](no-such-page.md)\n")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode != 0 and "no-such-page.md" in proc.stderr


def test_every_command_has_a_section_in_the_command_line_page():
    from graphrag_dag.drivers.cli.main import _commands, build_parser

    parser = build_parser()
    listed = set()
    for action in parser._subparsers._group_actions:  # noqa: SLF001 - argparse keeps the subcommands here
        listed |= set(action.choices)
    commands = listed | set(_commands())
    assert {"query", "index", "serve", "config", "keys"} <= commands
    headings = set(re.findall(r"^#{2,3} (\S+)\s*$", (PROJECT_ROOT / "docs" / "cli.md").read_text(), flags=re.M))
    missing = sorted(commands - headings)
    assert not missing, f"docs/cli.md has no section for: {', '.join(missing)}"
