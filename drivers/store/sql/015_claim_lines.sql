-- A claim's evidence line no longer repeats its quote when its statement already holds it (an
-- offline claim's statement is the sentence it quotes: dataflows/common/line_tokens.py). The
-- counts stored for the old lines are wrong for the new ones, so they are cleared; a claim with no
-- count is counted when a search reads it, until its namespace is written again.
UPDATE claims SET line_tokens = NULL WHERE line_tokens IS NOT NULL;
