"""The offline extractor's rules (not a DAG module): named-entity mentions found without a model.

Everything here is deterministic and ships in wheels (jieba's and janome's dictionaries), so a
corpus indexes the same way on any machine with no download.

Latin scripts, by capitalisation:
- a mention is a run of capitalised words (letters or digits after an upper-case first letter),
  which may be joined by the lower-case connectors of names ("Bank of England", "Ludwig van
  Beethoven"); leading articles and question words are dropped ("The Hague" → "Hague");
- a run ends at a word that ends a sentence ("Cooperative." ends it; an initial such as "J." or
  an honorific such as "Dr." does not);
- a capitalised word that starts a sentence is not part of a name when the corpus also writes it
  in lower case, nor, when it stands alone, unless the corpus also capitalises it inside a
  sentence ("Today the harbour..." and "Storms were rising" name nothing; "Ada Lovelace wrote"
  names Ada Lovelace);
- numbers, months and weekdays on their own are not names ("March", "October 2021");
- honorifics (Dr, Mrs, King, ...) are dropped from the name and make it a PERSON; a last word
  such as Company, University or Council makes an ORGANIZATION, River, Valley or Sound a GEO,
  War, Festival or Treaty an EVENT; anything else is an ENTITY;
- a trailing possessive ("Quill's") is not part of the name;
- a pronoun's contraction ("I'd", "We'll") is no name, nor a one-word name that the corpus writes
  in lower case at least as often as it capitalises it inside a sentence ("Basal" in a heading,
  "Types"), nor a speaker label (a name that opens a line and is followed by a colon).

Chinese, with jieba's part-of-speech tags: runs of adjacent person names (nr), places (ns),
organisations (nt) and other proper nouns (nz), typed by their first token, of two or more
characters, where only a one-character token joins its neighbour ("陈" + "大山" → 陈大山, but
中国 and 深圳 side by side stay two). A person name (or a run with a person token) longer than four
characters is a segmentation error, not a name, and so is a two-character "place" that begins with a verb of motion (上山,
下山: going up or down the mountain).

Japanese, with janome's morphological analysis: runs of proper nouns (固有名詞), typed by their
sub-category (人名 person, 地域 place, 組織 organisation), with a place suffix that follows them
(北浜 + 港 → 北浜港, 大阪 + 市).
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.textproc import STOP_WORDS

_KANA_RE = re.compile(r"[\u3040-\u30ff]")
_HAN_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# A Latin-script word: letters (not CJK), digits, apostrophes, dots and hyphens inside.
_WORD_RE = re.compile(rf"(?:(?![{_CJK_CHARS}])[^\W\d_])(?:(?![{_CJK_CHARS}])[\w'’.-])*|\d(?:(?![{_CJK_CHARS}])[\w.-])*")
_SENTENCE_START_RE = re.compile(r"(^|[.!?:;\n]\s*|[\"“(]\s*)$")
CONNECTORS = frozenset({"of", "the", "de", "del", "della", "da", "di", "do", "dos", "du", "la", "le", "van", "von",
                        "der", "den", "y", "al", "bin", "ibn"})
HONORIFICS = frozenset({"mr", "mrs", "ms", "miss", "dr", "prof", "professor", "sir", "dame", "lady", "lord", "king",
                        "queen", "prince", "princess", "captain", "capt", "general", "colonel",
                        "president", "senator", "judge", "father", "mother", "brother", "sister", "uncle", "aunt",
                        "emperor", "empress", "duke", "duchess", "count", "countess", "pope", "bishop", "rev"})
_TYPE_WORDS = {
    "ORGANIZATION": {"company", "corporation", "corp", "inc", "ltd", "llc", "university", "college", "school",
                     "institute", "council", "guild", "society", "association", "bank", "party", "ministry",
                     "agency", "committee", "club", "band", "group", "foundation", "league", "union", "army",
                     "navy", "church", "cooperative", "co-operative", "records", "studios", "museum"},
    "GEO": {"river", "lake", "mountain", "mount", "valley", "sound", "bay", "island", "islands", "city", "county",
            "province", "state", "street", "road", "harbour", "harbor", "sea", "ocean", "forest", "village",
            "town", "kingdom", "republic", "coast", "hills", "peninsula", "strait"},
    "EVENT": {"war", "battle", "festival", "treaty", "revolution", "championship", "olympics", "cup", "election",
              "flood", "storm", "fair", "expedition", "uprising", "siege", "conference"},
}
_LEADING_DROP = STOP_WORDS | {"according", "unlike", "like", "during", "since", "although", "whereas", "however"}
_CALENDAR = frozenset("""january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday""".split())
_MOTION = frozenset("上下进出回到去来")
_CHINESE_PROPER = frozenset({"nr", "nrfg", "nrt", "ns", "nt", "nz"})
_JIEBA_TYPES = {"nr": "PERSON", "nrfg": "PERSON", "nrt": "PERSON", "ns": "GEO", "nt": "ORGANIZATION",
                "nz": "ENTITY"}
_JANOME_TYPES = {"人名": "PERSON", "地域": "GEO", "組織": "ORGANIZATION"}


@dataclass(frozen=True)
class Mention:
    text: str  # the surface form, as it stands in the document
    type: str
    start: int  # document offsets, [start, end)
    end: int


def _type_of(words: list[str], honorific: bool) -> str:
    """By the last word, or by the first for "X of Y" names ("Bank of England")."""
    if honorific:
        return "PERSON"
    heads = [words[-1]] + ([words[0]] if any(w.casefold() in CONNECTORS for w in words) else [])
    for head in (h.casefold().strip(".") for h in heads):
        for kind, vocab in _TYPE_WORDS.items():
            if head in vocab:
                return kind
    if words[0].casefold() in ("mount", "lake", "port", "cape"):
        return "GEO"
    return "ENTITY"


def _is_capitalised(word: str) -> bool:
    return word[:1].isupper() or (word[:1].isdigit() and len(word) > 1)


@dataclass(frozen=True)
class WordCases:
    """How the corpus writes its words: in lower case somewhere, or capitalised inside a sentence;
    `common`: words (case-folded) written in lower case at least as often as capitalised inside a
    sentence."""

    lower: frozenset[str]
    capitalised: frozenset[str]
    common: frozenset[str] = frozenset()


def at_sentence_start(text: str, position: int) -> bool:
    return position == 0 or bool(_SENTENCE_START_RE.search(text[max(0, position - 3):position]))


def _ends_sentence(word: str) -> bool:
    bare = word.rstrip(".")
    return word.endswith(".") and len(bare) > 1 and bare.casefold() not in HONORIFICS and bare.casefold() != "st"


def latin_mentions(text: str, offset: int, cases: WordCases) -> list[Mention]:
    """Capitalised runs of `text` (see the module's rules); offsets are `offset` + position."""
    words = list(_WORD_RE.finditer(text))
    out: list[Mention] = []
    i = 0
    while i < len(words):
        if not words[i].group()[:1].isupper():
            i += 1
            continue
        j = i + 1
        while j < len(words) and not _ends_sentence(words[j - 1].group()):
            w = words[j].group()
            gap = text[words[j - 1].end():words[j].start()]
            if gap.strip(" ") not in ("", "-") or "\n" in gap:
                break
            if _is_capitalised(w):
                j += 1
            elif w.casefold() in CONNECTORS and j + 1 < len(words) and words[j + 1].group()[:1].isupper() \
                    and text[words[j].end():words[j + 1].start()].strip(" ") == "":
                j += 2
            else:
                break
        run = words[i:j]
        i = j
        mention = _clean_run(text, run, cases)
        if mention is not None:
            (s, e), kind = mention
            if not _speaker_label(text, s, e):
                out.append(Mention(text[s:e], kind, offset + s, offset + e))
    return out


def _speaker_label(text: str, start: int, end: int) -> bool:
    """A name that opens its line and is followed by a colon labels who speaks ("ANNA:", "Dr. Lee:")."""
    line_start = text.rfind("\n", 0, start) + 1
    return text[end:end + 2].lstrip(" ")[:1] == ":" and not text[line_start:start].strip(" \t-*>#\"'")


def _clean_run(text: str, run: list[re.Match], cases: WordCases) -> tuple | None:
    honorific = False
    if at_sentence_start(text, run[0].start()):
        first = run[0].group().rstrip(".")
        ordinary = first.casefold() in cases.lower or (len(run) == 1 and first not in cases.capitalised)
        if ordinary:
            honorific = first.casefold() in HONORIFICS
            run = run[1:]
    while run and (run[0].group().casefold().strip(".") in _LEADING_DROP | HONORIFICS or run[0].group()[0].isdigit()):
        honorific = honorific or run[0].group().casefold().strip(".") in HONORIFICS
        run = run[1:]
    while run and run[-1].group().casefold() in CONNECTORS:
        run = run[:-1]
    if not run:
        return None
    names = [m.group().rstrip(".") for m in run]
    if all(n.casefold() in _CALENDAR or n.isdigit() for n in names):
        return None
    if len(run) == 1 and (len(names[0]) < 2 or names[0].casefold() in STOP_WORDS):
        return None
    if len(run) == 1 and _contraction(names[0]):
        return None
    if len(run) == 1 and names[0].casefold() in cases.common:
        return None
    start, end = run[0].start(), run[-1].end()
    while end > start and text[end - 1] in ".-'’":
        end -= 1
    for suffix in ("'s", "’s"):
        if text[start:end].endswith(suffix):
            end -= len(suffix)
    if end - start < 2:
        return None
    return (start, end), _type_of(names, honorific)


def _extra_missing(language: str, extra: str, package: str) -> BadInput:
    """The segmenters are extras (janome alone is about 200 MB, which a corpus with no Japanese
    never needs): a corpus that needs one that is not installed is refused before anything is
    written, in one line that names the extra."""
    return BadInput(f"this corpus has {language} text, whose names need {package}: "
                    f"pip install 'graphrag-dag[{extra}]' (or [cjk] for Chinese and Japanese)")


@functools.lru_cache(maxsize=1)
def _jieba():
    try:
        import jieba
        import jieba.posseg
    except ImportError:
        raise _extra_missing("Chinese", "zh", "jieba") from None

    jieba.setLogLevel(logging.WARNING)  # it logs building its prefix dictionary at every start
    return jieba.posseg


@functools.lru_cache(maxsize=1)
def _janome():
    try:
        from janome.tokenizer import Tokenizer
    except ImportError:
        raise _extra_missing("Japanese", "ja", "janome") from None

    return Tokenizer()


def _chinese_name(word: str, flag: str) -> bool:
    if len(word) < 2 or not _HAN_RE.search(word):
        return False
    if flag.startswith("nr") and len(word) > 4:  # also a run with a person token in it
        return False
    return not (flag == "ns" and len(word) == 2 and word[0] in _MOTION)


def _placed(text: str, tokens: Iterable[tuple[str, str]]) -> Iterator[tuple[int, int, str]]:
    """(start, end, tag) of each (surface, tag) token of a segmenter, found in order in `text`."""
    pos = 0
    for surface, tag in tokens:
        at = text.find(surface, pos)
        if at >= 0:
            pos = at + len(surface)
            yield at, pos, tag


def _runs(text: str, offset: int, placed: Iterable[tuple[int, int, str, bool, bool]],
          name: Callable[[str, list[str]], str | None]) -> list[Mention]:
    """Mentions from runs of adjacent tokens: `placed` gives (start, end, tag, joins a run,
    starts a new one); `name(text, tags)` gives a run's type, or None when it is not a name."""
    out: list[Mention] = []
    run: list[tuple[int, int, str]] = []

    def close() -> None:
        if run:
            s, e = run[0][0], run[-1][1]
            kind = name(text[s:e], [tag for _, _, tag in run])
            if kind:
                out.append(Mention(text[s:e], kind, offset + s, offset + e))
            run.clear()

    for start, end, tag, joins, fresh in placed:
        if not joins:
            close()
            continue
        if run and (run[-1][1] != start or fresh):
            close()
        run.append((start, end, tag))
    close()
    return out


def _chinese_kind(word: str, flags: list[str]) -> str | None:
    person = any(f.startswith("nr") for f in flags)
    return _JIEBA_TYPES.get(flags[0], "ENTITY") if _chinese_name(word, "nr" if person else flags[0]) else None


def chinese_mentions(text: str, offset: int) -> list[Mention]:
    placed = list(_placed(text, ((p.word, p.flag) for p in _jieba().cut(text))))
    marked = []
    for n, (s, e, flag) in enumerate(placed):
        proper = flag in _CHINESE_PROPER and bool(_HAN_RE.search(text[s:e]))
        prev = placed[n - 1] if n else None
        # Only a one-character token joins a neighbour (陈 + 大山); two names side by side (中国 深圳) stay two.
        fresh = bool(prev and prev[1] - prev[0] > 1 and e - s > 1)
        marked.append((s, e, flag, proper, fresh))
    return _runs(text, offset, marked, _chinese_kind)


def _japanese_kind(word: str, kinds: list[str]) -> str | None:
    typed = [k for k in kinds if k != "ENTITY"]
    return (typed[0] if typed else "ENTITY") if len(word) >= 2 else None


def japanese_mentions(text: str, offset: int) -> list[Mention]:
    marked = []
    in_run = False
    for s, e, pos in _placed(text, ((t.surface, t.part_of_speech) for t in _janome().tokenize(text))):
        parts = pos.split(",")
        proper = parts[0] == "名詞" and len(parts) > 1 and parts[1] == "固有名詞"
        suffix = in_run and parts[:3] == ["名詞", "接尾", "地域"]  # 北浜 + 港
        kind = "GEO" if suffix else _JANOME_TYPES.get(parts[2] if len(parts) > 2 else "", "ENTITY")
        marked.append((s, e, kind, proper or suffix, False))
        in_run = proper or suffix
    return _runs(text, offset, marked, _japanese_kind)


def mentions_in(text: str, offset: int, cases: WordCases) -> list[Mention]:
    """All mentions in a passage: the CJK analyser its script calls for, plus the Latin rules for
    its Latin words; where two overlap, the longer one is kept."""
    found = latin_mentions(text, offset, cases)
    if _KANA_RE.search(text):
        found += japanese_mentions(text, offset)
    elif _HAN_RE.search(text):
        found += chinese_mentions(text, offset)
    return longest_first(found)


def _contraction(word: str) -> bool:
    """A pronoun or other function word with a contracted verb ("I'd", "We'll", "That's")."""
    head = word.replace("’", "'").split("'")[0].casefold()
    return "'" in word.replace("’", "'") and (head in STOP_WORDS or head in ("i", "we", "you", "they", "he", "she"))


def longest_first(found: list[Mention]) -> list[Mention]:
    """Mentions in text order; where two overlap, the longer one (then the first) is kept."""
    found = sorted(found, key=lambda m: (m.start, -(m.end - m.start)))
    kept: list[Mention] = []
    for m in found:
        if kept and m.start < kept[-1].end:
            continue
        kept.append(m)
    return kept


def located(name: str, text: str) -> list[tuple[int, int]]:
    """Every place `name` stands in `text`, ignoring case (an LLM's names are placed this way)."""
    spans: list[tuple[int, int]] = []
    low, needle = text.casefold(), name.casefold()
    if len(needle) != len(name) or len(low) != len(text) or not needle:  # no safe offsets after folding
        return spans
    at = low.find(needle)
    while at >= 0:
        spans.append((at, at + len(needle)))
        at = low.find(needle, at + len(needle))
    return spans
