"""Global search, stage 2: shuffle, split and pack summaries into token-budgeted map batches.

Every batch's full map prompt (template + question + content) is counted with the token counter
and fits `map_budget - map_output_reserve`; a summary too large on its own is split into parts
labelled with its community id and part number, cut at sentence, then word, then character
boundaries.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.prompting import render
from graphrag_dag.dataflows.global_search.global_summaries import AugmentedSummary
from graphrag_dag.dataflows.common.settings import GLOBAL
from graphrag_dag.dataflows.common.resources import TokenCounter
from graphrag_dag.dataflows.common.textproc import sentence_spans

SEPARATOR = "\n\n"


@dataclass
class Part:
    community_id: str
    label: str  # "community 12" or "community 12, part 2/3"
    text: str

    @property
    def block(self) -> str:
        return f"[{self.label}]\n{self.text}"


@dataclass
class Batch:
    index: int
    parts: list[Part] = field(default_factory=list)
    tokens: int = 0  # tokens of the full map prompt

    @property
    def content(self) -> str:
        return SEPARATOR.join(p.block for p in self.parts)

    @property
    def community_ids(self) -> list[str]:
        return list(dict.fromkeys(p.community_id for p in self.parts))


def _pieces(text: str, fits) -> list[str]:
    """Cut `text` into the fewest consecutive pieces that each satisfy `fits`, preferring sentence
    boundaries, then word boundaries, then characters (for unspaced scripts)."""
    units = [text[s:e] for s, e in sentence_spans(text)] or [text]
    out: list[str] = []
    current = ""
    for unit in units:
        candidate = f"{current} {unit}".strip() if current else unit
        if fits(candidate):
            current = candidate
            continue
        if current:
            out.append(current)
            current = ""
        if fits(unit):
            current = unit
            continue
        words = unit.split(" ")
        for word in words:
            candidate = f"{current} {word}".strip() if current else word
            if fits(candidate):
                current = candidate
                continue
            if current:
                out.append(current)
                current = ""
            if fits(word):
                current = word
                continue
            for ch in word:
                if current and not fits(current + ch):
                    out.append(current)
                    current = ""
                current += ch
    if current:
        out.append(current)
    return out


def _split(summary: AugmentedSummary, fits_block) -> list[Part]:
    whole = Part(summary.community_id, f"community {summary.community_id}", summary.text)
    if fits_block(whole.block):
        return [whole]
    # Reserve room for the longest label this split could need ("part 999/999").
    probe_label = f"community {summary.community_id}, part 999/999"
    texts = _pieces(summary.text, lambda t: fits_block(f"[{probe_label}]\n{t}"))
    n = len(texts)
    parts = [Part(summary.community_id, f"community {summary.community_id}, part {i}/{n}", t)
             for i, t in enumerate(texts, 1)]
    # When the room left for content is smaller than a label plus one character, `_pieces` can
    # only emit pieces that do not fit: refuse rather than send prompts over the budget.
    if not all(fits_block(p.block) for p in parts):
        raise BadInput(f"the map budget minus its output reserve is too small to hold even a small part of "
                       f"community {summary.community_id}; raise the map budget")
    return parts


def summary_batches(augmented_summaries: list[AugmentedSummary], query: str, token_counter: TokenCounter,
                    map_template: str, seed: int = GLOBAL.seed, map_budget: int = GLOBAL.map_budget,
                    map_output_reserve: int = GLOBAL.map_output_reserve) -> list[Batch]:
    limit = map_budget - map_output_reserve
    known: dict[str, int] = {}

    def count(text: str) -> int:  # each block is counted once
        if text not in known:
            known[text] = token_counter.count(text)
        return known[text]

    def prompt_tokens(content: str) -> int:
        return token_counter.count(render(map_template, query=query, content=content))

    if prompt_tokens("") >= limit:
        raise BadInput(f"the map budget ({map_budget} tokens minus {map_output_reserve} reserved) cannot even hold "
                       f"the prompt template and question")
    order = sorted(augmented_summaries, key=lambda s: s.community_id)
    random.Random(seed).shuffle(order)
    wholes = [Part(s.community_id, f"community {s.community_id}", s.text).block for s in order]
    known.update(zip(wholes, token_counter.count_many(wholes), strict=True))
    base = prompt_tokens("")

    def fits(block: str) -> bool:  # the estimate decides far from the limit, an exact count near it
        return base + count(block) <= limit - EXACT_MARGIN or prompt_tokens(block) <= limit

    parts = [p for s in order for p in _split(s, fits)]
    sep_tokens = count(SEPARATOR)
    batches: list[Batch] = []
    current = Batch(0)
    for part in parts:
        part_tokens = count(part.block)
        # Token counts are additive across the separator but for rare merges, so the running sum
        # decides; `_verified` then counts each whole prompt exactly and repairs any overshoot.
        if current.parts and current.tokens + sep_tokens + part_tokens <= limit:
            current.parts.append(part)
            current.tokens += sep_tokens + part_tokens
            continue
        if current.parts:
            batches.append(current)
        current = Batch(len(batches), [part], base + part_tokens)
    if current.parts:
        batches.append(current)
    exact = token_counter.count_many([render(map_template, query=query, content=b.content) for b in batches])
    return _verified(batches, prompt_tokens, limit, exact)


EXACT_MARGIN = 32  # tokens: how close to the budget a running estimate is trusted


def _verified(batches: list[Batch], prompt_tokens, limit: int, exact: list[int] | None = None) -> list[Batch]:
    """Exact counts for every batch's whole prompt (running figures may be estimates); a batch that
    a rare tokenizer merge pushed over the limit gives its last parts to a batch of their own.
    `exact`, the first counts of all prompts, comes from one batched call: at 20k entities the
    prompts are megabytes of text, and the batched encoder runs on two threads."""
    out: list[Batch] = []
    for i, batch in enumerate(batches):
        carry: list[Part] = []
        batch.tokens = exact[i] if exact is not None else prompt_tokens(batch.content)
        while batch.tokens > limit and len(batch.parts) > 1:
            carry.insert(0, batch.parts.pop())
            batch.tokens = prompt_tokens(batch.content)
        out.append(batch)
        if carry:
            out.extend(_verified([Batch(0, carry)], prompt_tokens, limit))
    for i, batch in enumerate(out):
        batch.index = i
    return out
