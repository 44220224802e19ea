"""The command line's benchmark tools: `graphrag-dag synth` (a synthetic GraphRAG v3 index),
`graphrag-dag bench` (latency per stage over generated queries) and `graphrag-dag eval`
(retrieval quality of every system on a benchmark folder)."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any, Callable

from graphrag_dag.drivers.cli.args import non_negative_int, positive_int
from graphrag_dag.drivers.cli.console import open_graphrag, progress


def add_parsers(sub: Any) -> None:
    b = sub.add_parser("bench", help="latency per stage over generated queries")
    b.add_argument("--namespace", required=True)
    b.add_argument("--queries", type=positive_int, default=50)
    b.add_argument("--method", choices=["local", "global"], default="local")
    b.add_argument("--llm-latency-ms", type=non_negative_int, help="use a local stand-in LLM with this latency")
    b.add_argument("--concurrency", type=positive_int, default=4, help="global map concurrency")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--warmup", type=positive_int, default=5, help="uncounted queries run first")
    b.add_argument("--prewarm", action="store_true",
                   help="read the namespace into the server's buffers first, as `warm` does (default: off)")
    b.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="run under a switch, e.g. global_selection=dynamic, repeatable (default: none)")
    b.add_argument("--json", action="store_true")


    e = sub.add_parser("eval", help="retrieval quality of every system on a benchmark folder")
    e.add_argument("folder", help="a folder with corpus.json, questions.json and optionally published_top8.json; "
                                  "or with documents/ and questions.json whose questions list gold evidence facts")
    e.add_argument("--namespace", help="evaluate this namespace instead of indexing the corpus offline")
    e.add_argument("--graphrag-python", default=os.environ.get("GRAPHRAG_DAG_GRAPHRAG_PYTHON") or None,
                   help="a Python with Microsoft GraphRAG installed: also score its local-search context "
                        "(default: $GRAPHRAG_DAG_GRAPHRAG_PYTHON)")
    e.add_argument("--variant", action="append", metavar="KEY=VALUE[,KEY=VALUE]",
                   help="also run local search under these switches, e.g. decompose=on, repeatable "
                        "(default: ranking=weighted; 'none' for no extra system)")
    e.add_argument("--limit", type=positive_int, help="score only the first N questions (gold-fact folders)")
    e.add_argument("--json", action="store_true")

    sb = sub.add_parser("servebench", help="local search through graphrag-dag serve at several client concurrencies")
    sb.add_argument("--namespace", required=True)
    sb.add_argument("--queries", type=positive_int, default=200, help="requests per concurrency level")
    sb.add_argument("--clients", default="1,8,32", help="comma-separated client concurrencies (default 1,8,32)")
    sb.add_argument("--seed", type=int, default=0)
    sb.add_argument("--workers", type=positive_int, default=1, help="server processes (default 1)")
    sb.add_argument("--json", action="store_true")

    y = sub.add_parser("synth", help="write a synthetic Microsoft GraphRAG v3 index (parquet) for benchmarks")
    y.add_argument("--entities", type=positive_int, required=True)
    y.add_argument("--seed", type=int, default=0)
    y.add_argument("--out", required=True, help="output folder (new, empty, or an earlier synth output)")
    y.add_argument("--json", action="store_true")


def cmd_bench(args: argparse.Namespace) -> int:
    from graphrag_dag.dataflows.common.switches import parse_pairs
    from graphrag_dag_tools.bench import run_bench

    with open_graphrag(args) as rag:
        report = run_bench(rag, args.namespace, queries=args.queries, method=args.method,
                           llm_latency_ms=args.llm_latency_ms, concurrency=args.concurrency, seed=args.seed,
                           warmup=args.warmup, config=parse_pairs(args.config), prewarm=args.prewarm,
                           progress=None if args.json else progress)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    t = report["total_ms"]
    print(f"{report['method']} search, {report['queries']} queries: total p50 {t['p50']:.1f} ms, "
          f"p95 {t['p95']:.1f} ms, mean {t['mean']:.1f} ms; peak RSS {report['peak_rss_mb']} MB; "
          f"LLM calls {report['llm_calls']}; outside-node overhead {report['overhead_pct']}% "
          f"(Hamilton's own {report['hamilton_overhead_pct']}%)")
    server, machine = report["server"], report["machine"]
    print(f"on {machine['cpus']} CPUs, load average {machine['load_avg_start']} before and {machine['load_avg']} after; "
          f"server: {server['shared_buffers_mb']:,.0f} MB of shared buffers, huge pages {server['huge_pages']}"
          + (f" ({server['huge_pages_needed']:,} would hold its shared memory)" if server["huge_pages_needed"] else ""))
    for node, s in sorted(report["stages_ms"].items(), key=lambda kv: -kv[1]["p50"]):
        print(f"  {node:<28} p50 {s['p50']:8.2f}  p95 {s['p95']:8.2f}")
    return 0


def cmd_servebench(args: argparse.Namespace) -> int:
    from graphrag_dag.dataflows.common.errors import BadInput
    from graphrag_dag_tools.servebench import run_servebench

    try:
        levels = tuple(int(x) for x in args.clients.split(","))
    except ValueError:
        raise BadInput(f"--clients must be comma-separated positive integers, not {args.clients!r}") from None
    if not levels or min(levels) < 1:
        raise BadInput("--clients must be comma-separated positive integers")
    with open_graphrag(args) as rag:
        report = run_servebench(rag, args.namespace, queries=args.queries, levels=levels, seed=args.seed,
                                workers=args.workers, progress=None if args.json else progress)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    lib = report["library_ms"]
    print(f"library call: p50 {lib['p50']:.1f} ms, p95 {lib['p95']:.1f} ms; through the server, taking turns: "
          f"p50 {report['paired_http_ms']['p50']:.1f} ms; the server's own cost {report['server_overhead_ms']['p50']:.1f} ms "
          f"(median of the paired differences; load {report['load_avg']})")
    for lv in report["levels"]:
        print(f"  {lv['clients']:>3} clients: {lv['rps']:7.1f} requests/s  p50 {lv['p50']:7.1f} ms  "
              f"p95 {lv['p95']:7.1f} ms  errors {lv['errors']}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from graphrag_dag_tools.quality.evaluate import DEFAULT_VARIANTS, format_table, parse_variants, run_eval

    from graphrag_dag_tools.quality.facts import format_fact_table, is_fact_benchmark, load_questions, run_fact_eval

    if is_fact_benchmark(args.folder):  # documents/ and questions.json with gold facts
        load_questions(args.folder)  # a bad folder exits 2 before the store opens
        with open_graphrag(args) as rag:
            report = run_fact_eval(rag, args.folder, namespace=args.namespace, limit=args.limit,
                                   progress=None if args.json else progress)
        print(json.dumps(report, indent=2) if args.json else format_fact_table(report))
        return 0
    variants = DEFAULT_VARIANTS if args.variant is None else [v for v in args.variant if v != "none"]
    parse_variants(variants)  # a bad switch exits 2 before the store opens
    with open_graphrag(args) as rag:
        report = run_eval(rag, args.folder, namespace=args.namespace, graphrag_python=args.graphrag_python,
                          progress=None if args.json else progress, variants=variants)
    print(json.dumps(report, indent=2) if args.json else format_table(report))
    return 0


def cmd_synth(args: argparse.Namespace) -> int:
    from graphrag_dag_tools.synth import write_synthetic_index

    started = time.perf_counter()
    counts = write_synthetic_index(Path(args.out), args.entities, seed=args.seed,
                                   progress=None if args.json else progress)
    seconds = round(time.perf_counter() - started, 3)
    if args.json:
        print(json.dumps({"out": str(Path(args.out).expanduser()), "seed": args.seed, "counts": counts,
                          "seconds": seconds}))
    else:
        print(" ".join(f"{k}={v}" for k, v in counts.items()) + f" ({seconds:.1f} s)")
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"bench": cmd_bench, "eval": cmd_eval,
                                                                 "servebench": cmd_servebench,
                                                                 "synth": cmd_synth}
