-- What the indexer's LLM extracted from each text, keyed by (namespace, text hash, prompt, model),
-- so a rerun or an update makes no call for text it has seen. Rows are written as each call
-- returns, outside the namespace's own transaction, so a crashed run's work is not lost.
CREATE TABLE IF NOT EXISTS extraction_cache (
    namespace text NOT NULL,
    key text NOT NULL,
    value text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, key)
);
