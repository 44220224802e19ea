-- A claim's subject name and text unit, copied at write time: local search read them through two
-- joins per claim (an entity and a chunk look-up for each of ~400 candidates), which took more
-- than half of its claims statement. A namespace is always written whole, so the copies cannot
-- go stale. A claim whose subject names no entity keeps a NULL name and stays unread, as the
-- inner join left it.
ALTER TABLE claims ADD COLUMN IF NOT EXISTS subject_name text;
ALTER TABLE claims ADD COLUMN IF NOT EXISTS unit_id text;

UPDATE claims cl SET subject_name = e.name
FROM entities e
WHERE e.namespace = cl.namespace AND e.id = cl.subject_id AND cl.subject_name IS NULL;

UPDATE claims cl SET unit_id = coalesce(ch.parent_id, ch.id)
FROM chunks ch
WHERE ch.namespace = cl.namespace AND ch.id = cl.chunk_id AND cl.unit_id IS NULL;
