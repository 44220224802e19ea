-- Indexes that carry the columns local search reads with them, so that its look-ups read the index
-- alone instead of one random heap page per row. On a namespace too large for shared buffers, the
-- pages a query touches first cost a good part of its time: 12-15 ms of about 50 at 100k entities
-- (README, Scale).
--
-- Each ranked entity's first units, own pages (`about`) first (ENTITY_UNITS in
-- dataflows/common/sql.py): with `about` only in the table, every row of the entity was read from
-- the heap to be sorted: 3,046 pages for the 320 rows kept, in a query at 100k entities.
ALTER TABLE entity_units DROP CONSTRAINT IF EXISTS entity_units_pkey;
ALTER TABLE entity_units ADD CONSTRAINT entity_units_pkey PRIMARY KEY (namespace, entity_id, unit_id) INCLUDE (about);

-- An entity's strongest neighbours (the graph walk) and the edges between query entities and a
-- community's members (community signals): each edge's other end was read from the heap.
DROP INDEX IF EXISTS edges_source_idx;
CREATE INDEX edges_source_idx ON edges (namespace, source_id, weight DESC) INCLUDE (target_id);
DROP INDEX IF EXISTS edges_target_idx;
CREATE INDEX edges_target_idx ON edges (namespace, target_id, weight DESC) INCLUDE (source_id);
