-- What the indexer was given when it wrote a namespace: its options, whether it ran offline and
-- which models it used (drivers/ingest/indexer.py). An update compares them with its own to know
-- whether anything but the documents changed; removing documents indexes the rest the same way.
-- Imported namespaces have none.
ALTER TABLE namespaces ADD COLUMN IF NOT EXISTS index_settings jsonb;

-- A document titled by a record's title field (a .json/.jsonl/.csv record): the indexer takes such
-- a title as a mention of what the record is about, so indexing the stored documents again must
-- know it.
ALTER TABLE documents ADD COLUMN IF NOT EXISTS record_title boolean NOT NULL DEFAULT false;
