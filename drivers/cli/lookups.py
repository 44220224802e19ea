"""The command line's lookups (drivers/api/lookups.py): `community ID`, `neighbors NAME` and
`source ID`, each on one namespace, as JSON or as lines for a person."""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import Any

from graphrag_dag.drivers.cli.args import positive_int
from graphrag_dag.drivers.cli.console import open_graphrag
from graphrag_dag.drivers.cli.printing import say


def add_lookup_parsers(sub: Any) -> None:
    c = sub.add_parser("community", help="a community's summary, members, edges, claims and evidence")
    c.add_argument("id")
    c.add_argument("--namespace", required=True)
    c.add_argument("--json", action="store_true")

    n = sub.add_parser("neighbors", help="an entity's neighbours with edge weights, hops and communities")
    n.add_argument("name", help="an entity name or alias (typos are matched like a question's)")
    n.add_argument("--namespace", required=True)
    n.add_argument("--depth", type=int, choices=[1, 2, 3], default=1)
    n.add_argument("--limit", type=positive_int, default=50, help="at most this many neighbours (default 50)")
    n.add_argument("--json", action="store_true")

    s = sub.add_parser("source", help="where an evidence id sits in its document")
    s.add_argument("id", help="an evidence id of a local result (a chunk or claim id)")
    s.add_argument("--namespace", required=True)
    s.add_argument("--context-chars", type=int, default=200, help="document text shown around the span (default 200)")
    s.add_argument("--json", action="store_true")


def _short(text: str, width: int = 100) -> str:
    return textwrap.shorten(" ".join(str(text).split()), width) if text else ""


def cmd_community(args: argparse.Namespace) -> int:
    with open_graphrag(args) as rag:
        d = rag.community_details(args.namespace, args.id)
    if args.json:
        print(json.dumps(d, ensure_ascii=False, indent=2))
        return 0
    say(f"[{d['id']}] level {d['level']} {d['title']}" + (f" (parent {d['parent_id']})" if d["parent_id"] else ""))
    say(f"\n{d['summary']}\n")
    say(f"Members ({d['member_count']}):")
    for m in d["members"]:
        say(f"  {m['name']} ({m['type'] or '-'}, degree {m['degree']})")
    say("\nEdges:")
    for e in d["edges"]:
        say(f"  {e['source']} — {e['target']} (weight {e['weight']:g}{'' if e['internal'] else ', outgoing'})"
            + (f": {_short(e['description'], 80)}" if e["description"] else ""))
    if d["claims"]:
        say("\nClaims:")
        for c in d["claims"]:
            say(f"  {c['id']} {c['subject']}: {_short(c['description'], 90)}")
    if d["evidence"]:
        say("\nEvidence:")
        for u in d["evidence"]:
            say(f"  {u['id']} {u['title'] or u['document_id']} [{u['start']}:{u['end']}]: {_short(u['snippet'], 80)}")
    return 0


def cmd_neighbors(args: argparse.Namespace) -> int:
    with open_graphrag(args) as rag:
        d = rag.entity_neighbors(args.namespace, args.name, depth=args.depth, limit=args.limit)
    if args.json:
        print(json.dumps(d, ensure_ascii=False, indent=2))
        return 0
    e = d["entity"]
    say(f"{e['name']} ({e['id']}; matched by {', '.join(d['resolved_by'])})")
    for n in d["neighbors"]:
        home = f" [{n['community']['id']} {n['community']['title']}]" if n["community"] else ""
        say(f"  {n['hops']} hop{'s' if n['hops'] > 1 else ''}  {n['name']} via {n['via']} (weight {n['weight']:g}){home}")
    if d["truncated"]:
        say(f"  ... more beyond --limit {args.limit}")
    return 0


def cmd_source(args: argparse.Namespace) -> int:
    with open_graphrag(args) as rag:
        d = rag.source(args.namespace, args.id, context_chars=args.context_chars)
    if args.json:
        print(json.dumps(d, ensure_ascii=False, indent=2))
        return 0
    span = f"[{d['start']}:{d['end']}]" if d["start"] is not None else "[span unknown]"
    say(f"{d['evidence_id']} ({d['kind']}) in {d['title'] or d['document_id']} ({d['document_id']}) {span}")
    if d["statement"]:
        say(f"claim: {d['statement']}")
    say(f"\n…{d['before']}>>>{d['text']}<<<{d['after']}…")
    return 0


LOOKUP_COMMANDS = {"community": cmd_community, "neighbors": cmd_neighbors, "source": cmd_source}
