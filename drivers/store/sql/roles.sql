-- The two logins of graphrag-dag (docs/contract.md, "Two logins"). The embedded server runs this
-- itself; on a server of your own, run it once as an administrator in the database graphrag-dag
-- will use, then give both roles passwords, for example
--   ALTER ROLE graphrag_writer PASSWORD '...';  ALTER ROLE graphrag_query PASSWORD '...';
-- and point GRAPHRAG_DAG_DSN at graphrag_writer (migrations, imports, keys, jobs) and
-- GRAPHRAG_DAG_QUERY_DSN at graphrag_query (searches and lookups). The writer owns the tables it
-- creates on first connect; the query role owns nothing, is no superuser, and reads only through
-- graphrag_reader's row-level security policies. Not a migration: it needs an administrator.
CREATE EXTENSION IF NOT EXISTS vector;
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'graphrag_reader') THEN
        CREATE ROLE graphrag_reader NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'graphrag_writer') THEN
        CREATE ROLE graphrag_writer LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'graphrag_query') THEN
        CREATE ROLE graphrag_query LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE IN ROLE graphrag_reader;
    END IF;
END
$$;
GRANT graphrag_reader TO graphrag_writer;
GRANT USAGE, CREATE ON SCHEMA public TO graphrag_writer;
