"""The graph walk's SQL: what dataflows/local/graph_index.py loads once per namespace version, so
that the walk, the ranking's member signals and the sources' entity units read nothing per query.

Entities, communities and units are numbered by their place in id order ("C": code-point order,
whatever the database's collation), and the rows linking them come as those numbers, which a
binary COPY moves as fixed-width columns. All are read in one snapshot, so the numbers agree.
Parameterised and namespace-scoped like sql.py; not a DAG module."""

from __future__ import annotations

from psycopg import sql

GRAPH_ENTITIES = 'SELECT id, name, leaf_community_id FROM entities WHERE namespace = %(ns)s ORDER BY id COLLATE "C"'
GRAPH_CONCEPTS = "SELECT id FROM entities WHERE namespace = %(ns)s AND type = 'CONCEPT'"
GRAPH_COMMUNITIES = 'SELECT id, level, parent_id FROM communities WHERE namespace = %(ns)s ORDER BY id COLLATE "C"'
GRAPH_UNIT_IDS = ('SELECT unit_id FROM entity_units WHERE namespace = %(ns)s '
                  'GROUP BY unit_id ORDER BY unit_id COLLATE "C"')

_ENTITY_NUMBERS = sql.SQL("""entity_numbers AS MATERIALIZED (
    SELECT id, (row_number() OVER (ORDER BY id COLLATE "C") - 1)::int4 AS n FROM entities WHERE namespace = %(ns)s
)""")

# source, target (int4), weight (float8)
GRAPH_EDGES = sql.SQL("""WITH {numbers}
SELECT s.n, t.n, e.weight::float8 FROM edges e
JOIN entity_numbers s ON s.id = e.source_id JOIN entity_numbers t ON t.id = e.target_id
WHERE e.namespace = %(ns)s""").format(numbers=_ENTITY_NUMBERS)

# community, entity (int4)
GRAPH_MEMBERS = sql.SQL("""WITH {numbers}, community_numbers AS MATERIALIZED (
    SELECT id, (row_number() OVER (ORDER BY id COLLATE "C") - 1)::int4 AS n FROM communities WHERE namespace = %(ns)s
)
SELECT c.n, e.n FROM community_members m
JOIN community_numbers c ON c.id = m.community_id JOIN entity_numbers e ON e.id = m.entity_id
WHERE m.namespace = %(ns)s""").format(numbers=_ENTITY_NUMBERS)

# entity, unit (int4), about (bool)
GRAPH_UNITS = sql.SQL("""WITH {numbers}, unit_numbers AS MATERIALIZED (
    SELECT unit_id, (row_number() OVER (ORDER BY unit_id COLLATE "C") - 1)::int4 AS n
    FROM (SELECT DISTINCT unit_id FROM entity_units WHERE namespace = %(ns)s) d
)
SELECT e.n, u.n, eu.about FROM entity_units eu
JOIN entity_numbers e ON e.id = eu.entity_id JOIN unit_numbers u ON u.unit_id = eu.unit_id
WHERE eu.namespace = %(ns)s""").format(numbers=_ENTITY_NUMBERS)
