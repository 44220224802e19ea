"""Global search, stages 4-5: reduce the useful map answers within a budget, and the result.

Reduce drops usefulness 0 and failed batches, sorts by usefulness (stable), and adds answers one
by one within its budget, skipping one that does not fit so that a later, shorter one can enter.
No usable map answer means no reduce call at all. The status is then no_results when the model
read the batches and found nothing, and failed when every map call failed: those are different
news for a user, and only the first one is about the data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from graphrag_dag.dataflows.common.budget import SEPARATOR, Packed, PromptMeter
from graphrag_dag.dataflows.common.citations import usable_prose
from graphrag_dag.dataflows.common.prompting import Prompt, ask
from graphrag_dag.dataflows.common.resources import ChatModel, TokenCounter
from graphrag_dag.dataflows.common.settings import GLOBAL
from graphrag_dag.dataflows.common.switches import switch_is
from graphrag_dag.dataflows.common.textproc import folded, passage_terms, whole_sentence
from graphrag_dag.dataflows.global_search.global_batches import Batch
from graphrag_dag.dataflows.global_search.global_summaries import SummaryItem
from graphrag_dag.dataflows.global_search.mapping import MapAnswer


@dataclass
class ReduceInput:
    kept: list[MapAnswer]
    skipped: list[MapAnswer]  # useful but did not fit the reduce budget
    dropped: list[MapAnswer]  # usefulness 0 or failed
    prompt: str  # the reduce prompt as packed and counted (sent as the `reduce_prompt` node)
    tokens: int
    answers: str = ""  # the kept answers as they stand in the prompt


@dataclass
class GlobalAnswer:
    text: str
    method: str  # "llm", "extractive" or "none"
    warnings: list[str] = field(default_factory=list)
    fell_back: bool = False  # the reduce call failed or its reply was unusable: the map answers stand in
    covers_skipped: bool = False  # the answer draws on the answers past the reduce budget too (offline digest)


@dataclass
class GlobalResult:
    level: int | None
    summaries: int
    batches: int
    map_answers: list[MapAnswer]
    reduce: ReduceInput
    answer: GlobalAnswer
    selection: dict[str, Any] | None = None  # dynamic selection's account; None for static
    selection_warnings: list[str] = field(default_factory=list)

    @property
    def failed_batches(self) -> int:
        return sum(1 for m in self.map_answers if m.error)

    @property
    def status(self) -> str:
        if self.map_answers and self.failed_batches == len(self.map_answers):
            return "failed"
        if not self.reduce.kept:
            return "no_results"
        return "partial" if self.failed_batches or self.answer.fell_back else "completed"

    @property
    def error(self) -> str | None:
        if self.status != "failed":
            return None
        first = next(m.error for m in self.map_answers if m.error)
        return f"every map call failed ({len(self.map_answers)} batches); first error: {first}"

    def as_json(self) -> dict[str, Any]:
        warnings = [*self.selection_warnings, *self.answer.warnings]
        warnings += [f"map batch {m.batch} failed after {m.attempts} attempts: {m.error}"
                     for m in self.map_answers if m.error]
        warnings += [f"map batch {m.batch} cited {len(m.removed_citations)} id(s) that were not in its batch, "
                     f"removed: {', '.join(m.removed_citations[:5])}" for m in self.map_answers if m.removed_citations]
        if self.reduce.skipped and not self.answer.covers_skipped:
            warnings.append(f"{len(self.reduce.skipped)} map answers did not fit the reduce budget")
        return {"status": self.status, "answer": self.answer.text, "answer_method": self.answer.method,
                "warnings": warnings, "level": self.level,
                "map_answers": [m.as_json() for m in self.map_answers if not m.error],
                "failed_batches": self.failed_batches, "error": self.error,
                **({"selection": self.selection} if self.selection is not None else {})}


ANSWER_SEPARATOR = SEPARATOR


def _answer_block(m: MapAnswer) -> str:
    return f"[answer from batch {m.batch}, usefulness {m.usefulness}]\n{m.answer}"


def _joined(answers: list[MapAnswer]) -> str:
    return ANSWER_SEPARATOR.join(_answer_block(x) for x in answers)


def reduce_input(map_answers: list[MapAnswer], query: str, token_counter: TokenCounter, reduce_template: str,
                 reduce_budget: int = GLOBAL.reduce_budget,
                 reduce_output_reserve: int = GLOBAL.reduce_output_reserve) -> ReduceInput:
    """Counts are exact prompt counts summed from per-answer counts (dataflows/common/budget.py):
    once the budget is nearly full, every later answer is still tried, and encoding the whole
    prompt for each try would cost more than the reduce call's wait."""
    limit = reduce_budget - reduce_output_reserve
    useful = [m for m in map_answers if not m.error and m.usefulness > 0]
    dropped = [m for m in map_answers if m.error or m.usefulness <= 0]
    useful.sort(key=lambda m: -m.usefulness)  # stable: ties keep batch order
    meter = PromptMeter(token_counter, reduce_template, "answers", query=query)
    kept: list[MapAnswer] = []
    skipped: list[MapAnswer] = []
    packed = Packed()
    for m in useful:
        grown = meter.grown(packed, _answer_block(m))
        if grown.tokens <= limit:
            kept.append(m)
            packed = grown
        else:
            skipped.append(m)
    tokens = packed.tokens if kept else meter.empty()
    return ReduceInput(kept, skipped, dropped, meter.text(packed.blocks), tokens, _joined(kept))


def global_answer(reduce_input: ReduceInput, reduce_prompt: Prompt, chat_model: ChatModel,
                  global_summaries: list[SummaryItem],
                  reduce_output_reserve: int = GLOBAL.reduce_output_reserve) -> GlobalAnswer:
    """The LLM's synthesis of the kept map answers. Offline, an extractive digest of every useful
    map answer (those past the reduce budget too) by theme, named by the communities' titles
    (`_digest`). When the call fails or its reply is unusable (dataflows/common/citations.py), the
    map answers themselves, most useful first. The reply may cite what the kept answers' batches
    labelled."""
    if not reduce_input.kept:
        if reduce_input.dropped and all(m.error for m in reduce_input.dropped):
            return GlobalAnswer("No answer: the LLM failed on every map batch (see the error).", "none")
        return GlobalAnswer("No relevant information was found for this question.", "none")
    body = "\n".join(f"- {m.answer}" for m in reduce_input.kept)
    if chat_model.offline:
        titles = {s.community_id: s.title for s in global_summaries}
        return GlobalAnswer(_digest([*reduce_input.kept, *reduce_input.skipped], titles), "extractive",
                            covers_skipped=True)
    allowed = {i for m in reduce_input.kept for i in m.citable}
    asked = ask(chat_model, reduce_prompt, lambda text: usable_prose(text, allowed), max_tokens=reduce_output_reserve)
    if asked.value is None:
        return GlobalAnswer(body, "extractive", [asked.warning("reduce", "returned the map answers")], fell_back=True)
    return GlobalAnswer(asked.value.text, "llm", asked.value.warning("the answer"))


DIGEST_THEMES = (3, 8)  # at least (when the answers hold as many) and at most
DIGEST_WORDS = 400  # the digest's length, citations included
DIGEST_SENTENCE_WORDS = 60  # a longer "sentence" is a run of text, not a statement
THEME_OVERLAP = 0.25  # term overlap (Jaccard) at which a sentence joins an earlier theme
HEAD_WORDS = 25  # the digest's first line, which says what it is, at most
_CITED = re.compile(r"(.+?)\s\[(community [^\]]+)\](?=\s|$)")


def _cited_sentences(answer: str) -> list[tuple[str, str]]:
    """(sentence, citation) pairs of an offline map answer ("sentence [community 3, cl-2] ...")."""
    return [(m[1].strip(), m[2]) for m in _CITED.finditer(answer)]


@dataclass
class _Theme:
    communities: list[str]
    terms: set[str]
    said: list[tuple[str, str]] = field(default_factory=list)  # (sentence, citation) shown


def _digest(answers: list[MapAnswer], titles: dict[str, str]) -> str:
    """The offline answer as a short digest: themes, each named by the title of the community it
    starts from, with one or two whole, cited sentences and the number of communities behind it.

    Sentences come from the useful map answers, most useful first (each answer holds its batch's
    sentences nearest the question). A sentence joins its community's theme; a community not yet in
    one joins the theme whose sentences share the most of its sentence's terms (at least
    THEME_OVERLAP), or starts a theme.
    Fragments, headings, over-long runs and repeats never appear. Themes are shown in order of
    their first (most useful) sentence, up to DIGEST_THEMES[1] and DIGEST_WORDS words."""
    themes: list[_Theme] = []
    said: list[str] = []
    for m in sorted(answers, key=lambda a: -a.usefulness):  # stable: ties keep batch order
        for sentence, cite in _cited_sentences(m.answer):
            key = folded(sentence)
            if (not whole_sentence(sentence) or len(sentence.split()) > DIGEST_SENTENCE_WORDS
                    or any(key in earlier or earlier in key for earlier in said)):
                continue
            said.append(key)
            community = cite.removeprefix("community ").split(",")[0].strip()
            terms = set(passage_terms(sentence))
            best = next((t for t in themes if community in t.communities), None)  # a community is one theme
            if best is None:
                best = max(themes, key=lambda t: _overlap(terms, t.terms), default=None)
                if best is None or _overlap(terms, best.terms) < THEME_OVERLAP:
                    best = _Theme([], set())
                    themes.append(best)
            if community not in best.communities:
                best.communities.append(community)
            best.terms |= terms
            if len(best.said) < 2:
                best.said.append((sentence, cite))
    lines: list[str] = []
    words = HEAD_WORDS  # the first line's, so that the whole digest keeps to DIGEST_WORDS
    for n, theme in enumerate(themes[:DIGEST_THEMES[1]], 1):
        name = titles.get(theme.communities[0]) or ", ".join(sorted(theme.terms)[:3])
        support = f"{len(theme.communities)} communit{'y' if len(theme.communities) == 1 else 'ies'}"
        full, short = (f"{n}. {name} ({support}): " + " ".join(f"{s} [{c}]" for s, c in said)
                       for said in (theme.said, theme.said[:1]))
        line = next((x for x in (full, short) if words + len(x.split()) <= DIGEST_WORDS), None)
        if line is None:
            if len(lines) >= DIGEST_THEMES[0]:
                break
            line = short  # the first themes are shown even past the length
        lines.append(line)
        words += len(line.split())
    if not lines:
        return "No relevant information was found for this question."
    shown = {c for t in themes[:len(lines)] for c in t.communities}
    head = (f"Offline extractive digest: {len(lines)} themes from {len(shown)} communities, in the source's own "
            "sentences (no LLM configured; with one, the answer is a written synthesis).")
    return head + "\n" + "\n".join(lines)


def _overlap(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


@switch_is("global_selection", "static")
def global_result__static(global_summaries: list[SummaryItem], summary_batches: list[Batch],
                          map_answers: list[MapAnswer], reduce_input: ReduceInput, global_answer: GlobalAnswer,
                          level: int | None = GLOBAL.level) -> GlobalResult:
    resolved = level if level is not None else (max((s.level for s in global_summaries), default=None))
    return GlobalResult(resolved, len(global_summaries), len(summary_batches), map_answers, reduce_input, global_answer)


@switch_is("global_selection", "dynamic")
def global_result__dynamic(global_summaries: list[SummaryItem], summary_batches: list[Batch],
                           map_answers: list[MapAnswer], reduce_input: ReduceInput, global_answer: GlobalAnswer,
                           community_ratings: Any, level: int | None = GLOBAL.level) -> GlobalResult:
    """The static result plus the selection's account (ratings made, communities kept, calls)."""
    out = global_result__static(global_summaries, summary_batches, map_answers, reduce_input, global_answer, level)
    out.selection = community_ratings.as_json()
    out.selection_warnings = list(community_ratings.warnings)
    return out
