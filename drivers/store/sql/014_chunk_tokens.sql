-- Each evidence chunk's and each claim's evidence line as local search writes it into a context,
-- counted in cl100k tokens when it is written (dataflows/common/line_tokens.py says why, and what keeps it
-- right). Chunks written before this column keep NULL and are counted at query time, as before:
-- the same numbers, only slower, until the namespace is written again. Only local search's context
-- reads it.
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS line_tokens integer;
ALTER TABLE claims ADD COLUMN IF NOT EXISTS line_tokens integer;
