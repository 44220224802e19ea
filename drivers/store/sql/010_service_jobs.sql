-- Background jobs of `graphrag-dag serve` (imports, uploaded documents), kept in the database so
-- that every worker process sees every job and a cancel reaches the process running it.
CREATE TABLE IF NOT EXISTS service_jobs (
    id               text PRIMARY KEY,
    kind             text NOT NULL,
    namespace        text NOT NULL,
    owner            text NOT NULL,
    status           text NOT NULL,
    progress         jsonb NOT NULL DEFAULT '[]',
    result           jsonb,
    error            text,
    cancel_requested boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz
);
ALTER TABLE service_jobs ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON service_jobs FROM PUBLIC;
