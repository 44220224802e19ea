"""Exact token counts of a prompt that holds a list of labelled blocks (not a DAG module).

Global search packs thousands of blocks into map prompts and hundreds of answers into the reduce
prompt, and every prompt must fit its budget as the model's tokenizer counts it. Encoding each
candidate prompt whole costs megabytes of tokenisation per question; a running sum of block counts
is cheap but only an estimate, because a block's last characters can merge with the separator.

A counter with `line_start_splits` (tiktoken's encodings) makes the sum exact: the blocks start
with a non-space character ("[community 12]", "[answer from batch 3 ...") and the separator ends
with a line break, so the tokens of a prompt are the tokens of each block *with what follows it*
(the separator, or the template's text after the blocks), plus the template's text before them.
Those counts do not depend on the question, so the counter remembers them from one question to
the next. With any other counter the meter counts whole prompts, which is exact and slower.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.prompting import render
from graphrag_dag.dataflows.common.resources import TokenCounter

SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Packed:
    """Blocks on their way into one prompt, with that prompt's exact token count."""

    blocks: tuple[str, ...] = ()
    tokens: int = 0


class PromptMeter:
    def __init__(self, counter: TokenCounter, template: str, slot: str, **values: str) -> None:
        halves = template.split("{" + slot + "}")
        if len(halves) != 2:
            raise BadInput(f"the prompt template must hold {{{slot}}} exactly once (it holds it {len(halves) - 1} times)")
        self.counter = counter
        self.template, self.slot, self.values = template, slot, values
        self.before, self.after = (render(h, **values) for h in halves)
        self.summed = bool(counter.line_start_splits)
        self._before_tokens = counter.count(self.before) if self.before.endswith("\n") else None

    def text(self, blocks: tuple[str, ...] | list[str]) -> str:
        return render(self.template, **{**self.values, self.slot: SEPARATOR.join(blocks)})

    def _share(self, block: str, first: bool, last: bool) -> int:
        """The tokens a block adds to a prompt: itself with what follows it (and, for the first
        block, the template's text before it)."""
        tail = self.after if last else SEPARATOR
        if not first:
            return self.counter.count(block + tail)
        if self._before_tokens is not None:
            return self._before_tokens + self.counter.count(block + tail)
        return self.counter.count(self.before + block + tail)

    def _summable(self, block: str) -> bool:
        return self.summed and bool(block) and not block[0].isspace()

    def remember(self, blocks: list[str]) -> None:
        """Counts every share these blocks can have in one call: a counter may spread a large call
        over threads, and remembers the counts for the packing that follows (and the next question)."""
        if self.summed:
            self.counter.count_many([b + tail for b in blocks for tail in (SEPARATOR, self.after)])

    def empty(self) -> int:
        return self.counter.count(self.text(()))

    def tokens(self, blocks: tuple[str, ...] | list[str]) -> int:
        if not blocks:
            return self.empty()
        if not all(self._summable(b) for b in blocks):
            return self.counter.count(self.text(blocks))
        n = len(blocks)
        return sum(self._share(b, i == 0, i == n - 1) for i, b in enumerate(blocks))

    def one(self, block: str) -> Packed:
        return Packed((block,), self.tokens((block,)))

    def grown(self, packed: Packed, block: str) -> Packed:
        """`packed` with `block` appended, counted from the last block's share and the new one's.
        Only the line starts before these two (and before the first block, if it is the last)
        must split for this to be exact."""
        if not packed.blocks:
            return self.one(block)
        blocks = (*packed.blocks, block)
        if not (self._summable(block) and self._summable(packed.blocks[-1])):
            return Packed(blocks, self.counter.count(self.text(blocks)))
        last, first = packed.blocks[-1], len(packed.blocks) == 1
        tokens = packed.tokens - self._share(last, first, True) + self._share(last, first, False)
        return Packed(blocks, tokens + self._share(block, False, True))
