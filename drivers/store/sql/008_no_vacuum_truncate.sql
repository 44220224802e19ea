-- VACUUM (and autovacuum) ends by truncating empty pages at the end of a table, which takes an
-- ACCESS EXCLUSIVE lock: every tenant's reads of that table wait. Tenants share the tables and a
-- rewrite deletes a whole namespace's rows, so truncation would follow every rewrite. The next
-- write reuses the pages anyway; keep them.
ALTER TABLE documents SET (vacuum_truncate = false);
ALTER TABLE chunks SET (vacuum_truncate = false);
ALTER TABLE chunk_words SET (vacuum_truncate = false);
ALTER TABLE entities SET (vacuum_truncate = false);
ALTER TABLE entity_aliases SET (vacuum_truncate = false);
ALTER TABLE entity_units SET (vacuum_truncate = false);
ALTER TABLE edges SET (vacuum_truncate = false);
ALTER TABLE communities SET (vacuum_truncate = false);
ALTER TABLE community_members SET (vacuum_truncate = false);
ALTER TABLE community_summaries SET (vacuum_truncate = false);
ALTER TABLE claims SET (vacuum_truncate = false);
ALTER TABLE namespaces SET (vacuum_truncate = false);
