"""The schema: versioned SQL files in sql/, applied once each under an advisory lock, so that two
processes connecting to a new database at once cannot both apply them."""

from __future__ import annotations

import sys
from importlib import resources as importlib_resources

import psycopg
from psycopg import sql

READER_ROLE = "graphrag_reader"
MIGRATION_LOCK_KEY = 727274  # also held while the embedded server's roles are made


def sql_files() -> list[tuple[int, str, str]]:
    folder = importlib_resources.files(__package__) / "sql"
    out = []
    for entry in folder.iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:1].isdigit():  # roles.sql is not a migration: it needs an administrator
            out.append((int(name.split("_", 1)[0]), name, entry.read_text(encoding="utf-8")))
    return sorted(out)


# Whether the login lacks the reader role: the role exists and the login is no superuser and no
# member. Asked first, so that a login that may not grant it (the embedded writer, a member already)
# does not leave a "permission denied to grant role" error in the server's log at every start.
NEEDS_READER = """SELECT r.oid IS NOT NULL AND NOT pg_has_role(current_user, r.oid, 'MEMBER')
                  FROM (SELECT 1) AS one LEFT JOIN pg_roles AS r ON r.rolname = %s"""


def _needs_reader_role(conn: psycopg.Connection) -> bool:
    return bool(conn.execute(NEEDS_READER, (READER_ROLE,)).fetchone()[0])


def migrate(conn: psycopg.Connection) -> None:
    """Apply pending migrations once; an advisory lock makes concurrent first connections safe."""
    conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")
        done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations").fetchall()}
        pending = [name for version, name, _ in sql_files() if version not in done]
        if done and pending:  # an existing database: converting its rows can take minutes, say so
            sys.stderr.write(f"[graphrag-dag] upgrading the database schema ({', '.join(pending)}); "
                             "on a large database this takes minutes\n")
        for version, name, text in sql_files():
            if version in done:
                continue
            with conn.transaction():
                conn.execute(text)
                conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name))
        if _needs_reader_role(conn):
            try:
                with conn.transaction():
                    conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(sql.Identifier(READER_ROLE)))
            except psycopg.Error:
                pass  # the searches then say what is missing when they SET ROLE
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
