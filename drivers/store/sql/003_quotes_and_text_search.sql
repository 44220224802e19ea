-- A claim's source passage cut from its document once, at write time, instead of detoasting the
-- whole document for every claim at query time.
ALTER TABLE claims ADD COLUMN IF NOT EXISTS quote text;

UPDATE claims cl
   SET quote = substr(d.text, cl.start_char + 1, cl.end_char - cl.start_char)
  FROM documents d
 WHERE d.namespace = cl.namespace AND d.id = cl.document_id
   AND cl.quote IS NULL AND cl.start_char IS NOT NULL AND cl.end_char > cl.start_char;

-- Keyword recall prefilter: the words of each chunk (core PostgreSQL, no extension) with a GIN
-- index, so ILIKE ranks a bounded candidate set instead of scanning every chunk of a namespace.
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS words tsvector
    GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED;
CREATE INDEX IF NOT EXISTS chunks_words_idx ON chunks USING gin (words) WHERE kind = 'evidence';
