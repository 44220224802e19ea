"""Rule-based query decomposition and expansion: what `--decompose` does without an LLM (not a DAG module).

A question that compares or joins two named things is two look-ups, and a question that walks a
chain of relations ("the mother of the director of film X") starts with its innermost hop. The
rules only cut the question's own text; they never invent words, so every sub-question can be
checked against the question it came from.

* Alternatives: "X or Y", "X and Y", "both X and Y", "X vs Y" where X and Y are names
  (capitalised or numbered words, with small joining words inside), and the CJK connectors
  和 与 跟 及 或 还是 and Japanese と か または. The span is replaced by each alternative, so
  "Which came out first, X or Y?" gives "Which came out first, X?" and "... Y?". "and" splits
  only a comparison (a cue such as "same", "both", "first", "older", "than"), so "X and who
  funded it" or a title such as "Pride and Prejudice" in a plain question is left whole.
* Chains: "the R of [film|song|...] X" and "X's R" give the innermost hop as a sub-question,
  when the question goes on past it (a further relation, or a verb asking about it); 的 and の
  chains give their first link.

Expansions name concepts that words such as "history", "background" or "cause" imply (design
note 5.2): the table is the note's own examples and their plain synonyms, not fitted to any
benchmark.
"""

from __future__ import annotations

import re

from graphrag_dag.dataflows.common.textproc import STOP_WORDS, is_cjk

MAX_SUB_QUESTIONS = 4

# A word that can sit inside a name between capitalised words: "The Lord of the Rings", "Ian de Vries".
_JOINERS = frozenset("of the a an de du la le les von van der den di da del y et in on at to for with by and "
                     "upon from".split())
_COMPARISON_CUES = frozenset("same both first earlier later older younger longer shorter more less most least "
                             "between compare compared common differ different difference than which whose "
                             "who".split())
_WORD_RE = re.compile(r"\S+")
_CONNECTOR_RE = re.compile(r"\s+(or|and|vs\.?|versus)\s+", re.IGNORECASE)
_RELATION_KINDS = r"(?:film|movie|song|album|book|novel|band|company|series|show|game|play|poem|painting)"
_CHAIN_RE = re.compile(rf"\b(?:the\s+)?((?:[a-z][\w-]*\s+)?[a-z][\w-]*)\s+of\s+(?:the\s+)?(?:{_RELATION_KINDS}s?\s+)?"
                       r"(?=[A-Z0-9\"“'])")
_POSSESSIVE_RE = re.compile(r"(['’]s?)\s+((?:[a-z][\w]*-)*[a-z][\w]*(?:-in-law)?)\b")
_CJK_ALT_RE = re.compile(r"(还是|或者|或是|与|和|跟|及|或|または|それとも|と|か)")
_CJK_STOPS = re.compile(r"(为什么|是否|哪个|哪一|哪|谁|什么|是|的|在|会|有|都|吗|呢|？|\?|，|,|、|。|は|が|を|に|で|も|の|どちら|どれ)")


def _is_name_word(word: str) -> bool:
    core = word.strip("\"“”'‘’(),:;")
    return bool(core) and (core[0].isupper() or core[0].isdigit())


def _name_span_left(words: list[str], end: int) -> int:
    """The first index of the name that ends at words[end - 1] (end itself when there is none)."""
    i = end
    while i > 0:
        w = words[i - 1]
        if _is_name_word(w):
            i -= 1
        elif w.casefold() in _JOINERS and i - 2 >= 0 and _is_name_word(words[i - 2]) and i < end:
            i -= 1
        else:
            break
    while i < end and (words[i].casefold() in STOP_WORDS or not _is_name_word(words[i])):
        i += 1  # "Are X and Y": a capitalised question word is not part of the name
    return i


def _name_span_right(words: list[str], start: int) -> int:
    """One past the last index of the name that starts at words[start]."""
    i = start
    while i < len(words):
        w = words[i]
        if _is_name_word(w) and not (i == start and w.casefold() in STOP_WORDS and i + 1 < len(words)
                                     and not _is_name_word(words[i + 1])):
            i += 1
            if w.endswith((",", "?", ";", ":")) and not w.endswith(":"):
                break
        elif (w.casefold() in _JOINERS and i + 1 < len(words) and _is_name_word(words[i + 1])
              and (i > start or w.casefold() in ("the", "a", "an"))):  # "... or the Meridian Trust"
            i += 1
        else:
            break
    return i


def _alternatives(query: str) -> list[str]:
    words = _WORD_RE.findall(query)
    cues = {w.strip("?,.!").casefold() for w in words}
    found = list(_CONNECTOR_RE.finditer(query))
    ordered = [m for m in found if m.group(1).casefold() != "and"] + [m for m in found if m.group(1).casefold() == "and"]
    for m in ordered:  # "or" first: "Pride and Prejudice or Emma" compares two titles
        conn = m.group(1).casefold()
        if conn == "and" and not (cues & _COMPARISON_CUES):
            continue
        left_words = _WORD_RE.findall(query[:m.start()])
        right_words = _WORD_RE.findall(query[m.end():])
        lo = _name_span_left(left_words, len(left_words))
        hi = _name_span_right(right_words, 0)
        if lo == len(left_words) or hi == 0:
            continue
        comma = next((k for k in range(lo - 1, -1, -1) if left_words[k].endswith(",")), None)
        if comma is not None and all(_is_name_word(w) or w.casefold() in _JOINERS for w in left_words[comma + 1:lo]):
            lo = comma + 1  # "Sir Thomas Wheate, 1st Baronet or ...": the name runs back to the comma
        left = " ".join(left_words[lo:])
        right = " ".join(right_words[:hi]).rstrip("?,.;!")
        head_words = left_words[:lo]
        if head_words and head_words[-1].casefold() == "both":
            head_words = head_words[:-1]
        head = " ".join(head_words)
        tail = " ".join(right_words[hi:])
        if right_words[:hi] and right_words[hi - 1][-1:] in "?,.;!" and not tail:
            tail = right_words[hi - 1][-1]
        subs = []
        for alt in (left.rstrip(","), right):
            text = " ".join(p for p in (head, alt) if p)
            text = f"{text}{'' if tail[:1] in '?,.;!' else ' '}{tail}".strip()
            subs.append(re.sub(r"\s*\bboth\b", "", text, flags=re.IGNORECASE).strip())  # one thing is not "both"
        return subs
    return []


def _cjk_alternatives(query: str) -> list[str]:
    for m in _CJK_ALT_RE.finditer(query):
        before, after = query[:m.start()], query[m.end():]
        if not before or not after or not (is_cjk(before[-1]) or before[-1].isalnum()):
            continue
        left_cut = max((s.end() for s in _CJK_STOPS.finditer(before)), default=0)
        right_stop = _CJK_STOPS.search(after)
        right_end = right_stop.start() if right_stop else len(after)
        left, right = before[left_cut:], after[:right_end]
        if len(left) < 1 or len(right) < 1 or left == before and not right_stop:
            continue
        head, tail = before[:left_cut], after[right_end:]
        return [f"{head}{left}{tail}", f"{head}{right}{tail}"]
    return []


def _chain_hops(query: str) -> list[str]:
    """The innermost hop of a relation chain, when the question asks something beyond it."""
    subs: list[str] = []
    possessive = _POSSESSIVE_RE.search(query)
    chain = [m for m in _CHAIN_RE.finditer(query) if not (possessive and possessive.start() > m.end())]
    if chain:  # a possessive later on is the hop ("the place of birth of X's husband")
        m = chain[-1]
        words = _WORD_RE.findall(query[m.end():])
        hi = _name_span_right(words, 0)
        name = " ".join(words[:hi]).rstrip("?,.;!")
        relation = [w for w in m.group(1).split() if w.casefold() not in STOP_WORDS]
        kind = re.search(rf"\b{_RELATION_KINDS}s?\s+$", m.group(0))
        # the question asks more than this hop: content words before it, or words after the name
        before = [w for w in re.findall(r"\b[a-z][\w-]*", query[:m.start()].casefold()) if w not in STOP_WORDS]
        if name and relation and (before or words[hi:]):
            subs.append(" ".join(["the", *relation, "of", *([kind.group(0).strip()] if kind else []), name]))
    for m in _POSSESSIVE_RE.finditer(query):
        words = _WORD_RE.findall(query[:m.start()])
        lo = _name_span_left(words, len(words))
        if lo < len(words) and m.group(2).casefold() not in STOP_WORDS:
            subs.append(f"{' '.join(words[lo:])}{m.group(1)} {m.group(2)}")
    cjk = [p for p in re.split(r"[的の]", query) if p]
    if len(cjk) >= 3 and is_cjk(query):
        sep = "的" if "的" in query else "の"
        subs.append(sep.join(cjk[:2]).split("，")[-1])
    return subs


def sub_questions(query: str) -> list[str]:
    """The question's sub-questions by rule, in order and without repeats; [] when it is one look-up."""
    q = query.strip()
    found = _cjk_alternatives(q) if is_cjk(q) else _alternatives(q)
    if not found:  # each alternative of a comparison is already one hop
        found = _chain_hops(q)
    out: dict[str, None] = {}
    for s in found:
        s = s.strip()
        if s and s.casefold() != q.casefold():
            out[s] = None
    return list(out)[:MAX_SUB_QUESTIONS]


# word → concepts it implies (design note 5.2: "its history" means timeline, events, milestones)
IMPLIED: dict[str, tuple[str, ...]] = {
    "history": ("timeline", "events", "milestones", "origins"),
    "evolution": ("timeline", "development", "stages"),
    "background": ("origins", "context", "early life"),
    "origin": ("founding", "beginnings", "history"),
    "cause": ("reason", "origin", "factors"),
    "why": ("reason", "cause"),
    "effect": ("consequence", "impact", "result"),
    "impact": ("consequence", "effect", "influence"),
    "influence": ("impact", "effect"),
    "relationship": ("connection", "cooperation", "link"),
    "cooperation": ("partnership", "collaboration", "agreement"),
    "历史": ("时间线", "事件", "关键节点", "演进"),
    "背景": ("起源", "背景信息"),
    "原因": ("起因", "因素"),
    "影响": ("后果", "结果"),
    "合作": ("伙伴", "协议"),
    "歴史": ("年表", "出来事", "沿革"),
    "影響": ("結果", "効果"),
}


def expansions(query: str, limit: int = 8) -> list[str]:
    """Concepts the question's words imply, in question order, without words it already has."""
    folded = query.casefold()
    have = set(re.findall(r"\w+", folded))
    out: dict[str, None] = {}
    for word, implied in IMPLIED.items():
        hit = word in folded if is_cjk(word) else word in have
        if hit:
            for concept in implied:
                if concept not in have and concept not in folded:
                    out[concept] = None
    return list(out)[:limit]
