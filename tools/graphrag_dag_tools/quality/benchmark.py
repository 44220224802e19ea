"""A benchmark folder in the format of 2Wiki-51: corpus.json (passages `{id, title, text}`),
questions.json (`{id, question, gold_titles}`) and, optionally, published_top8.json (per system,
`{question_id, top8_titles}` for each question). Passages are identified by title, as the
published metric does; titles may repeat."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphrag_dag.dataflows.common.errors import BadInput


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    gold_titles: tuple[str, ...]


@dataclass
class Benchmark:
    name: str
    corpus_path: Path
    passages: list[dict[str, str]]
    questions: list[Question]
    published: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # system → question id → titles


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(f"{path} is missing: a benchmark folder has corpus.json and questions.json") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path} is not valid JSON: {exc}") from None


def _texts(row: Any, keys: tuple[str, ...]) -> bool:
    return isinstance(row, dict) and all(isinstance(row.get(k), str) for k in keys)


def load_benchmark(folder: str | Path) -> Benchmark:
    """Everything checked before any work starts, so a bad folder costs nothing."""
    root = Path(folder)
    if not root.is_dir():
        raise BadInput(f"{root} is not a folder")
    passages = _read(root / "corpus.json")
    if not isinstance(passages, list) or not passages or not all(_texts(p, ("title", "text")) for p in passages):
        raise BadInput(f"{root / 'corpus.json'} must be a non-empty list of {{id, title, text}} objects")
    rows = _read(root / "questions.json")
    if not isinstance(rows, list) or not rows or not all(
            _texts(q, ("id", "question")) and isinstance(q.get("gold_titles"), list) and q["gold_titles"]
            and all(isinstance(t, str) for t in q["gold_titles"]) for q in rows):
        raise BadInput(f"{root / 'questions.json'} must be a non-empty list of {{id, question, gold_titles}} objects")
    titles = {p["title"] for p in passages}
    questions = [Question(q["id"], q["question"], tuple(dict.fromkeys(q["gold_titles"]))) for q in rows]
    for q in questions:
        missing = [t for t in q.gold_titles if t not in titles]
        if missing:
            raise BadInput(f"question {q.id}: gold title {missing[0]!r} is not a passage title in corpus.json")
    published: dict[str, dict[str, list[str]]] = {}
    if (root / "published_top8.json").exists():
        data = _read(root / "published_top8.json")
        if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
            raise BadInput(f"{root / 'published_top8.json'} must map each system to a list of answers")
        for system, answers in data.items():
            published[system] = {str(a.get("question_id")): [str(t) for t in a.get("top8_titles", [])]
                                 for a in answers if isinstance(a, dict)}
    return Benchmark(root.name, root / "corpus.json", passages, questions, published)
