"""The built-in demo corpus: an original small index shipped as package data (corpus.json)."""

from __future__ import annotations

import json
from dataclasses import fields
from importlib import resources
from typing import Any

from graphrag_dag.dataflows.common import records as R

DEMO_NAMESPACE = "demo"


def _load_json() -> dict[str, Any]:
    return json.loads((resources.files(__package__) / "corpus.json").read_text(encoding="utf-8"))


def _build(cls: type, rows: list[dict[str, Any]]) -> list[Any]:
    names = {f.name for f in fields(cls)}
    return [cls(**{k: v for k, v in row.items() if k in names}) for row in rows]


def demo_records() -> R.IndexRecords:
    data = _load_json()
    return R.IndexRecords(
        documents=_build(R.Document, data["documents"]),
        chunks=_build(R.Chunk, data["chunks"]),
        entities=_build(R.Entity, data["entities"]),
        aliases=_build(R.Alias, data["aliases"]),
        edges=_build(R.Edge, data["edges"]),
        communities=_build(R.Community, data["communities"]),
        summaries=_build(R.CommunitySummary, data["summaries"]),
        claims=_build(R.Claim, data["claims"]),
    )


def demo_queries() -> dict[str, str]:
    return dict(_load_json().get("queries", {}))
