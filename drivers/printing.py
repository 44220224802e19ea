"""The command line's human-readable output of a query (with --json it prints the contract)."""

from __future__ import annotations

import textwrap
from typing import Any


def print_local(res: dict[str, Any]) -> None:
    print(f"Question: {res['query']}")
    print(f"\nAnswer{' (offline)' if res['offline'] else ''}:\n{res['answer']}\n")
    print("Communities:")
    for c in res["communities"]:
        ents = ", ".join(c["matched_entities"]) or "-"
        print(f"  [{c['id']}] level {c['level']} {c['title']}  (score {c['score']:.4f}; matched: {ents})")
    print("\nEvidence:")
    for e in res["evidence"][:10]:
        span = f"[{e['start']}:{e['end']}]" if e["start"] is not None else "[?]"
        text = textwrap.shorten(" ".join(str(e.get("statement") or e["text"]).split()), 110)
        print(f"  {e['id']} ({e['kind']}) doc={e['document_id']} chunk={e['chunk_id']} {span}: {text}")
    if len(res["evidence"]) > 10:
        print(f"  ... and {len(res['evidence']) - 10} more")
    print("\nSources:")
    for n, s in enumerate(res.get("sources", [])[:8], 1):
        print(f"  {n}. {s['title'] or s['document_id']} (unit {s['text_unit_id']}; {', '.join(s['signals'])})")
    _print_common(res)


def print_global(res: dict[str, Any]) -> None:
    print(f"Question: {res['query']}")
    print(f"Status: {res['status']} (level {res['level']}, {len(res['map_answers'])} map answers, "
          f"{res['failed_batches']} failed batches)")
    print(f"\nAnswer{' (offline)' if res['offline'] else ''}:\n{res['answer']}")
    _print_common(res)


def _print_common(res: dict[str, Any]) -> None:
    for w in res["warnings"]:
        print(f"warning: {w}")
    print("\nStage timings (ms):")
    for node, ms in res["timings_ms"].items():
        print(f"  {node:<28} {ms:9.2f}")
    llm = res["llm"]
    print(f"LLM: {llm['calls']} calls, {llm['prompt_tokens']} prompt + {llm['completion_tokens']} completion tokens")
