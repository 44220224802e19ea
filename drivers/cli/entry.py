"""The `graphrag-dag` script. A `query` is first offered to the query worker of its home's
embedded server (drivers/cli/worker.py), which has everything a query loads already loaded; when
there is none, or it declines, the command runs here as it always did (drivers/cli/main.py).
This module imports next to nothing, so that asking costs the script little."""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Sequence

_GLOBAL_WITH_VALUE = ("--dsn", "--query-dsn", "--home")
_RUN_HERE = ("--dsn", "--query-dsn", "--verbose", "--help", "-h")  # a server of one's own; live lines; help


def _forwarded(argv: list[str]) -> int | None:
    """The worker's exit code after printing its output, or None to run the command here."""
    words = iter(argv)
    command, home = None, None
    for word in words:
        if word in _GLOBAL_WITH_VALUE:
            value = next(words, None)
            if word == "--home":
                home = value
        elif not word.startswith("-"):
            command = word
            break
    if command != "query" or any(a in _RUN_HERE for a in argv):
        return None
    try:
        from pathlib import Path

        from graphrag_dag.drivers.cli.worker import SOCKET_NAME, profile
        from graphrag_dag.drivers.runtime.config import default_home, load

        environ = dict(os.environ)
        load({"home": home}).apply(environ)  # as main would see it: graphrag-dag.toml and .env applied
        if environ.get("GRAPHRAG_DAG_DSN"):  # a server of one's own: no embedded one, no worker
            return None
        if home:
            environ["GRAPHRAG_DAG_HOME"] = str(Path(home).expanduser())
        path = (Path(home).expanduser() if home else default_home()) / SOCKET_NAME
        if not path.exists():
            return None
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(2)
        conn.connect(str(path))
        conn.sendall(json.dumps({"argv": argv, "profile": profile(environ, os.getcwd())}).encode() + b"\n")
        reader = conn.makefile("rb")
        first = json.loads(reader.readline() or b"{}")
        if not first.get("accepted"):
            conn.close()
            return None
        conn.settimeout(None)
    except Exception:  # noqa: BLE001 - no worker, a bad setting, anything: the command runs here
        return None
    try:
        line = reader.readline()
    except OSError:  # the worker went away: the command runs here
        line = b""
    finally:
        conn.close()  # also on Ctrl-C: the worker hears it close and interrupts the query
    try:
        result = json.loads(line) if line else {}
    except ValueError:
        result = {}
    if "code" not in result:  # declined after all (the worker is stopping), or it went away
        return None
    sys.stdout.write(result["stdout"])
    sys.stdout.flush()
    sys.stderr.write(result["stderr"])
    return int(result["code"])


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    try:
        code = _forwarded(given)
    except KeyboardInterrupt:  # while asking the worker: it hears the socket close
        print("graphrag-dag: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `... | head` closed our output: what was wanted was delivered
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    if code is not None:
        return code
    from graphrag_dag.drivers.cli.main import main as run_here

    return run_here(given)


if __name__ == "__main__":
    sys.exit(main())
