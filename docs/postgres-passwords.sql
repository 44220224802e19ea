-- Passwords for the two logins that drivers/store/sql/roles.sql creates (docker-compose.yml runs
-- both on the first start). Change them here before that first start.
ALTER ROLE graphrag_writer PASSWORD 'change-me-writer';
ALTER ROLE graphrag_query PASSWORD 'change-me-query';
