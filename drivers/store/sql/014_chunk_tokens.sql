-- Each evidence chunk's token count as local search's context counts it: cl100k tokens of a space
-- and the chunk's text with its whitespace runs made single spaces (dataflows/common/line_tokens.py).
-- Counting the recalled and source chunks' lines took about 4.7 ms of a local query's 40 ms of
-- Python at 100k entities, most of them chunks seen for the first time; with the count written
-- beside the text, a line costs only its short label. Chunks written before this column exist keep
-- NULL and are counted at query time, as before: the same numbers, only slower, until the namespace
-- is written again. Nothing else reads it.
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS text_tokens integer;
