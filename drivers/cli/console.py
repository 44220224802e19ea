"""What every command shares: opening the GraphRag its global options name, and progress lines on
stderr (a tqdm bar on a terminal for "stage: i/n" messages)."""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from typing import Any


def open_graphrag(args: argparse.Namespace, **kwargs: Any) -> Any:
    """A GraphRag on --dsn/--home (imported here, so `--help` and usage errors stay fast)."""
    from graphrag_dag.drivers.api import GraphRag

    return GraphRag(args.dsn, query_dsn=getattr(args, "query_dsn", None), home=args.home, **kwargs)


_COUNT_RE = re.compile(r"^(?P<stage>[\w ]+): (?P<done>\d+)/(?P<total>\d+)$")
QUARTERS = 4  # without a terminal, a counted stage prints at its start, each quarter and its end


@dataclass
class _Stage:
    name: str
    total: int
    bar: Any = None  # a tqdm bar on a terminal
    shown: int = -1  # without one: the last quarter printed


_open: _Stage | None = None


def _close() -> None:
    global _open
    if _open is not None and _open.bar is not None:
        _open.bar.close()
    _open = None


def progress(msg: str) -> None:
    """One line per message on stderr. "stage: i/n" messages draw one progress bar with its rate and
    time left (tqdm) on a terminal; elsewhere (a log, a pipe, a job's progress) they print at the
    stage's start, at each quarter and at its end, not once per step."""
    global _open
    m = _COUNT_RE.match(msg)
    if m is None:
        _close()
        print(f"[graphrag-dag] {msg}", file=sys.stderr, flush=True)
        return
    stage, done, total = m["stage"], int(m["done"]), max(1, int(m["total"]))
    if _open is None or (_open.name, _open.total) != (stage, total) or done < (_open.bar.n if _open.bar else 0):
        _close()
        _open = _Stage(stage, total)
        if sys.stderr.isatty():
            from tqdm import tqdm

            _open.bar = tqdm(total=total, desc=f"[graphrag-dag] {stage}", file=sys.stderr, leave=True,
                             dynamic_ncols=True, mininterval=0.2)
    if _open.bar is not None:
        _open.bar.update(done - _open.bar.n)
    else:
        quarter = QUARTERS * done // total
        if quarter > _open.shown or done == total:
            _open.shown = quarter
            print(f"[graphrag-dag] {msg}", file=sys.stderr, flush=True)
    if done >= total:
        _close()
