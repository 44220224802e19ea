"""The seeds' second and third retrieval interfaces, and evidence auditing: a community's details,
an entity's neighbours, and where an evidence id sits in its document.

These are lookups, not searches: no ranking choices to experiment with, so they are plain
functions over one namespace-scoped snapshot rather than Hamilton flows. Where a lookup needs a
search's judgement (which entity a name means, how the graph is walked) it calls the local
flow's own node functions, so the CLI, the service and local search can never disagree on it.
All their SQL is in this module.
"""

from __future__ import annotations

import re

from dataclasses import asdict, dataclass, field
from typing import Any

from graphrag_dag.dataflows.common.errors import BadInput, NotFound
from graphrag_dag.dataflows.common.resources import Database
from graphrag_dag.dataflows.common.textproc import escape_like, name_key
from graphrag_dag.dataflows.local import community_recall, entity_matching

MAX_DEPTH = 3
SNIPPET_CHARS = 300

COMMUNITY = """
SELECT c.id, c.level, c.parent_id, c.is_leaf, coalesce(nullif(s.title, ''), c.title),
       coalesce(s.summary, ''), coalesce(s.full_content, ''), s.rank,
       (SELECT count(*) FROM community_members m WHERE m.namespace = c.namespace AND m.community_id = c.id),
       coalesce((SELECT array_agg(k.id ORDER BY k.id) FROM communities k
                  WHERE k.namespace = c.namespace AND k.parent_id = c.id), '{}')
FROM communities c
LEFT JOIN community_summaries s ON s.namespace = c.namespace AND s.community_id = c.id
WHERE c.namespace = %(ns)s AND c.id = %(id)s
"""

# The best-connected members first: a root community of a large index has thousands.
MEMBERS = """
SELECT e.id, e.name, e.type, e.degree, left(e.description, %(chars)s)
FROM community_members m JOIN entities e ON e.namespace = m.namespace AND e.id = m.entity_id
WHERE m.namespace = %(ns)s AND m.community_id = %(id)s
ORDER BY e.degree DESC, e.name, e.id LIMIT %(cap)s
"""

# Edges touching the members, those among members first, strongest first.
MEMBER_EDGES = """
WITH mem AS (SELECT entity_id FROM community_members WHERE namespace = %(ns)s AND community_id = %(id)s)
SELECT ed.id, ed.source_id, s.name, ed.target_id, t.name, ed.weight, left(ed.description, %(chars)s),
       (ed.source_id IN (SELECT entity_id FROM mem) AND ed.target_id IN (SELECT entity_id FROM mem)) AS internal
FROM edges ed
JOIN entities s ON s.namespace = ed.namespace AND s.id = ed.source_id
JOIN entities t ON t.namespace = ed.namespace AND t.id = ed.target_id
WHERE ed.namespace = %(ns)s
  AND (ed.source_id IN (SELECT entity_id FROM mem) OR ed.target_id IN (SELECT entity_id FROM mem))
ORDER BY internal DESC, ed.weight DESC, ed.id LIMIT %(cap)s
"""

MEMBER_CLAIMS = """
SELECT cl.id, cl.subject_id, se.name, cl.object_id, cl.type, cl.status, cl.description,
       cl.quote, cl.document_id, cl.chunk_id, cl.start_char, cl.end_char
FROM claims cl JOIN entities se ON se.namespace = cl.namespace AND se.id = cl.subject_id
WHERE cl.namespace = %(ns)s
  AND cl.subject_id IN (SELECT entity_id FROM community_members WHERE namespace = %(ns)s AND community_id = %(id)s)
ORDER BY cl.id LIMIT %(cap)s
"""

# The text units that mention the most members: the passages the community was built from.
MEMBER_UNITS = """
SELECT u.id, u.document_id, coalesce(d.title, ''), u.start_char, u.end_char, left(u.text, %(chars)s), n.members
FROM (SELECT eu.unit_id, count(*) AS members FROM entity_units eu
       WHERE eu.namespace = %(ns)s AND eu.entity_id IN
             (SELECT entity_id FROM community_members WHERE namespace = %(ns)s AND community_id = %(id)s)
       GROUP BY eu.unit_id ORDER BY count(*) DESC, eu.unit_id LIMIT %(cap)s) n
JOIN chunks u ON u.namespace = %(ns)s AND u.id = n.unit_id
LEFT JOIN documents d ON d.namespace = u.namespace AND d.id = u.document_id
ORDER BY n.members DESC, u.id
"""

ENTITIES = "SELECT id, name, type, degree FROM entities WHERE namespace = %(ns)s AND id = ANY(%(ids)s)"

# Each entity's leaf community with its title (the deepest grouping it belongs to).
LEAF_COMMUNITIES = """
SELECT e.id, c.id, c.level, coalesce(nullif(s.title, ''), c.title)
FROM entities e
JOIN communities c ON c.namespace = e.namespace AND c.id = e.leaf_community_id
LEFT JOIN community_summaries s ON s.namespace = c.namespace AND s.community_id = c.id
WHERE e.namespace = %(ns)s AND e.id = ANY(%(ids)s)
"""

# An evidence id is a chunk (evidence span or text unit) or a claim; both carry a document span.
EVIDENCE = """
SELECT 'chunk', c.id, c.document_id, c.start_char, c.end_char, c.text, c.parent_id, NULL::text
FROM chunks c WHERE c.namespace = %(ns)s AND c.id = %(id)s
UNION ALL
SELECT 'claim', cl.id, cl.document_id, cl.start_char, cl.end_char, coalesce(cl.quote, cl.source_text), cl.chunk_id,
       cl.description
FROM claims cl WHERE cl.namespace = %(ns)s AND cl.id = %(id)s
"""

# An excerpt's id: its chunk's id, then `#start-end`, the excerpt's characters in the chunk's text.
EXCERPT_ID = re.compile(r"(.+)#(\d+)-(\d+)")

# The ids a shortened form `head…tail` (the CLI's display form, drivers/cli/printing.py) may stand for.
SHORT_MATCHES = """
SELECT id FROM chunks WHERE namespace = %(ns)s AND id LIKE %(pattern)s
UNION
SELECT id FROM claims WHERE namespace = %(ns)s AND id LIKE %(pattern)s
LIMIT 2
"""
SHORT_MARK = "…"

DOCUMENT_WINDOW = """
SELECT d.title, length(d.text), substr(d.text, %(from)s + 1, %(len)s)
FROM documents d WHERE d.namespace = %(ns)s AND d.id = %(id)s
"""


def _json(obj: Any) -> dict[str, Any]:
    return asdict(obj)


@dataclass
class CommunityDetails:
    id: str
    level: int
    parent_id: str | None
    is_leaf: bool
    title: str
    summary: str
    full_content: str
    rank: float | None
    member_count: int
    children: list[str]
    members: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)

    as_json = _json


def community_details(db: Database, namespace: str, community_id: str, *, max_members: int = 200,
                      max_edges: int = 100, max_claims: int = 50, max_evidence: int = 10) -> CommunityDetails:
    """Everything an application shows for one community; every list is capped (a root community
    can hold most of the index) and `member_count` says how many members there are in all."""
    params = {"ns": namespace, "id": community_id, "chars": SNIPPET_CHARS}
    rows = db.rows(COMMUNITY, params)
    if not rows:
        raise NotFound(f"unknown community {community_id!r} in namespace {namespace!r}")
    cid, level, parent, leaf, title, summary, content, rank, count, children = rows[0]
    out = CommunityDetails(cid, int(level), parent, bool(leaf), title, summary, content,
                           None if rank is None else float(rank), int(count), list(children))
    out.members = [{"id": i, "name": n, "type": t, "degree": int(d), "description": desc}
                   for i, n, t, d, desc in db.rows(MEMBERS, {**params, "cap": max_members})]
    out.edges = [{"id": i, "source_id": s, "source": sn, "target_id": t, "target": tn, "weight": float(w),
                  "description": desc, "internal": bool(internal)}
                 for i, s, sn, t, tn, w, desc, internal in db.rows(MEMBER_EDGES, {**params, "cap": max_edges})]
    out.claims = [{"id": i, "subject_id": s, "subject": sn, "object_id": o, "type": t, "status": st,
                   "description": desc, "text": quote, "document_id": doc, "chunk_id": ch, "start": a, "end": b}
                  for i, s, sn, o, t, st, desc, quote, doc, ch, a, b in
                  db.rows(MEMBER_CLAIMS, {**params, "cap": max_claims})]
    out.evidence = [{"id": i, "document_id": doc, "title": ti, "start": a, "end": b, "snippet": text,
                     "members": int(n)}
                    for i, doc, ti, a, b, text, n in db.rows(MEMBER_UNITS, {**params, "cap": max_evidence})]
    return out


@dataclass
class Neighbors:
    entity: dict[str, Any]
    depth: int
    resolved_by: list[str]  # the channels that found the name
    neighbors: list[dict[str, Any]]
    truncated: bool

    as_json = _json


def resolve_entity(db: Database, namespace: str, name: str) -> entity_matching.MatchedEntity:
    """The entity a name means, through local search's exact, alias and fuzzy channels fused by
    the same RRF: a typo or an alias finds what a question containing it would find."""
    key = name_key(name)
    if not key:
        raise BadInput("the entity name is empty")
    rows = entity_matching.name_key_rows([key], db, namespace)
    exact = entity_matching.exact_matches([key], rows)
    alias = entity_matching.alias_matches([key], rows)
    fuzzy = entity_matching.fuzzy_matches([key], entity_matching.name_index(db, namespace))
    fused = entity_matching.matched_entities__plain(exact, alias, fuzzy, [], [])
    if not fused:
        raise NotFound(f"no entity named {name!r} in namespace {namespace!r}")
    return fused[0]


def entity_neighbors(db: Database, namespace: str, name: str, *, depth: int = 1, limit: int = 50,
                     per_entity: int = 25) -> Neighbors:
    """Neighbours up to `depth` hops, walked the way local search walks (the strongest
    `per_entity` edges of each entity per hop), nearest first and then by the weight of the edge
    that reached them. Each neighbour says which nearer entity it was reached through."""
    if not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH:
        raise BadInput(f"depth must be 1 to {MAX_DEPTH}")
    if not isinstance(limit, int) or limit < 1:
        raise BadInput("limit must be a positive integer")
    start = resolve_entity(db, namespace, name)
    walk = community_recall._walk([start.id], community_recall.graph_index(db, namespace), depth, per_entity,
                                 max(limit, per_entity) * 4)
    via: dict[str, tuple[str, float]] = {}
    for (a, b), weight in walk.edges.items():
        for near, far in ((a, b), (b, a)):
            if walk.hops.get(near, 99) + 1 == walk.hops.get(far) and weight > via.get(far, ("", -1e300))[1]:
                via[far] = (near, weight)
    reached = sorted((i for i in walk.hops if i != start.id), key=lambda i: (walk.hops[i], -via[i][1], i))
    shown = reached[:limit]
    ids = [start.id, *shown, *{via[i][0] for i in shown}]
    info = {r[0]: r for r in db.rows(ENTITIES, {"ns": namespace, "ids": ids})}
    homes = {r[0]: {"id": r[1], "level": int(r[2]), "title": r[3]}
             for r in db.rows(LEAF_COMMUNITIES, {"ns": namespace, "ids": ids})}

    def entity(i: str) -> dict[str, Any]:
        _, n, t, d = info[i]
        return {"id": i, "name": n, "type": t, "degree": int(d), "community": homes.get(i)}

    neighbors = [{**entity(i), "hops": walk.hops[i], "via_id": via[i][0], "via": info[via[i][0]][1],
                  "weight": via[i][1]} for i in shown]
    return Neighbors(entity(start.id), depth, start.channels, neighbors, len(reached) > len(shown))


@dataclass
class SourcePassage:
    evidence_id: str
    kind: str  # "chunk" or "claim"
    document_id: str | None
    title: str
    start: int | None
    end: int | None
    text: str  # the stored evidence text, which equals the document slice [start, end) when both are known
    before: str  # up to `context_chars` of the document before the span
    after: str
    chunk_id: str | None  # a chunk's parent text unit, or the chunk an excerpt or a claim came from
    statement: str | None  # a claim's description
    document_chars: int | None

    as_json = _json


def _full_id(db: Database, namespace: str, evidence_id: str) -> str:
    """The id a display form `head…tail` stands for, when exactly one chunk or claim of the namespace
    starts with `head` and ends with `tail` (an excerpt's `#start-end` kept whole after it); any
    other id as given. Several matches are an error naming the way out."""
    if SHORT_MARK not in evidence_id:
        return evidence_id
    excerpt = re.fullmatch(r"(.*)(#\d+-\d+)", evidence_id)
    base, suffix = (excerpt[1], excerpt[2]) if excerpt else (evidence_id, "")
    head, _, tail = base.partition(SHORT_MARK)
    if not head or not tail or SHORT_MARK in tail:
        return evidence_id
    pattern = f"{escape_like(head)}%{escape_like(tail)}"
    matches = [r[0] for r in db.rows(SHORT_MATCHES, {"ns": namespace, "pattern": pattern})
               if len(r[0]) >= len(head) + len(tail)]
    if len(matches) > 1:
        raise BadInput(f"{evidence_id!r} stands for more than one id in namespace {namespace!r}; "
                       "use the full id (query --json shows it)")
    return matches[0] + suffix if matches else evidence_id


def source(db: Database, namespace: str, evidence_id: str, *, context_chars: int = 200) -> SourcePassage:
    """Where an evidence id sits: its document, title and span, and the text around it. The id may
    be given whole or in the shortened form the command line prints."""
    if not isinstance(evidence_id, str) or not evidence_id.strip():
        raise BadInput("the evidence id is empty")
    if not isinstance(context_chars, int) or not 0 <= context_chars <= 20000:
        raise BadInput("context_chars must be 0 to 20000")
    evidence_id = _full_id(db, namespace, evidence_id)
    rows = db.rows(EVIDENCE, {"ns": namespace, "id": evidence_id})
    excerpt = EXCERPT_ID.fullmatch(evidence_id) if not rows else None
    if excerpt is not None:  # some sentences of a chunk (`EvidenceItem.excerpt`): the chunk, narrowed
        rows = [r for r in db.rows(EVIDENCE, {"ns": namespace, "id": excerpt[1]}) if r[0] == "chunk"]
        a, b = int(excerpt[2]), int(excerpt[3])
        if rows and a < b <= len(rows[0][5] or ""):
            kind, _, doc, start, end, text, _, statement = rows[0]
            placed = start is not None and end is not None
            rows = [(kind, evidence_id, doc, start + a if placed else None, start + b if placed else None,
                     text[a:b], excerpt[1], statement)]
        else:
            rows = []
    if not rows:
        raise NotFound(f"unknown evidence id {evidence_id!r} in namespace {namespace!r}")
    kind, eid, doc, start, end, text, chunk, statement = rows[0]
    title, before, after, total = "", "", "", None
    if doc is not None:
        if start is not None and end is not None:
            lo = max(0, start - context_chars)
            window = db.rows(DOCUMENT_WINDOW, {"ns": namespace, "id": doc, "from": lo,
                                               "len": end + context_chars - lo})
            if window:
                title, total, piece = window[0]
                before, after = piece[: start - lo], piece[end - lo:]
        else:
            window = db.rows(DOCUMENT_WINDOW, {"ns": namespace, "id": doc, "from": 0, "len": 0})
            if window:
                title, total, _ = window[0]
    return SourcePassage(eid, kind, doc, title or "", start, end, text or "", before, after, chunk, statement,
                         None if total is None else int(total))
