from graphrag_dag.drivers.ingest.demo import demo_queries


def test_demo_local_offline(rag):
    res = rag.local_search(demo_queries()["local"], "demo")
    assert res["status"] == "completed"
    assert res["communities"] and res["evidence"]
    assert any(m["name"] == "Mara Quill" for m in res["matched_entities"])


def test_demo_global_offline(rag):
    res = rag.global_search("What are the main themes?", "demo")
    assert res["status"] == "completed"
    assert res["map_answers"]
