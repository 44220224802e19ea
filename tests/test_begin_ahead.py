"""A local search begins its snapshot ahead (drivers/store/scoped.py `begin_ahead`): it assumes the
namespace's row an earlier request of the instance read, and checks it at its first read. A
namespace rewritten or dropped in between is found out there, and the search runs again from a
fresh begin, so no answer is ever made from an old version's in-memory indexes or cached nodes."""

from __future__ import annotations

import pytest
from test_isolation import _ids, _tenant

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.drivers.api import GraphRag
from graphrag_dag.drivers.cancel import CancelToken
from graphrag_dag.drivers.resources import ChatConfig
from graphrag_dag.drivers.store.scoped import NamespaceChanged, NamespaceInfo

QUERY = "What about Mara Quill and the Stormwatch Project?"


def _info(rag, namespace: str) -> NamespaceInfo:
    return rag.store.namespace_info(namespace)


def _search(rag, namespace: str) -> dict:
    """A local search's result without its timings (which differ between any two runs)."""
    res = rag.local_search(QUERY, namespace)
    res.pop("timings_ms")
    res.pop("trace")
    return res


def test_a_begin_sent_ahead_is_checked_at_the_first_read(rag):
    info = _info(rag, "demo")
    right = rag.store.scoped("demo", CancelToken(), snapshot=True)
    try:
        right.begin_ahead(info)
        assert right.index_version == info.index_version
        reply = right.send("SELECT count(*) FROM entities WHERE namespace = %(ns)s", {"ns": "demo"})
        assert reply.rows()[0][0] > 0
        right.confirm()
    finally:
        right.close()
    for assumed in (NamespaceInfo("demo", info.embed_model, info.embed_dim, "an-older-version"),
                    NamespaceInfo("demo", "another-model", info.embed_dim, info.index_version)):
        wrong = rag.store.scoped("demo", CancelToken(), snapshot=True)
        try:
            wrong.begin_ahead(assumed)
            reply = wrong.send("SELECT count(*) FROM entities WHERE namespace = %(ns)s", {"ns": "demo"})
            with pytest.raises(NamespaceChanged):
                reply.rows()
            with pytest.raises(NamespaceChanged):  # and every read after it
                wrong.rows("SELECT 1")
            assert wrong.changed()
        finally:
            wrong.close()


def test_a_begin_sent_ahead_is_checked_before_a_request_returns_even_without_a_read(rag):
    """A request whose nodes read nothing (all from a cache) still checks the row before it returns."""
    info = _info(rag, "demo")
    db = rag.store.scoped("demo", CancelToken(), snapshot=True)
    try:
        db.begin_ahead(NamespaceInfo("demo", info.embed_model, info.embed_dim, "an-older-version"))
        with pytest.raises(NamespaceChanged):
            db.confirm()
    finally:
        db.close()


@pytest.mark.parametrize("cache", [False, True], ids=["plain", "cached"])
def test_a_search_after_a_rewrite_answers_from_the_new_version(home, tmp_path, cache):
    namespace = f"ahead-{'cached' if cache else 'plain'}"
    rag = GraphRag(home=home, chat=ChatConfig(), cache=tmp_path / "cache" if cache else False)
    try:
        rag.write(namespace, _tenant("a-", "FACT-A"), replace=True)
        before = _search(rag, namespace)
        assert before["matched_entities"] and all(i.startswith("a-") for i in _ids(before))
        assert namespace in rag._known  # the next search begins ahead
        rag.write(namespace, _tenant("b-", "FACT-B"), replace=True)
        after = _search(rag, namespace)
        assert after["matched_entities"] and all(i.startswith("b-") for i in _ids(after)), _ids(after)
        assert rag._known[namespace][0] == _info(rag, namespace)  # learned anew
        with GraphRag(home=home, chat=ChatConfig()) as fresh:
            assert after == _search(fresh, namespace)
        assert _search(rag, namespace) == after  # ahead again, on the new row
    finally:
        rag.store.drop(namespace)
        rag.close()


def test_a_search_after_a_drop_says_the_namespace_is_unknown(rag):
    rag.write("ahead-dropped", _tenant("a-", "FACT-A"), replace=True)
    assert _search(rag, "ahead-dropped")["matched_entities"]
    rag.store.drop("ahead-dropped")
    with pytest.raises(BadInput, match="unknown namespace"):
        rag.local_search(QUERY, "ahead-dropped")
    assert "ahead-dropped" not in rag._known
