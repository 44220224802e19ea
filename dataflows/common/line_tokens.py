"""A chunk's evidence line, and its token count made once, when the chunk is written.

Local search labels each evidence line `[id] (chunk; doc=document) text` and counts every line
against its context budget. A chunk's line depends on the chunk alone, and on a Microsoft GraphRAG
import its label is most of it: two 128-character digests, about 160 tokens, beside a text of a
few dozen. Counting them took about 5 ms of a local query's 40 ms of Python at 100k entities, most
for chunks not seen before. So the store keeps each evidence chunk's line count
(`chunks.line_tokens`, written by dataflows/index/prepare.py), and a query adds it up.

The stored count is only right for this line and this tokenizer. It is used only when the counter
is cl100k, and `chunk_line` is the one place the line is made, both when the count is written and
when the context is built. Changing `chunk_line` needs a migration that sets `line_tokens` to NULL;
chunks with NULL are counted at query time, as chunks written before the column are.
"""

from __future__ import annotations

from graphrag_dag.dataflows.common.resources import TokenCounter

STORED_TOKENIZER = "cl100k_base"  # the encoding whose counts chunks.line_tokens holds


def chunk_line(chunk_id: str, document_id: str | None, text: str) -> str:
    """A chunk's evidence line. Its own id is its label already: naming it again as `chunk=` cost
    a 128-hex id's ~77 tokens a line on a GraphRAG import (its text unit ids are SHA-512 digests),
    a third of the budget that evidence could have had."""
    return f"[{chunk_id}] (chunk; doc={document_id}) " + " ".join(text.split())


def stored_tokens(token_counter: TokenCounter) -> bool:
    """Whether counts stored with chunks apply to this counter."""
    return token_counter.name == STORED_TOKENIZER
