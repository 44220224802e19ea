"""A synthetic namespace made as a user makes one: `graphrag-dag synth`, then `import-graphrag`,
both through the command line (not a test module).

A large one (the plan test's 20k entities) takes about two minutes to make, most of it waiting on
the embedder or the server, so it can be made in the background while other tests run: in a home
of its own, so its write neither waits for nor delays the session's own writes (a test that counts
the writers waiting for their turn would otherwise count it too)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from shared_data import PROJECT_ROOT

_CLEAN_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GRAPHRAG_DAG_CHAT_MODEL", "GRAPHRAG_DAG_DSN")


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


class BackgroundNamespace:
    """`synthetic_namespace` in a child process with its own home, started now, awaited by `result`."""

    def __init__(self, home: Path, namespace: str, entities: int, seed: int) -> None:
        self.home = home
        self.namespace = namespace
        env = {k: v for k, v in os.environ.items() if k not in _CLEAN_ENV}
        env["GRAPHRAG_DAG_HOME"] = str(home)
        self._log = home / "make.log"
        with self._log.open("w") as log:
            self._proc = subprocess.Popen(
                [sys.executable, __file__, str(home / "index"), namespace, str(entities), str(seed)],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=PROJECT_ROOT)

    def result(self, timeout: float = 900) -> dict:
        """The import's counts; fails with the child's output if it failed."""
        rc = self._proc.wait(timeout=timeout)
        out = self._log.read_text()
        assert rc == 0, out[-4000:]
        return json.loads(out.strip().splitlines()[-1])

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


# The plan test's 20k-entity namespace, begun by conftest at the end of collection.
PLANS_NAMESPACE: dict[str, BackgroundNamespace] = {}


if __name__ == "__main__":
    # The child: make the namespace in $GRAPHRAG_DAG_HOME and print the import's counts last.
    folder, ns, n, seed = sys.argv[1:5]
    counts = synthetic_namespace(dict(os.environ), Path(folder), ns, int(n), int(seed))
    print(json.dumps(counts), flush=True)
