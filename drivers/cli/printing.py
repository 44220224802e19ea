"""The command line's human-readable output of a query (with --json it prints the contract).

Everything printed for a person passes through `say`, which removes terminal control sequences:
an answer, a title or a passage is text from a model or a document, and must not be able to move
the cursor, retitle the window or hide what follows. JSON keeps the text as it is (escaped)."""

from __future__ import annotations

import re
import sys
import textwrap
from typing import Any

# ANSI/VT sequences (CSI ... final byte; OSC ... BEL or ST; two-byte ESC x), then any other C0/C1
# control character except newline and tab.
_CONTROL_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|"
                         r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(text: str) -> str:
    return _CONTROL_RE.sub("", text)


LLM_FAILURE = re.compile(r"^(?P<task>.+?) by LLM (?P<problem>.+?); (?P<instead>.+)$")


def llm_failure(warning: str) -> re.Match[str] | None:
    """A warning that a stage's LLM call failed and what the stage did instead
    (dataflows/common/prompting.py writes them: "<task> by LLM <problem>; <fallback>")."""
    return LLM_FAILURE.match(warning)


def llm_failure_line(res: dict[str, Any], endpoint: str) -> str | None:
    """One line for every LLM failure of a result: which endpoint, the first error, and what was
    done instead; None when the model answered every call."""
    failed = [m for m in map(llm_failure, res.get("warnings", [])) if m]
    if not failed:
        return None
    instead = "; ".join(dict.fromkeys(m["instead"] for m in failed))
    steps = f"{len(failed)} step{'s' if len(failed) > 1 else ''}"
    return clean(f"graphrag-dag: warning: the LLM at {endpoint} {failed[0]['problem']} in {steps}; "
                 f"answered without it: {instead}")


def say(text: str = "") -> None:
    print(clean(text))


SHORT_ID = 16  # ids longer than this are shown by their head and tail
_WIDTH = 118  # evidence lines are cut to fit this many characters


def short_ids(ids: list[str]) -> dict[str, str]:
    """Display forms for long ids (a 128-hex GraphRAG id becomes `3f2a9c…e41b07-ev3`-like), as
    short as keeps them apart within one output; the JSON keeps the full ids. An excerpt's
    `#start-end` stays whole. `graphrag-dag source` (and the HTTP and MCP lookups) accept the
    display form: it stands for the one id of the namespace with that head and tail."""
    long_ids = sorted({i for i in ids if i and len(_excerpt_split(i)[0]) > SHORT_ID})
    for keep in range(6, SHORT_ID):
        shown = {i: _shorten(i, keep) for i in long_ids}
        if len(set(shown.values())) == len(shown):
            return shown
    return {i: i for i in long_ids}


def _excerpt_split(evidence_id: str) -> tuple[str, str]:
    """(the chunk's id, `#start-end`) for an excerpt's id, (the id, "") for any other."""
    match = re.fullmatch(r"(.*)(#\d+-\d+)", evidence_id)
    return (match[1], match[2]) if match else (evidence_id, "")


def _shorten(evidence_id: str, keep: int) -> str:
    base, suffix = _excerpt_split(evidence_id)
    return f"{base[:keep]}…{base[-keep:]}{suffix}"


def _shortened(text: str, shown: dict[str, str]) -> str:
    for full, short in shown.items():
        text = text.replace(full, short)
    return text


def print_local(res: dict[str, Any]) -> None:
    titles = {s["document_id"]: s["title"] for s in res.get("sources", []) if s.get("title")}
    shown = short_ids([e[k] for e in res["evidence"] for k in ("id", "document_id", "chunk_id") if e.get(k)]
                      + [c["id"] for c in res["communities"]] + [s["text_unit_id"] for s in res.get("sources", [])])
    say(f"Question: {res['query']}")
    say(f"\nAnswer{' (offline)' if res['offline'] else ''}:\n{_shortened(res['answer'], shown)}\n")
    say("Communities:")
    for c in res["communities"]:
        ents = ", ".join(c["matched_entities"]) or "-"
        say(f"  [{shown.get(c['id'], c['id'])}] level {c['level']} {c['title']}  (score {c['score']:.4f}; "
            f"matched: {ents})")
    say("\nEvidence:")
    for e in res["evidence"][:10]:
        span = f"[{e['start']}:{e['end']}]" if e["start"] is not None else "[?]"
        doc = titles.get(e["document_id"]) or shown.get(e["document_id"], e["document_id"])
        head = f"  {shown.get(e['id'], e['id'])} ({e['kind']}) {textwrap.shorten(str(doc), 30)} {span}: "
        body = " ".join(str(e.get("statement") or e["text"]).split())
        say(head + textwrap.shorten(body, max(40, _WIDTH - len(head))))
    if len(res["evidence"]) > 10:
        say(f"  ... and {len(res['evidence']) - 10} more")
    say("\nSources:")
    for n, s in enumerate(res.get("sources", [])[:8], 1):
        unit = shown.get(s["text_unit_id"], s["text_unit_id"])
        say(f"  {n}. {s['title'] or shown.get(s['document_id'], s['document_id'])} (unit {unit}; "
            f"{', '.join(s['signals'])})")
    _print_common(res)


def print_global(res: dict[str, Any]) -> None:
    from graphrag_dag.dataflows.common.citations import citable_ids  # it brings the prompts: only when printing

    say(f"Question: {res['query']}")
    say(f"Status: {res['status']} (level {res['level']}, {len(res['map_answers'])} map answers, "
          f"{res['failed_batches']} failed batches)")
    shown = short_ids(sorted(citable_ids(res["answer"])))
    say(f"\nAnswer{' (offline)' if res['offline'] else ''}:\n{_shortened(res['answer'], shown)}")
    _print_common(res)


def print_drift(res: dict[str, Any]) -> None:
    shown = short_ids([e[k] for e in res["evidence"] for k in ("id", "document_id", "chunk_id") if e.get(k)]
                      + [c["id"] for c in res["primer"]["communities"]])
    say(f"Question: {res['query']}")
    say(f"Status: {res['status']} ({len(res['primer']['communities'])} primer reports, {len(res['steps'])} follow-ups)")
    say(f"\nAnswer{' (offline)' if res['offline'] else ''}:\n{_shortened(res['answer'], shown)}\n")
    say("Follow-ups:")
    for s in res["steps"]:
        say(f"  step {s['depth']}: {s['question']}  ({s['status']}, {len(s['evidence'])} evidence, {s['ms']:.0f} ms)")
    say(f"\nEvidence: {len(res['evidence'])} items from every step; sources: {len(res['sources'])} passages")
    _print_common(res)


def print_warm(report: Any) -> None:
    """`warm`'s report (drivers/store/warm.py): what was read, by kind, and whether it all stays."""
    for kind, label in {"table": "tables", "btree": "b-trees", "hnsw": "vector graphs"}.items():
        mine = [r for r in report.relations if r.kind == kind]
        print(f"{label}: {len(mine)}, {sum(r.read_mb for r in mine):,.0f} MB read")
    print(f"warmed {report.namespace} in {report.seconds:.1f} s: {report.read_mb:,.0f} MB read into "
          f"{report.shared_buffers_mb:,.0f} MB of shared buffers")
    if report.read_mb > report.shared_buffers_mb:
        print("the namespace is larger than the buffers: the vector graphs, read last, stay; "
              "a larger shared_buffers keeps all of it (docs/contract.md, GRAPHRAG_DAG_SHARED_BUFFERS)")


def _print_common(res: dict[str, Any]) -> None:
    for w in res["warnings"]:
        if not llm_failure(w):  # those are summed up in one line (llm_failure_line)
            print(f"warning: {clean(w)}", file=sys.stderr)
    say("\nStage timings (ms):")
    for node, ms in res["timings_ms"].items():
        say(f"  {node:<28} {ms:9.2f}")
    llm = res["llm"]
    say(f"LLM: {llm['calls']} calls, {llm['prompt_tokens']} prompt + {llm['completion_tokens']} completion tokens")
