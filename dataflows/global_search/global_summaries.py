"""Global search, stage 1: the community summaries to analyse, with their supporting evidence."""

from __future__ import annotations

from dataclasses import dataclass, field

from graphrag_dag.dataflows.common import sql
from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.settings import GLOBAL
from graphrag_dag.dataflows.common.resources import Database
from graphrag_dag.dataflows.common.switches import switch_is


@dataclass(frozen=True)
class SummaryItem:
    community_id: str
    level: int
    title: str
    summary: str
    rank: float
    is_leaf: bool = False


@dataclass
class AugmentedSummary:
    community_id: str
    title: str
    text: str  # summary plus claims and excerpts, ready for a map prompt
    claim_ids: list[str] = field(default_factory=list)
    chunk_ids: list[str] = field(default_factory=list)


def _check_level(db: Database, namespace: str, level: int | None) -> None:
    if level is not None:
        levels = [r[0] for r in db.rows(sql.COMMUNITY_LEVELS, {"ns": namespace})]
        if level not in levels:
            raise BadInput(f"level {level} does not exist; available levels: {', '.join(map(str, levels)) or 'none'}")


@switch_is("global_selection", "static")
def global_summaries__static(db: Database, namespace: str, level: int | None = GLOBAL.level) -> list[SummaryItem]:
    """Leaf-community summaries by default, or those of the requested level. They do not depend on
    the question, so they are read once per namespace version and level (`Database.memoized`)."""
    return list(db.memoized(f"global_summaries:{level}", lambda: _summaries_at_level(db, namespace, level)))


def _summaries_at_level(db: Database, namespace: str, level: int | None) -> list[SummaryItem]:
    _check_level(db, namespace, level)
    rows = db.rows(sql.SUMMARIES_AT_LEVEL, {"ns": namespace, "level": level})
    return [SummaryItem(cid, int(lvl), title, summary, float(rank), bool(leaf))
            for cid, lvl, title, summary, rank, leaf in rows
            if (summary or "").strip()]


def augmented_summaries(global_summaries: list[SummaryItem], db: Database, namespace: str,
                        claims_per_summary: int = GLOBAL.claims_per_summary,
                        excerpts_per_summary: int = GLOBAL.excerpts_per_summary) -> list[AugmentedSummary]:
    """Each summary plus claims (and the source excerpts they came from) of its descendant leaf
    communities, bounded per summary, so the map stage sees evidence cues with their ids.

    A community's block depends only on the index and the two bounds, never on the question, and
    reading them is most of the serial work before the map stage. So blocks are
    kept per namespace version and bounds, by summary, and a search reads only the summaries no
    earlier search of that version asked for (the dynamic selection asks for a few at a time).
    Kept by the whole summary, not its community: dynamic selection titles a report without a
    title of its own by its community's, which the block starts with."""
    if not global_summaries:
        return []
    known: dict[SummaryItem, AugmentedSummary] = db.memoized(
        f"augmented_summaries:{claims_per_summary}:{excerpts_per_summary}", dict)
    missing = [s for s in dict.fromkeys(global_summaries) if s not in known]
    if missing:
        known.update(zip(missing, _augmented(missing, db, namespace, claims_per_summary, excerpts_per_summary),
                         strict=True))
    return [known[s] for s in global_summaries]


def _augmented(summaries: list[SummaryItem], db: Database, namespace: str, claims_per_summary: int,
               excerpts_per_summary: int) -> list[AugmentedSummary]:
    """The blocks of `summaries`, read in one statement. A leaf's block is the same from either
    statement: its only descendant leaf is itself."""
    cids = [s.community_id for s in summaries]
    statement = sql.LEAF_CLAIMS if all(s.is_leaf for s in summaries) else sql.DESCENDANT_CLAIMS
    rows = db.rows(statement, {"ns": namespace, "cids": cids, "limit": claims_per_summary})
    by_root: dict[str, list[tuple[str, str, str | None, str | None]]] = {}
    for root, claim_id, desc, chunk_id, excerpt in rows:
        by_root.setdefault(root, []).append((claim_id, desc, chunk_id, excerpt))
    out = []
    for s in summaries:
        lines = [f"{s.title}: {s.summary}".strip()]
        claims = by_root.get(s.community_id, [])
        claim_ids, chunk_ids = [], []
        if claims:
            lines.append("Claims:")
            for claim_id, desc, _chunk, _ex in claims:
                lines.append(f"- [{claim_id}] {' '.join(desc.split())}")
                claim_ids.append(claim_id)
        excerpts = [(c, ex) for _id, _d, c, ex in claims if c and ex]
        seen: set[str] = set()
        shown = 0
        for chunk_id, excerpt in excerpts:
            if chunk_id in seen or shown >= excerpts_per_summary:
                continue
            if shown == 0:
                lines.append("Source excerpts:")
            seen.add(chunk_id)
            shown += 1
            lines.append(f"- [{chunk_id}] {' '.join(excerpt.split())[:600]}")
            chunk_ids.append(chunk_id)
        out.append(AugmentedSummary(s.community_id, s.title, "\n".join(lines), claim_ids, chunk_ids))
    return out
