"""The relay's storage backends as test fixtures see them: one contract, two databases.

A :class:`Backend` is one fresh, empty relay database location (a SQLite
file path or a PostgreSQL URL naming a database of its own) plus the raw
SQL escape hatch a few tests use to force states no API reaches (a team at
the sequence maximum, a full policy history). Raw SQL is written with ``?``
placeholders and the SQLite table names; on PostgreSQL the connection's
``search_path`` is the relay schema and ``?`` becomes ``%s``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import pytest

from relay.storage import location
from relay.storage.base import RelayStore

BACKENDS = ("sqlite", "postgres")


@dataclass
class Backend:
    name: str
    location: str
    initialized: bool = False

    @property
    def is_postgres(self) -> bool:
        return self.name == "postgres"

    def initialize(self) -> str:
        return location.initialize(self.location)

    def open(self, **kwargs: Any) -> RelayStore:
        return location.open_store(self.location, **kwargs)

    def new_store(self, **kwargs: Any) -> RelayStore:
        """Initialize the database (once) and open a store on it."""
        if not self.initialized and not self._initialized():
            self.initialize()
        self.initialized = True
        return self.open(**kwargs)

    def _initialized(self) -> bool:
        if not self.is_postgres:
            return Path(self.location).exists()
        import psycopg

        from relay.storage.pg_schema import RELAY_SCHEMA

        with psycopg.connect(self.location) as conn:
            row = conn.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (RELAY_SCHEMA,)
            ).fetchone()
        return row is not None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run raw SQL in one transaction outside any store."""
        if not self.is_postgres:
            conn = apsw.Connection(self.location)
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(sql, tuple(params))
                conn.execute("COMMIT")
            finally:
                conn.close()
            return
        import psycopg

        from relay.storage.pg_schema import RELAY_SCHEMA

        with psycopg.connect(self.location) as conn:  # type: ignore[assignment]
            conn.execute(f"SET search_path TO {RELAY_SCHEMA}")
            conn.execute(sql.replace("?", "%s"), tuple(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not self.is_postgres:
            conn = apsw.Connection(self.location)
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(sql, [tuple(r) for r in rows])
                conn.execute("COMMIT")
            finally:
                conn.close()
            return
        import psycopg

        from relay.storage.pg_schema import RELAY_SCHEMA

        with psycopg.connect(self.location) as conn, conn.cursor() as cur:  # type: ignore[assignment, attr-defined]
            cur.execute(f"SET search_path TO {RELAY_SCHEMA}")
            cur.executemany(sql.replace("?", "%s"), [tuple(r) for r in rows])

    def dump(self) -> bytes:
        """Every byte the database holds about the relay, for secrecy audits.

        SQLite: the database files themselves. PostgreSQL: every row of every
        relay table as JSON, where ``bytea`` appears as ``\\x`` + hex.
        """
        if not self.is_postgres:
            base = Path(self.location)
            return b"".join(
                p.read_bytes() for p in base.parent.iterdir() if p.name.startswith(base.name)
            )
        import psycopg

        from relay.storage.pg_schema import RELAY_SCHEMA

        out: list[bytes] = []
        with psycopg.connect(self.location) as conn:
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                    (RELAY_SCHEMA,),
                )
            ]
            for table in tables:
                for (row,) in conn.execute(
                    f"SELECT row_to_json(t)::text FROM {RELAY_SCHEMA}.{table} t"
                ):
                    out.append(str(row).encode())
        return b"\n".join(out)


def require_postgres() -> Any:
    """The session's PostgreSQL server; skipped (outside CI) when it cannot run here."""
    from tests.relay.pg_server import PostgresUnavailable, shared_server

    try:
        return shared_server()
    except PostgresUnavailable as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"PostgreSQL is not available here: {exc}")
