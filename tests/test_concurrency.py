"""One driver and one pool serve many threads at once with the same results as serial runs."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

QUERIES = ["What did Dr. Mara Quill discover?", "Who funded the Stormwatch Project?", "Tell me about Alice Tern",
           "青岚茶社和林晓雨是什么关系？", "Who is Al?", "What happened during Storm Orla?", "Greywik Lighthouse Institute",
           "What is the Salt and Leaf Exchange?"]


def _essence(res: dict) -> tuple:
    return (res["answer"], [c["id"] for c in res["communities"]], [e["id"] for e in res["evidence"]],
            [m["id"] for m in res["matched_entities"]])


def test_32_threads_match_serial_results(rag):
    serial = {q: _essence(rag.local_search(q, "demo")) for q in QUERIES}
    work = [QUERIES[i % len(QUERIES)] for i in range(32)]
    with ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(lambda q: (q, _essence(rag.local_search(q, "demo"))), work))
    assert len(results) == 32
    for q, essence in results:
        assert essence == serial[q], q
