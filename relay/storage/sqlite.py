"""The relay's embedded SQLite store (APSW), one transaction per operation.

Schema (opacity is auditable from here: docs/spec/server-opaque-envelope.md):
no table, column or index holds a sender, recipient, body or client time.
``messages`` keeps only the opaque envelope members plus server sequence and
receipt time; ``wire_ids`` is the permanent dedupe ledger
``(team, id, envelope_digest, original team_seq)`` written with every insert,
so a row whose sequence falls at or below the floor *is* the tombstone v1.md
"Team sequence allocation" requires, and retention only deletes payload rows.

Concurrency: SQLite has one writer at a time. Every mutating operation starts
with ``BEGIN IMMEDIATE``, which takes that lock before reading the team row;
this is stricter than the per-team ``SELECT … FOR UPDATE`` the spec asks of
PostgreSQL, and gives the same guarantee: committed ``team_seq`` order is
visibility order. The sequence itself lives on the team row (never a global
counter). Reads run in WAL snapshots (``BEGIN`` deferred), so a page, its
floor check and its ``has_more`` probe see one snapshot. That is why
:data:`SQLITE` has no row-lock fragments: the shared steps
(relay/storage/steps.py, relay/storage/operations.py) run here exactly as
written, without a lock clause.

What this module keeps is SQLite's own: the schema, the connection per thread
(APSW releases the GIL inside SQLite), the transactions and the mapping of
APSW errors to 503/500. Every operation and its named crash points live in
:class:`relay.storage.operations.SqlRelayStore`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import apsw

from relay.crash import crash_point
from relay.errors import InternalError, OperatorError, RelayError, Unavailable
from relay.limits import RETRY_AFTER_SECONDS
from relay.secrets import new_uuid7
from relay.storage import steps
from relay.storage.dialect import BulkTable, Dialect, Tx, insert_statement
from relay.storage.operations import SqlRelayStore, commit
from relay.storage.records import PoolState, ProvisioningDocument
from relay.storage.steps import TeamRow

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SQLITE", "SqliteRelayStore"]

_log = logging.getLogger("relay.storage")
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE relay_meta(
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE teams(
  team_pk INTEGER PRIMARY KEY,
  team_id TEXT NOT NULL UNIQUE,
  team_name TEXT NOT NULL,
  current_seq INTEGER NOT NULL DEFAULT 0,
  min_available_seq INTEGER NOT NULL DEFAULT 0,
  members_revision INTEGER NOT NULL DEFAULT 0,
  policy_revision INTEGER NOT NULL DEFAULT 0,
  provisioned_at TEXT NOT NULL
);

CREATE TABLE policy_history(
  team_pk INTEGER NOT NULL REFERENCES teams(team_pk),
  effective_from_seq INTEGER NOT NULL,
  policy_revision INTEGER NOT NULL,
  accepted_envelope_versions TEXT NOT NULL,
  write_allowed_ciphers TEXT NOT NULL,
  PRIMARY KEY(team_pk, effective_from_seq)
) WITHOUT ROWID;

CREATE TABLE members(
  team_pk INTEGER NOT NULL REFERENCES teams(team_pk),
  member_id TEXT NOT NULL,
  name TEXT NOT NULL,
  active INTEGER NOT NULL,
  PRIMARY KEY(team_pk, member_id)
) WITHOUT ROWID;

-- A name, once assigned, belongs to its member_id forever (v1.md members).
CREATE TABLE member_names(
  team_pk INTEGER NOT NULL REFERENCES teams(team_pk),
  name TEXT NOT NULL,
  member_id TEXT NOT NULL,
  PRIMARY KEY(team_pk, name)
) WITHOUT ROWID;

CREATE TABLE registrations(
  team_pk INTEGER NOT NULL REFERENCES teams(team_pk),
  registration_id TEXT NOT NULL,
  member_id TEXT NOT NULL,
  installation_id TEXT NOT NULL,
  type TEXT NOT NULL,
  active INTEGER NOT NULL,
  PRIMARY KEY(team_pk, registration_id)
) WITHOUT ROWID;

-- Permanent idempotency ledger: the tombstone outlives the payload row.
CREATE TABLE wire_ids(
  team_pk INTEGER NOT NULL REFERENCES teams(team_pk),
  wire_id TEXT NOT NULL,
  envelope_digest BLOB NOT NULL,
  team_seq INTEGER NOT NULL,
  PRIMARY KEY(team_pk, wire_id)
) WITHOUT ROWID;

-- Live opaque envelopes, retained above min_available_seq.
CREATE TABLE messages(
  team_pk INTEGER NOT NULL REFERENCES teams(team_pk),
  team_seq INTEGER NOT NULL,
  wire_id TEXT NOT NULL,
  server_received_at TEXT NOT NULL,
  v INTEGER NOT NULL,
  cipher TEXT NOT NULL,
  key_id TEXT,
  blob TEXT NOT NULL,
  PRIMARY KEY(team_pk, team_seq)
);

CREATE TABLE read_frontiers(
  team_pk INTEGER NOT NULL REFERENCES teams(team_pk),
  member_id TEXT NOT NULL,
  server_seq INTEGER NOT NULL,
  PRIMARY KEY(team_pk, member_id)
) WITHOUT ROWID;

-- team_seq is the resolved live seq or tombstone original_seq, kept so GC
-- can prove coverage without a join.
CREATE TABLE read_exact(
  team_pk INTEGER NOT NULL REFERENCES teams(team_pk),
  member_id TEXT NOT NULL,
  wire_id TEXT NOT NULL,
  team_seq INTEGER NOT NULL,
  PRIMARY KEY(team_pk, member_id, wire_id)
) WITHOUT ROWID;

CREATE TABLE pairing_tokens(
  token_hash BLOB PRIMARY KEY,
  team_pk INTEGER NOT NULL REFERENCES teams(team_pk),
  device_name TEXT,
  issued_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  consumed_at TEXT,
  credential_id TEXT
) WITHOUT ROWID;

CREATE TABLE credentials(
  credential_id TEXT PRIMARY KEY,
  team_pk INTEGER NOT NULL REFERENCES teams(team_pk),
  secret_hash BLOB NOT NULL UNIQUE,
  device_name TEXT,
  paired_at TEXT NOT NULL,
  revoked_at TEXT
) WITHOUT ROWID;
"""

#: Ordered ``(version, DDL)`` steps above the version-1 schema; a new schema
#: version appends one. ``init`` writes version 1 and applies them all, so a
#: new file and a migrated one hold the same schema.
MIGRATIONS: tuple[tuple[int, str], ...] = (
    # The live wait's read-state revision (specs/live.md), raised by every
    # read-state sync that changes a frontier or an exact read.
    (2, "ALTER TABLE teams ADD COLUMN read_revision INTEGER NOT NULL DEFAULT 0"),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]

# Database conditions that mean "try again later", never "you are wrong".
_UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    apsw.BusyError,
    apsw.LockedError,
    apsw.CantOpenError,
    apsw.IOError,
    apsw.FullError,
    apsw.NotADBError,
    apsw.CorruptError,
    apsw.ProtocolError,
)


#: The shared statements on SQLite: 0/1 booleans, ID lists as a JSON array
#: read back with ``json_each``, JSON text columns, and no row locks.
def _insert_rows(conn: apsw.Connection, table: BulkTable, rows: Sequence[Sequence[Any]]) -> None:
    """One prepared INSERT stepped per row: in-process, so no round trips to save."""
    cursor = conn.cursor()
    try:
        cursor.executemany(insert_statement(table, "?"), rows)
    finally:
        cursor.close()


SQLITE = Dialect(
    name="sqlite",
    placeholder="?",
    active="active = 1",
    true="1",
    false="0",
    any="IN (SELECT value FROM json_each(?))",
    row_locks=False,
    lock_team="",
    lock_share="",
    lock_update="",
    lock_token="",
    encode_ids=json.dumps,
    encode_json=json.dumps,
    decode_json=json.loads,
    changes=lambda conn, _cursor: int(conn.changes()),
    insert_rows=_insert_rows,
)


def _unavailable() -> Unavailable:
    return Unavailable(headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def _is_empty_database(target: Path) -> bool:
    """True for a zero-byte file or an SQLite database with no schema at all,
    looked at read-only so a database that is not empty is never touched."""
    if target.stat().st_size == 0:
        return True
    try:
        conn = apsw.Connection(str(target), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return False
    try:
        row = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return row is not None and int(row[0]) == 0
    except apsw.Error:  # not a database, or unreadable
        return False
    finally:
        conn.close()


class SqliteRelayStore(SqlRelayStore):
    """:class:`relay.storage.base.RelayStore` on one SQLite file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5000,
        retention_max_live_messages: int | None = None,
    ) -> None:
        self._path = str(path)
        self._busy_timeout_ms = busy_timeout_ms
        self._retention_max_live = retention_max_live_messages
        self._local = threading.local()
        self._all: list[apsw.Connection] = []
        self._all_lock = threading.Lock()
        self._server_instance_id = self._run(False, self._read_instance_id)
        self._check_schema_version(self._run(False, self._read_schema_version))

    # -- lifecycle -------------------------------------------------------------
    @classmethod
    def initialize(cls, path: str | os.PathLike[str]) -> str:
        """Create a new database with an immutable UUIDv7 server_instance_id.

        Refuses an existing database: a second ``init`` would mint a new
        identity for data clients are already bound to. The file is created
        0600. The one existing file it takes over is an empty one — what an
        ``init`` killed before its commit leaves (``relay.init.before_commit``)
        — so that crash never needs a hand-deleted file.
        """
        target = Path(path)
        if target.exists():
            if not _is_empty_database(target):
                raise OperatorError(
                    f"{target} already exists",
                    "keep it, or choose another --db path; init never replaces a database",
                )
            target.chmod(0o600)
        else:
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            os.close(fd)
        conn = apsw.Connection(str(target))
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(_SCHEMA)
            for _, ddl in MIGRATIONS:
                conn.execute(ddl)
            instance_id = new_uuid7()
            conn.execute(
                "INSERT INTO relay_meta(key, value) VALUES ('server_instance_id', ?), "
                "('schema_version', ?)",
                (instance_id, str(SCHEMA_VERSION)),
            )
            crash_point("relay.init.before_commit")
            conn.execute("COMMIT")
            crash_point("relay.init.after_commit")
        finally:
            conn.close()
        for suffix in ("-wal", "-shm"):
            side = Path(str(target) + suffix)
            if side.exists():
                side.chmod(0o600)
        return instance_id

    @classmethod
    def migrate(cls, path: str | os.PathLike[str]) -> tuple[int, int]:
        """Bring the file to :data:`SCHEMA_VERSION` in one transaction; ``(from, to)``.

        ``BEGIN IMMEDIATE`` takes the writer lock first, so a relay serving
        the file cannot write between the version check and the steps; SQLite
        DDL is transactional, so a failed step leaves the previous version
        whole. A file newer than this code is refused, never touched.
        """
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE)
        try:
            conn.set_busy_timeout(5000)
            conn.execute("BEGIN IMMEDIATE")
            try:
                current = cls._read_schema_version(Tx(conn, SQLITE))
                cls._check_schema_version(current, migrating=True)
                target = current
                for version, ddl in MIGRATIONS:
                    if version > current:
                        conn.execute(ddl)
                        target = version
                conn.execute(
                    "UPDATE relay_meta SET value = ? WHERE key = 'schema_version'",
                    (str(target),),
                )
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except _UNAVAILABLE_ERRORS:
            raise _unavailable() from None
        finally:
            conn.close()
        return current, target

    @staticmethod
    def _read_schema_version(tx: Tx) -> int:
        row = tx.one("SELECT value FROM relay_meta WHERE key = 'schema_version'")
        return 1 if row is None else int(row[0])

    @staticmethod
    def _check_schema_version(version: int, *, migrating: bool = False) -> None:
        """A file written by a newer relay is refused rather than misread; an
        older one is served only after ``relay migrate`` brought it forward."""
        if version > SCHEMA_VERSION:
            raise OperatorError(
                f"the relay database is schema version {version}, newer than this "
                f"relay's {SCHEMA_VERSION}",
                "run the newer syncengine release that wrote it",
            )
        if version < SCHEMA_VERSION and not migrating:
            raise OperatorError(
                f"the relay database is schema version {version}; this relay needs "
                f"{SCHEMA_VERSION}",
                "upgrade it: syncengine relay migrate --db PATH",
            )

    @property
    def server_instance_id(self) -> str:
        return self._server_instance_id

    def close(self) -> None:
        with self._all_lock:
            for conn in self._all:
                with suppress(apsw.Error):  # best effort at shutdown
                    conn.close()
            self._all.clear()
        self._local = threading.local()

    def _open(self) -> apsw.Connection:
        conn = apsw.Connection(self._path, flags=apsw.SQLITE_OPEN_READWRITE)
        conn.set_busy_timeout(self._busy_timeout_ms)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _conn(self) -> apsw.Connection:
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    def _drop_conn(self) -> None:
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with self._all_lock:
                if conn in self._all:
                    self._all.remove(conn)
            with suppress(apsw.Error):
                conn.close()

    # -- transactions ------------------------------------------------------------
    @contextmanager
    def _tx(self, write: bool, name: str | None = None) -> Iterator[Tx]:
        """One transaction; a named write one passes ``<name>.before_commit``
        and ``<name>.after_commit`` (relay/crash.py) around its COMMIT."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield Tx(conn, SQLITE)
        except BaseException:
            if not conn.in_transaction:  # pragma: no cover - SQLite already rolled back
                raise
            conn.execute("ROLLBACK")
            raise
        commit(conn, name if write else None)

    def _run(self, write: bool, body: Callable[[Tx], T], name: str | None = None) -> T:
        """Run ``body`` as one transaction, mapping database failures to 503/500.

        ``name`` names a write transaction's crash points (relay/crash.py).
        """
        try:
            with self._tx(write, name) as tx:
                return body(tx)
        except RelayError:
            raise
        except OperatorError:
            raise
        except _UNAVAILABLE_ERRORS as exc:
            _log.warning("database unavailable: %s", type(exc).__name__)
            self._drop_conn()
            raise _unavailable() from None
        except apsw.Error as exc:
            _log.error("database error: %s", type(exc).__name__)
            self._drop_conn()
            raise InternalError() from None

    # -- SQLite's own steps ----------------------------------------------------------
    def _read_instance_id(self, tx: Tx) -> str:
        instance_id = steps.read_instance_id(tx)
        if instance_id is None:
            raise apsw.CorruptError("relay_meta has no server_instance_id")
        return instance_id

    def _claim_team(self, tx: Tx, document: ProvisioningDocument, now: str) -> tuple[TeamRow, bool]:
        """Read the team, inserting it if new; the write lock is already held."""
        team = steps.load_team(tx, document.team_id)
        if team is not None:
            return team, False
        tx.run(
            "INSERT INTO teams(team_id, team_name, provisioned_at) VALUES (?, ?, ?)",
            (document.team_id, document.team_name, now),
        )
        team = steps.load_team(tx, document.team_id)
        assert team is not None
        return team, True

    def _team_counts(self, tx: Tx, team_pk: int) -> tuple[int, int, int]:
        counts = []
        for statement in (
            "SELECT count(*) FROM messages WHERE team_pk = ?",
            "SELECT count(*) FROM members WHERE team_pk = ? AND active = 1",
            "SELECT count(*) FROM credentials WHERE team_pk = ? AND revoked_at IS NULL",
        ):
            row = tx.one(statement, (team_pk,))
            assert row is not None
            counts.append(int(row[0]))
        live, members, creds = counts
        return live, members, creds

    # -- readiness -----------------------------------------------------------------
    def probe(self) -> str:
        """Open a fresh read-only connection and read the instance ID."""
        try:
            conn = apsw.Connection(self._path, flags=apsw.SQLITE_OPEN_READONLY)
        except apsw.Error:
            raise _unavailable() from None
        try:
            conn.set_busy_timeout(self._busy_timeout_ms)
            return self._read_instance_id(Tx(conn, SQLITE))
        except apsw.Error:
            raise _unavailable() from None
        finally:
            conn.close()

    def _announce(self, tx: Tx, team_id: str) -> None:
        """Nothing to tell: one process owns the file, and the HTTP layer wakes
        its own waiters once the transaction returns."""

    def live_feed(self) -> None:
        """One process owns the file: the HTTP layer's own wakes are all there are."""
        return None

    def pool_state(self) -> PoolState:
        """One connection per worker thread that has used the store; no queue to wait in."""
        with self._all_lock:
            return PoolState(size=len(self._all))
