-- Which text units mention each entity (GraphRAG's entities.text_unit_ids): local search ranks
-- its sources by the passages of the matched entities and of the entities the graph reaches.
CREATE TABLE IF NOT EXISTS entity_units (
    namespace  text NOT NULL,
    entity_id  text NOT NULL,
    unit_id    text NOT NULL,
    about      boolean NOT NULL DEFAULT false,  -- the unit's document is named after the entity
    PRIMARY KEY (namespace, entity_id, unit_id)
);

ALTER TABLE entity_units ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS namespace_scope ON entity_units;
CREATE POLICY namespace_scope ON entity_units FOR SELECT TO graphrag_reader
    USING (namespace = current_setting('graphrag.namespace', true));
GRANT SELECT ON entity_units TO graphrag_reader;

-- The entities a unit mentions: the pages a question names seed the graph walk with them.
CREATE INDEX IF NOT EXISTS entity_units_unit_idx ON entity_units (namespace, unit_id);
