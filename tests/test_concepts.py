"""Offline extraction of concepts as well as names, on small documents written for the test: a
lower-case multi-word concept becomes an entity, an acronym is an alias of its expansion, "I'd", a
speaker label and a header made of the file's name do not become entities, Chinese and Japanese common-noun concepts become entities
that a question reaches; and the sources rank as the text list does when the question names
nothing with confidence."""

from __future__ import annotations

import pytest

from graphrag_dag.dataflows.index import concepts, extract
from graphrag_dag.dataflows.local.sources import TEXT_SIGNALS, ranked_units

GUIDES = {
    "skin.md": """# Skin cancer guide

Basal cell carcinoma (BCC) is the most common skin cancer. Basal cell carcinoma starts in the basal cells
of the lower epidermis. BCC rarely spreads. Surgery removes most basal cell carcinoma tumours, and
radiation therapy treats a basal cell carcinoma that surgery cannot reach. Your doctor checks the skin
after radiation therapy.
""",
    "lung.md": """# Lung cancer guide

Lung cancer starts in the cells that line the airways. Smoking causes most lung cancer. Radiation therapy
and chemotherapy treat lung cancer. A lung biopsy shows whether the cells are cancer cells. Your doctor
plans radiation therapy with a scan.
""",
    "blood.md": """# Blood cancer guide

Leukemia starts in the bone marrow. The bone marrow makes blood cells. Leukemia crowds out healthy blood
cells. A bone marrow biopsy finds leukemia. Chemotherapy treats leukemia in most people.
""",
    "bone.md": """# Bone cancer guide

Bone cancer starts in a bone. A bone scan finds bone cancer. Surgery and chemotherapy treat bone cancer.
The bone marrow is inside the bone.
""",
    "talk.md": """# Interview transcript

ANNA: I'd say the clinic is busy. We'll see more patients next year.
BEN: I'm sure radiation therapy helps. I'd ask the nurse.
ANNA: The nurse explains radiation therapy to every patient.
""",
    "acme_q4_2023_earnings_call.txt": """ACME Q4 2023 Earnings Call

HOST: Welcome, everyone. Revenue grew this quarter and margins held steady.
""",
}


@pytest.fixture(scope="module")
def guides(rag, tmp_path_factory):
    from graphrag_dag.drivers.ingest.indexer import index_corpus

    folder = tmp_path_factory.mktemp("guides")
    for name, text in GUIDES.items():
        (folder / name).write_text(text, encoding="utf-8")
    index_corpus(rag, [folder], "concepts", replace=True, offline=True)
    yield "concepts"
    rag.store.drop("concepts")


def _names(rag, namespace: str) -> dict[str, str]:
    return dict(rag.store.scoped(namespace).rows("SELECT name, id FROM entities WHERE namespace = %(ns)s",
                                                 {"ns": namespace}))


def test_a_lower_case_multi_word_concept_becomes_an_entity(rag, guides):
    names = {n.casefold() for n in _names(rag, guides)}
    assert {"basal cell carcinoma", "radiation therapy", "bone marrow", "lung cancer"} <= names, sorted(names)


def test_an_acronym_is_an_alias_of_its_expansion(rag, guides):
    ids = {n.casefold(): i for n, i in _names(rag, guides).items()}
    aliases = rag.store.scoped(guides).rows("SELECT alias, entity_id FROM entity_aliases WHERE namespace = %(ns)s",
                                            {"ns": guides})
    assert ("BCC", ids["basal cell carcinoma"]) in aliases, aliases
    assert "bcc" not in ids  # one entity, not two
    assert concepts.acronyms("non-small cell lung cancer (NSCLC) and the National Cancer Institute (NCI)") == {
        "NSCLC": ("non-small", "cell", "lung", "cancer"), "NCI": ("national", "cancer", "institute")}
    assert concepts.acronyms("radiation therapy (often)") == {}


def test_contractions_speaker_labels_and_file_name_headers_are_not_entities(rag, guides):
    names = {n.casefold() for n in _names(rag, guides)}
    assert not names & {"i'd", "i'm", "we'll", "anna", "ben", "host"}, sorted(names)
    assert not [n for n in names if "acme" in n or "earnings" in n], sorted(names)  # the header its file name made
    cases = extract.WordCases(frozenset(), frozenset({"Anna"}))
    assert extract.latin_mentions("ANNA: hello there.\nThen Anna left.", 0, cases) == [
        extract.Mention("Anna", "ENTITY", 24, 28)]  # the label goes, the name in a sentence stays


def test_a_question_naming_a_concept_reaches_it(rag, guides):
    res = rag.local_search("From which cells does basal cell carcinoma arise?", guides)
    assert "basal cell carcinoma" in [m["name"].casefold() for m in res["matched_entities"]]
    assert res["sources"][0]["title"] == "Skin cancer guide"


CHINESE = {
    "blockchain.txt": "区块链是一种分布式账本技术。区块链用密码学保护数据。许多银行研究区块链。区块链的应用越来越广。",
    "quantum.txt": "量子计算利用量子力学的原理。量子计算可以解决复杂的问题。量子计算需要低温环境。研究人员改进量子计算。",
    "ai.txt": "人工智能包括机器学习。机器学习需要大量数据。机器学习改变了很多行业。",
    "db.txt": "数据库存储数据。数据库管理系统很重要。数据库需要备份。",
    "net.txt": "互联网连接世界。互联网改变了通信。互联网需要安全。",
}
JAPANESE = {
    "blockchain.txt": "ブロックチェーンは分散型台帳の技術です。ブロックチェーンは暗号技術でデータを守ります。銀行がブロックチェーンを研究しています。",
    "quantum.txt": "量子計算は量子力学の原理を使います。量子計算は複雑な問題を解きます。量子計算には低温が必要です。",
    "ai.txt": "人工知能は機械学習を含みます。機械学習には大量のデータが必要です。機械学習は産業を変えました。",
    "db.txt": "データベースはデータを保存します。データベースの管理は大切です。データベースにはバックアップが必要です。",
    "net.txt": "通信網は世界をつなぎます。通信網は通信を変えました。通信網には安全が必要です。",
}


# Plain text files are titled by their file names, so no title names the concept: the entity does.
@pytest.mark.parametrize("language, documents, question, concept, document", [
    ("zh", CHINESE, "区块链和量子计算有什么关系？", "区块链", "blockchain"),
    ("zh", CHINESE, "量子计算需要什么环境？", "量子计算", "quantum"),
    ("ja", JAPANESE, "量子計算には何が必要ですか", "量子計算", "quantum"),
])
def test_a_cjk_common_noun_concept_becomes_an_entity_a_question_reaches(rag, tmp_path, language, documents, question,
                                                                       concept, document):
    from graphrag_dag.drivers.ingest.indexer import index_corpus

    for name, text in documents.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    namespace = f"concepts-{language}"
    index_corpus(rag, [tmp_path], namespace, replace=True, offline=True)
    try:
        assert concept in _names(rag, namespace)
        res = rag.local_search(question, namespace)
        assert concept in [m["name"] for m in res["matched_entities"]]
        assert document in [s["title"] for s in res["sources"][:3]], res["sources"]
    finally:
        rag.store.drop(namespace)


def test_weak_matches_rank_as_the_text_list_and_a_named_page_leads(rag, guides):
    """Named nothing with confidence (here: nothing at all), the sources are RRF of the text signals
    alone; a question naming an entity's own page puts that page first."""
    run = rag.run("local", "Which treatments do people get?", guides, offline=True,
                  final_vars=["named_entities", "source_rankings", "ranked_units"])
    values = run.values
    assert values["named_entities"] == []
    text_only = {name: units for name, units in values["source_rankings"].items() if name in TEXT_SIGNALS}
    assert values["ranked_units"] == ranked_units(text_only, [])
    assert ranked_units({**values["source_rankings"], "graph": ["x"], "claim": ["y"]}, []) == values["ranked_units"]
    titled = rag.run("local", "What does the Lung cancer guide say about smoking?", guides, offline=True,
                     final_vars=["sources"]).values["sources"]
    assert titled[0].title == "Lung cancer guide" and "title" in titled[0].signals
