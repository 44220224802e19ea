-- A running job's process writes its heartbeat every few seconds; a job whose heartbeat is older
-- than the lease (drivers/service/jobs.py) belongs to a process that died, and is marked failed by
-- whichever process looks next. Jobs of older versions have none: they count from their start.
ALTER TABLE service_jobs ADD COLUMN IF NOT EXISTS heartbeat_at timestamptz NOT NULL DEFAULT now();
