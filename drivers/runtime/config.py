"""The settings a process runs with, from four layers: flags > environment > file > defaults.

The file is `graphrag-dag.toml`, looked for in the working folder, then in the user's home folder
(`GRAPHRAG_DAG_CONFIG` names another file; set empty, no file and no `.env` are read, which is
how the tests stay hermetic). Secrets never come from it: an API key or a DSN holding a password
there is refused, and they come from the environment or from a `.env` file in the working
folder, which sits between the two (a variable already set wins).

Everything downstream reads the environment, as it did before the file existed, so `apply`
writes the file's and `.env`'s values into `os.environ` where nothing is set. Search settings
(`[search]`) have no environment layer: they are the defaults of `query`'s flags.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.dataflows.common.settings import SEARCH_FLOWS, SETTINGS, Setting

FILE_NAME = "graphrag-dag.toml"
CONFIG_ENV = "GRAPHRAG_DAG_CONFIG"


@dataclass(frozen=True)
class Key:
    """One setting of the file: its dotted name there, its environment variable, the global flag
    that overrides both (if any), and what applies when nothing sets it."""

    name: str
    env: str
    default: str
    flag: str | None = None
    secret: bool = False


KEYS: tuple[Key, ...] = (
    Key("home", "GRAPHRAG_DAG_HOME", "the platform's user data folder", "--home"),
    Key("dsn", "GRAPHRAG_DAG_DSN", "the embedded server", "--dsn"),
    Key("query_dsn", "GRAPHRAG_DAG_QUERY_DSN", "dsn's, or the embedded server's query login", "--query-dsn"),
    Key("llm.base_url", "OPENAI_BASE_URL", "OpenAI's, when an API key is set"),
    Key("llm.api_key", "OPENAI_API_KEY", "none: searches run offline", secret=True),
    Key("llm.chat_model", "GRAPHRAG_DAG_CHAT_MODEL", "gpt-4o-mini"),
    Key("llm.embed_model", "GRAPHRAG_DAG_EMBED_MODEL", "none: the offline embedder"),
    Key("embedder", "GRAPHRAG_DAG_EMBEDDER", "wordllama"),
    Key("server.shared_buffers", "GRAPHRAG_DAG_SHARED_BUFFERS", "1GB"),
    Key("server.huge_pages", "GRAPHRAG_DAG_HUGE_PAGES", "try"),
    Key("server.prepare", "GRAPHRAG_DAG_PREPARE", "on"),
    Key("server.build_memory", "GRAPHRAG_DAG_BUILD_MEMORY", "sized to each build's graph"),
    Key("server.idle", "GRAPHRAG_DAG_SERVER_IDLE", "300 (seconds the embedded server stays up after its last user)"),
)
_PASSWORD = re.compile(r"://[^/@:]+:[^@]+@|password\s*=", re.IGNORECASE)


def default_home() -> Path:
    """The data folder: GRAPHRAG_DAG_HOME, else the platform's user data folder."""
    env = os.environ.get("GRAPHRAG_DAG_HOME")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("graphrag-dag"))


def search_settings() -> dict[str, Setting]:
    """Each search setting by name (a name several methods share is one setting of the CLI)."""
    found: dict[str, Setting] = {}
    for flow in SEARCH_FLOWS:
        for s in SETTINGS[flow]:
            found.setdefault(s.name, s)
    return found


@dataclass
class Config:
    """The effective settings: each key's value and where it came from ("flag --home",
    "environment GRAPHRAG_DAG_HOME", ".env GRAPHRAG_DAG_HOME", "file <path>", or "default")."""

    file: Path | None
    values: dict[str, tuple[str | None, str]] = field(default_factory=dict)
    search: dict[str, tuple[Any, str]] = field(default_factory=dict)

    def apply(self, environ: Any = os.environ) -> None:
        """Write what the file and `.env` give into the environment, where nothing is set."""
        for key in KEYS:
            value, source = self.values[key.name]
            if value is not None and not source.startswith(("flag", "environment", "default")):
                environ.setdefault(key.env, value)

    def as_json(self) -> dict[str, Any]:
        shown = {}
        for key in KEYS:
            value, source = self.values[key.name]
            shown[key.name] = {"value": ("(set)" if key.secret and value else value), "source": source,
                               "env": key.env, **({"default": key.default} if value is None else {})}
        return {"file": str(self.file) if self.file else None, "settings": shown,
                "search": {name: {"value": value, "source": source} for name, (value, source) in self.search.items()}}


def config_file(environ: Mapping[str, str], cwd: Path) -> Path | None:
    named = environ.get(CONFIG_ENV)
    if named is not None:
        if not named:
            return None
        path = Path(named).expanduser()
        if not path.is_file():
            raise BadInput(f"{CONFIG_ENV} names {path}, which is not a file")
        return path
    for folder in (cwd, Path.home()):
        if (folder / FILE_NAME).is_file():
            return folder / FILE_NAME
    return None


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in table.items():
        if isinstance(v, dict) and prefix + k != "search":
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def _read_file(path: Path) -> tuple[dict[str, str], dict[str, Any]]:
    """The file's keys (checked: known, not secret, strings) and its [search] table (each value
    checked by its setting's own rule)."""
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: {exc}") from None
    flat = _flatten(table)
    search = flat.pop("search", {})
    if not isinstance(search, dict):
        raise BadInput(f"{path}: search must be a table of search settings")
    known = {key.name: key for key in KEYS}
    values: dict[str, str] = {}
    for name, value in flat.items():
        key = known.get(name)
        if key is None:
            raise BadInput(f"{path}: unknown setting {name!r} (known: {', '.join(known)}, and a [search] table)")
        if key.secret or (name.endswith("dsn") and isinstance(value, str) and _PASSWORD.search(value)):
            raise BadInput(f"{path}: {name} holds a secret, which belongs in the environment or .env "
                           f"({key.env}), never in the file")
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise BadInput(f"{path}: {name} must be a string")
        values[name] = str(value)
    settings = search_settings()
    checked: dict[str, Any] = {}
    for name, value in search.items():
        if name not in settings:
            raise BadInput(f"{path}: [search] has no setting {name!r} (see graphrag-dag query --help)")
        try:
            checked[name] = settings[name].check(value)
        except BadInput as exc:
            raise BadInput(f"{path}: [search] {exc}") from None
    return values, checked


def _read_dotenv(cwd: Path) -> dict[str, str]:
    path = cwd / ".env"
    if not path.is_file():
        return {}
    from dotenv import dotenv_values

    return {k: v for k, v in dotenv_values(path).items() if v is not None}


def load(flags: Mapping[str, str | None] | None = None, environ: Mapping[str, str] | None = None,
         cwd: Path | None = None) -> Config:
    """The four layers resolved; `flags` maps a key's name to its flag's value (None: not given)."""
    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else cwd
    flags = flags or {}
    path = config_file(environ, cwd)
    from_file, search = _read_file(path) if path else ({}, {})
    dotenv = {} if environ.get(CONFIG_ENV) == "" else _read_dotenv(cwd)
    config = Config(file=path)
    for key in KEYS:
        if flags.get(key.name) is not None:
            config.values[key.name] = (flags[key.name], f"flag {key.flag}")
        elif environ.get(key.env):
            config.values[key.name] = (environ[key.env], f"environment {key.env}")
        elif dotenv.get(key.env):
            config.values[key.name] = (dotenv[key.env], f".env {key.env}")
        elif key.name in from_file:
            config.values[key.name] = (from_file[key.name], f"file {path}")
        else:
            config.values[key.name] = (None, "default")
    for name, setting in search_settings().items():
        config.search[name] = (search[name], f"file {path}") if name in search else (setting.default, "default")
    return config


def package_version() -> str:
    """The installed distribution's version (package metadata is the one place it is written):
    what `--version` prints and what an index records of the rules that made it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("graphrag-dag")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"
