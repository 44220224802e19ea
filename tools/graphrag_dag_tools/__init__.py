"""The benchmark, quality and synthetic-data tools behind `bench`, `servebench`, `eval` and `synth`."""

from __future__ import annotations

import os


def load_avg() -> list[float]:
    """The machine's load average over 1, 5 and 15 minutes, as every tool's report gives it."""
    return [round(x, 2) for x in os.getloadavg()]
