-- The word table names each chunk by a small integer key instead of its id. A GraphRAG text unit
-- id is a 128-character digest, repeated in a row (and an index entry) for every distinct word of
-- the chunk: a row took 176 bytes, 44 with a key, and the table with its index 1.88 GB for the
-- 5.2M words of the 2k, 20k and 100k synthetic namespaces, 0.50 GB with keys. Keys number a namespace's evidence chunks in id order
-- (code-point order, as COLLATE "C" and Python compare), so a word's chunks come in the same order
-- as before and the per-term cap of keyword recall keeps the same ones. The writer assigns them
-- the same way (drivers/store/writer.py); a namespace is always written whole, so they never go stale.
-- The UPDATE gives every evidence chunk a new row version, which the chunks' HNSW graphs take in as
-- new entries: until a namespace is next written, its approximate vector recall may differ slightly
-- (7 of 57 queries at 100k had a different top 12, each more similar to the query).
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS chunk_key integer;

UPDATE chunks c SET chunk_key = k.n
FROM (SELECT namespace, id, row_number() OVER (PARTITION BY namespace ORDER BY id COLLATE "C") AS n
      FROM chunks WHERE kind = 'evidence') k
WHERE c.namespace = k.namespace AND c.id = k.id AND c.chunk_key IS DISTINCT FROM k.n;

CREATE UNIQUE INDEX IF NOT EXISTS chunks_key_idx ON chunks (namespace, chunk_key);

DROP TABLE IF EXISTS chunk_words;
CREATE TABLE chunk_words (
    namespace  text NOT NULL,
    word       text COLLATE "C" NOT NULL,
    chunk_key  integer NOT NULL,
    PRIMARY KEY (namespace, word, chunk_key)
);

INSERT INTO chunk_words (namespace, word, chunk_key)
SELECT DISTINCT c.namespace, w, c.chunk_key
FROM chunks c, unnest(tsvector_to_array(to_tsvector('simple', c.text))) AS w
WHERE c.kind = 'evidence';

ALTER TABLE chunk_words SET (vacuum_truncate = false);
ALTER TABLE chunk_words ENABLE ROW LEVEL SECURITY;
CREATE POLICY namespace_scope ON chunk_words FOR SELECT TO graphrag_reader
    USING (namespace = current_setting('graphrag.namespace', true));
GRANT SELECT ON chunk_words TO graphrag_reader;
