"""Shared fixtures: one embedded PostgreSQL for the session (real server, real pgvector), the demo
namespace loaded once, and the loopback OpenAI-compatible server."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
# No graphrag-dag.toml or .env of the person running the tests reaches the CLI they start (the
# configuration tests set their own).
os.environ["GRAPHRAG_DAG_CONFIG"] = ""
# An embedded server stops with its last user, as the tests of its life expect, and no test home's
# server outlives the session (tests/test_embedded_idle.py sets its own grace period).
os.environ["GRAPHRAG_DAG_SERVER_IDLE"] = "0"

from llm_server import LlmServer  # noqa: E402
from synthetic import PLANS_NAMESPACE, BackgroundNamespace  # noqa: E402


def _remove_stopped_home(path: Path) -> None:
    """The session's home, unless its server still runs (another process still uses it)."""
    if not (path / "pgdata" / "postmaster.pid").exists():
        shutil.rmtree(path, ignore_errors=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start making the plan test's namespace if that test is to run: it takes about two minutes,
    which other tests then fill instead of waiting through."""
    if any(item.path.name == "test_plans.py" for item in session.items) and not PLANS_NAMESPACE:
        path = Path(tempfile.mkdtemp(prefix="graphrag-dag-plans-"))
        atexit.register(_remove_stopped_home, path)  # before any server of that home starts
        made = PLANS_NAMESPACE["plans-20k"] = BackgroundNamespace(path, "plans-20k", 20000, 5)
        atexit.register(made.stop)  # runs first: an interrupted session does not wait for it


@pytest.fixture(scope="session")
def home() -> Path:
    # Not tmp_path_factory: concurrent pytest sessions prune each other's old numbered tmp dirs,
    # which would delete a running server's data folder.
    given = os.environ.get("GRAPHRAG_DAG_TEST_HOME")
    path = Path(given or tempfile.mkdtemp(prefix="graphrag-dag-test-"))
    if not given:
        # Registered before the server starts, so it runs after the server's own exit handler has
        # stopped it (atexit runs last-registered first): a full run leaves about 2 GB otherwise.
        atexit.register(_remove_stopped_home, path)
    os.environ["GRAPHRAG_DAG_HOME"] = str(path)
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GRAPHRAG_DAG_CHAT_MODEL", "GRAPHRAG_DAG_EMBED_MODEL"):
        os.environ.pop(var, None)
    return path


@pytest.fixture(scope="session")
def rag(home: Path):
    """An offline GraphRag over the session's embedded server, with the demo namespace loaded."""
    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.llm.chat import ChatConfig

    instance = GraphRag(home=home, chat=ChatConfig())
    instance.load_demo()
    yield instance
    instance.close()


@pytest.fixture()
def llm_server():
    with LlmServer() as server:
        yield server


@pytest.fixture()
def chat_config(llm_server: LlmServer):
    from graphrag_dag.drivers.llm.chat import ChatConfig

    return ChatConfig(model="test-model", base_url=llm_server.base_url, api_key="test", timeout=10, max_retries=0)


@pytest.fixture(scope="session")
def cli_env(home: Path, rag) -> dict[str, str]:
    """Environment for `graphrag-dag` subprocesses: same home (so the same embedded server), offline."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GRAPHRAG_DAG_CHAT_MODEL", "GRAPHRAG_DAG_DSN")}
    env["GRAPHRAG_DAG_HOME"] = str(home)
    return env


@pytest.fixture
def interruptible():
    """SIGINT handled as in an interactive run. A shell starts a background job with SIGINT ignored,
    a CI runner may too, and a process started from here would inherit that and ignore Ctrl-C (an
    ignored signal stays ignored across exec; a handled one is reset to the default, on which
    Python raises KeyboardInterrupt)."""
    import signal

    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)
