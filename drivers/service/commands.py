"""The command line of the service: `serve` (HTTP API and MCP over HTTP), `mcp` (MCP over
stdio) and `keys create|list|revoke`."""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
from pathlib import Path
from typing import Any

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.drivers.cli.args import positive_float, positive_int
from graphrag_dag.drivers.cli.console import open_graphrag, progress
from graphrag_dag.drivers.service.uploads import ZipLimits

LOOPBACK_NAMES = ("localhost",)


def add_service_parsers(sub: Any) -> None:
    s = sub.add_parser("serve", help="serve the HTTP API (/v1, OpenAPI at /docs) and MCP at /mcp")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--no-auth", action="store_true", help="no API keys (allowed only on a loopback host)")
    s.add_argument("--max-concurrent", type=positive_int, default=8, help="searches at once; more get 429 (default 8)")
    s.add_argument("--request-timeout", type=positive_float, default=120.0, help="seconds per request (default 120)")
    s.add_argument("--max-body-bytes", type=positive_int, default=1_000_000, help="JSON body limit (default 1 MB)")
    s.add_argument("--max-upload-bytes", type=positive_int, default=200_000_000, help="upload limit (default 200 MB)")
    s.add_argument("--max-unzipped-bytes", type=positive_int, default=ZipLimits.max_bytes,
                   help="an uploaded zip's total uncompressed size limit (default 2 GB)")
    s.add_argument("--max-zip-members", type=positive_int, default=ZipLimits.max_members,
                   help="an uploaded zip's member limit (default 10,000)")
    s.add_argument("--max-zip-ratio", type=positive_float, default=ZipLimits.max_ratio,
                   help="an uploaded zip's limit on uncompressed / compressed size (default 200)")
    s.add_argument("--import-root", help="server-side folders that imports may name must lie under this one")
    s.add_argument("--cache", action="store_true", help="use Hamilton's cache for intermediate results")
    s.add_argument("--no-mcp", action="store_true", help="do not mount the MCP tools at /mcp")
    s.add_argument("--workers", type=positive_int, default=1,
                   help="server processes (a search is mostly Python: one process uses one core; default 1)")
    s.add_argument("--warm", metavar="NS[,NS...]", default="",
                   help="read these namespaces into the database server's buffers before serving, as `warm` "
                        "does (default: none)")

    m = sub.add_parser("mcp", help="serve the MCP tools over stdio (for an agent that starts this process)")
    m.add_argument("--cache", action="store_true", help="use Hamilton's cache for intermediate results")

    k = sub.add_parser("keys", help="create, list or revoke API keys of the service")
    ks = k.add_subparsers(dest="keys_command", required=True, parser_class=sub._parser_class)  # one-line usage errors
    c = ks.add_parser("create", help="create a key; it is printed once and stored hashed")
    c.add_argument("--namespace", required=True, help="comma-separated namespaces, or '*' for all")
    c.add_argument("--role", choices=["query", "write", "admin"], default="query")
    c.add_argument("--label", default="")
    c.add_argument("--json", action="store_true")
    ls = ks.add_parser("list", help="list keys (never their secrets)")
    ls.add_argument("--json", action="store_true")
    r = ks.add_parser("revoke", help="revoke a key by its id")
    r.add_argument("id")


def _loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from graphrag_dag.drivers.service.app import ServiceSettings, create_app

    if args.no_auth and not _loopback(args.host):
        raise BadInput(f"--no-auth is allowed only on a loopback host, not {args.host!r}")
    if not 0 < args.port < 65536:
        raise BadInput(f"invalid port {args.port}")
    root = Path(args.import_root).expanduser().resolve() if args.import_root else None
    if root is not None and not root.is_dir():
        raise BadInput(f"--import-root {args.import_root!r} is not a folder")
    settings = ServiceSettings(auth=not args.no_auth, max_body_bytes=args.max_body_bytes,
                               max_upload_bytes=args.max_upload_bytes, max_unzipped_bytes=args.max_unzipped_bytes,
                               max_zip_members=args.max_zip_members, max_zip_ratio=args.max_zip_ratio,
                               max_concurrent=args.max_concurrent,
                               request_timeout=args.request_timeout, import_root=root, mcp=not args.no_mcp,
                               host=args.host)
    warm = _warm_list(args.warm)
    served = (f"serving on http://{args.host}:{args.port} (API at /v1, docs at /docs"
              f"{', MCP at /mcp' if settings.mcp else ''}{'; no auth' if args.no_auth else ''}"
              f"{f'; {args.workers} workers' if args.workers > 1 else ''})")
    run = {"host": args.host, "port": args.port, "log_level": "warning", "access_log": False,
           "http": "graphrag_dag.drivers.service.protocol:NoDelayH11Protocol"}
    if args.workers > 1:
        # each worker process builds its own GraphRag and app from this description
        os.environ[WORKER_ENV] = json.dumps({"dsn": args.dsn, "query_dsn": args.query_dsn, "home": args.home,
                                             "cache": bool(args.cache), "settings": settings.as_json(),
                                             "warm": warm})
        with open_graphrag(args) as rag:  # fail here, once, when the store cannot be reached
            # the buffers are the database server's: warmed once for every worker; each worker
            # builds its own in-memory indexes as it starts (worker_app)
            _warm(rag, warm, indexes=False)
        progress(served)
        uvicorn.run("graphrag_dag.drivers.service.commands:worker_app", factory=True, workers=args.workers, **run)
        return 0
    rag = open_graphrag(args, cache=bool(args.cache), pool_size=args.max_concurrent + 4)
    try:
        _warm(rag, warm)
        app = create_app(rag, settings)
        progress(served)
        uvicorn.run(app, **run)
    finally:
        rag.close()
    return 0


WORKER_ENV = "GRAPHRAG_DAG_SERVE_WORKER"


def _warm_list(text: str) -> list[str]:
    from graphrag_dag.drivers.store import validate_namespace

    return [validate_namespace(ns.strip()) for ns in text.split(",") if ns.strip()]


def _warm(rag: Any, namespaces: list[str], *, indexes: bool = True) -> None:
    """Warm before listening: the first requests then find their namespace's pages in the buffers
    and, with `indexes`, this process's in-memory indexes built. Every name is checked first, so
    a misspelt one stops the start before any warming."""
    for ns in namespaces:
        rag.store.namespace_info(ns)
    for ns in namespaces:
        if indexes:
            built, report = rag.warm_for_search(ns)
            progress(f"built the in-memory indexes of {ns} in {built:.1f} s")
        else:
            report = rag.warm(ns)
        progress(f"warmed {ns}: {report.read_mb:,.0f} MB read in {report.seconds:.1f} s")



def worker_app() -> Any:
    """The app of one `serve --workers N` process (uvicorn imports and calls this in each)."""
    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.service.app import ServiceSettings, create_app

    spec = json.loads(os.environ[WORKER_ENV])
    settings = ServiceSettings.from_json(spec["settings"])
    rag = GraphRag(spec["dsn"], query_dsn=spec.get("query_dsn"), home=spec["home"], cache=spec["cache"],
                   pool_size=settings.max_concurrent + 4)
    for ns in spec.get("warm", []):  # this process's own: the parent warmed the server's buffers
        progress(f"worker {os.getpid()} built the in-memory indexes of {ns} in {rag.load_indexes(ns):.1f} s")
    return create_app(rag, settings, owns_rag=True)


def cmd_mcp(args: argparse.Namespace) -> int:
    import anyio

    from graphrag_dag.drivers.service.mcp_tools import build_mcp
    from graphrag_dag.drivers.service.runner import SearchRunner

    rag = open_graphrag(args, cache=bool(args.cache))
    runner = SearchRunner(rag, max_concurrent=4, request_timeout=300.0)
    try:
        anyio.run(build_mcp(rag, runner, None).run_stdio_async)
    finally:
        runner.close()
        rag.close()
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    from graphrag_dag.drivers.service.keys import KeyStore, check_label, parse_namespaces, printable

    if args.keys_command == "create":  # bad input stops before the store starts
        namespaces, label = parse_namespaces(args.namespace), check_label(args.label)
    with open_graphrag(args) as rag:
        keys = KeyStore(rag.store)
        if args.keys_command == "create":
            made = keys.create(namespaces, args.role, label)
            if args.json:
                print(json.dumps(made))
            else:
                print(made["key"])
                print(f"key {made['id']}: {made['role']} on {','.join(made['namespaces'])} "
                      "(shown once; only its hash is stored)", file=sys.stderr)
        elif args.keys_command == "list":
            rows = keys.list()
            if args.json:
                print(json.dumps(rows))
            for r in rows if not args.json else []:
                state = f"revoked {r['revoked_at']}" if r["revoked_at"] else "active"
                print(f"{r['id']}\t{r['role']}\t{','.join(r['namespaces'])}\t{state}\t{printable(r['label'])}")
        elif not keys.revoke(args.id):
            raise BadInput(f"no active key with id {args.id!r}")
        else:
            print(f"revoked key {args.id}")
    return 0


SERVICE_COMMANDS = {"serve": cmd_serve, "mcp": cmd_mcp, "keys": cmd_keys}
