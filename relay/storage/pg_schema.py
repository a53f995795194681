"""The relay's PostgreSQL schema and its versioned, transactional migrations.

Everything lives in one schema, :data:`RELAY_SCHEMA`, so a relay can share a
database with anything else and touch none of it; connections set
``search_path`` to it, which keeps the queries identical in shape to the
SQLite ones. The columns mirror :mod:`relay.storage.sqlite` one for one (so
the opacity audit reads the same) with native types: ``bigint`` sequences,
``bytea`` hashes, ``boolean`` flags, ``jsonb`` policy lists. Identifier
columns are ``COLLATE "C"``: keyset pagination compares IDs in code-point
order, and a database's default collation (``en_US.UTF-8`` …) would order
hyphenated UUIDs differently from Python. Timestamps stay the canonical
RFC 3339 text the HTTP edge produced, compared exactly as SQLite compares
them, so both backends answer a token expiry identically.

Migrations are ``(version, DDL)`` steps applied in order, all in the caller's
transaction (PostgreSQL DDL is transactional: a failed step leaves the
previous version intact) under a transaction-scoped advisory lock, so two
relays racing ``init``/``migrate`` run one after the other and the second
sees the first's result. A database whose recorded version is newer than
:data:`SCHEMA_VERSION` is refused, never touched.
"""

from __future__ import annotations

from typing import Any, Protocol

from relay.errors import OperatorError

__all__ = [
    "MIGRATIONS",
    "RELAY_SCHEMA",
    "SCHEMA_VERSION",
    "apply_migrations",
    "installed_version",
    "lock_schema",
    "require_current",
]

RELAY_SCHEMA = "syncengine_relay"

#: Arbitrary fixed key of the advisory lock serializing init and migrate.
_MIGRATION_LOCK_KEY = 0x5E_12E1_A7


class _Conn(Protocol):
    def execute(self, query: Any, params: Any = ..., /) -> Any: ...


_V1 = """
CREATE TABLE relay_meta(
  key text COLLATE "C" PRIMARY KEY,
  value text NOT NULL
);

CREATE TABLE teams(
  team_pk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  team_id text COLLATE "C" NOT NULL UNIQUE,
  team_name text NOT NULL,
  current_seq bigint NOT NULL DEFAULT 0,
  min_available_seq bigint NOT NULL DEFAULT 0,
  members_revision bigint NOT NULL DEFAULT 0,
  policy_revision bigint NOT NULL DEFAULT 0,
  provisioned_at text NOT NULL
);

CREATE TABLE policy_history(
  team_pk bigint NOT NULL REFERENCES teams(team_pk),
  effective_from_seq bigint NOT NULL,
  policy_revision bigint NOT NULL,
  accepted_envelope_versions jsonb NOT NULL,
  write_allowed_ciphers jsonb NOT NULL,
  PRIMARY KEY(team_pk, effective_from_seq)
);

CREATE TABLE members(
  team_pk bigint NOT NULL REFERENCES teams(team_pk),
  member_id text COLLATE "C" NOT NULL,
  name text NOT NULL,
  active boolean NOT NULL,
  PRIMARY KEY(team_pk, member_id)
);

CREATE TABLE member_names(
  team_pk bigint NOT NULL REFERENCES teams(team_pk),
  name text COLLATE "C" NOT NULL,
  member_id text COLLATE "C" NOT NULL,
  PRIMARY KEY(team_pk, name)
);

CREATE TABLE registrations(
  team_pk bigint NOT NULL REFERENCES teams(team_pk),
  registration_id text COLLATE "C" NOT NULL,
  member_id text COLLATE "C" NOT NULL,
  installation_id text NOT NULL,
  type text NOT NULL,
  active boolean NOT NULL,
  PRIMARY KEY(team_pk, registration_id)
);

CREATE TABLE wire_ids(
  team_pk bigint NOT NULL REFERENCES teams(team_pk),
  wire_id text COLLATE "C" NOT NULL,
  envelope_digest bytea NOT NULL,
  team_seq bigint NOT NULL,
  PRIMARY KEY(team_pk, wire_id)
);

CREATE TABLE messages(
  team_pk bigint NOT NULL REFERENCES teams(team_pk),
  team_seq bigint NOT NULL,
  wire_id text COLLATE "C" NOT NULL,
  server_received_at text NOT NULL,
  v integer NOT NULL,
  cipher text NOT NULL,
  key_id text,
  blob text NOT NULL,
  PRIMARY KEY(team_pk, team_seq)
);

CREATE TABLE read_frontiers(
  team_pk bigint NOT NULL REFERENCES teams(team_pk),
  member_id text COLLATE "C" NOT NULL,
  server_seq bigint NOT NULL,
  PRIMARY KEY(team_pk, member_id)
);

CREATE TABLE read_exact(
  team_pk bigint NOT NULL REFERENCES teams(team_pk),
  member_id text COLLATE "C" NOT NULL,
  wire_id text COLLATE "C" NOT NULL,
  team_seq bigint NOT NULL,
  PRIMARY KEY(team_pk, member_id, wire_id)
);

CREATE TABLE pairing_tokens(
  token_hash bytea PRIMARY KEY,
  team_pk bigint NOT NULL REFERENCES teams(team_pk),
  device_name text,
  issued_at text NOT NULL,
  expires_at text NOT NULL,
  consumed_at text,
  credential_id text COLLATE "C"
);

CREATE TABLE credentials(
  credential_id text COLLATE "C" PRIMARY KEY,
  team_pk bigint NOT NULL REFERENCES teams(team_pk),
  secret_hash bytea NOT NULL UNIQUE,
  device_name text,
  paired_at text NOT NULL,
  revoked_at text
);
"""

#: Ordered ``(version, DDL)`` steps; a new schema version appends one step.
MIGRATIONS: tuple[tuple[int, str], ...] = (
    (1, _V1),
    # The live wait's read-state revision (specs/live.md), raised by every
    # read-state sync that changes a frontier or an exact read.
    (2, "ALTER TABLE teams ADD COLUMN read_revision bigint NOT NULL DEFAULT 0"),
    # Issue #35: the two tables a POST appends 1,000 rows to keep no foreign
    # key to ``teams``. PostgreSQL checks a reference with one trigger call
    # per row (a third of the bulk append's server time, measured), and here
    # the check can never fail: every row's ``team_pk`` is the key of the team
    # row the same transaction holds locked, and team rows are never deleted.
    # The other tables, written a row or a few at a time, keep theirs.
    # ``IF EXISTS``: a database an operator already relieved of them migrates too.
    (
        3,
        "ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_team_pk_fkey;"
        " ALTER TABLE wire_ids DROP CONSTRAINT IF EXISTS wire_ids_team_pk_fkey",
    ),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


def lock_schema(conn: _Conn) -> None:
    """Serialize init/migrate across processes until the transaction ends."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK_KEY,))


def schema_exists(conn: _Conn) -> bool:
    row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (RELAY_SCHEMA,)).fetchone()
    return row is not None


def schema_is_empty(conn: _Conn) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s",
        (RELAY_SCHEMA,),
    ).fetchone()
    return row is not None and int(row[0]) == 0


def installed_version(conn: _Conn) -> int | None:
    """The recorded schema version, or ``None`` when no relay schema exists."""
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{RELAY_SCHEMA}.relay_meta",)
    ).fetchone()
    if row is None or not row[0]:
        return None
    row = conn.execute(
        f"SELECT value FROM {RELAY_SCHEMA}.relay_meta WHERE key = 'schema_version'"
    ).fetchone()
    return None if row is None else int(row[0])


def apply_migrations(conn: _Conn, current: int) -> int:
    """Apply every step above ``current`` in order; returns the new version.

    The caller holds :func:`lock_schema` and commits; ``search_path`` must
    name :data:`RELAY_SCHEMA` so the steps create their tables there.
    """
    if current > SCHEMA_VERSION:
        raise newer_schema(current)
    for version, ddl in MIGRATIONS:
        if version > current:
            conn.execute(ddl)
            current = version
    conn.execute(
        "INSERT INTO relay_meta(key, value) VALUES ('schema_version', %s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (str(current),),
    )
    return current


def newer_schema(version: int) -> OperatorError:
    return OperatorError(
        f"the relay schema is version {version}, newer than this relay's {SCHEMA_VERSION}",
        "run the newer syncengine release that wrote it; an older relay never touches it",
    )


def require_current(version: int | None) -> None:
    """Refuse to serve a database that is missing, older or newer than this code."""
    if version is None:
        raise OperatorError(
            f"no relay schema ({RELAY_SCHEMA}) in this database",
            "create it: syncengine relay init --database URL",
        )
    if version > SCHEMA_VERSION:
        raise newer_schema(version)
    if version < SCHEMA_VERSION:
        raise OperatorError(
            f"the relay schema is version {version}; this relay needs {SCHEMA_VERSION}",
            "upgrade it: syncengine relay migrate --database URL",
        )
