"""Evidence lines of chunks and claims, and their token counts made once, when they are written.

Local search labels each evidence line (`[id] (chunk; doc=document) text`, `[id] (claim;
doc=document chunk=chunk) statement Source: "quote"`) and counts every line against its context
budget. Each line depends on its chunk or claim alone, and on a Microsoft GraphRAG import its label
is most of it: 128-character digests, about 160 tokens for a chunk, beside a text of a few dozen.
Counting them at query time would be a large share of a local search's Python, mostly for lines
not seen before. So the store keeps each line's count (`chunks.line_tokens`, `claims.line_tokens`,
written by dataflows/index/prepare.py), and a query adds them up.

A stored count is only right for its line and its tokenizer. It is used only when the counter is
cl100k, and the functions here are the one place the lines are made, both when the counts are
written and when the context is built. Changing a line needs a migration that sets `line_tokens`
to NULL; rows with NULL are counted at query time, as rows written before the columns are.
"""

from __future__ import annotations

import re

from graphrag_dag.dataflows.common.resources import TokenCounter

STORED_TOKENIZER = "cl100k_base"  # the encoding whose counts chunks.line_tokens and claims.line_tokens hold


def chunk_line(chunk_id: str, document_id: str | None, text: str) -> str:
    """A chunk's evidence line. Its own id is its label already: naming it again as `chunk=` cost
    a 128-hex id's ~77 tokens a line on a GraphRAG import (its text unit ids are SHA-512 digests),
    a third of the budget that evidence could have had."""
    return f"[{chunk_id}] (chunk; doc={document_id}) " + " ".join(text.split())


def claim_statement(subject_name: str, claim_type: str, status: str | None, description: str) -> str:
    """What a claim says, as its evidence item states it."""
    return f"{subject_name} — {claim_type}{f' ({status})' if status else ''}: {description}"


_STATEMENT = re.compile(r"(?s)^.*? — [^:\n]*: (.*)$")


def claim_description(statement: str) -> str:
    """A claim's statement less the subject and type that `claim_statement` put before it: what
    its source says, without an attribution the extraction added."""
    match = _STATEMENT.match(statement)
    return match[1] if match else statement


def claim_line(claim_id: str, document_id: str | None, chunk_id: str | None, statement: str,
               quote: str | None) -> str:
    """A claim's evidence line: it names the chunk it stands in, and quotes its source when the
    source was placed in its document (`quote` is None when it was not) and the statement does not
    already say it word for word (an offline claim's statement is the sentence it quotes)."""
    source = f"doc={document_id}" + ("" if chunk_id == claim_id else f" chunk={chunk_id}")
    if quote is not None and " ".join(quote.split()) in " ".join(statement.split()):
        quote = None
    body = statement + (f' Source: "{quote}"' if quote is not None else "")
    return f"[{claim_id}] (claim; {source}) " + " ".join(body.split())


def stored_tokens(token_counter: TokenCounter) -> bool:
    """Whether counts stored with chunks and claims apply to this counter."""
    return token_counter.name == STORED_TOKENIZER
