"""The command line's ways into and out of a namespace: `index` (your documents), `documents`
and `delete-documents` (what an indexed namespace holds, and removing some of it),
`import-graphrag` (Microsoft GraphRAG output) and `export` (GraphRAG v3 parquet)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from graphrag_dag.dataflows.common.settings import SETTINGS
from graphrag_dag.drivers.cli.args import add_settings, positive_int
from graphrag_dag.drivers.cli.console import open_graphrag, progress


def add_ingest_parsers(sub: Any) -> None:
    i = sub.add_parser("import-graphrag", help="import a Microsoft GraphRAG output folder")
    i.add_argument("path")
    i.add_argument("--namespace", required=True)
    i.add_argument("--embeddings", choices=["auto", "keep", "recompute"], default="auto",
                   help="reuse GraphRAG's vectors when the embedder made them (auto), insist (keep), or never "
                        "(recompute) (default: auto)")
    i.add_argument("--source-embedding-model", metavar="MODEL",
                   help="the model that made GraphRAG's vectors (it does not record it), e.g. text-embedding-3-small: "
                        "they are kept, and the rest and every query are embedded with MODEL at the configured "
                        "OpenAI-compatible endpoint (default: unknown)")
    i.add_argument("--replace", action="store_true")
    i.add_argument("--json", action="store_true")

    ix = sub.add_parser("index", help="build a namespace from your own documents")
    ix.add_argument("paths", nargs="+", metavar="PATH", help=".txt .md .html .pdf .docx .pptx files, .json/.jsonl/.csv records, or folders")
    ix.add_argument("--namespace", required=True)
    how = ix.add_mutually_exclusive_group()
    how.add_argument("--replace", action="store_true", help="rebuild an existing namespace")
    how.add_argument("--update", action="store_true",
                     help="sync an existing namespace with the paths as they are now (cached text costs no call)")
    ix.add_argument("--offline", action="store_true", help="use the rule-based extractor even if an LLM is configured")
    ix.add_argument("--max-llm-calls", type=positive_int, help="cap on LLM calls for this run")
    ix.add_argument("--max-llm-tokens", type=positive_int, help="cap on LLM tokens for this run")
    ix.add_argument("--json", action="store_true")
    add_settings(ix, ("index",))

    ds = sub.add_parser("documents", help="list a namespace's documents: id and title")
    ds.add_argument("--namespace", required=True)
    ds.add_argument("--json", action="store_true")

    dd = sub.add_parser("delete-documents", help="remove documents from an indexed namespace, and what only they supported")
    dd.add_argument("documents", nargs="+", metavar="ID",
                    help="a document id, or a file's path in the corpus (what precedes the id's #): all its documents")
    dd.add_argument("--namespace", required=True)
    dd.add_argument("--json", action="store_true")

    e = sub.add_parser("export", help="write a namespace as Microsoft GraphRAG v3 parquet")
    e.add_argument("--namespace", required=True)
    e.add_argument("--format", choices=["graphrag"], default="graphrag")
    e.add_argument("--out", required=True, help="a new or empty folder")
    e.add_argument("--json", action="store_true")


def capped(chat: Any, args: argparse.Namespace) -> Any:
    """The chat configuration with the command's call and token caps, if any."""
    if not (args.max_llm_calls or args.max_llm_tokens):
        return None
    from graphrag_dag.drivers.llm.chat import LlmLimits

    return dataclasses.replace(chat, limits=LlmLimits(args.max_llm_calls, args.max_llm_tokens))


def cmd_index(args: argparse.Namespace) -> int:
    from graphrag_dag.drivers.ingest.indexer import IndexOptions, index_corpus

    opts = IndexOptions(**{s.name: getattr(args, s.name) for s in SETTINGS["index"] if getattr(args, s.name) is not None})
    with open_graphrag(args) as rag:
        chat = capped(rag.chat, args)
        report = index_corpus(rag, args.paths, args.namespace, replace=args.replace, options=opts,
                              progress=None if args.json else progress, offline=args.offline, chat=chat,
                              update=args.update)
    _print_index_report(report, args.json)
    return 0


def _print_index_report(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return
    for w in report["warnings"]:
        print(f"warning: {w}")
    print(" ".join(f"{k}={v}" for k, v in report.items()
                   if k not in ("warnings", "timings_ms", "llm", "update", "deleted_documents")))
    update = report.get("update")
    if update:
        docs, rows, vectors = update["documents"], update.get("rows"), update.get("vectors")
        line = f"update: documents kept={docs['kept']} added={docs['added']} removed={docs['removed']}"
        line += " rewritten" if update["rewritten"] else f" rows deleted={rows['deleted']} written={rows['written']}"
        if vectors:
            line += f" vectors reused={vectors['reused']} embedded={vectors['embedded']}"
        print(line)


def cmd_documents(args: argparse.Namespace) -> int:
    with open_graphrag(args) as rag:
        docs = rag.documents(args.namespace)
    if args.json:
        print(json.dumps(docs, ensure_ascii=False, indent=2))
    else:
        for d in docs:
            print(f"{d['id']}\t{d['title']}")
    return 0


def cmd_delete_documents(args: argparse.Namespace) -> int:
    with open_graphrag(args) as rag:
        report = rag.delete_documents(args.namespace, args.documents, progress=None if args.json else progress)
    _print_index_report(report, args.json)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from graphrag_dag.drivers.ingest.exporter import export_graphrag

    with open_graphrag(args) as rag:
        counts = export_graphrag(rag, args.namespace, args.out)
    print(json.dumps(counts) if args.json else " ".join(f"{k}={v}" for k, v in counts.items()))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from graphrag_dag.drivers.ingest.importer import import_graphrag

    with open_graphrag(args) as rag:
        report = import_graphrag(rag, args.path, args.namespace, embeddings=args.embeddings, replace=args.replace,
                                 progress=progress, source_embedding_model=args.source_embedding_model)
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        for w in report.get("warnings", []):
            print(f"warning: {w}")
        print(" ".join(f"{k}={v}" for k, v in report.items() if k != "warnings"))
    return 0


INGEST_COMMANDS = {"index": cmd_index, "import-graphrag": cmd_import, "export": cmd_export,
                   "documents": cmd_documents, "delete-documents": cmd_delete_documents}
