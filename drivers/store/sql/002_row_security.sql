-- Defence in depth: the query path runs as graphrag_reader, which sees only the rows of the
-- namespace named by the transaction-local setting graphrag.namespace. SQL that forgot its
-- namespace predicate therefore still cannot read another tenant's data.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'graphrag_reader') THEN
        CREATE ROLE graphrag_reader NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
END
$$;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['namespaces', 'documents', 'chunks', 'entities', 'entity_aliases', 'edges',
                             'communities', 'community_members', 'community_summaries', 'claims']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('DROP POLICY IF EXISTS namespace_scope ON %I', t);
        EXECUTE format(
            'CREATE POLICY namespace_scope ON %I FOR SELECT TO graphrag_reader '
            'USING (namespace = current_setting(''graphrag.namespace'', true))', t);
        EXECUTE format('GRANT SELECT ON %I TO graphrag_reader', t);
    END LOOP;
END
$$;

GRANT USAGE ON SCHEMA public TO graphrag_reader;
