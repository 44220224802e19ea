"""Least privilege: searches log in as a role that is neither a superuser nor the owner of any
table, so row-level security binds every statement they run, whatever role they set or reset."""

from __future__ import annotations

import psycopg
import pytest

from test_isolation import tenants  # noqa: F401 - the fixture: tenant-a and tenant-b, same names, other facts


def _one(conn: psycopg.Connection, query: str, params: tuple = ()) -> tuple:
    return conn.execute(query, params).fetchone()


def test_the_query_role_is_no_superuser_and_owns_no_table(rag):
    assert rag.store.query_pool is not rag.store.pool
    with rag.store.query_pool.connection() as conn:
        user, superuser, bypass = _one(conn, "SELECT rolname, rolsuper, rolbypassrls FROM pg_roles "
                                             "WHERE rolname = current_user")
        owned = _one(conn, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tableowner = current_user")
        owners = {r[0] for r in conn.execute("SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'")}
    assert user == "graphrag_query" and superuser is False and bypass is False
    assert owned == (0,)
    assert owners == {"graphrag_writer"}
    with rag.store.pool.connection() as conn:
        assert _one(conn, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user") == (False,)


def test_set_role_and_reset_role_cannot_lift_row_level_security(tenants):  # noqa: F811
    with tenants.store.query_pool.connection() as conn:
        with conn.transaction():
            conn.execute("SELECT set_config('graphrag.namespace', 'tenant-a', true)")
            for statement in ("RESET ROLE", "SET ROLE graphrag_reader", "RESET ROLE", "SET ROLE NONE"):
                conn.execute(statement)
                seen = {r[0] for r in conn.execute("SELECT DISTINCT namespace FROM entities")}
                assert seen == {"tenant-a"}, statement
                facts = conn.execute("SELECT description FROM entities").fetchall()
                assert facts and all("FACT-A" in d for (d,) in facts)
        with conn.transaction():  # no namespace set: nothing at all
            conn.execute("RESET ROLE")
            assert _one(conn, "SELECT count(*) FROM entities") == (0,)
        # Each is refused; `row_security = off` is accepted, but then a query that the policy
        # would filter fails instead of running unfiltered.
        for statement in ("SET ROLE graphrag_writer", "SET ROLE postgres", "SET SESSION AUTHORIZATION postgres",
                          "SET row_security = off"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute(statement)
                conn.execute("SELECT set_config('graphrag.namespace', 'tenant-a', true)")
                conn.execute("SELECT count(*) FROM entities WHERE namespace = 'tenant-b'")


@pytest.mark.parametrize("statement", ["DELETE FROM entities", "UPDATE namespaces SET source = 'x'",
                                       "SELECT * FROM api_keys", "CREATE TABLE stolen (x int)",
                                       "ALTER TABLE entities DISABLE ROW LEVEL SECURITY"])
def test_the_query_role_cannot_write_or_read_the_keys(rag, statement):
    with rag.store.query_pool.connection() as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
            conn.execute(statement)


def test_the_documented_roles_serve_an_external_database(rag, home):
    """The packaged roles.sql and docs/postgres-passwords.sql, run as an administrator on a new
    database as docker-compose.yml runs them, give the two DSNs the README describes: the writer
    builds the schema and the demo, the query role searches it."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from graphrag_dag.drivers.api import GraphRag
    from graphrag_dag.drivers.store.server import roles_sql
    from shared_data import PROJECT_ROOT

    admin = make_conninfo(rag.dsn, user="postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS roles_external")
        conn.execute("CREATE DATABASE roles_external")
    database = make_conninfo(admin, dbname="roles_external")
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(roles_sql())
        conn.execute((PROJECT_ROOT / "docs" / "postgres-passwords.sql").read_text(encoding="utf-8"))
    external = GraphRag(make_conninfo(database, user="graphrag_writer"),
                        query_dsn=make_conninfo(database, user="graphrag_query"), home=home)
    try:
        external.load_demo()
        result = external.local_search("Who funded the Stormwatch Project?", "demo", offline=True)
        assert result["status"] == "completed" and result["evidence"]
        with external.store.query_pool.connection() as conn:
            assert conn.execute("SELECT current_user, current_database()").fetchone() == (
                "graphrag_query", "roles_external")
            assert conn.execute("SELECT count(*) FROM pg_tables WHERE tableowner = current_user").fetchone() == (0,)
    finally:
        external.close()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("DROP DATABASE roles_external WITH (FORCE)")
    assert conninfo_to_dict(external.store.query_dsn)["user"] == "graphrag_query"
