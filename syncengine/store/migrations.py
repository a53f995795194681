"""Versioned, forward-only schema migrations (specs/store.md §2).

The schema version is SQLite's ``user_version``. Each migration runs in its
own ``BEGIN IMMEDIATE`` transaction together with the bump of
``user_version``, so a crash leaves the store at exactly one known version
and a concurrent opener either sees the old or the new schema. A store whose
version is newer than :data:`LATEST_VERSION` is refused, never downgraded.

Tables are ``STRICT`` and keyed by integer surrogates so renames touch one
row. Names of later sync tables (bindings, wire-ID reservations, acks,
quarantine, remote read overlays) are left for migrations 3 and up; the
``messages.origin`` column already distinguishes local writes from imports.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from syncengine.ids import new_uuid4
from syncengine.store.connection import write_transaction
from syncengine.store.errors import StoreTooNew

__all__ = ["LATEST_VERSION", "MIGRATIONS", "migrate", "schema_version"]


def _v1_registry(conn: Any) -> None:
    """Store metadata (with the driver generation) and the team registry."""
    conn.execute(
        """
        CREATE TABLE store_meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        ) STRICT;
        CREATE TABLE teams (
            team_pk    INTEGER PRIMARY KEY,
            team_id    TEXT NOT NULL UNIQUE,
            name       TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL
        ) STRICT;
        CREATE TABLE members (
            member_pk  INTEGER PRIMARY KEY,
            team_pk    INTEGER NOT NULL REFERENCES teams (team_pk),
            member_id  TEXT NOT NULL UNIQUE,
            name       TEXT NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE (team_pk, name)
        ) STRICT;
        """
    )
    # Minted exactly once per store file: a rebuilt store is a new generation.
    conn.execute(
        "INSERT INTO store_meta (key, value) VALUES ('driver_generation', ?)", (new_uuid4(),)
    )


def _v2_message_log(conn: Any) -> None:
    """The message log, exact read events and per-member local frontiers."""
    conn.execute(
        """
        CREATE TABLE messages (
            seq          INTEGER PRIMARY KEY AUTOINCREMENT,
            id           TEXT NOT NULL,
            team_pk      INTEGER NOT NULL REFERENCES teams (team_pk),
            sender_pk    INTEGER NOT NULL REFERENCES members (member_pk),
            recipient_pk INTEGER NOT NULL REFERENCES members (member_pk),
            body         TEXT NOT NULL,
            at           TEXT NOT NULL,
            origin       TEXT NOT NULL CHECK (origin IN ('local', 'imported')),
            UNIQUE (team_pk, id)
        ) STRICT;
        CREATE INDEX messages_by_team ON messages (team_pk, seq);
        CREATE INDEX messages_by_sender ON messages (sender_pk, seq);
        CREATE INDEX messages_by_recipient ON messages (recipient_pk, seq);
        CREATE TABLE message_reads (
            read_seq     INTEGER PRIMARY KEY AUTOINCREMENT,
            id           TEXT NOT NULL UNIQUE,
            msg_seq      INTEGER NOT NULL REFERENCES messages (seq),
            reader_pk    INTEGER NOT NULL REFERENCES members (member_pk),
            at           TEXT NOT NULL,
            log_position INTEGER NOT NULL
        ) STRICT;
        CREATE INDEX message_reads_by_reader ON message_reads (reader_pk, msg_seq);
        CREATE TABLE read_frontiers (
            member_pk      INTEGER PRIMARY KEY REFERENCES members (member_pk),
            local_position INTEGER NOT NULL CHECK (local_position >= 0)
        ) STRICT;
        """
    )


#: Migration ``i`` takes the schema from version ``i`` to ``i + 1``.
MIGRATIONS: tuple[Callable[[Any], None], ...] = (_v1_registry, _v2_message_log)
LATEST_VERSION = len(MIGRATIONS)


def schema_version(conn: Any) -> int:
    version: int = conn.execute("PRAGMA user_version").fetchall()[0][0]
    return version


def migrate(conn: Any, path: Path, target: int = LATEST_VERSION) -> int:
    """Apply every pending migration up to ``target``; returns the new version."""
    current = schema_version(conn)
    if current > LATEST_VERSION:
        raise StoreTooNew(
            f"store {path} has schema version {current}, newer than this syncengine "
            f"supports ({LATEST_VERSION}); upgrade syncengine"
        )
    while current < target:
        with write_transaction(conn, path):
            # Re-read under the write lock: another process may have migrated.
            current = schema_version(conn)
            if current >= target:
                break
            MIGRATIONS[current](conn)
            conn.execute(f"PRAGMA user_version = {current + 1}")
        current = schema_version(conn)
    return current
