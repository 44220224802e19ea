"""Compare two versions of local search on a shared, noisy machine by running each query on both,
one after the other, never at once.

Interleaving whole `bench` runs cannot separate a 10% change here: from one minute to the next,
the same code's p50 moved between 27 and 39 ms (README, Scale). Two long-lived workers, A and B,
each warm their namespace, then take the same generated queries in turn (A then B, then B then A),
so both see the same machine from query to query. The paired differences say more than the two
medians do.

A side is a source tree: a checkout's root (with `dataflows/` and `drivers/`), or nothing for
the installed package. A tree is put before the installed package through a folder of two
links, `graphrag_dag/dataflows` and `graphrag_dag/drivers`. Both sides may also use one tree,
with different namespaces, to compare sizes (300k against 100k entities):

    git worktree add /tmp/base e9e910b
    python tests/benchmarks/lockstep.py --a /tmp/base --namespace syn100kt --queries 300
    python tests/benchmarks/lockstep.py --namespace syn100kt --b-namespace syn300k --queries 300

Uses GRAPHRAG_DAG_HOME (or --home). Prints one JSON object: per side, wall p50 / p95 / mean and
CPU (process time) per query; the medians of the paired differences (B - A); the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _worker(namespace: str, queries: int, warmup: int, seed: int) -> None:
    """Warm up, say READY, then answer query numbers read from stdin with [wall ms, CPU ms]."""
    from graphrag_dag.drivers.api import GraphRag, LocalOptions
    from graphrag_dag.drivers.llm.chat import ChatConfig
    from graphrag_dag_tools.bench import generate_queries

    with GraphRag() as rag:
        rag.warm_for_search(namespace)
        texts = generate_queries(rag, namespace, queries + warmup, seed)
        for text in texts[:warmup]:
            rag.run("local", text, namespace, options=LocalOptions(), chat=ChatConfig())
        print("READY", flush=True)
        for line in sys.stdin:
            text = texts[warmup + int(line)]
            wall, cpu = time.perf_counter(), time.process_time()
            rag.run("local", text, namespace, options=LocalOptions(), chat=ChatConfig())
            print(json.dumps([(time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000]), flush=True)


def _source_path(tree: str | None, links: Path) -> str | None:
    """A folder whose `graphrag_dag` package is the tree's (None: the installed package)."""
    if not tree:
        return None
    root = Path(tree).resolve()
    if not (root / "dataflows").is_dir() or not (root / "drivers").is_dir():
        raise SystemExit(f"lockstep: {root} has no dataflows/ and drivers/")
    package = links / "graphrag_dag"
    package.mkdir(parents=True)
    for part in ("dataflows", "drivers"):
        (package / part).symlink_to(root / part)
    return str(links)


def _start(tree: str | None, namespace: str, args: argparse.Namespace, links: Path) -> subprocess.Popen:
    env = dict(os.environ)
    if args.home:
        env["GRAPHRAG_DAG_HOME"] = args.home
    path = _source_path(tree, links)
    if path:
        env["PYTHONPATH"] = os.pathsep.join([path, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    command = [sys.executable, __file__, "--worker", "--namespace", namespace, "--queries", str(args.queries),
               "--warmup", str(args.warmup), "--seed", str(args.seed)]
    worker = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    for line in worker.stdout:
        if line.strip() == "READY":
            return worker
    raise SystemExit(f"lockstep: the worker for {tree or 'the installed package'} on {namespace} exited "
                     f"with {worker.wait()} before it was ready")


def compare(args: argparse.Namespace) -> dict:
    from graphrag_dag_tools.bench import percentile

    b_namespace = args.b_namespace or args.namespace
    with tempfile.TemporaryDirectory() as scratch:
        # One side at a time: two warm-ups at once would each read the other's pages.
        workers = {"a": _start(args.a, args.namespace, args, Path(scratch) / "a"),
                   "b": _start(args.b, b_namespace, args, Path(scratch) / "b")}
        times: dict[str, list[tuple[float, float]]] = {"a": [], "b": []}
        try:
            for i in range(args.queries):
                for side in ("a", "b") if i % 2 == 0 else ("b", "a"):
                    worker = workers[side]
                    worker.stdin.write(f"{i}\n")
                    worker.stdin.flush()
                    times[side].append(tuple(json.loads(worker.stdout.readline())))
        finally:
            for worker in workers.values():
                worker.stdin.close()
                worker.wait()
    out: dict = {"queries": args.queries}
    for side, tree, namespace in (("a", args.a, args.namespace), ("b", args.b, b_namespace)):
        wall = [w for w, _ in times[side]]
        out[side] = {"tree": tree or "installed", "namespace": namespace, "p50_ms": round(percentile(wall, 0.5), 2),
                     "p95_ms": round(percentile(wall, 0.95), 2), "mean_ms": round(statistics.fmean(wall), 2),
                     "cpu_ms": round(statistics.fmean(c for _, c in times[side]), 2)}
    pairs = list(zip(times["a"], times["b"]))
    out["b_minus_a_median_ms"] = {"wall": round(statistics.median(b[0] - a[0] for a, b in pairs), 2),
                                  "cpu": round(statistics.median(b[1] - a[1] for a, b in pairs), 2)}
    out["load_avg"] = [round(x, 2) for x in os.getloadavg()]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", help="side A's source tree (default: the installed package)")
    parser.add_argument("--b", help="side B's source tree (default: the installed package)")
    parser.add_argument("--namespace", required=True, help="side A's namespace (and B's, unless --b-namespace)")
    parser.add_argument("--b-namespace")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--home", help="GRAPHRAG_DAG_HOME for both sides")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.queries < 1:
        raise SystemExit("lockstep: --queries must be at least 1")
    if args.worker:
        _worker(args.namespace, args.queries, args.warmup, args.seed)
        return
    print(json.dumps(compare(args)))


if __name__ == "__main__":
    main()
