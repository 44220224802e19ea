"""The Python API: `GraphRag` (open a store, run any flow or any subset of its nodes, look things
up, draw the DAGs, index, import, write and warm namespaces), the typed options of each search,
and the types of what it returns.

The names are loaded on first use, so that the command line can check its options (`options`)
without loading the DAG machinery behind `GraphRag`."""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "GraphRag": "graphrag", "default_home": "graphrag", "RunOutput": "run_output",
    "LocalOptions": "options", "GlobalOptions": "options", "BasicOptions": "options", "DriftOptions": "options",
    "IndexOptions": "options",
    **{name: "types" for name in ("LocalResult", "GlobalResult", "DriftResult", "IndexReport", "ImportReport",
                                  "Evidence", "Source", "MatchedEntity", "CommunityHit")},
}
__all__ = list(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
