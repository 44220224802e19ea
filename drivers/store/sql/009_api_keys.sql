-- API keys of `graphrag-dag serve`: only a hash of each secret is kept; a key grants a role on a
-- list of namespaces ('*' for all). The reader role a search runs as cannot see this table.
CREATE TABLE IF NOT EXISTS api_keys (
    id          text PRIMARY KEY,
    secret_hash text NOT NULL,
    namespaces  text[] NOT NULL,
    role        text NOT NULL CHECK (role IN ('query', 'write', 'admin')),
    label       text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON api_keys FROM PUBLIC;
