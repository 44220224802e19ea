"""The bounded graph walk's SQL: an entity's strongest neighbours, the first two hops in one
statement (with, for local search, the community of every entity reached), and the community of
given entities at a level. Local search's recall and sources walk with it, and so does the
`neighbors` lookup. Parameterised and namespace-scoped like sql.py; not a DAG module."""

from __future__ import annotations

from psycopg import sql

# Strongest neighbours of one frontier entity `f.id`, capped: the two halves use the (source, weight)
# and (target, weight) indexes so a hub costs `cap` rows, not its degree.
_NEIGHBOUR_ROWS = sql.SQL("""
    SELECT other, weight FROM (
        (SELECT e.target_id AS other, e.weight FROM edges e
          WHERE e.namespace = %(ns)s AND e.source_id = f.id ORDER BY e.weight DESC LIMIT %(cap)s)
        UNION ALL
        (SELECT e.source_id AS other, e.weight FROM edges e
          WHERE e.namespace = %(ns)s AND e.target_id = f.id ORDER BY e.weight DESC LIMIT %(cap)s)
    ) both_ways
    ORDER BY weight DESC LIMIT %(cap)s""")

# Those of each entity of a frontier.
NEIGHBOURS = sql.SQL("""
SELECT f.id AS from_id, n.other, n.weight
FROM unnest(%(ids)s::text[]) AS f(id) CROSS JOIN LATERAL ({rows}) n
""").format(rows=_NEIGHBOUR_ROWS)

# Up the parent chain from each entity's leaf community (`leaf`: entity_id, id, level, parent_id) to
# %(level)s, and the community each entity has there; with no level, its leaf.
_UP_TO_LEVEL = """up AS (
    SELECT entity_id, id, level, parent_id FROM leaf
    UNION ALL
    SELECT up.entity_id, p.id, p.level, p.parent_id
    FROM up CROSS JOIN LATERAL (
        SELECT p.id, p.level, p.parent_id FROM communities p
        WHERE p.namespace = %(ns)s AND p.id = up.parent_id LIMIT 1
    ) p
    WHERE %(level)s::int IS NOT NULL AND up.level > %(level)s::int
), at_level AS (
    SELECT DISTINCT ON (entity_id) entity_id, id, level
    FROM up
    ORDER BY entity_id, abs(level - coalesce(%(level)s::int, level)), level DESC
)"""

# The first two hops of the walk in one statement: the NEIGHBOURS rows of the seeds (hop 1), and of
# the frontier they lead to (hop 2), each frontier chosen as dataflows/local/community_recall.py
# chooses it: new entities by their strongest edge, then by id in code-point order, at most
# %(total)s of them. Rows of hop 0 are the first frontier, so the caller can check it. With
# %(communities)s, rows of hop 3 are the second frontier, and rows of hop 4 (entity, community,
# level) the community at %(level)s of every entity reached (the seeds and both frontiers): the
# topology candidates come with the walk instead of one round trip later, and the caller checks
# that the SQL reached what it did before using them. Columns: hop, a, b, weight, level.
TWO_HOPS = sql.SQL("""
WITH RECURSIVE h1 AS (
    SELECT f.id AS from_id, n.other, n.weight
    FROM unnest(%(ids)s::text[]) AS f(id) CROSS JOIN LATERAL ({rows}) n
), f1 AS (
    SELECT other AS id FROM h1 WHERE other <> ALL(%(ids)s::text[])
    GROUP BY other ORDER BY max(weight) DESC, other COLLATE "C" LIMIT %(total)s
), h2 AS (
    SELECT f.id AS from_id, n.other, n.weight FROM f1 AS f CROSS JOIN LATERAL ({rows}) n
), f2 AS (
    SELECT other AS id FROM h2
    WHERE %(communities)s AND other <> ALL(%(ids)s::text[]) AND other NOT IN (SELECT id FROM f1)
    GROUP BY other ORDER BY max(weight) DESC, other COLLATE "C" LIMIT %(total)s
), reached AS (
    SELECT id FROM unnest(%(ids)s::text[]) AS s(id) WHERE %(communities)s
    UNION ALL SELECT id FROM f1 WHERE %(communities)s
    UNION ALL SELECT id FROM f2
), leaf AS (
    -- a primary-key lookup per reached entity, then one per leaf community (LIMIT 1, as below)
    SELECT r.id AS entity_id, c.id, c.level, c.parent_id
    FROM reached r
    CROSS JOIN LATERAL (SELECT e.leaf_community_id FROM entities e
                        WHERE e.namespace = %(ns)s AND e.id = r.id LIMIT 1) e
    CROSS JOIN LATERAL (SELECT c.id, c.level, c.parent_id FROM communities c
                        WHERE c.namespace = %(ns)s AND c.id = e.leaf_community_id LIMIT 1) c
), {up}
SELECT 1 AS hop, from_id, other, weight, NULL::int AS level FROM h1
UNION ALL
SELECT 0, id, NULL, NULL, NULL FROM f1
UNION ALL
SELECT 2, from_id, other, weight, NULL FROM h2
UNION ALL
SELECT 3, id, NULL, NULL, NULL FROM f2
UNION ALL
SELECT 4, entity_id, id, NULL, level FROM at_level
""").format(rows=_NEIGHBOUR_ROWS, up=sql.SQL(_UP_TO_LEVEL))

# The deepest community of each entity (its leaf, stored on the entity at write time), then, when a
# level is requested, the ancestor at that level found through the parent chain.
ENTITY_COMMUNITIES = sql.SQL("""
WITH RECURSIVE leaf AS (
    SELECT e.id AS entity_id, c.id, c.level, c.parent_id
    FROM entities e
    CROSS JOIN LATERAL (  -- one primary-key lookup per entity, never a scan of all communities:
        SELECT c.id, c.level, c.parent_id FROM communities c  -- LIMIT 1 (ids are unique) keeps the
        WHERE c.namespace = %(ns)s AND c.id = e.leaf_community_id  -- planner from flattening this
        LIMIT 1                                                    -- into a hash join over a scan
    ) c
    WHERE e.namespace = %(ns)s AND e.id = ANY(%(ids)s)
), {up}
SELECT entity_id, id, level FROM at_level
""").format(up=sql.SQL(_UP_TO_LEVEL))
