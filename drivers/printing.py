"""The command line's human-readable output of a query (with --json it prints the contract).

Everything printed for a person passes through `say`, which removes terminal control sequences:
an answer, a title or a passage is text from a model or a document, and must not be able to move
the cursor, retitle the window or hide what follows. JSON keeps the text as it is (escaped)."""

from __future__ import annotations

import re
import textwrap
from typing import Any

# ANSI/VT sequences (CSI ... final byte; OSC ... BEL or ST; two-byte ESC x), then any other C0/C1
# control character except newline and tab.
_CONTROL_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|"
                         r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(text: str) -> str:
    return _CONTROL_RE.sub("", text)


def say(text: str = "") -> None:
    print(clean(text))


def print_local(res: dict[str, Any]) -> None:
    say(f"Question: {res['query']}")
    say(f"\nAnswer{' (offline)' if res['offline'] else ''}:\n{res['answer']}\n")
    say("Communities:")
    for c in res["communities"]:
        ents = ", ".join(c["matched_entities"]) or "-"
        say(f"  [{c['id']}] level {c['level']} {c['title']}  (score {c['score']:.4f}; matched: {ents})")
    say("\nEvidence:")
    for e in res["evidence"][:10]:
        span = f"[{e['start']}:{e['end']}]" if e["start"] is not None else "[?]"
        text = textwrap.shorten(" ".join(str(e.get("statement") or e["text"]).split()), 110)
        say(f"  {e['id']} ({e['kind']}) doc={e['document_id']} chunk={e['chunk_id']} {span}: {text}")
    if len(res["evidence"]) > 10:
        say(f"  ... and {len(res['evidence']) - 10} more")
    say("\nSources:")
    for n, s in enumerate(res.get("sources", [])[:8], 1):
        say(f"  {n}. {s['title'] or s['document_id']} (unit {s['text_unit_id']}; {', '.join(s['signals'])})")
    _print_common(res)


def print_global(res: dict[str, Any]) -> None:
    say(f"Question: {res['query']}")
    say(f"Status: {res['status']} (level {res['level']}, {len(res['map_answers'])} map answers, "
          f"{res['failed_batches']} failed batches)")
    say(f"\nAnswer{' (offline)' if res['offline'] else ''}:\n{res['answer']}")
    _print_common(res)


def _print_common(res: dict[str, Any]) -> None:
    for w in res["warnings"]:
        say(f"warning: {w}")
    say("\nStage timings (ms):")
    for node, ms in res["timings_ms"].items():
        say(f"  {node:<28} {ms:9.2f}")
    llm = res["llm"]
    say(f"LLM: {llm['calls']} calls, {llm['prompt_tokens']} prompt + {llm['completion_tokens']} completion tokens")
