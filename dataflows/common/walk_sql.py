"""The graph walk's SQL: what dataflows/local/graph_index.py loads once per namespace version
(every edge, each entity's name, leaf community and text units, the community tree and its members), so that the walk, the
ranking's member signals and the sources' entity units read nothing per query. Parameterised and namespace-scoped like sql.py; not a DAG module."""

from __future__ import annotations

GRAPH_ENTITIES = "SELECT id, name, leaf_community_id FROM entities WHERE namespace = %(ns)s"
GRAPH_EDGES = "SELECT source_id, target_id, weight FROM edges WHERE namespace = %(ns)s"
GRAPH_COMMUNITIES = "SELECT id, level, parent_id FROM communities WHERE namespace = %(ns)s"
GRAPH_MEMBERS = "SELECT community_id, entity_id FROM community_members WHERE namespace = %(ns)s"
GRAPH_UNITS = "SELECT entity_id, unit_id, about FROM entity_units WHERE namespace = %(ns)s"
