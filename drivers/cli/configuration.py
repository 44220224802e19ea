"""`graphrag-dag config show`: the settings in effect and where each came from (flag,
environment, `.env`, `graphrag-dag.toml` or default; drivers/runtime/config.py resolves them)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from graphrag_dag.drivers.cli.printing import say


def add_config_parsers(sub: Any) -> None:
    c = sub.add_parser("config", help="the settings in effect and where each came from")
    verbs = c.add_subparsers(dest="config_command", required=True)
    show = verbs.add_parser("show", help="print every setting, its value and its source")
    show.add_argument("--json", action="store_true")


def cmd_config(args: argparse.Namespace) -> int:
    shown = args.resolved.as_json()
    if args.json:
        print(json.dumps(shown, indent=2, ensure_ascii=False))
        return 0
    say(f"# file: {shown['file'] or 'none found (graphrag-dag.toml in this folder or your home folder)'}")
    rows = [(name, row["value"], row["source"] + ("" if "default" not in row else f": {row['default']}"))
            for name, row in shown["settings"].items()]
    rows += [(f"search.{name}", row["value"], row["source"]) for name, row in shown["search"].items()]
    width = max(len(name) for name, _, _ in rows)
    for name, value, source in rows:
        say(f"{name:<{width}}  {'' if value is None else value}  ({source})")
    return 0


CONFIG_COMMANDS = {"config": cmd_config}
