-- Row-level security evaluates its namespace check before any non-leakproof operator, so a GIN
-- index on tsvector (@@) can never serve the query role. Keyword recall uses this word table
-- instead: equality and range comparisons on text are leakproof, so its b-tree serves prefix
-- look-ups under RLS. Words are PostgreSQL's own 'simple' tokens of each evidence chunk.
DROP INDEX IF EXISTS chunks_words_idx;
ALTER TABLE chunks DROP COLUMN IF EXISTS words;

CREATE TABLE IF NOT EXISTS chunk_words (
    namespace  text NOT NULL,
    word       text COLLATE "C" NOT NULL,
    chunk_id   text NOT NULL,
    PRIMARY KEY (namespace, word, chunk_id)
);

INSERT INTO chunk_words (namespace, word, chunk_id)
SELECT DISTINCT c.namespace, w, c.id
FROM chunks c, unnest(tsvector_to_array(to_tsvector('simple', c.text))) AS w
WHERE c.kind = 'evidence'
ON CONFLICT DO NOTHING;

ALTER TABLE chunk_words ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS namespace_scope ON chunk_words;
CREATE POLICY namespace_scope ON chunk_words FOR SELECT TO graphrag_reader
    USING (namespace = current_setting('graphrag.namespace', true));
GRANT SELECT ON chunk_words TO graphrag_reader;
