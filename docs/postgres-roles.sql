-- The two logins of graphrag-dag on a PostgreSQL server of your own (docs/contract.md, "Two
-- logins"). Run once as an administrator, connected to the database graphrag-dag will use, after
-- changing both passwords; then
--   GRAPHRAG_DAG_DSN=postgresql://graphrag_writer:...@host/db        (migrations, imports, keys, jobs)
--   GRAPHRAG_DAG_QUERY_DSN=postgresql://graphrag_query:...@host/db   (searches and lookups)
-- The writer owns the tables it creates on first connect. The query role owns nothing and is no
-- superuser: it reads only through graphrag_reader's row-level security policies.
CREATE EXTENSION IF NOT EXISTS vector;
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'graphrag_reader') THEN
        CREATE ROLE graphrag_reader NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'graphrag_writer') THEN
        CREATE ROLE graphrag_writer LOGIN PASSWORD 'change-me-writer' NOSUPERUSER NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'graphrag_query') THEN
        CREATE ROLE graphrag_query LOGIN PASSWORD 'change-me-query' NOSUPERUSER NOBYPASSRLS IN ROLE graphrag_reader;
    END IF;
END
$$;
GRANT graphrag_reader TO graphrag_writer;
GRANT USAGE, CREATE ON SCHEMA public TO graphrag_writer;
