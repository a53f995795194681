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
floor check and its ``has_more`` probe see one snapshot.

Each thread keeps its own connection (APSW releases the GIL inside SQLite).

Every write transaction is named (``relay.post``, ``relay.pairing``, …) and
passes ``<name>.before_commit`` / ``<name>.after_commit`` around its COMMIT,
where ``SYNCENGINE_CRASH_AT`` can kill the process (relay/crash.py lists
them all; crash_tests/test_relay_crash_points.py proves each one).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import apsw

from relay.admission import ExistingId, plan_batch
from relay.crash import crash_point
from relay.errors import (
    CredentialScopeViolation,
    Forbidden,
    InternalError,
    InvalidPairingToken,
    InvalidRequest,
    OperatorError,
    PairingTokenConsumed,
    PairingTokenExpired,
    ProvisioningRejected,
    RelayError,
    ResyncRequired,
    TeamNotFound,
    Unauthenticated,
    Unavailable,
)
from relay.limits import (
    ACCEPTED_ENVELOPE_VERSIONS,
    DEFAULT_WRITE_ALLOWED_CIPHERS,
    MAX_BLOB_BYTES,
    MAX_EXACT_PER_MEMBER,
    MAX_EXACT_PER_TEAM,
    MAX_POLICY_HISTORY,
    MAX_SEQ,
    RETRY_AFTER_SECONDS,
    STORABLE_CIPHERS,
)
from relay.secrets import new_uuid7
from relay.storage.records import (
    Access,
    CapabilitySnapshot,
    CredentialInfo,
    ExchangeResult,
    IncomingMessage,
    IssuedToken,
    Member,
    MessagePage,
    PolicyEntry,
    PoolState,
    PostResult,
    ProvisioningDocument,
    ReadItem,
    ReadKey,
    ReadStatePage,
    ReadStateRequest,
    Registration,
    RetentionResult,
    RevokeResult,
    Roster,
    StoreCounts,
    StoredMessage,
    StoreStatus,
    TeamBinding,
    TeamStatus,
    TeamSummary,
)
from relay.storage.rules import check_document_shape, check_read_state_bounds, log_retention

__all__ = ["SCHEMA_VERSION", "SqliteRelayStore"]

SCHEMA_VERSION = 1
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


class _Db(Protocol):
    """The slice of an APSW connection the queries use; rows come back untyped."""

    def execute(self, statements: str, bindings: Any = ..., /) -> Any: ...

    def executemany(self, statements: str, sequenceofbindings: Any, /) -> Any: ...

    def changes(self) -> int: ...

    @property
    def in_transaction(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class _Team:
    pk: int
    team_id: str
    team_name: str
    current_seq: int
    min_available_seq: int
    members_revision: int
    policy_revision: int

    @property
    def binding(self) -> TeamBinding:
        return TeamBinding(self.team_id, self.team_name, self.min_available_seq)


#: Retiring a member deactivates it and its registrations and cascades its
#: read state (read-state spec); each statement binds ``(team_pk, member_id)``.
_RETIRE_MEMBER = (
    "UPDATE members SET active = 0 WHERE team_pk = ? AND member_id = ?",
    "UPDATE registrations SET active = 0 WHERE team_pk = ? AND member_id = ?",
    "DELETE FROM read_frontiers WHERE team_pk = ? AND member_id = ?",
    "DELETE FROM read_exact WHERE team_pk = ? AND member_id = ?",
)

_TEAM_COLUMNS = (
    "team_pk, team_id, team_name, current_seq, min_available_seq, members_revision, policy_revision"
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


class SqliteRelayStore:
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
        """Bring the file to :data:`SCHEMA_VERSION`; ``(from, to)``.

        Version 1 is the only SQLite schema so far, so this checks and reports
        (refusing a newer file) — the command exists for parity with PostgreSQL,
        and the next schema change adds its step here.
        """
        store = cls(path)
        try:
            version = store._run(False, store._read_schema_version)
        finally:
            store.close()
        return version, version

    @staticmethod
    def _read_schema_version(conn: _Db) -> int:
        row = conn.execute("SELECT value FROM relay_meta WHERE key = 'schema_version'").fetchone()
        return 1 if row is None else int(row[0])

    @staticmethod
    def _check_schema_version(version: int) -> None:
        """A file written by a newer relay is refused rather than misread."""
        if version > SCHEMA_VERSION:
            raise OperatorError(
                f"the relay database is schema version {version}, newer than this "
                f"relay's {SCHEMA_VERSION}",
                "run the newer syncengine release that wrote it",
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

    @contextmanager
    def _tx(self, write: bool, name: str | None = None) -> Iterator[_Db]:
        """One transaction; a named write one passes ``<name>.before_commit``
        and ``<name>.after_commit`` (relay/crash.py) around its COMMIT."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield conn
        except BaseException:
            if not conn.in_transaction:  # pragma: no cover - SQLite already rolled back
                raise
            conn.execute("ROLLBACK")
            raise
        named = write and name is not None
        if named:
            crash_point(f"{name}.before_commit")
        conn.execute("COMMIT")
        if named:
            crash_point(f"{name}.after_commit")

    def _run(self, write: bool, body: Callable[[_Db], T], name: str | None = None) -> T:
        """Run ``body`` as one transaction, mapping database failures to 503/500.

        ``name`` names a write transaction's crash points (relay/crash.py).
        """
        try:
            with self._tx(write, name) as conn:
                return body(conn)
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

    # -- shared reads ------------------------------------------------------------
    @staticmethod
    def _read_instance_id(conn: _Db) -> str:
        row = conn.execute(
            "SELECT value FROM relay_meta WHERE key = 'server_instance_id'"
        ).fetchone()
        if row is None:
            raise apsw.CorruptError("relay_meta has no server_instance_id")
        return str(row[0])

    @staticmethod
    def _team(conn: _Db, team_id: str) -> _Team | None:
        row = conn.execute(
            f"SELECT {_TEAM_COLUMNS} FROM teams WHERE team_id = ?", (team_id,)
        ).fetchone()
        return None if row is None else _Team(*row)

    def _team_or_operator_error(self, conn: _Db, team_id: str) -> _Team:
        team = self._team(conn, team_id)
        if team is None:
            raise OperatorError(
                f"team {team_id} is not provisioned",
                "apply a provisioning document first: syncengine relay team apply DOC.json",
            )
        return team

    def _authenticate(
        self, conn: _Db, access: Access, *, allow_revoked: bool = False
    ) -> tuple[_Team, str]:
        """401, then 404 for an unprovisioned team, then 403 for another team's."""
        row = conn.execute(
            "SELECT credential_id, team_pk, revoked_at FROM credentials WHERE secret_hash = ?",
            (access.secret_hash,),
        ).fetchone()
        if row is None or (row[2] is not None and not allow_revoked):
            raise Unauthenticated()
        credential_id, team_pk, _revoked = row
        team = self._team(conn, access.team_id)
        if team is None:
            raise TeamNotFound(team_id=access.team_id)
        if team.pk != team_pk:
            raise Forbidden(team_id=access.team_id)
        return team, str(credential_id)

    @staticmethod
    def _policy_history(conn: _Db, team_pk: int) -> tuple[PolicyEntry, ...]:
        rows = conn.execute(
            "SELECT policy_revision, effective_from_seq, accepted_envelope_versions, "
            "write_allowed_ciphers FROM policy_history WHERE team_pk = ? "
            "ORDER BY effective_from_seq",
            (team_pk,),
        ).fetchall()
        return tuple(
            PolicyEntry(int(rev), int(eff), tuple(json.loads(versions)), tuple(json.loads(ciphers)))
            for rev, eff, versions, ciphers in rows
        )

    def _snapshot(self, conn: _Db, team: _Team) -> CapabilitySnapshot:
        return CapabilitySnapshot(
            team.binding, team.current_seq, self._policy_history(conn, team.pk), MAX_BLOB_BYTES
        )

    # -- readiness -----------------------------------------------------------------
    def probe(self) -> str:
        """Open a fresh read-only connection and read the instance ID."""
        try:
            conn = apsw.Connection(self._path, flags=apsw.SQLITE_OPEN_READONLY)
        except apsw.Error:
            raise _unavailable() from None
        try:
            conn.set_busy_timeout(self._busy_timeout_ms)
            return self._read_instance_id(conn)
        except apsw.Error:
            raise _unavailable() from None
        finally:
            conn.close()

    # -- data plane ---------------------------------------------------------------------
    def authorize(self, access: Access) -> TeamBinding:
        return self._run(False, lambda c: self._authenticate(c, access)[0].binding)

    def capabilities(self, access: Access) -> CapabilitySnapshot:
        def body(conn: _Db) -> CapabilitySnapshot:
            team, _ = self._authenticate(conn, access)
            return self._snapshot(conn, team)

        return self._run(False, body)

    def post_messages(
        self, access: Access, batch: Sequence[IncomingMessage], received_at: str
    ) -> PostResult:
        def body(conn: _Db) -> PostResult:
            team, _ = self._authenticate(conn, access)
            ids = json.dumps(sorted({m.wire_id for m in batch}))
            existing = {
                wire_id: ExistingId(bytes(digest), int(seq))
                for wire_id, digest, seq in conn.execute(
                    "SELECT wire_id, envelope_digest, team_seq FROM wire_ids "
                    "WHERE team_pk = ? AND wire_id IN (SELECT value FROM json_each(?))",
                    (team.pk, ids),
                )
            }
            policy = self._policy_history(conn, team.pk)[-1]
            plan = plan_batch(batch, existing, policy, team.current_seq)
            if plan.inserts:
                conn.executemany(
                    "INSERT INTO messages(team_pk, team_seq, wire_id, server_received_at, "
                    "v, cipher, key_id, blob) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            team.pk,
                            seq,
                            m.wire_id,
                            received_at,
                            m.envelope.v,
                            m.envelope.cipher,
                            m.envelope.key_id,
                            m.envelope.blob,
                        )
                        for seq, m in plan.inserts
                    ],
                )
                conn.executemany(
                    "INSERT INTO wire_ids(team_pk, wire_id, envelope_digest, team_seq) "
                    "VALUES (?, ?, ?, ?)",
                    [(team.pk, m.wire_id, m.digest, seq) for seq, m in plan.inserts],
                )
                conn.execute(
                    "UPDATE teams SET current_seq = ? WHERE team_pk = ?",
                    (plan.new_current_seq, team.pk),
                )
            retention = None
            floor = team.min_available_seq
            if self._retention_max_live is not None:
                target = plan.new_current_seq - self._retention_max_live
                if target > floor:
                    retention = self._retain_locked(conn, team, target)
                    floor = retention.new_floor
            binding = TeamBinding(team.team_id, team.team_name, floor)
            return PostResult(binding, policy.policy_revision, plan.acks, retention)

        result = self._run(True, body, "relay.post")
        if result.retention is not None:
            log_retention(result.retention, automatic=True)
        return result

    def page_messages(self, access: Access, after: int, limit: int) -> MessagePage:
        def body(conn: _Db) -> MessagePage:
            team, _ = self._authenticate(conn, access)
            if after < team.min_available_seq:
                raise ResyncRequired(
                    details={
                        "after": str(after),
                        "min_available_seq": str(team.min_available_seq),
                    },
                    team_id=team.team_id,
                    extra={
                        "team_name": team.team_name,
                        "min_available_seq": team.min_available_seq,
                    },
                )
            rows = conn.execute(
                "SELECT team_seq, wire_id, server_received_at, v, cipher, key_id, blob "
                "FROM messages WHERE team_pk = ? AND team_seq > ? ORDER BY team_seq LIMIT ?",
                (team.pk, after, limit + 1),
            ).fetchall()
            has_more = len(rows) > limit
            messages = tuple(StoredMessage(*row) for row in rows[:limit])
            next_after = messages[-1].server_seq if messages else after
            return MessagePage(team.binding, messages, next_after, has_more)

        return self._run(False, body)

    def members(self, access: Access) -> Roster:
        def body(conn: _Db) -> Roster:
            team, _ = self._authenticate(conn, access)
            return Roster(team.binding, team.members_revision, self._active_members(conn, team))

        return self._run(False, body)

    @staticmethod
    def _active_members(conn: _Db, team: _Team) -> tuple[Member, ...]:
        registrations: dict[str, list[Registration]] = {}
        for member_id, reg_id, inst_id, reg_type in conn.execute(
            "SELECT member_id, registration_id, installation_id, type FROM registrations "
            "WHERE team_pk = ? AND active = 1 ORDER BY registration_id",
            (team.pk,),
        ):
            registrations.setdefault(member_id, []).append(Registration(reg_id, inst_id, reg_type))
        return tuple(
            Member(member_id, name, tuple(registrations.get(member_id, ())))
            for member_id, name in conn.execute(
                "SELECT member_id, name FROM members WHERE team_pk = ? AND active = 1 "
                "ORDER BY member_id",
                (team.pk,),
            )
        )

    # -- read state ----------------------------------------------------------------------------
    def sync_read_state(self, access: Access, request: ReadStateRequest) -> ReadStatePage:
        def body(conn: _Db) -> ReadStatePage:
            team, _ = self._authenticate(conn, access)
            if request.updates:
                self._merge_read_updates(conn, team, request)
            items, has_more = self._read_page(conn, team, request.page_after, request.page_limit)
            return ReadStatePage(team.binding, team.current_seq, items, has_more)

        return self._run(bool(request.updates), body, "relay.read_state")

    def _merge_read_updates(self, conn: _Db, team: _Team, request: ReadStateRequest) -> None:
        """Validate, max-merge, set-union, GC on proof, then enforce the bounds."""
        member_ids = [u.member_id for u in request.updates]
        active = {
            row[0]
            for row in conn.execute(
                "SELECT member_id FROM members WHERE team_pk = ? AND active = 1 "
                "AND member_id IN (SELECT value FROM json_each(?))",
                (team.pk, json.dumps(member_ids)),
            )
        }
        all_exact = sorted({w for u in request.updates for w in u.exact_wire_ids})
        resolved = {
            wire_id: int(seq)
            for wire_id, seq in conn.execute(
                "SELECT wire_id, team_seq FROM wire_ids WHERE team_pk = ? "
                "AND wire_id IN (SELECT value FROM json_each(?))",
                (team.pk, json.dumps(all_exact)),
            )
        }
        for index, update in enumerate(request.updates):
            where = f"updates[{index}]"
            if update.member_id not in active:
                raise InvalidRequest(
                    "member is not active in this team", details={"field": f"{where}.member_id"}
                )
            if update.server_seq > team.current_seq:
                raise InvalidRequest(
                    "frontier is beyond the team's current_seq",
                    details={"field": f"{where}.server_seq"},
                )
            for wire_id in update.exact_wire_ids:
                if wire_id not in resolved:
                    raise InvalidRequest(
                        "exact wire id is not a message of this team",
                        details={"field": f"{where}.exact_wire_ids"},
                    )

        added: dict[str, int] = {}
        for update in request.updates:
            row = conn.execute(
                "SELECT server_seq FROM read_frontiers WHERE team_pk = ? AND member_id = ?",
                (team.pk, update.member_id),
            ).fetchone()
            stored = int(row[0]) if row is not None else 0
            frontier = max(stored, update.server_seq, team.min_available_seq)
            if row is None or frontier != stored:
                conn.execute(
                    "INSERT INTO read_frontiers(team_pk, member_id, server_seq) VALUES (?, ?, ?) "
                    "ON CONFLICT(team_pk, member_id) "
                    "DO UPDATE SET server_seq = excluded.server_seq",
                    (team.pk, update.member_id, frontier),
                )
            conn.execute(
                "DELETE FROM read_exact WHERE team_pk = ? AND member_id = ? AND team_seq <= ?",
                (team.pk, update.member_id, frontier),
            )
            fresh = 0
            for wire_id in update.exact_wire_ids:
                seq = resolved[wire_id]
                if seq <= frontier:
                    continue  # already covered: never stored, nothing to collect
                conn.execute(
                    "INSERT INTO read_exact(team_pk, member_id, wire_id, team_seq) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (team.pk, update.member_id, wire_id, seq),
                )
                fresh += conn.changes()
            added[update.member_id] = fresh

        (total,) = conn.execute(
            "SELECT count(*) FROM read_exact WHERE team_pk = ?", (team.pk,)
        ).fetchone()
        counts = {
            member_id: int(count)
            for member_id, count in conn.execute(
                "SELECT member_id, count(*) FROM read_exact WHERE team_pk = ? "
                "AND member_id IN (SELECT value FROM json_each(?)) GROUP BY member_id",
                (team.pk, json.dumps(sorted(added))),
            )
        }
        check_read_state_bounds(
            added,
            counts,
            int(total),
            max_per_member=MAX_EXACT_PER_MEMBER,
            max_per_team=MAX_EXACT_PER_TEAM,
        )

    @staticmethod
    def _read_page(
        conn: _Db, team: _Team, after: ReadKey | None, limit: int
    ) -> tuple[tuple[ReadItem, ...], bool]:
        """One keyset page of the canonical (member_id, kind, wire_id) stream."""
        want = limit + 1
        items: list[ReadItem] = []
        start = after.member_id if after is not None else ""
        frontiers = dict(
            conn.execute(
                "SELECT member_id, server_seq FROM read_frontiers WHERE team_pk = ?", (team.pk,)
            ).fetchall()
        )
        for (member_id,) in conn.execute(
            "SELECT member_id FROM members WHERE team_pk = ? AND active = 1 AND member_id >= ? "
            "ORDER BY member_id",
            (team.pk, start),
        ).fetchall():
            frontier_key = ReadKey(member_id, 0)
            if after is None or frontier_key > after:
                effective = max(int(frontiers.get(member_id, 0)), team.min_available_seq)
                items.append(ReadItem(frontier_key, effective))
                if len(items) >= want:
                    break
            wire_floor = ""
            if after is not None and after.member_id == member_id and after.kind_order == 1:
                wire_floor = after.wire_id
            for (wire_id,) in conn.execute(
                "SELECT wire_id FROM read_exact WHERE team_pk = ? AND member_id = ? "
                "AND wire_id > ? ORDER BY wire_id LIMIT ?",
                (team.pk, member_id, wire_floor, want - len(items)),
            ).fetchall():
                items.append(ReadItem(ReadKey(member_id, 1, wire_id)))
            if len(items) >= want:
                break
        has_more = len(items) > limit
        return tuple(items[:limit]), has_more

    # -- pairing and credentials ---------------------------------------------------------------
    def exchange_pairing_token(
        self, token_hash: bytes, credential_id: str, credential_hash: bytes, now: str
    ) -> ExchangeResult:
        def body(conn: _Db) -> ExchangeResult:
            row = conn.execute(
                "SELECT t.team_pk, t.device_name, t.expires_at, t.consumed_at, teams.team_id "
                "FROM pairing_tokens t JOIN teams USING (team_pk) WHERE t.token_hash = ?",
                (token_hash,),
            ).fetchone()
            if row is None:
                raise InvalidPairingToken()
            team_pk, device_name, expires_at, consumed_at, team_id = row
            if consumed_at is not None:
                raise PairingTokenConsumed(team_id=team_id)
            if now >= expires_at:
                raise PairingTokenExpired(team_id=team_id, details={"expired_at": expires_at})
            conn.execute(
                "INSERT INTO credentials(credential_id, team_pk, secret_hash, device_name, "
                "paired_at) VALUES (?, ?, ?, ?, ?)",
                (credential_id, team_pk, credential_hash, device_name, now),
            )
            conn.execute(
                "UPDATE pairing_tokens SET consumed_at = ?, credential_id = ? WHERE token_hash = ?",
                (now, credential_id, token_hash),
            )
            team = self._team(conn, team_id)
            assert team is not None
            return ExchangeResult(credential_id, self._snapshot(conn, team))

        return self._run(True, body, "relay.pairing")

    def revoke_own_credential(self, access: Access, credential_id: str, now: str) -> RevokeResult:
        def body(conn: _Db) -> RevokeResult:
            team, own_id = self._authenticate(conn, access, allow_revoked=True)
            if credential_id != own_id:
                raise CredentialScopeViolation(team_id=team.team_id)
            conn.execute(
                "UPDATE credentials SET revoked_at = ? WHERE credential_id = ? "
                "AND revoked_at IS NULL",
                (now, own_id),
            )
            (revoked_at,) = conn.execute(
                "SELECT revoked_at FROM credentials WHERE credential_id = ?", (own_id,)
            ).fetchone()
            return RevokeResult(team.binding, own_id, str(revoked_at))

        return self._run(True, body, "relay.revoke")

    # -- operator control plane ---------------------------------------------------------------
    def apply_provisioning(self, document: ProvisioningDocument, now: str) -> TeamSummary:
        """Atomic replace of one team's roster (v1.md "GET /v1/members")."""
        check_document_shape(document)

        def body(conn: _Db) -> TeamSummary:
            team = self._team(conn, document.team_id)
            created = team is None
            if team is None:
                conn.execute(
                    "INSERT INTO teams(team_id, team_name, provisioned_at) VALUES (?, ?, ?)",
                    (document.team_id, document.team_name, now),
                )
                team = self._team(conn, document.team_id)
                assert team is not None
                conn.execute(
                    "INSERT INTO policy_history(team_pk, effective_from_seq, policy_revision, "
                    "accepted_envelope_versions, write_allowed_ciphers) VALUES (?, 1, 0, ?, ?)",
                    (
                        team.pk,
                        json.dumps(list(ACCEPTED_ENVELOPE_VERSIONS)),
                        json.dumps(sorted(DEFAULT_WRITE_ALLOWED_CIPHERS)),
                    ),
                )
            elif team.members_revision >= MAX_SEQ:
                raise ProvisioningRejected("members_revision is at its maximum")
            self._replace_roster(conn, team, document)
            revision = team.members_revision if created else team.members_revision + 1
            conn.execute(
                "UPDATE teams SET team_name = ?, members_revision = ? WHERE team_pk = ?",
                (document.team_name, revision, team.pk),
            )
            return TeamSummary(
                document.team_id, document.team_name, revision, len(document.members), created
            )

        return self._run(True, body, "relay.provision")

    @staticmethod
    def _replace_roster(conn: _Db, team: _Team, document: ProvisioningDocument) -> None:
        existing = {
            member_id: bool(active)
            for member_id, active in conn.execute(
                "SELECT member_id, active FROM members WHERE team_pk = ?", (team.pk,)
            )
        }
        names = dict(
            conn.execute(
                "SELECT name, member_id FROM member_names WHERE team_pk = ?", (team.pk,)
            ).fetchall()
        )
        regs = {
            reg_id: (member_id, bool(active))
            for reg_id, member_id, active in conn.execute(
                "SELECT registration_id, member_id, active FROM registrations WHERE team_pk = ?",
                (team.pk,),
            )
        }
        wanted = {m.member_id for m in document.members}
        for member in document.members:
            if member.member_id in existing and not existing[member.member_id]:
                raise ProvisioningRejected(
                    f"member_id {member.member_id} was retired and cannot be reused",
                    "mint a new member_id for a new member",
                )
            owner = names.get(member.name)
            if owner is not None and owner != member.member_id:
                raise ProvisioningRejected(
                    f"name {member.name!r} already belongs to member {owner}",
                    "a member name is never reassigned to another member_id",
                )
            for reg in member.registrations:
                known = regs.get(reg.registration_id)
                if known is not None and (known[0] != member.member_id or not known[1]):
                    raise ProvisioningRejected(
                        f"registration_id {reg.registration_id} belongs to another member "
                        "or was retired",
                        "mint a new registration_id",
                    )
        removed = [m for m, active in existing.items() if active and m not in wanted]
        for member_id in removed:
            for statement in _RETIRE_MEMBER:
                conn.execute(statement, (team.pk, member_id))
        for member in document.members:
            conn.execute(
                "INSERT INTO members(team_pk, member_id, name, active) VALUES (?, ?, ?, 1) "
                "ON CONFLICT(team_pk, member_id) DO UPDATE SET name = excluded.name",
                (team.pk, member.member_id, member.name),
            )
            conn.execute(
                "INSERT INTO member_names(team_pk, name, member_id) VALUES (?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                (team.pk, member.name, member.member_id),
            )
            keep = {r.registration_id for r in member.registrations}
            for reg_id, (owner, active) in regs.items():
                if owner == member.member_id and active and reg_id not in keep:
                    conn.execute(
                        "UPDATE registrations SET active = 0 WHERE team_pk = ? "
                        "AND registration_id = ?",
                        (team.pk, reg_id),
                    )
            for reg in member.registrations:
                conn.execute(
                    "INSERT INTO registrations(team_pk, registration_id, member_id, "
                    "installation_id, type, active) VALUES (?, ?, ?, ?, ?, 1) "
                    "ON CONFLICT(team_pk, registration_id) DO UPDATE SET "
                    "installation_id = excluded.installation_id, type = excluded.type",
                    (team.pk, reg.registration_id, member.member_id, reg.installation_id, reg.type),
                )

    def issue_pairing_token(
        self, team_id: str, token_hash: bytes, device_name: str | None, now: str, expires_at: str
    ) -> IssuedToken:
        def body(conn: _Db) -> IssuedToken:
            team = self._team_or_operator_error(conn, team_id)
            conn.execute(
                "INSERT INTO pairing_tokens(token_hash, team_pk, device_name, issued_at, "
                "expires_at) VALUES (?, ?, ?, ?, ?)",
                (token_hash, team.pk, device_name, now, expires_at),
            )
            return IssuedToken(team_id, device_name, now, expires_at)

        return self._run(True, body, "relay.token_issue")

    def list_credentials(self, team_id: str | None) -> tuple[CredentialInfo, ...]:
        def body(conn: _Db) -> tuple[CredentialInfo, ...]:
            params: tuple[Any, ...] = ()
            where = ""
            if team_id is not None:
                team = self._team_or_operator_error(conn, team_id)
                where, params = "WHERE c.team_pk = ?", (team.pk,)
            return tuple(
                CredentialInfo(*row)
                for row in conn.execute(
                    "SELECT c.credential_id, t.team_id, c.device_name, c.paired_at, "
                    f"c.revoked_at FROM credentials c JOIN teams t USING (team_pk) {where} "
                    "ORDER BY c.credential_id",
                    params,
                )
            )

        return self._run(False, body)

    def revoke_credential(self, team_id: str, credential_id: str, now: str) -> CredentialInfo:
        def body(conn: _Db) -> CredentialInfo:
            team = self._team_or_operator_error(conn, team_id)
            conn.execute(
                "UPDATE credentials SET revoked_at = ? WHERE credential_id = ? AND team_pk = ? "
                "AND revoked_at IS NULL",
                (now, credential_id, team.pk),
            )
            row = conn.execute(
                "SELECT credential_id, device_name, paired_at, revoked_at FROM credentials "
                "WHERE credential_id = ? AND team_pk = ?",
                (credential_id, team.pk),
            ).fetchone()
            if row is None:
                raise OperatorError(
                    f"no credential {credential_id} in team {team_id}",
                    "list them with: syncengine relay credential list --team TEAM_ID",
                )
            return CredentialInfo(row[0], team_id, row[1], row[2], row[3])

        return self._run(True, body, "relay.credential_revoke")

    def set_policy(self, team_id: str, write_allowed_ciphers: Sequence[str]) -> PolicyEntry:
        """Append a policy revision effective from ``current_seq + 1``.

        Same-boundary revisions collapse to the newest (only the greatest
        revision at a boundary is ever effective); a new distinct boundary
        beyond 4,096 entries, or a revision/boundary past the signed 64-bit
        maximum, fails atomically.
        """
        ciphers = tuple(sorted(set(write_allowed_ciphers)))
        unknown = [c for c in ciphers if c not in STORABLE_CIPHERS]
        if unknown:
            raise ProvisioningRejected(
                f"cipher {unknown[0]!r} is not storable by this relay",
                f"choose from: {', '.join(STORABLE_CIPHERS)} (or none of them)",
            )

        def body(conn: _Db) -> PolicyEntry:
            team = self._team_or_operator_error(conn, team_id)
            if team.current_seq >= MAX_SEQ or team.policy_revision >= MAX_SEQ:
                raise ProvisioningRejected("policy change would exceed the signed 64-bit maximum")
            boundary = team.current_seq + 1
            revision = team.policy_revision + 1
            history = self._policy_history(conn, team.pk)
            if history[-1].effective_from_seq != boundary and len(history) >= MAX_POLICY_HISTORY:
                raise ProvisioningRejected(
                    f"policy history already has {MAX_POLICY_HISTORY} effective entries",
                    "a team's policy history is bounded for its lifetime",
                )
            conn.execute(
                "INSERT INTO policy_history(team_pk, effective_from_seq, policy_revision, "
                "accepted_envelope_versions, write_allowed_ciphers) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(team_pk, effective_from_seq) DO UPDATE SET "
                "policy_revision = excluded.policy_revision, "
                "accepted_envelope_versions = excluded.accepted_envelope_versions, "
                "write_allowed_ciphers = excluded.write_allowed_ciphers",
                (
                    team.pk,
                    boundary,
                    revision,
                    json.dumps(list(ACCEPTED_ENVELOPE_VERSIONS)),
                    json.dumps(list(ciphers)),
                ),
            )
            conn.execute(
                "UPDATE teams SET policy_revision = ? WHERE team_pk = ?", (revision, team.pk)
            )
            return PolicyEntry(revision, boundary, ACCEPTED_ENVELOPE_VERSIONS, ciphers)

        return self._run(True, body, "relay.policy")

    def retain(self, team_id: str, through_seq: int) -> RetentionResult:
        def body(conn: _Db) -> RetentionResult:
            team = self._team_or_operator_error(conn, team_id)
            if through_seq > team.current_seq:
                raise ProvisioningRejected(
                    f"--through {through_seq} is beyond current_seq {team.current_seq}",
                    "retention can only cover sequences that exist",
                )
            return self._retain_locked(conn, team, through_seq)

        result = self._run(True, body, "relay.retain")
        log_retention(result, automatic=False)
        return result

    @staticmethod
    def _retain_locked(conn: _Db, team: _Team, through_seq: int) -> RetentionResult:
        """The one retention primitive, inside a transaction holding the write lock.

        Tombstones already exist (``wire_ids``), so the floor never becomes
        visible without them. Deletes the live prefix, raises the floor,
        max-merges stored read frontiers to it, and drops exact reads the
        new floor covers (read-state-synchronization.md "Retention floor").
        """
        new_floor = max(team.min_available_seq, through_seq)
        if new_floor == team.min_available_seq:
            return RetentionResult(team.team_id, team.min_available_seq, new_floor, 0)
        conn.execute(
            "DELETE FROM messages WHERE team_pk = ? AND team_seq <= ?", (team.pk, new_floor)
        )
        removed = conn.changes()
        conn.execute(
            "UPDATE teams SET min_available_seq = ? WHERE team_pk = ?", (new_floor, team.pk)
        )
        conn.execute(
            "UPDATE read_frontiers SET server_seq = ? WHERE team_pk = ? AND server_seq < ?",
            (new_floor, team.pk, new_floor),
        )
        conn.execute(
            "DELETE FROM read_exact WHERE team_pk = ? AND team_seq <= ?", (team.pk, new_floor)
        )
        return RetentionResult(team.team_id, team.min_available_seq, new_floor, removed)

    def status(self) -> StoreStatus:
        def body(conn: _Db) -> StoreStatus:
            teams = []
            for row in conn.execute(
                f"SELECT {_TEAM_COLUMNS} FROM teams ORDER BY team_id"
            ).fetchall():
                team = _Team(*row)
                (live,) = conn.execute(
                    "SELECT count(*) FROM messages WHERE team_pk = ?", (team.pk,)
                ).fetchone()
                (members,) = conn.execute(
                    "SELECT count(*) FROM members WHERE team_pk = ? AND active = 1", (team.pk,)
                ).fetchone()
                (creds,) = conn.execute(
                    "SELECT count(*) FROM credentials WHERE team_pk = ? AND revoked_at IS NULL",
                    (team.pk,),
                ).fetchone()
                policy = self._policy_history(conn, team.pk)[-1]
                teams.append(
                    TeamStatus(
                        team.team_id,
                        team.team_name,
                        team.current_seq,
                        team.min_available_seq,
                        int(live),
                        team.members_revision,
                        int(members),
                        policy.policy_revision,
                        policy.write_allowed_ciphers,
                        int(creds),
                    )
                )
            return StoreStatus(self._read_instance_id(conn), tuple(teams))

        return self._run(False, body)

    def counts(self) -> StoreCounts:
        """One aggregate over the team rows (records.StoreCounts says why it equals the rows)."""

        def body(conn: _Db) -> StoreCounts:
            row = conn.execute(
                "SELECT count(*), coalesce(sum(current_seq - min_available_seq), 0), "
                "coalesce(sum(current_seq), 0) FROM teams"
            ).fetchone()
            assert row is not None
            return StoreCounts(int(row[0]), int(row[1]), int(row[2]))

        return self._run(False, body)

    def pool_state(self) -> PoolState:
        """One connection per worker thread that has used the store; no queue to wait in."""
        with self._all_lock:
            return PoolState(size=len(self._all))
