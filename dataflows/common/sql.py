"""All retrieval SQL but the graph walk's (walk_sql.py), in one place. Every statement is
parameterised and filters by namespace (row-level security enforces the same scope underneath).
Not a DAG module.

The statements built from a dimension or a flag are rendered to text once per argument and kept
(`functools.cache`): composing one anew on every call would cost more than sending it.

Vector searches use the exact expression of the per-namespace partial HNSW index
(`(embedding::vector(D))`, or halfvec above 2,000 dims) plus the namespace predicate, so the planner
walks that namespace's own HNSW graph.

Ids are ordered `COLLATE "C"`, by code point, as Python and the in-memory graph order them: the
same ties and the same cut at a LIMIT whatever the server's locale (the embedded server's C.UTF-8
orders ids by code point too, but through the C library, and the en_US of a stock PostgreSQL image
does not). A byte comparison is also a little cheaper than a locale's: 1-3% of the claims and
keyword statements at 100k entities.
"""

from __future__ import annotations

import functools

from psycopg import sql

HALFVEC_ABOVE = 2000


def _vec_kind(dim: int) -> sql.SQL:
    return sql.SQL("halfvec" if dim > HALFVEC_ABOVE else "vector")


def vector_expr(dim: int) -> sql.Composable:
    return sql.SQL("(embedding::{}({}))").format(_vec_kind(dim), sql.Literal(int(dim)))


def _query_vec(dim: int) -> sql.Composable:
    return sql.SQL("(%(qvec)s::vector::{}({}))").format(_vec_kind(dim), sql.Literal(int(dim)))


def _text(statement: sql.Composable) -> str:
    return statement.as_string(None)


def _nearest(columns: str, table: str, extra_where: str, dim: int) -> str:
    """Nearest rows by cosine distance; `columns`, `table` and `extra_where` are constants of this module."""
    return _text(sql.SQL(
        "SELECT {columns}, 1 - ({expr} <=> {q}) AS similarity FROM {table}"
        " WHERE namespace = %(ns)s AND embedding IS NOT NULL {extra}"
        " ORDER BY {expr} <=> {q} LIMIT %(k)s"
    ).format(columns=sql.SQL(columns), table=sql.Identifier(table), extra=sql.SQL(extra_where),
             expr=vector_expr(dim), q=_query_vec(dim)))


# Entities whose name or alias has one of the given keys; the matched text comes back as `via`.
# One statement, one round trip, for the exact, alias and intent channels together.
ENTITIES_BY_KEY = """
SELECT id, name, name AS via, name_key, false AS is_alias FROM entities
WHERE namespace = %(ns)s AND name_key = ANY(%(keys)s)
UNION ALL
SELECT a.entity_id, e.name, a.alias, a.alias_key, true
FROM entity_aliases a JOIN entities e ON e.namespace = a.namespace AND e.id = a.entity_id
WHERE a.namespace = %(ns)s AND a.alias_key = ANY(%(keys)s)
"""

# In id order: among names of one fuzzy ratio the scorer keeps the first ones it met, so the
# order must not be the table's physical one (a rewrite or a concurrent scan changes that).
ENTITY_NAMES = "SELECT id, name FROM entities WHERE namespace = %(ns)s ORDER BY id"
ALIAS_NAMES = "SELECT entity_id, alias FROM entity_aliases WHERE namespace = %(ns)s ORDER BY entity_id, alias"



@functools.cache
def nearest_entities(dim: int) -> str:
    return _nearest("id, name", "entities", "", dim)


@functools.cache
def nearest_chunks(dim: int) -> str:
    return _nearest("id, text, document_id, parent_id, start_char, end_char, line_tokens", "chunks",
                    "AND kind = 'evidence'", dim)


@functools.cache
def nearest_summaries(dim: int, leaf_only: bool) -> str:
    where = "AND is_leaf" if leaf_only else "AND level = %(level)s"
    return _nearest("community_id", "community_summaries", where, dim)


COMMUNITY_LEVELS = "SELECT DISTINCT level FROM communities WHERE namespace = %(ns)s ORDER BY level"


# Every community with its title and report, in id order ("C": code-point order): what
# dataflows/local/community_reports.py keeps per namespace version for the ranking's signals.
COMMUNITY_REPORTS = """
SELECT c.id, c.level, c.title, coalesce(s.summary, ''), coalesce(s.rank, 0) FROM communities c
LEFT JOIN community_summaries s ON s.namespace = c.namespace AND s.community_id = c.id
WHERE c.namespace = %(ns)s ORDER BY c.id COLLATE "C"
"""


@functools.cache
def community_vectors(dim: int) -> str:
    """Each summary vector, with its community's place in COMMUNITY_REPORTS' order, for a binary COPY."""
    return _text(sql.SQL(
        """
SELECT x.n, s.embedding::vector({dim}) FROM (
    SELECT id, (row_number() OVER (ORDER BY id COLLATE "C") - 1)::int4 AS n FROM communities WHERE namespace = %(ns)s
) x JOIN community_summaries s ON s.namespace = %(ns)s AND s.community_id = x.id
WHERE s.embedding IS NOT NULL
"""
    ).format(dim=sql.Literal(int(dim))))


@functools.cache
def keyword_chunks(scan: bool) -> str:
    """Evidence chunks ranked by how many ILIKE patterns they contain, then shorter first, each with
    the terms it holds and, for BM25, how many chunks hold each ranged term's first word (a
    one-word term: a word it begins), counted up to `spread_cap`.

    Candidates come from the word table (`chunk_words`, which names chunks by integer key): for
    each term, chunks holding a word in its range [lo, hi) (its first word exactly, or the prefix
    of a one-word term), at most `per_term_cap` per term in chunk id order, so rare terms such as
    entity names keep all their chunks while a common word cannot flood the set. Only leakproof
    text comparisons are used, so the b-tree serves the RLS-restricted role. CJK terms cannot be
    found inside unspaced runs by words, so when there are any (`scan`) their chunks are also
    found by an ILIKE scan.

    A term counts where the chunk's lowered text contains the lowered term. In a UTF-8 database
    that is exactly ILIKE '%term%' (ILIKE lowers both sides there, with the same lower()), but the
    text is lowered once per candidate instead of once per candidate and term, each term once per
    statement instead of once per candidate (a third of the statement's time at 100k entities, with
    about 200 candidates and 12 terms), and strpos needs no escaping.
    """
    extra = sql.SQL(
        """
    UNION
    SELECT c.chunk_key FROM chunks c
    WHERE c.namespace = %(ns)s AND c.kind = 'evidence' AND c.text ILIKE ANY(%(scan_patterns)s)"""
        if scan else ""
    )
    return _text(sql.SQL(
        r"""
WITH cand AS MATERIALIZED (
    SELECT x.chunk_key AS key FROM unnest(%(lo)s::text[], %(hi)s::text[]) AS r(lo, hi)
    CROSS JOIN LATERAL (
        SELECT w.chunk_key FROM chunk_words w
        WHERE w.namespace = %(ns)s AND w.word >= r.lo COLLATE "C" AND w.word < r.hi COLLATE "C"
        LIMIT %(per_term_cap)s
    ) x{extra}
)
SELECT c.id, c.text, c.document_id, c.parent_id, c.start_char, c.end_char, c.line_tokens, hits.n, hits.found,
       -- each ranged term's document frequency, counted once for the statement (an InitPlan)
       (SELECT array_agg(s.n ORDER BY r.ord) FROM unnest(%(lo)s::text[], %(hi)s::text[]) WITH ORDINALITY AS r(lo, hi, ord)
        CROSS JOIN LATERAL (SELECT count(*) AS n FROM (SELECT 1 FROM chunk_words w WHERE w.namespace = %(ns)s
                            AND w.word >= r.lo COLLATE "C" AND w.word < r.hi COLLATE "C" LIMIT %(spread_cap)s) x) s
       ) AS spread
FROM (SELECT DISTINCT key FROM cand) d
JOIN chunks c ON c.namespace = %(ns)s AND c.chunk_key = d.key
CROSS JOIN LATERAL (SELECT lower(c.text) AS low OFFSET 0) t  -- OFFSET 0: computed once, not inlined per term
CROSS JOIN LATERAL (
    -- the terms lowered once for the statement (an uncorrelated subquery: an InitPlan), not per candidate
    SELECT count(*) AS n, array_agg(p.ord) AS found
    FROM unnest((SELECT array_agg(lower(x)) FROM unnest(%(terms)s::text[]) AS x)) WITH ORDINALITY AS p(term, ord)
    WHERE strpos(t.low, p.term) > 0
) hits
WHERE hits.n > 0
ORDER BY hits.n DESC, length(c.text) ASC, c.id COLLATE "C"
LIMIT %(limit)s
"""
    ).format(extra=extra))

# Claims whose subject is a member of the selected communities: those about (then naming) a matched
# entity first, bounded before the finer ranking in Python.
# The quote was cut from the document at the claim's span when the namespace was written (see
# dataflows/index/prepare.py), so evidence text always equals the span it reports.
CLAIMS_FOR_COMMUNITIES = """
WITH found AS MATERIALIZED (
    SELECT cl.id, cl.subject_name, cl.type, cl.status, cl.description,
           cl.quote, cl.document_id, cl.chunk_id, cl.start_char, cl.end_char,
           (cl.subject_id = ANY(%(eids)s)) AS subject_matched,
           coalesce(cl.object_id = ANY(%(eids)s), false) AS object_matched,
           cl.unit_id, cl.line_tokens
    FROM (SELECT DISTINCT m.entity_id FROM unnest(%(cids)s::text[]) AS x(id)
          CROSS JOIN LATERAL (SELECT cm.entity_id FROM community_members cm
                              WHERE cm.namespace = %(ns)s AND cm.community_id = x.id OFFSET 0) m) mem
    -- Each community's members, then each member's claims through claims_subject_idx. OFFSET 0 keeps
    -- the look-ups per row: inlined, a member count misestimated fivefold turned them into a hash join
    -- over every claim of the namespace. The
    -- subject's name and the claim's unit are copies made at write time (sql/011_claim_subjects.sql):
    -- joined here, they were two more look-ups per claim.
    CROSS JOIN LATERAL (
        SELECT c.id, c.subject_id, c.subject_name, c.object_id, c.type, c.status, c.description, c.quote,
               c.document_id, c.chunk_id, c.start_char, c.end_char, c.unit_id, c.line_tokens
        FROM claims c WHERE c.namespace = %(ns)s AND c.subject_id = mem.entity_id AND c.subject_name IS NOT NULL
        OFFSET 0) cl
)
-- The order only chooses which claims a full set keeps: the ranking in Python orders them all again
-- (dataflows/local/evidence.py), so a set within the limit comes unsorted. Each branch's condition
-- is a one-time filter, tested before its rows are read, so the sort (a large share of the
-- statement, and most candidate sets stay within the limit) runs only when the set is cut.
SELECT * FROM found WHERE (SELECT count(*) FROM found) <= %(limit)s
UNION ALL
(SELECT * FROM found WHERE (SELECT count(*) FROM found) > %(limit)s
 ORDER BY subject_matched DESC, object_matched DESC, id COLLATE "C"
 LIMIT %(limit)s)
"""

SUMMARIES_AT_LEVEL = """
SELECT community_id, level, title, summary, coalesce(rank, 0), is_leaf FROM community_summaries
WHERE namespace = %(ns)s AND (CASE WHEN %(level)s::int IS NULL THEN is_leaf ELSE level = %(level)s::int END)
ORDER BY community_id
"""

# For each summary's community: claims of members of its descendant leaf communities, a bounded
# number per root, with the chunk each claim came from as a source excerpt. Members are looked up
# per leaf (not joined for every level, then sorted) and texts are fetched only for the claims
# kept.
DESCENDANT_CLAIMS = """
WITH RECURSIVE tree AS (
    SELECT id AS root, id, is_leaf FROM communities WHERE namespace = %(ns)s AND id = ANY(%(cids)s)
    UNION ALL
    SELECT t.root, c.id, c.is_leaf FROM tree t
    JOIN communities c ON c.namespace = %(ns)s AND c.parent_id = t.id
), ranked AS (
    SELECT t.root, cl.id, row_number() OVER (PARTITION BY t.root ORDER BY cl.id) AS n
    FROM tree t
    CROSS JOIN LATERAL (SELECT m.entity_id FROM community_members m
                        WHERE m.namespace = %(ns)s AND m.community_id = t.id OFFSET 0) m
    JOIN claims cl ON cl.namespace = %(ns)s AND cl.subject_id = m.entity_id
    WHERE t.is_leaf
)
SELECT r.root, r.id, x.description, x.chunk_id, x.excerpt
FROM ranked r
CROSS JOIN LATERAL (
    SELECT cl.description, cl.chunk_id, ch.text AS excerpt FROM claims cl
    LEFT JOIN chunks ch ON ch.namespace = %(ns)s AND ch.id = cl.chunk_id
    WHERE cl.namespace = %(ns)s AND cl.id = r.id OFFSET 0
) x
WHERE r.n <= %(limit)s ORDER BY r.root, r.n
"""


# The same for leaf communities only, the default level: each is its own root, so the members
# of all of them are joined by hash (in parallel) rather than looked up leaf by leaf, and a
# claim's description comes with it.
LEAF_CLAIMS = """
WITH ranked AS (
    SELECT m.community_id AS root, cl.id, cl.description, cl.chunk_id,
           row_number() OVER (PARTITION BY m.community_id ORDER BY cl.id) AS n
    FROM unnest(%(cids)s::text[]) AS r(id)
    JOIN communities c ON c.namespace = %(ns)s AND c.id = r.id
    JOIN community_members m ON m.namespace = %(ns)s AND m.community_id = c.id
    JOIN claims cl ON cl.namespace = %(ns)s AND cl.subject_id = m.entity_id
    WHERE c.is_leaf
)
SELECT r.root, r.id, r.description, r.chunk_id, x.excerpt
FROM ranked r
LEFT JOIN LATERAL (
    SELECT ch.text AS excerpt FROM chunks ch WHERE ch.namespace = %(ns)s AND ch.id = r.chunk_id OFFSET 0
) x ON true
WHERE r.n <= %(limit)s ORDER BY r.root, r.n
"""


# Ranked sources (dataflows/local/sources.py): the text units of the entities that rank highest
# in the walked subgraph, and the pages a question names.
SOURCE_UNITS = """
SELECT c.id, c.document_id, coalesce(d.title, ''), c.start_char, c.end_char FROM chunks c
LEFT JOIN documents d ON d.namespace = c.namespace AND d.id = c.document_id
WHERE c.namespace = %(ns)s AND c.id = ANY(%(ids)s)
"""

# Each unit with its evidence chunks, in document order (a unit without any comes once, chunk NULL).
SOURCE_ROWS = """
SELECT u.id, u.document_id, coalesce(d.title, ''), u.start_char, u.end_char,
       e.id, e.text, e.start_char, e.end_char, e.line_tokens
FROM chunks u
LEFT JOIN documents d ON d.namespace = u.namespace AND d.id = u.document_id
LEFT JOIN chunks e ON e.namespace = u.namespace AND e.parent_id = u.id AND e.kind = 'evidence'
WHERE u.namespace = %(ns)s AND u.id = ANY(%(ids)s)
ORDER BY u.id COLLATE "C", e.start_char NULLS LAST, e.id COLLATE "C"
"""

UNIT_COUNT = "SELECT count(*) FROM chunks WHERE namespace = %(ns)s AND kind <> 'evidence'"
# Evidence chunks in the namespace and their mean length in characters: BM25's N and average length.
EVIDENCE_STATS = ("SELECT count(*), coalesce(avg(length(text)), 0) FROM chunks "
                  "WHERE namespace = %(ns)s AND kind = 'evidence'")

FIRST_UNITS = """
SELECT DISTINCT ON (c.document_id) c.id, coalesce(d.title, ''),
       left(split_part(coalesce(d.text, ''), E'\\n', 1), %(chars)s)
FROM chunks c JOIN documents d ON d.namespace = c.namespace AND d.id = c.document_id
WHERE c.namespace = %(ns)s AND c.kind <> 'evidence'
ORDER BY c.document_id, c.start_char NULLS LAST, c.id
"""

UNIT_TEXTS = "SELECT c.id, c.text FROM chunks c WHERE c.namespace = %(ns)s AND c.id = ANY(%(ids)s)"


@functools.cache
def community_tier(dim: int, roots: bool) -> str:
    """The root communities (`roots`), or the children of %(parents)s, each with its report and the
    report's similarity to the query: one level of dynamic selection's descent."""
    where = "c.parent_id IS NULL" if roots else "c.parent_id = ANY(%(parents)s)"
    return _text(sql.SQL(
        "SELECT c.id, c.parent_id, c.level, c.is_leaf, coalesce(nullif(s.title, ''), c.title),"
        " coalesce(s.summary, ''), coalesce(s.rank, 0),"
        " CASE WHEN s.embedding IS NULL THEN NULL ELSE 1 - ({expr} <=> {q}) END"
        " FROM communities c LEFT JOIN community_summaries s ON s.namespace = c.namespace AND s.community_id = c.id"
        " WHERE c.namespace = %(ns)s AND {where} ORDER BY c.id"
    ).format(expr=vector_expr(dim), q=_query_vec(dim), where=sql.SQL(where)))


@functools.cache
def primer_reports(dim: int) -> str:
    """Community reports of any level nearest the question (DRIFT's primer)."""
    return _nearest("community_id, level, title, summary", "community_summaries", "AND summary <> ''", dim)
