"""Pure formulas and text helpers (no database): RRF, Jaccard, rank_by, word-boundary keys, ILIKE
escaping, tokens/keywords (CJK, stop words), capitalised phrases and sentence spans."""

from __future__ import annotations

import math

import pytest

from graphrag_dag.dataflows.common.fusion import jaccard, rank_by, reciprocal_rank_fusion
from graphrag_dag.dataflows.common.textproc import (
    STOP_WORDS,
    capitalised_phrases,
    escape_like,
    is_cjk,
    keywords,
    name_key,
    query_keys,
    covered_terms,
    sentence_spans,
    stem,
    term_hits,
    tokens,
)

# ------------------------------------------------------------------------------------- RRF


def test_rrf_uses_one_based_ranks_and_k():
    scores = reciprocal_rank_fusion([["a", "b", "c"], ["x", "y", "a"]], k=60)
    assert math.isclose(scores["a"], 1 / 61 + 1 / 63)
    assert math.isclose(scores["b"], 1 / 62)
    assert math.isclose(scores["c"], 1 / 63)
    assert math.isclose(scores["x"], 1 / 61)
    assert math.isclose(scores["y"], 1 / 62)


def test_rrf_k_changes_the_scores():
    scores = reciprocal_rank_fusion([["a", "b"]], k=0)
    assert scores == {"a": 1.0, "b": 0.5}
    scores10 = reciprocal_rank_fusion([["a", "b"]], k=10)
    assert math.isclose(scores10["a"], 1 / 11) and math.isclose(scores10["b"], 1 / 12)


def test_rrf_default_k_is_60():
    assert math.isclose(reciprocal_rank_fusion([["only"]])["only"], 1 / 61)


def test_rrf_absent_item_earns_nothing_from_a_list():
    scores = reciprocal_rank_fusion([["a", "b"], ["b"], []], k=60)
    assert math.isclose(scores["a"], 1 / 61)  # absent from lists 2 and 3: nothing added
    assert math.isclose(scores["b"], 1 / 62 + 1 / 61)
    assert "z" not in scores


def test_rrf_duplicates_in_one_list_count_once_and_do_not_use_up_ranks():
    scores = reciprocal_rank_fusion([["a", "a", "b", "a"]], k=60)
    assert math.isclose(scores["a"], 1 / 61)
    assert math.isclose(scores["b"], 1 / 62)  # the duplicate did not push b to rank 3


def test_rrf_accepts_generators_and_rejects_negative_k():
    scores = reciprocal_rank_fusion((lst for lst in (["a"], ["a"])), k=1)
    assert math.isclose(scores["a"], 1.0)
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], k=-1)


def test_rrf_an_item_in_more_lists_beats_a_single_first_place():
    scores = reciprocal_rank_fusion([["solo", "both"], ["both"]], k=60)
    assert scores["both"] > scores["solo"]


# --------------------------------------------------------------------------------- Jaccard


@pytest.mark.parametrize(
    "a,b,inter,expected",
    [
        (2, 5, 1, 1 / 6),  # |A∪B| = 2 + 5 - 1
        (3, 3, 3, 1.0),
        (4, 6, 0, 0.0),
        (0, 0, 0, 0.0),  # empty union: 0, not a ZeroDivisionError
        (1, 10, 1, 0.1),
    ],
)
def test_jaccard_from_set_sizes(a, b, inter, expected):
    assert math.isclose(jaccard(a, b, inter), expected)


# --------------------------------------------------------------------------------- rank_by


def test_rank_by_sorts_descending_and_drops_zeros_and_negatives():
    assert rank_by({"a": 0.5, "b": 0.0, "c": 2.0, "d": -1.0}) == ["c", "a"]


def test_rank_by_keep_zero_keeps_them_and_ties_break_by_id():
    assert rank_by({"b": 1.0, "a": 1.0, "z": 0.0}, keep_zero=True) == ["a", "b", "z"]
    assert rank_by({}) == []


def test_rank_by_and_rrf_equal_their_formulas_on_random_ties_and_repeats():
    """The fast forms (two stable sorts; first places through dict.fromkeys) against the formulas
    written out: value descending then id, and 1 / (k + first 1-based rank) summed list by list,
    in the same order of addition, so the floats are equal, not just close."""
    import random

    rng = random.Random(5)
    for _ in range(400):
        ids = [f"e{rng.randrange(60)}" for _ in range(rng.randrange(0, 80))]
        values = {i: rng.choice([0.0, -1.0, 0.5, 1.0, 1.5, rng.random()]) for i in ids}
        for keep in (False, True):
            want = sorted((i for i, v in values.items() if keep or v > 0), key=lambda i: (-values[i], str(i)))
            assert rank_by(values, keep_zero=keep) == want
        lists = [[f"e{rng.randrange(30)}" for _ in range(rng.randrange(0, 40))] for _ in range(rng.randrange(1, 5))]
        k = rng.choice([0, 1, 60])
        want_scores: dict[str, float] = {}
        for ranked in lists:
            firsts: list[str] = []
            for item in ranked:
                if item not in firsts:
                    firsts.append(item)
            for n, item in enumerate(firsts):
                want_scores[item] = want_scores.get(item, 0.0) + 1.0 / (k + n + 1)
        got = reciprocal_rank_fusion(lists, k=k)
        assert got == want_scores and list(got) == list(want_scores)


# ------------------------------------------------------------------------ word-boundary keys


def test_query_keys_never_contain_a_name_inside_a_longer_word():
    keys = query_keys("Where is Alice?")
    assert "al" not in keys
    assert "alice" in keys
    assert "where is alice" in keys


def test_query_keys_contain_a_short_name_standing_alone():
    keys = query_keys("Where is Al today?")
    assert "al" in keys
    assert "al today" in keys


def test_query_keys_are_casefolded_word_ngrams_up_to_six_words():
    keys = query_keys("one two three four five six seven")
    assert "one two three four five six" in keys
    assert "one two three four five six seven" not in keys
    assert all(k == k.casefold() for k in keys)


def test_query_keys_include_cjk_substrings():
    keys = query_keys("青岚茶社是谁成立的？")
    assert "青岚茶社" in keys
    assert "茶社" in keys


def test_query_keys_match_a_name_followed_by_a_possessive():
    # "Mara Quill's" contains the name "Mara Quill" at a word boundary.
    keys = query_keys("What was Mara Quill's discovery?")
    assert name_key("Mara Quill") in keys
    assert name_key("Quill") in keys
    # an apostrophe inside a name is kept (the name key of "Keeper's Logbook" has it)
    assert name_key("Keeper's Logbook Digitisation") in query_keys("Who ran the Keeper's Logbook Digitisation?")


def test_name_key_normalises_case_and_punctuation():
    assert name_key("Dr. Quill") == "dr quill"
    assert name_key("  ALICE   Tern ") == "alice tern"
    assert name_key("Saltmarrow Fishers' Cooperative") == "saltmarrow fishers cooperative"


# ------------------------------------------------------------------------------ ILIKE escape


@pytest.mark.parametrize(
    "raw,escaped",
    [
        ("100%", "100\\%"),
        ("a_b", "a\\_b"),
        ("back\\slash", "back\\\\slash"),
        ("\\%_", "\\\\\\%\\_"),  # the backslash is escaped first, so its escape is not re-escaped
        ("plain words", "plain words"),
        ("O'Brien \"quoted\"", "O'Brien \"quoted\""),  # quotes are parameters' business, left alone
    ],
)
def test_escape_like(raw, escaped):
    assert escape_like(raw) == escaped


# -------------------------------------------------------------------------- tokens / keywords


def test_tokens_keep_a_cjk_run_as_one_token_and_casefold_latin():
    assert tokens("Who founded 青岚茶社? ALICE") == ["who", "founded", "青岚茶社", "alice"]
    assert tokens("O'Brien's boat") == ["o'brien's", "boat"]
    assert tokens("a_b %%% ---") == ["a", "b"]


def test_is_cjk():
    assert is_cjk("林晓雨")
    assert is_cjk("mixed 茶")
    assert not is_cjk("Alice Tern")


def test_keywords_drop_stop_words_single_letters_and_numbers():
    kws = keywords("What is the role of the Stormwatch Project in Saltmarrow in 2018?")
    assert kws == ["role", "stormwatch", "project", "saltmarrow"]
    assert not set(kws) & STOP_WORDS


def test_keywords_split_cjk_runs_on_stop_words():
    assert keywords("青岚茶社的林晓雨是谁") == ["青岚茶社", "林晓雨"]
    kws = keywords("林晓雨和陈大山")
    assert "林晓雨" in kws and "陈大山" in kws and "和" not in "".join(kws)


def test_keywords_split_long_cjk_pieces_into_bigrams():
    kws = keywords("青溪县农业技术推广站")  # 10 characters, no stop word: bigrams
    assert "青溪" in kws and "推广" in kws
    assert all(len(k) == 2 for k in kws)


def test_keywords_limit_and_dedup():
    assert keywords("storm storm surge surge") == ["storm", "surge"]
    assert len(keywords(" ".join(f"word{i}x" for i in range(30)), limit=5)) == 5


# ----------------------------------------------------------------------- capitalised phrases


def test_capitalised_phrases_find_names_and_drop_question_words():
    phrases = capitalised_phrases("What did Dr. Mara Quill discover about the Bank of England in Corran Sound?")
    assert phrases == ["Dr. Mara Quill", "Bank of England", "Corran Sound"]


def test_capitalised_phrases_short_names_and_lowercase_queries():
    assert capitalised_phrases("Where is Al today?") == ["Al"]
    assert capitalised_phrases("who is alice tern") == []


# ---------------------------------------------------------------------------- sentence spans


def test_sentence_spans_english():
    text = "Quill found a trap. It explains the surge!  Did it? Yes.\nNew line here"
    spans = sentence_spans(text)
    assert [text[s:e] for s, e in spans] == [
        "Quill found a trap.", "It explains the surge!", "Did it?", "Yes.", "New line here",
    ]
    for s, e in spans:
        assert text[s:e] == text[s:e].strip()


def test_sentence_spans_chinese():
    text = "林晓雨成立了茶社。陈大山教炒茶！真的吗？是的"
    assert [text[s:e] for s, e in sentence_spans(text)] == ["林晓雨成立了茶社。", "陈大山教炒茶！", "真的吗？", "是的"]


def test_sentence_spans_keep_closing_quotes_and_skip_blank_text():
    text = 'He said "keep the lamp lit." Then he left.'
    assert [text[s:e] for s, e in sentence_spans(text)] == ['He said "keep the lamp lit."', "Then he left."]
    assert sentence_spans("   \n\n  ") == []


def test_a_title_before_a_name_does_not_end_a_sentence():
    text = "It is suspected that Mr. Fred helps. Then Dr. Quill left. He met Mr.\nNext. (Mrs. Cratchit) came."
    assert [text[s:e] for s, e in sentence_spans(text)] == [
        "It is suspected that Mr. Fred helps.", "Then Dr. Quill left.", "He met Mr.", "Next.", "(Mrs. Cratchit) came."]



def _reference_sentence_spans(text: str) -> list[tuple[int, int]]:
    """sentence_spans by its definition: a break after each mark (look-behind), or at a newline
    run; a space before a capital after a title ("Mr. Fred") is no break; spans trimmed."""
    import re

    from graphrag_dag.dataflows.common.textproc import _TITLE_BEFORE_RE

    spans, pos = [], 0

    def add(start: int, end: int) -> None:
        piece = text[start:end]
        if piece.strip():
            spans.append((start + len(piece) - len(piece.lstrip()), start + len(piece.rstrip())))

    for m in re.finditer(r"(?<=[.!?。！？])[\"'”’)\]]*\s*|\n+", text):
        start, end = m.span()
        if end <= pos:
            continue
        gap = m.group()
        blank = not gap.strip()
        if blank and "\n" not in gap and text[end:end + 1].isupper() and _TITLE_BEFORE_RE.search(
                text, max(0, start - 8), start):
            continue
        add(pos, start if blank and "\n" in gap else end)
        pos = end
    add(pos, len(text))
    return spans


def test_sentence_spans_equal_their_definition_on_random_texts():
    """The splitter scans for marks and newlines and works out each gap from there: on random texts
    of marks, closing quotes, every kind of whitespace, titles and capitals, it finds exactly the
    breaks the look-behind definition does."""
    import random

    pieces = [*"aZ .!?。！？\"'”’)]( \n\t\r\x0b\u3000\u2028", "Mr. ", "Dr. ", "St.", " Fred", "\n\n", "... ", "?!", "’ ",
              ") ", ".\" ", "word", "。林"]
    rng = random.Random(11)
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 24)))
        assert sentence_spans(text) == _reference_sentence_spans(text), repr(text)

def test_covered_terms_match_by_light_stems_and_cjk_by_substring():
    assert stem("funded") == stem("funding") == stem("funder") == "fund"
    assert stem("sees") == "sees" and stem("was") == "was"  # a cut must leave four letters
    text = "The Institute is funded by the Meridian Coastal Trust; 林晓雨成立了茶社。"
    assert covered_terms(text, ["funding", "Coastal Trust", "茶社", "storm", "dr"]) == {"funding", "Coastal Trust",
                                                                                         "茶社"}


def test_covered_terms_skips_words_only_where_no_term_can_be():
    """The substring pre-test is exact: on random texts of words, stems and capitals, covered_terms
    equals stemming every word of the text and comparing (the rule before the pre-test)."""
    import random
    import re

    def by_every_word(text: str, terms: list[str]) -> set[str]:
        low = text.casefold()
        stems = {stem(w) for w in re.findall(r"\w+", low)}
        out = set()
        for term in terms:
            words = re.findall(r"\w+", term.casefold())
            if not words:
                continue
            if (len(words) == 1 and not words[0].isascii()) or len(words[0]) < 3:
                if term.casefold() in low:
                    out.add(term)
            elif {stem(w) for w in words} <= stems:
                out.add(term)
        return out

    rng = random.Random(16)
    vocab = ["fund", "funded", "Funding", "funders", "trust", "Trusts", "coastal", "STORM", "storms", "storming",
             "dr", "Quill", "quills", "茶社", "林晓雨", "Straße", "STRASSE", "was", "sees", "it's", "trusting"]
    for _ in range(3000):
        text = " ".join(rng.choice(vocab) + rng.choice(["", "", ".", ",", "-x", "ing"]) for _ in range(rng.randint(0, 12)))
        terms = [" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(1, 5))]
        assert covered_terms(text, terms) == by_every_word(text, terms), (text, terms)


def test_a_text_ruled_out_for_terms_has_no_sentence_that_covers_one():
    """TermCoverage.possible may say yes wrongly, never no: on random texts of words, stems,
    capitals, punctuation and whitespace runs, every sentence (spaces collapsed, as an answer
    quotes it) that covers a term lies in a text that `possible` lets through."""
    import random

    from graphrag_dag.dataflows.common.textproc import TermCoverage

    rng = random.Random(17)
    vocab = ["fund", "Funding", "trust", "coastal", "STORM", "dr", "Dr.", "Quill", "茶社", "Straße", "STRASSE",
             "al", "Al Gore", "it's", "Mr.", "e.g."]
    gaps = [" ", "  ", "\n", "\n\n", ". ", "! ", "? ", "。", "\t", "\u00a0", ".", ""]
    let_through = 0
    for _ in range(3000):
        text = "".join(rng.choice(vocab) + rng.choice(gaps) for _ in range(rng.randint(0, 14)))
        terms = [" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 2))) for _ in range(rng.randint(0, 4))]
        coverage = TermCoverage(terms)
        for s, e in sentence_spans(text):
            sentence = " ".join(text[s:e].split())
            assert coverage.covered(sentence) == covered_terms(sentence, terms)
            if coverage.covered(sentence):
                assert coverage.possible(text), (text, terms, sentence)
                let_through += 1
    assert let_through > 500  # the property was exercised


def test_the_extractive_answer_splits_only_texts_that_can_score_and_answers_as_if_it_split_all():
    """The offline answer skips splitting texts that mention no term; its answer equals picking
    from every sentence of every text, on random contexts (fallbacks to the first two included).
    The reference builds its candidates from every sentence and hands them to the same pick."""
    import random
    from types import SimpleNamespace

    from graphrag_dag.dataflows.common.line_tokens import claim_description
    from graphrag_dag.dataflows.common.textproc import whole_sentence as _whole_sentence
    from graphrag_dag.dataflows.local.local_answer import _extractive, _picked

    def every_sentence(terms, selection, evidence, context, max_sentences=5,
                       header="Offline extractive answer (no LLM configured):"):
        candidates = []
        for text, ref, weight, bonus, limit in (
                [(claim_description(i.statement) if i.kind == "claim" else i.text, i.id, 1.0,
                  0.5 if i.kind == "claim" else 0.0, None)
                 for i in evidence if i.id in context.evidence_ids]
                + [(c.summary, f"community {c.id}", 0.8, 0.0, 2) for c in selection.communities
                   if c.id in context.community_ids]):
            for s, e in sentence_spans(text)[:limit]:
                sentence = " ".join(text[s:e].split())
                got = covered_terms(sentence, terms)
                score = len(got) * weight + bonus if _whole_sentence(sentence) else 0.0
                candidates.append((got, score, len(candidates), sentence, ref))
        return _picked(candidates, max_sentences, header)  # the pick is shared: the candidates are what changed

    rng = random.Random(18)
    words = ["storm", "Storms", "trust", "funded", "harbour", "Quill", "the", "a", "was", "Dr.", "known", "茶社"]

    def text() -> str:
        return " ".join(rng.choice(words) + rng.choice(["", "", ".", ". ", "\n"]) for _ in range(rng.randint(0, 30)))

    skipped_all = 0
    for _ in range(400):
        evidence = [SimpleNamespace(id=f"e{k}", label=f"e{k}", kind=rng.choice(["chunk", "chunk", "claim"]),
                                    text=text(), statement=text()) for k in range(rng.randint(0, 8))]
        communities = [SimpleNamespace(id=f"c{k}", summary=text()) for k in range(rng.randint(0, 3))]
        context = SimpleNamespace(evidence_ids=[e.id for e in evidence if rng.random() < 0.8],
                                  community_ids=[c.id for c in communities if rng.random() < 0.8])
        selection = SimpleNamespace(communities=communities)
        terms = rng.sample(["storm", "trust", "quill", "harbour", "茶社", "nothing"], rng.randint(0, 3))
        got = _extractive(terms, selection, evidence, context)
        assert got == every_sentence(terms, selection, evidence, context), terms
        skipped_all += "No relevant" in got
    assert 0 < skipped_all < 400


def test_term_hits_counts_distinct_terms_case_insensitively():
    assert term_hits("Corran Sound funnels the SURGE", ["corran", "surge", "trap", ""]) == 2


def test_an_answer_sentence_is_whole_and_no_heading_file_name_or_fragment():
    from graphrag_dag.dataflows.common.textproc import whole_sentence as _whole_sentence

    good = ["Chemotherapy is the standard of care for treating AML.", "Mara Quill and Oren Pike form the core.",
            "Who funded it?", "HPV is the main cause (in most cases).", "青兰茶社的春茶由北路货运运往盐港。"]
    bad = ["Ep-104_transcript.txt", "episode notes.md.", "2 Testing for FL Test results General health tests.",
           "Lymphoma basics Lymphatic system Lymphocytes Follicular lymphoma How does FL develop?",
           "org/patientguidelines and on the NCCN Patient Guides for Cancer app.", "Key points", "Yes.",
           "Treatment options Surgery Radiation therapy Chemotherapy Targeted therapy Immunotherapy Clinical trials."]
    assert [s for s in good if not _whole_sentence(s)] == []
    assert [s for s in bad if _whole_sentence(s)] == []


def test_the_extractive_pick_says_no_sentence_twice():
    from graphrag_dag.dataflows.local.local_answer import _picked

    said = "The Meridian Coastal Trust funds the Stormwatch Project."
    candidates = [({"trust"}, 2.0, 0, said, "cl-13"), ({"trust"}, 1.5, 1, said.upper(), "d2-ev1"),
                  ({"fund"}, 1.0, 2, "Ida Marsh says the Meridian Coastal Trust funds the Stormwatch Project.", "c1"),
                  ({"quill"}, 1.0, 3, "Mara Quill studies surges.", "d1-ev4")]
    lines = _picked(candidates, 5, "Answer:").splitlines()[1:]
    assert lines == ["- The Meridian Coastal Trust funds the Stormwatch Project. [cl-13]",
                     "- Mara Quill studies surges. [d1-ev4]"]  # the repeat and the one holding it are not said again
