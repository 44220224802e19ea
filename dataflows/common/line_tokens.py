"""A context line's token count from its label and a count made when its text was written.

Local search labels each evidence line `[id] (kind; source) text`, and counts every line against
its token budget. The text is most of a line and is the same every time a chunk comes back, so the
store keeps its count (`chunks.text_tokens`, written by dataflows/index/prepare.py), and a line
costs only its label.

That sum is exact, not an estimate. cl100k's pre-tokeniser cuts a text into pieces that are
encoded separately, and the label ends in ")": no piece that holds ")" can also hold the space
after it (`[^\\r\\n\\p{L}\\p{N}]?\\p{L}+` needs a letter next, ` ?[^\\s\\p{L}\\p{N}]+` stops at
whitespace), and the pieces are matched left to right with no look-behind. So the pieces of
`label + " " + text` are the label's pieces followed by those of `" " + text`, and its count is
the sum of theirs. tests/test_line_tokens.py checks it on texts of many scripts and shapes.
Another tokenizer promises nothing of the kind: stored counts are used only with cl100k.
"""

from __future__ import annotations

from graphrag_dag.dataflows.common.resources import TokenCounter

STORED_TOKENIZER = "cl100k_base"  # the encoding whose counts chunks.text_tokens holds


def spaced_text(text: str) -> str:
    """The text as it ends a context line: after the label's space, its whitespace runs single spaces."""
    return " " + " ".join(text.split())


def text_tokens(text: str, token_counter: TokenCounter) -> int | None:
    """The count to store for `text`; None when the counter is not the one stored counts are for."""
    if token_counter.name != STORED_TOKENIZER:
        return None
    return token_counter.count(spaced_text(text))


def line_tokens(label: str, text: str, stored: int | None, token_counter: TokenCounter) -> int:
    """Tokens of `label + spaced_text(text)`: the label counted and the text's stored count added
    when there is one that applies, else the whole line counted."""
    if stored is not None and token_counter.name == STORED_TOKENIZER and label.endswith(")"):
        return token_counter.count(label) + stored
    return token_counter.count(label + spaced_text(text))
