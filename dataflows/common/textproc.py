"""Pure text helpers shared by the match, recall and batching stages (not a DAG module).

Latin-script text is matched on word tokens so that "Al" never matches inside "Alice"; CJK text
has no spaces, so CJK names are matched as substrings of CJK runs instead.
"""

from __future__ import annotations

import functools
import re

import Stemmer

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN_RE = re.compile(rf"[{_CJK}]+|[^\W{_CJK}_]+(?:['’][^\W{_CJK}_]+)*")
_CJK_RE = re.compile(rf"[{_CJK}]")
_POSSESSIVE_RE = re.compile(r"['’]s$")
MAX_NAME_WORDS = 6
MAX_CJK_NAME_CHARS = 12

STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me more
    most my myself no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves tell give show explain describe please main does did
    s t don whose whats us let know many much""".split()
)
CJK_STOP = frozenset("的 了 是 和 与 在 有 吗 呢 什么 哪些 怎么 如何 为什么 请 关于 一个 这个 那个 及 或 也 都 对 被 把 之".split())


def is_cjk(text: str) -> bool:
    return bool(_CJK_RE.search(text))


def tokens(text: str) -> list[str]:
    """Casefolded word tokens; a CJK run is one token."""
    return _TOKEN_RE.findall(text.casefold())


def name_key(name: str) -> str:
    """The form names, aliases and query n-grams are compared in: casefolded word tokens."""
    return " ".join(tokens(name))


def query_keys(query: str) -> list[str]:
    """Every key a name occurring in the query could have.

    Latin: contiguous runs of up to MAX_NAME_WORDS tokens (so matches fall on word boundaries).
    CJK: every substring of each CJK run up to MAX_CJK_NAME_CHARS characters.
    """
    toks = tokens(query)
    keys: dict[str, None] = {}
    for i in range(len(toks)):
        for j in range(i + 1, min(len(toks), i + MAX_NAME_WORDS) + 1):
            keys[" ".join(toks[i:j])] = None
            last = _POSSESSIVE_RE.sub("", toks[j - 1])  # "Mara Quill's" also contains "Mara Quill"
            if last != toks[j - 1] and last:
                keys[" ".join([*toks[i:j - 1], last])] = None
    for tok in toks:
        if is_cjk(tok):
            for i in range(len(tok)):
                for j in range(i + 1, min(len(tok), i + MAX_CJK_NAME_CHARS) + 1):
                    keys[tok[i:j]] = None
    return list(keys)


def keywords(query: str, limit: int = 12) -> list[str]:
    """Stop-word filtered keywords; CJK runs contribute their non-stop-word pieces and bigrams."""
    out: dict[str, None] = {}
    for tok in tokens(query):
        if is_cjk(tok):
            for piece in _split_cjk_stop(tok):
                if len(piece) <= 4:
                    out[piece] = None
                else:
                    for i in range(len(piece) - 1):
                        out[piece[i : i + 2]] = None
        elif tok not in STOP_WORDS and len(tok) > 1 and not tok.isdigit():
            out[tok] = None
    return list(out)[:limit]


def _split_cjk_stop(run: str) -> list[str]:
    pieces = [run]
    for stop in sorted(CJK_STOP, key=len, reverse=True):
        pieces = [p for chunk in pieces for p in chunk.split(stop)]
    return [p for p in pieces if len(p) >= 2]


_CAP_PHRASE_RE = re.compile(r"\b(?:[A-Z][\w'’.-]*)(?:\s+(?:of|the|de|van|von)?\s*[A-Z][\w'’.-]*)*")


def capitalised_phrases(query: str) -> list[str]:
    """Rule-based entity guesses: capitalised phrases, minus a leading question word."""
    found: dict[str, None] = {}
    for m in _CAP_PHRASE_RE.finditer(query):
        phrase = m.group(0).strip(" .'’-")
        words = phrase.split()
        while words and words[0].casefold() in STOP_WORDS:
            words = words[1:]
        if words:
            found[" ".join(words)] = None
    return list(found)


def escape_like(term: str) -> str:
    """Escape LIKE/ILIKE metacharacters so a user's `%`, `_` or `\\` match literally."""
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# A sentence ends after . ! ? 。！？ and any closing quotes, brackets and whitespace, or at a run of
# newlines. The match starts at the mark or newline, a character class the regex engine can skip
# to, so the text is scanned in C; the gap the splitter reasons about starts after a mark. Written
# as a look-behind for the mark, the engine would try both branches at every character, for the
# same sentences.
_SENTENCE_END_RE = re.compile(r"[.!?。！？\n](?:(?<=\n)\n*|[\"'”’)\]]*\s*)")


# Titles written with a full stop before a name ("Mr. Scrooge", "Dr. Quill"): not a sentence end.
_TITLE_BEFORE_RE = re.compile(r"(?:^|(?<=[\s(\"'“‘]))(?:Mr|Mrs|Ms|Dr|Prof|St|Mt|Jr|Sr|Messrs)\.$")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) spans of sentences, trimmed of surrounding whitespace. An answer splits a
    hundred-odd passages a question, so the cheap tests go first and trimming is done by str."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in _SENTENCE_END_RE.finditer(text):
        start, end = m.span()
        if text[start] != "\n":
            start += 1  # the gap after the mark
        if end <= pos:
            continue
        gap = text[start:end]
        blank = not gap.strip()
        if (blank and "\n" not in gap and text[end:end + 1].isupper()
                and _TITLE_BEFORE_RE.search(text, max(0, start - 8), start)):
            continue
        _append_stripped(text, pos, start if blank and "\n" in gap else end, spans)
        pos = end
    _append_stripped(text, pos, len(text), spans)
    return spans


def _append_stripped(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> None:
    """`trim_span`'s span, appended when not empty (str.strip trims what str.isspace calls space)."""
    piece = text[start:end]
    kept = piece.lstrip()
    if kept:
        spans.append((start + len(piece) - len(kept), start + len(piece.rstrip())))


def trim_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """[start, end) without surrounding whitespace; None when nothing is left."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if end > start else None


_ENGLISH = Stemmer.Stemmer("english")


@functools.lru_cache(maxsize=16384)
def passage_terms(text: str) -> frozenset[str]:
    """The terms a passage is matched and compared by: its words less stop words and one-letter
    words, each reduced by the Snowball English stemmer ("arises", "arising" → "aris"), and each CJK
    run as its character bigrams (a run is unspaced, so a word is found inside it by its pairs of
    characters, as CJK search engines index). Remembered: the same passages come back question
    after question."""
    terms: set[str] = set()
    latin: list[str] = []
    for token in _TOKEN_RE.findall(text.casefold()):
        if _CJK_RE.match(token):
            terms.update(token[i:i + 2] for i in range(max(1, len(token) - 1)) if token[i:i + 2] not in CJK_STOP)
        elif len(token) > 1 and token not in STOP_WORDS:
            latin.append(token)
    terms.update(_ENGLISH.stemWords(latin))
    return frozenset(terms)


_SUFFIXES = ("ings", "ing", "ers", "er", "ed", "es", "s")
_WORDS_RE = re.compile(r"\w+")


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light English stem: "funded", "funding" and "funder" all give "fund". Only a suffix that
    leaves four letters or more is cut, so short words stay as they are. Remembered: an answer
    stems the same few hundred words sentence after sentence."""
    word = word.casefold()
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


@functools.lru_cache(maxsize=256)
def _term_forms(terms: tuple[str, ...]) -> tuple[tuple[str, str | None, frozenset[str]], ...]:
    """Each term as (term, substring to look for, or stems that must all occur)."""
    out = []
    for term in terms:
        words = _WORDS_RE.findall(term.casefold())
        if not words:
            continue
        if (len(words) == 1 and not words[0].isascii()) or len(words[0]) < 3:
            out.append((term, term.casefold(), frozenset()))
        else:
            out.append((term, None, frozenset(stem(w) for w in words)))
    return tuple(out)


def covered_terms(text: str, terms: list[str]) -> set[str]:
    """The terms `text` mentions: a term of words by the stems of all its words, a term in an
    unspaced script (one "word" of CJK characters) by substring."""
    return TermCoverage(terms).covered(text)


class TermCoverage:
    """`covered_terms` for one list of terms, asked of many texts (an answer asks it of every
    sentence of its context), with the terms' forms worked out once.

    A word's stem is a prefix of the casefolded word, so a term whose stems are not all
    substrings of the text cannot be covered: most texts are ruled out by a few substring tests,
    and a text is cut into words and stemmed only when a term may be there."""

    __slots__ = ("forms",)

    def __init__(self, terms: list[str]) -> None:
        self.forms = _term_forms(tuple(terms))

    def _possible(self, low: str) -> list[tuple[str, str | None, frozenset[str]]]:
        out = []
        for form in self.forms:
            substring = form[1]
            if substring is not None:
                if substring in low:
                    out.append(form)
                continue
            for needed in form[2]:
                if needed not in low:
                    break
            else:
                out.append(form)
        return out

    def possible(self, text: str) -> bool:
        """False when `text` surely covers none of the terms, nor does any part of it that keeps
        its words in order, whitespace runs aside (a sentence of it, spaces collapsed): each
        test is a substring test, and casefolding maps one character at a time."""
        return bool(self._possible(" ".join(text.split()).casefold()))

    def covered(self, text: str) -> set[str]:
        low = text.casefold()
        maybe = self._possible(low)
        if not maybe:
            return set()
        stems = {stem(w) for w in set(_WORDS_RE.findall(low))}
        return {term for term, substring, needed in maybe if substring is not None or needed <= stems}


def term_hits(text: str, terms: list[str]) -> int:
    """How many of the (non-empty) terms occur in the text, ignoring case."""
    return folded_hits(text, folded_terms(terms))


def folded_terms(terms: list[str]) -> list[str]:
    """The non-empty terms casefolded, once for many texts (`folded_hits`)."""
    return [t.casefold() for t in terms if t]


def folded_hits(text: str, folded: list[str]) -> int:
    """term_hits with the terms already casefolded."""
    return sum(map(text.casefold().__contains__, folded))


# A sentence that can stand in an answer: it ends as a sentence ends and does not begin in the
# middle of one (a lower-case start is the tail of a sentence split apart); it is no file name, no
# numbered heading ("2 Testing for ..."), and not a run of headings, which a page's table of contents
# or its running titles make: mostly capitalised words. And it is more than a couple of words.
_SENTENCE_END = re.compile(r"[.!?。！？][\"'”’)\]」』]*$")
_FILE_NAME = re.compile(r"(?i)\S+\.(?:txt|md|markdown|pdf|html?|docx?|json|jsonl|csv|rtf|vtt|srt)$")
_NUMBERED_HEADING = re.compile(r"^\d{1,3}\.? +[A-Z][a-z]")
HEADING_RUN_WORDS, HEADING_RUN_CAPITALS = 9, 0.5


def whole_sentence(sentence: str) -> bool:
    """Whether `sentence` can stand in an answer (see above)."""
    if not _SENTENCE_END.search(sentence) or _FILE_NAME.search(sentence.rstrip(".")):
        return False
    if sentence[:1].islower() or _NUMBERED_HEADING.match(sentence):
        return False
    words = sentence.split()
    cased = [w for w in words if w[:1].isalpha() and w[:1].lower() != w[:1].upper()]
    if len(words) >= HEADING_RUN_WORDS and cased and sum(w[:1].isupper() for w in cased) > HEADING_RUN_CAPITALS * len(cased):
        return False
    return len(words) >= 3 or (len(sentence) >= 8 and not sentence.isascii())


def folded(sentence: str) -> str:
    """A sentence as compared for repeats: case, punctuation and spacing folded."""
    return " ".join("".join(ch for ch in sentence.casefold() if ch.isalnum() or ch.isspace()).split())
