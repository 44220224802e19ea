"""API keys: created once and shown once, stored as a SHA-256 of the secret, each granting one
role on a list of namespaces. A key reads `grd_<id>_<secret>`: the id finds the row, the secret is
compared in constant time. The key table is read on every request, so revoking is immediate."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

from graphrag_dag.dataflows.common.errors import BadInput
from graphrag_dag.drivers.store import validate_namespace

ROLES = ("query", "write", "admin")  # each includes what the ones before it may do
ALL = "*"

INSERT = "INSERT INTO api_keys (id, secret_hash, namespaces, role, label) VALUES (%s, %s, %s, %s, %s)"
LOOKUP = "SELECT secret_hash, namespaces, role FROM api_keys WHERE id = %s AND revoked_at IS NULL"
LIST = "SELECT id, namespaces, role, label, created_at, revoked_at FROM api_keys ORDER BY created_at, id"
REVOKE = "UPDATE api_keys SET revoked_at = now() WHERE id = %s AND revoked_at IS NULL RETURNING id"


@dataclass(frozen=True)
class Principal:
    """Who is calling: a key's id, its namespaces (None: all) and its role."""

    key_id: str
    namespaces: frozenset[str] | None
    role: str

    def may(self, namespace: str, role: str = "query") -> bool:
        return (self.namespaces is None or namespace in self.namespaces) and ROLES.index(self.role) >= ROLES.index(role)

    def visible(self, names: list[str]) -> list[str]:
        return [n for n in names if self.namespaces is None or n in self.namespaces]


OPEN = Principal("no-auth", None, "admin")  # `serve --no-auth` on a loopback host


def bearer(headers: Any) -> str:
    """The key of an `Authorization: Bearer <key>` header ("" when there is none)."""
    scheme, _, key = (headers.get("authorization") or "").partition(" ") if headers else ("", "", "")
    return key.strip() if scheme.lower() == "bearer" else ""


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_namespaces(text: str) -> list[str]:
    """A key's namespaces: names, or '*' alone for all ('*,x' would read as all and as x)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise BadInput("--namespace needs at least one namespace (or '*' for all)")
    if ALL in names and len(names) > 1:
        raise BadInput("--namespace '*' means every namespace: give it alone, or list the namespaces")
    return [n if n == ALL else validate_namespace(n) for n in names]


def printable(text: str) -> str:
    """A label as a terminal may show it: control characters (escape sequences included) escaped."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def check_label(label: str) -> str:
    if len(label) > 200 or not label.isprintable():
        raise BadInput("--label must be printable text of at most 200 characters")
    return label


class KeyStore:
    """The api_keys table, through the store's (administrative) pool."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def create(self, namespaces: list[str], role: str, label: str = "") -> dict[str, Any]:
        if role not in ROLES:
            raise BadInput(f"unknown role {role!r}: use {', '.join(ROLES)}")
        check_label(label)
        key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        with self.store.pool.connection() as conn:
            conn.execute(INSERT, (key_id, _digest(secret), namespaces, role, label))
        return {"key": f"grd_{key_id}_{secret}", "id": key_id, "namespaces": namespaces, "role": role}

    def list(self) -> list[dict[str, Any]]:
        return [{"id": i, "namespaces": list(ns), "role": r, "label": lb, "created_at": c.isoformat(),
                 "revoked_at": v.isoformat() if v else None}
                for i, ns, r, lb, c, v in self.store.admin_rows(LIST)]

    def revoke(self, key_id: str) -> bool:
        with self.store.pool.connection() as conn:
            return conn.execute(REVOKE, (key_id,)).fetchone() is not None

    def verify(self, key: str) -> Principal | None:
        """The principal of a presented key, or None (malformed, unknown, revoked or wrong)."""
        parts = key.split("_", 2) if isinstance(key, str) else []
        if len(parts) != 3 or parts[0] != "grd" or not parts[1] or not parts[2] or len(key) > 200:
            return None
        rows = self.store.admin_rows(LOOKUP, (parts[1],))
        if not rows or not hmac.compare_digest(rows[0][0], _digest(parts[2])):
            return None
        names, role = rows[0][1], rows[0][2]
        return Principal(parts[1], None if ALL in names else frozenset(names), role)
