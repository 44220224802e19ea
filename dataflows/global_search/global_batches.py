"""Global search, stage 2: shuffle, split and pack summaries into token-budgeted map batches.

Every batch's full map prompt (template + question + content) is counted exactly with the token
counter and fits `map_budget - map_output_reserve`; a summary too large on its own is split into parts
labelled with its community id and part number, cut at sentence, then word, then character
boundaries.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from graphrag_dag.dataflows.common.budget import SEPARATOR, Packed, PromptMeter
from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.global_search.global_summaries import AugmentedSummary
from graphrag_dag.dataflows.common.settings import GLOBAL
from graphrag_dag.dataflows.common.resources import TokenCounter
from graphrag_dag.dataflows.common.textproc import sentence_spans

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
    """Greedy packing in shuffled order: a batch closes when the next part would not fit. Counts
    are exact prompt counts, summed from per-block counts that the counter remembers between
    questions (dataflows/common/budget.py), so no prompt is encoded whole to be checked."""
    limit = map_budget - map_output_reserve
    meter = PromptMeter(token_counter, map_template, "content", query=query)
    if meter.empty() >= limit:
        raise BadInput(f"the map budget ({map_budget} tokens minus {map_output_reserve} reserved) cannot even hold "
                       f"the prompt template and question")
    order = sorted(augmented_summaries, key=lambda s: s.community_id)
    random.Random(seed).shuffle(order)
    meter.remember([Part(s.community_id, f"community {s.community_id}", s.text).block for s in order])

    def fits(block: str) -> bool:
        return meter.one(block).tokens <= limit

    batches: list[Batch] = []
    current, packed = Batch(0), Packed()
    for part in (p for s in order for p in _split(s, fits)):
        grown = meter.grown(packed, part.block)
        if current.parts and grown.tokens > limit:
            batches.append(current)
            current, grown = Batch(len(batches)), meter.one(part.block)
        current.parts.append(part)
        current.tokens, packed = grown.tokens, grown
    if current.parts:
        batches.append(current)
    return batches
