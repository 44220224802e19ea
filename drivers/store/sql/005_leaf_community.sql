-- Each entity's deepest (leaf) community, derived at write time, so the graph walk resolves
-- communities with one index lookup per entity.
ALTER TABLE entities ADD COLUMN IF NOT EXISTS leaf_community_id text;

UPDATE entities e SET leaf_community_id = l.community_id
FROM (
    SELECT DISTINCT ON (m.namespace, m.entity_id) m.namespace, m.entity_id, m.community_id
    FROM community_members m
    JOIN communities c ON c.namespace = m.namespace AND c.id = m.community_id
    ORDER BY m.namespace, m.entity_id, c.level DESC, c.id
) l
WHERE e.namespace = l.namespace AND e.id = l.entity_id AND e.leaf_community_id IS NULL;

-- The graph walk reads only (id → leaf community): a covering index makes that an index-only scan.
CREATE INDEX IF NOT EXISTS entities_leaf_idx ON entities (namespace, id) INCLUDE (leaf_community_id);
