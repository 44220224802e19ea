"""A report's table as text: a header row, a rule, and the rows, the first column left-aligned."""

from __future__ import annotations

from typing import Any


def text_table(title: str, report: dict[str, Any], head: list[str], rows: list[list[str]]) -> str:
    """The table under a line naming the benchmark, where it ran and the load average."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    where = f"namespace {report['namespace']!r}" if report["namespace"] else "a scratch offline index"
    return "\n".join([f"{report['benchmark']}: {title} on {where} (load average {', '.join(map(str, report['load_avg']))})",
                      line(head), "  ".join("-" * w for w in widths), *map(line, rows)])
