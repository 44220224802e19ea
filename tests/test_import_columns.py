"""Wrong column types and repeated ids in a GraphRAG output are bad input: exit 2, one line that
names the file and the column, and nothing written."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from shared_data import PROJECT_ROOT, graphrag_output


def _break(folder, table: str, column: str, make) -> None:
    path = folder / f"{table}.parquet"
    t = pq.read_table(path)
    t = t.set_column(t.column_names.index(column), column, make(t.column(column)))
    pq.write_table(t, path)


CASES = {
    "integer-title": ("entities", "title", lambda c: pa.array(range(len(c)), pa.int64()), "column title must be text"),
    "text-weight": ("relationships", "weight", lambda c: pa.array(["heavy"] * len(c)), "column weight must be a number"),
    "duplicate-ids": ("entities", "id", lambda c: pc.if_else(pa.array([i < 2 for i in range(len(c))]),
                                                              c[0].as_py(), c), "column id repeats the value"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_bad_columns_exit_2_naming_file_and_column(case, cli_env, rag, tmp_path):
    table, column, make, message = CASES[case]
    folder = tmp_path / "out"
    shutil.copytree(graphrag_output("christmas-carol-3.1.2"), folder)
    _break(folder, table, column, make)
    ns = f"bad-{case}"
    proc = subprocess.run([sys.executable, "-m", "graphrag_dag.drivers.cli", "import-graphrag", str(folder),
                           "--namespace", ns], env=cli_env, capture_output=True, text=True, cwd=PROJECT_ROOT,
                          timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith("[graphrag-dag]")]
    assert len(lines) == 1 and f"{table}.parquet" in lines[0] and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert ns not in {n["namespace"] for n in rag.store.namespaces()}
