"""What every command shares: opening the GraphRag its global options name, and progress lines on
stderr (a redrawn bar on a terminal for "stage: i/n" messages)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any


def open_graphrag(args: argparse.Namespace, **kwargs: Any) -> Any:
    """A GraphRag on --dsn/--home (imported here, so `--help` and usage errors stay fast)."""
    from graphrag_dag.drivers.api import GraphRag

    return GraphRag(args.dsn, query_dsn=getattr(args, "query_dsn", None), home=args.home, **kwargs)


_COUNT_RE = re.compile(r"^(?P<stage>[\w ]+): (?P<done>\d+)/(?P<total>\d+)$")
_bar_open = False


def progress(msg: str) -> None:
    """One line per message; on a terminal, "stage: i/n" messages redraw one progress bar."""
    global _bar_open
    m = _COUNT_RE.match(msg)
    if m and sys.stderr.isatty():
        done, total = int(m["done"]), max(1, int(m["total"]))
        filled = 30 * done // total
        sys.stderr.write(f"\r[graphrag-dag] {m['stage']:<22} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}")
        _bar_open = done < total
        if not _bar_open:
            sys.stderr.write("\n")
        sys.stderr.flush()
        return
    if _bar_open:
        sys.stderr.write("\n")
        _bar_open = False
    print(f"[graphrag-dag] {msg}", file=sys.stderr, flush=True)
