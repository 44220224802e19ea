"""`graphrag-dag servebench`: local search through `graphrag-dag serve` at several client
concurrencies, against the same queries called through the library, so the service's own cost
is read off one run.

The server is started as its own process, on a free loopback port and without keys (with keys a
request adds one primary-key lookup); the clients are threads of this process,
so at high concurrency they share the machine's two cores with the server. Each level sends `queries` requests after a
warmup; requests per second is completed requests over the level's wall time.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag_tools import load_avg
from graphrag_dag_tools.bench import _summary, generate_queries


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start(dsn: str, query_dsn: str, home: str, clients: int, workers: int) -> tuple[subprocess.Popen, str]:
    import httpx2

    port = _free_port()
    env = {**os.environ, "GRAPHRAG_DAG_DSN": dsn, "GRAPHRAG_DAG_QUERY_DSN": query_dsn,
           "GRAPHRAG_DAG_HOME": home}
    proc = subprocess.Popen([sys.executable, "-m", "graphrag_dag.drivers.cli", "serve", "--port", str(port),
                             "--no-auth", "--no-mcp", "--max-concurrent", str(clients), "--workers", str(workers)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx2.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx2.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise BadInput(f"graphrag-dag serve did not start: {(proc.stderr.read() if proc.stderr else '')[-300:]}")


def _level(url: str, namespace: str, queries: list[str], clients: int) -> dict[str, Any]:
    import httpx2

    latencies: list[float] = []
    errors: list[int] = []
    lock = threading.Lock()
    todo = iter(range(len(queries)))

    def client() -> None:
        with httpx2.Client(base_url=url, timeout=120) as http:
            while True:
                with lock:
                    i = next(todo, None)
                if i is None:
                    return
                started = time.perf_counter()
                r = http.post("/v1/search/local", json={"query": queries[i], "namespace": namespace})
                ms = (time.perf_counter() - started) * 1000
                with lock:
                    (latencies.append(ms) if r.status_code == 200 else errors.append(r.status_code))

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    return {"clients": clients, "requests": len(latencies), "errors": len(errors),
            "rps": round(len(latencies) / wall, 2), **_summary(latencies)}


def run_servebench(rag: Any, namespace: str, *, queries: int = 200, levels: tuple[int, ...] = (1, 8, 32),
                   warmup: int = 20, seed: int = 0, workers: int = 1,
                   progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The library call and one HTTP client take turns on the same queries (a noisy machine then
    slows both alike), so the server's own cost is the median of the paired differences; the
    other levels run the same queries with more clients."""
    import httpx2

    say = progress or (lambda _m: None)
    rag.store.namespace_info(namespace)
    asked = generate_queries(rag, namespace, queries + warmup, seed)
    warm, measured = asked[:warmup], asked[warmup:]
    proc, url = _start(rag.dsn, rag.store.query_dsn, str(rag.home), max(levels), workers)
    try:
        for q in warm:
            rag.local_search(q, namespace, offline=True)
        _level(url, namespace, warm * workers, workers)  # every worker builds its drivers and memos
        library: list[float] = []
        served: list[float] = []
        with httpx2.Client(base_url=url, timeout=120) as http:
            for q in measured:
                started = time.perf_counter()
                rag.local_search(q, namespace, offline=True)
                library.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                http.post("/v1/search/local", json={"query": q, "namespace": namespace}).raise_for_status()
                served.append((time.perf_counter() - started) * 1000)
        say(f"library p50 {_summary(library)['p50']:.1f} ms, through the server {_summary(served)['p50']:.1f} ms")
        out = []
        for clients in levels:
            out.append(_level(url, namespace, measured, clients))
            say(f"{clients} clients: {out[-1]['rps']} requests/s, p50 {out[-1]['p50']:.1f} ms")
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    paired = sorted(b - a for a, b in zip(library, served, strict=True))
    return {"namespace": namespace, "queries": len(measured), "workers": workers,
            "library_ms": _summary(library), "paired_http_ms": _summary(served),
            "server_overhead_ms": {"p50": round(paired[len(paired) // 2], 3)}, "levels": out,
            "load_avg": load_avg()}
