"""A synthetic namespace made as a user makes one: `graphrag-dag synth`, then `import-graphrag`,
both through the command line (not a test module)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from shared_data import PROJECT_ROOT


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", *args], capture_output=True, text=True,
                          env=env, cwd=PROJECT_ROOT, timeout=600)


def synthetic_namespace(env: dict[str, str], folder: Path, namespace: str, entities: int, seed: int) -> dict:
    """Generate `entities` entities into `folder`, import them as `namespace`; the import's counts."""
    made = cli(env, "synth", "--entities", str(entities), "--seed", str(seed), "--out", str(folder), "--json")
    assert made.returncode == 0, made.stderr
    imported = cli(env, "import-graphrag", str(folder), "--namespace", namespace, "--replace", "--json")
    assert imported.returncode == 0, imported.stderr
    return json.loads(imported.stdout)
