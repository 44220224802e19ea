"""`graphrag-dag server status|stop`: the embedded PostgreSQL of a home, which stays up for an idle
grace period after its last command (drivers/store/keeper.py) so the next one starts at once."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.drivers.cli.printing import say


def add_embedded_parsers(sub: Any) -> None:
    s = sub.add_parser("server", help="the embedded PostgreSQL: whether it runs, or stop it now")
    verbs = s.add_subparsers(dest="server_command", required=True)
    st = verbs.add_parser("status", help="whether it runs, its users, and how long it waits when idle")
    st.add_argument("--json", action="store_true")
    verbs.add_parser("stop", help="stop it now instead of after its idle grace period")


def cmd_server(args: argparse.Namespace) -> int:
    from graphrag_dag.drivers.runtime.config import default_home
    from graphrag_dag.drivers.store import keeper

    if args.dsn or os.environ.get("GRAPHRAG_DAG_DSN"):
        raise BadInput("no embedded server here: GRAPHRAG_DAG_DSN (or --dsn) names a server of your own")
    home = default_home()
    if args.server_command == "stop":
        say(f"stopped the embedded server in {home}" if keeper.stop(home) else f"no embedded server runs in {home}")
        return 0
    shown = keeper.status(home)
    if args.json:
        print(json.dumps(shown, indent=2))
    elif not shown["running"]:
        say(f"not running (home {home})")
    else:
        waiting = f"; idle, stops after {shown['idle_seconds']} s without users" if shown["keeper"] else ""
        say(f"running (pid {shown['pid']}, home {home}); {len(shown['users'])} process(es) using it{waiting}")
    return 0


EMBEDDED_COMMANDS = {"server": cmd_server}
