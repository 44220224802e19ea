"""Concepts: the terms a corpus is about, lower case included, found by corpus statistics (not a
DAG module).

Names are what capitalisation finds (extract.py); most documents people have are about concepts
("basal cell carcinoma", "radiation therapy", 区块链) that no capital letter marks. No well-kept
English part-of-speech tagger ships its model inside a wheel on PyPI (spaCy's models are
published outside it, NLTK's and flair's are downloaded at run time), so concepts are mined from
the corpus itself, with statistics that are documented in the terminology-extraction literature
and that need no language model:

- **Candidates.** A document is cut into runs of content words: words that are not stop words,
  numbers or contractions, with nothing but spaces or a hyphen between them (any punctuation or
  line break ends a run). Chinese and Japanese runs are the analysers' adjacent nouns (jieba's
  n, nz, vn, nt, nr, ns; janome's 名詞 but numbers and suffixes). A candidate is any run of one
  to four of them; English phrases must not end in a word ending -ly, -ed or -ing (adverbs and
  verb forms, not the head of a noun phrase).
- **Nominal use.** Every word of an English candidate is one the corpus also writes in a noun
  phrase: in a run of content words that follows a determiner or possessive ("the", "a", "their",
  ...). Nouns and adjectives pass; verbs and adverbs ("radiation damages", "right away") seldom do.
- **Frequency.** A candidate occurs at least `MIN_COUNT` times in the corpus: a term worth an
  entity recurs.
- **Collocation strength** (multi-word candidates). The phrase accounts for at least
  `DEPENDENCE` of the occurrences of its rarest word: "basal cell carcinoma" holds most uses of
  "basal", while "cancer treatment" holds few of "treatment", which stands in many phrases.
- **Nesting.** A phrase that almost always stands inside one longer kept phrase ("cell carcinoma"
  inside "basal cell carcinoma") is that phrase's part, not a concept of its own.
- **Specificity** (single words). A word is a concept when the corpus has enough documents to
  tell (`MIN_DOCUMENTS`), it stands in at most `MAX_SPREAD` of them, and it is bursty: where it
  occurs it recurs (at least `BURST` times per document on average). "melanoma" passes;
  "treatment", in every guide, does not.

An acronym defined in the text ("basal cell carcinoma (BCC)": the letters are the initials of the
words before the parenthesis) makes its expansion and itself concepts however rare; the indexer
makes the acronym an alias of its expansion (`acronyms`).

Mentions of the kept concepts are then found in each passage, longest first.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Iterator

from graphrag_dag.dataflows.common.textproc import STOP_WORDS

MIN_COUNT = 3
DEPENDENCE = 0.25
NESTED = 0.75
MIN_DOCUMENTS = 5
MAX_SPREAD = 0.25
BURST = 2.0
MAX_WORDS = 4

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN_RE = re.compile(rf"(?:(?![{_CJK}])[^\W\d_])(?:(?![{_CJK}])[\w'’-])*|\d[\w.,]*|[{_CJK}]+")
_GAP_OK_RE = re.compile(r"[ \t]*-?[ \t]*")
_NOT_HEAD = ("ly", "ed", "ing")
_HAN_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_KANA_RE = re.compile(r"[\u3040-\u30ff]")
_CHINESE_NOUNS = frozenset({"n", "nz", "ng", "nt", "nr", "ns", "nrt", "nrfg"})
_CHINESE_INSIDE = _CHINESE_NOUNS | {"vn", "v"}  # 量子 + 计算: a verb goes on a noun's run, never starts one
DETERMINERS = frozenset("""the a an this these those that its their his her your our my each every any some no
    another such""".split())
# Beyond the stop words, words that end a noun phrase rather than stand in one: modal and naming
# verbs, and adverbs of frequency and degree.
PHRASE_BREAKS = frozenset("""may might must can could would should shall will also often usually always
    sometimes never called known named including include includes included using used uses use like
    well even still yet already ever quite rather""".split())
_ACRONYM_RE = re.compile(r"\(([A-Z][A-Za-z0-9]{1,7}?)s?\)")


@dataclass(frozen=True)
class Concepts:
    """The corpus's concepts, as tuples of lower-case words (Latin) or of tokens (CJK)."""

    terms: frozenset[tuple[str, ...]]
    longest: int = MAX_WORDS

    def __len__(self) -> int:
        return len(self.terms)


def _latin_runs(text: str, nominal: set[str] | None = None) -> Iterator[list[tuple[str, int, int]]]:
    """Runs of content words, each word with its place in `text`. `nominal` collects the words of
    runs that follow a determiner."""
    run: list[tuple[str, int, int]] = []
    last_end = 0
    after_determiner = prev_determiner = False
    for m in _TOKEN_RE.finditer(text):
        word = m.group()
        gap = text[last_end:m.start()]
        bare = word.strip("-").casefold()  # "in-" of "mother- in- law" is the stop word "in"
        content = (word[0].isalpha() and not _HAN_RE.match(word) and not _KANA_RE.match(word)
                   and "'" not in word and "’" not in word and len(bare) >= 2 and bare not in STOP_WORDS
                   and bare not in PHRASE_BREAKS and not word.endswith("-"))
        if run and (not content or not _GAP_OK_RE.fullmatch(gap)):
            yield run
            run = []
        if content:
            if not run:
                after_determiner = prev_determiner and _GAP_OK_RE.fullmatch(gap) is not None
            run.append((word.casefold(), m.start(), m.end()))
            if after_determiner and nominal is not None:
                nominal.add(word.casefold())
        prev_determiner = word.casefold() in DETERMINERS
        last_end = m.end()
    if run:
        yield run


def _cjk_runs(text: str) -> Iterator[list[tuple[str, int, int]]]:
    """Runs of adjacent nouns, by jieba (Chinese) or janome (Japanese)."""
    from graphrag_dag.dataflows.index.extract import _janome, _jieba, _placed

    if _KANA_RE.search(text):
        tokens = ((t.surface, t.part_of_speech) for t in _janome().tokenize(text))
        starts = lambda pos: pos.startswith("名詞") and not pos.startswith(("名詞,数", "名詞,接尾", "名詞,非自立", "名詞,代名詞"))  # noqa: E731
        goes_on = starts
    elif _HAN_RE.search(text):
        tokens = ((p.word, p.flag) for p in _jieba().cut(text))
        starts = lambda flag: flag in _CHINESE_NOUNS  # noqa: E731
        goes_on = lambda flag: flag in _CHINESE_INSIDE  # noqa: E731
    else:
        return
    run: list[tuple[str, int, int]] = []
    for start, end, tag in _placed(text, tokens):
        surface = text[start:end]
        cjk = bool(_HAN_RE.search(surface) or _KANA_RE.search(surface))
        if run and (not cjk or not goes_on(tag) or run[-1][2] != start):
            yield run
            run = []
        if cjk and (starts(tag) or (run and goes_on(tag))):
            run.append((surface, start, end))
    if run:
        yield run


def runs(text: str, nominal: set[str] | None = None) -> Iterator[list[tuple[str, int, int]]]:
    yield from _latin_runs(text, nominal)
    if _HAN_RE.search(text) or _KANA_RE.search(text):
        yield from _cjk_runs(text)


def _is_cjk(term: tuple[str, ...]) -> bool:
    return bool(_HAN_RE.search(term[0]) or _KANA_RE.search(term[0]))


def _candidates(run: list[str]) -> Iterator[tuple[str, ...]]:
    for n in range(1, min(MAX_WORDS, len(run)) + 1):
        for i in range(len(run) - n + 1):
            term = tuple(run[i:i + n])
            if not _is_cjk(term) and term[-1].endswith(_NOT_HEAD):
                continue
            yield term


def mine(texts: Iterable[str]) -> Concepts:
    """The concepts of a corpus (the module docstring's rules)."""
    count: Counter[tuple[str, ...]] = Counter()
    spread: Counter[tuple[str, ...]] = Counter()
    nominal: set[str] = set()
    defined: set[tuple[str, ...]] = set()
    documents = 0
    for text in texts:
        documents += 1
        for short, words in acronyms(text).items():
            defined.update([words, (short.casefold(),)])  # both are found as they stand
        seen: set[tuple[str, ...]] = set()
        for run in runs(text, nominal):
            for term in _candidates([w for w, _, _ in run]):
                count[term] += 1
                seen.add(term)
        spread.update(seen)
    words = {t[0]: n for t, n in count.items() if len(t) == 1}
    kept: set[tuple[str, ...]] = set()
    for term, n in count.items():
        if n < MIN_COUNT or not (_is_cjk(term) or all(w in nominal for w in term)):
            continue
        if len(term) > 1:
            rarest = min(words.get(w, n) for w in term)
            if n >= DEPENDENCE * rarest:
                kept.add(term)
        elif _is_cjk(term):
            if len(term[0]) >= 2 and documents >= MIN_DOCUMENTS and spread[term] <= MAX_SPREAD * documents:
                kept.add(term)
        elif (documents >= MIN_DOCUMENTS and len(term[0]) >= 4 and spread[term] <= MAX_SPREAD * documents
              and n >= BURST * spread[term]):
            kept.add(term)
    nested = {part for longer in kept for part in _parts(longer)
              if part in kept and count[longer] >= NESTED * count[part]}
    return Concepts(frozenset((kept - nested) | defined))


def _parts(term: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """The shorter runs inside a term."""
    for n in range(1, len(term)):
        for i in range(len(term) - n + 1):
            yield term[i:i + n]


def concept_spans(text: str, concepts: Concepts) -> list[tuple[int, int]]:
    """Where the concepts stand in `text`, longest first, left to right, never overlapping."""
    out: list[tuple[int, int]] = []
    if not concepts.terms:
        return out
    for run in runs(text):
        i = 0
        while i < len(run):
            for n in range(min(concepts.longest, len(run) - i), 0, -1):
                if tuple(w for w, _, _ in run[i:i + n]) in concepts.terms:
                    out.append((run[i][1], run[i + n - 1][2]))
                    i += n
                    break
            else:
                i += 1
    return out


def acronyms(text: str) -> dict[str, tuple[str, ...]]:
    """Acronyms the text defines, each with its expansion: the words right before "(ACR)" whose
    initials (a hyphenated word giving one per part, stop words skipped) spell it."""
    out: dict[str, tuple[str, ...]] = {}
    for m in _ACRONYM_RE.finditer(text):
        letters = m.group(1).upper()
        if not any(ch.isalpha() for ch in letters) or len(letters) < 2:
            continue
        before = [w for run in _latin_runs(text[max(0, m.start() - 120):m.start()]) for w, _, _ in run][-(len(letters) + 1):]
        for k in range(1, len(before) + 1):
            words = before[-k:]
            initials = "".join(part[0] for w in words for part in w.split("-") if part).upper()
            if initials == letters:
                out[letters] = tuple(words)
                break
            if len(initials) > len(letters):
                break
    return out
