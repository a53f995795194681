"""The relay store on PostgreSQL (psycopg 3 + psycopg_pool), for several relay processes.

Same observable behaviour as :mod:`relay.storage.sqlite`; what differs is
how the single-writer guarantee SQLite gets from ``BEGIN IMMEDIATE`` is
rebuilt when many relay processes share one database:

* **Writes** run at ``READ COMMITTED`` and take the team row with
  ``SELECT … FOR NO KEY UPDATE`` before reading anything they decide on.
  Every statement that allocates sequences, merges read state, retains,
  changes policy or the roster does so only while holding that row lock, so
  per team they execute one after another; at ``READ COMMITTED`` each later
  statement sees everything the previous lock holder committed. The
  sequence lives on the team row: allocation is gap-free (the next writer
  reads the committed ``current_seq``) and committed order is visibility
  order. ``NO KEY`` keeps foreign-key checks of unrelated inserts (tokens,
  credentials) from queueing behind a busy team.
* **The bearer** is re-read ``FOR SHARE`` inside a write (``FOR UPDATE`` for
  self-revocation), so a revocation either commits before the write sees the
  credential (401) or waits until the write commits: it is never outrun.
* **Pairing** locks the token row ``FOR UPDATE``: a concurrent exchange waits,
  then re-reads the token as consumed (409) — exactly one credential.
* **Reads** run at ``REPEATABLE READ READ ONLY``: a page, its floor check and
  its ``has_more`` probe see one snapshot, like SQLite's WAL snapshot.

Lock order is always credential → team (or token alone), so two relay
transactions cannot wait on each other in a cycle; serialization failures
and deadlocks are still retried a few times in case an operator's own
transaction introduces one. Any condition meaning "try later" — the server
down, a dropped connection, an exhausted pool (checkout waits at most the
busy timeout), a lock wait past ``lock_timeout`` — becomes
:class:`relay.errors.Unavailable` (HTTP 503, ``Retry-After``), never a 500.

Every write transaction passes the same named crash points as SQLite's
(relay/crash.py).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

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
from relay.storage import pg_schema
from relay.storage.pg_schema import RELAY_SCHEMA
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

__all__ = ["PostgresRelayStore"]

_log = logging.getLogger("relay.storage")
T = TypeVar("T")
Conn = psycopg.Connection[Any]

#: Attempts for a transaction PostgreSQL aborted as a serialization failure
#: or deadlock victim; past them the request is 503 and the client retries.
_ATTEMPTS = 4
_PROBE_CONNECT_TIMEOUT_S = 2

_RETRYABLE: tuple[type[BaseException], ...] = (
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
)
#: "Try again later": server down or restarting, connection dropped, pool
#: exhausted or closed, lock wait or statement past its timeout, disk full.
#: (psycopg files all of these, and the pool's errors, under OperationalError.)
_UNAVAILABLE: tuple[type[BaseException], ...] = (
    psycopg.OperationalError,
    psycopg.InterfaceError,
)

_BEGIN_WRITE = "BEGIN ISOLATION LEVEL READ COMMITTED"
_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

_TEAM_COLUMNS = (
    "team_pk, team_id, team_name, current_seq, min_available_seq, members_revision, policy_revision"
)

#: Retiring a member deactivates it and its registrations and cascades its
#: read state (read-state spec); each statement binds ``(team_pk, member_id)``.
_RETIRE_MEMBER = (
    "UPDATE members SET active = false WHERE team_pk = %s AND member_id = %s",
    "UPDATE registrations SET active = false WHERE team_pk = %s AND member_id = %s",
    "DELETE FROM read_frontiers WHERE team_pk = %s AND member_id = %s",
    "DELETE FROM read_exact WHERE team_pk = %s AND member_id = %s",
)


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


def _unavailable() -> Unavailable:
    return Unavailable(headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def _configure(lock_timeout_ms: int) -> Callable[[Conn], None]:
    """Per-connection session settings, applied once when the pool opens it.

    ``synchronous_commit = on`` whatever the server's default: a relay
    acknowledges a message only after its commit, so a commit that a server
    crash could still lose (``off``) would be an acknowledged message lost
    (server/spec/v1.md: an acknowledgement is durable)."""

    def configure(conn: Conn) -> None:
        conn.execute(f"SET search_path TO {RELAY_SCHEMA}")
        conn.execute(f"SET lock_timeout = {int(lock_timeout_ms)}")
        conn.execute("SET synchronous_commit = on")

    return configure


def _connect_direct(url: str) -> Conn:
    """One unpooled autocommit connection on the relay schema (init, migrate, probe)."""
    conn = psycopg.connect(url, autocommit=True, connect_timeout=_PROBE_CONNECT_TIMEOUT_S)
    conn.execute(f"SET search_path TO {RELAY_SCHEMA}")
    return conn


@contextmanager
def _admin_transaction(url: str) -> Iterator[Conn]:
    """A schema-changing transaction under the migration advisory lock."""
    try:
        conn = _connect_direct(url)
    except psycopg.Error:
        raise _unavailable() from None
    try:
        conn.execute("BEGIN")
        try:
            pg_schema.lock_schema(conn)
            yield conn
        except BaseException:
            with suppress(psycopg.Error):
                conn.execute("ROLLBACK")
            raise
    except (RelayError, OperatorError):
        raise
    except _UNAVAILABLE:
        raise _unavailable() from None
    except psycopg.Error as exc:
        _log.error("database error: %s", type(exc).__name__)
        raise InternalError() from None
    finally:
        conn.close()


class PostgresRelayStore:
    """:class:`relay.storage.base.RelayStore` on one PostgreSQL database."""

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_ms: int = 5000,
        retention_max_live_messages: int | None = None,
        pool_min_size: int = 1,
        pool_max_size: int = 10,
    ) -> None:
        self._url = url
        self._retention_max_live = retention_max_live_messages
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            url,
            min_size=pool_min_size,
            max_size=pool_max_size,
            kwargs={"autocommit": True},
            configure=_configure(busy_timeout_ms),
            check=ConnectionPool.check_connection,
            timeout=busy_timeout_ms / 1000,
            open=False,
            name="relay",
        )
        try:
            try:
                self._pool.open(wait=True, timeout=max(busy_timeout_ms / 1000, 1.0))
            except _UNAVAILABLE:
                raise _unavailable() from None  # the server is down or refuses us
            version = self._run(False, pg_schema.installed_version)
            pg_schema.require_current(version)
            self._server_instance_id = self._run(False, self._read_instance_id)
        except BaseException:
            self._pool.close()
            raise

    # -- lifecycle -------------------------------------------------------------------
    @classmethod
    def initialize(cls, url: str) -> str:
        """Create the relay schema at the current version and mint the instance ID.

        Refuses a database that already holds a relay schema (a second ``init``
        would mint a new identity for data clients are bound to) or whose
        :data:`~relay.storage.pg_schema.RELAY_SCHEMA` holds anything at all; an
        empty schema an operator created for the relay (say, to grant it) is used.
        Nothing else in the database is read or touched.
        """
        with _admin_transaction(url) as conn:
            if pg_schema.schema_exists(conn):
                if not pg_schema.schema_is_empty(conn):
                    raise OperatorError(
                        f"schema {RELAY_SCHEMA} already exists in this database",
                        "keep it, or point --database at another database; "
                        "init never replaces a relay database",
                    )
            else:
                conn.execute(f"CREATE SCHEMA {RELAY_SCHEMA}")
            pg_schema.apply_migrations(conn, 0)
            instance_id = new_uuid7()
            conn.execute(
                "INSERT INTO relay_meta(key, value) VALUES ('server_instance_id', %s)",
                (instance_id,),
            )
            crash_point("relay.init.before_commit")
            conn.execute("COMMIT")
            crash_point("relay.init.after_commit")
        return instance_id

    @classmethod
    def migrate(cls, url: str) -> tuple[int, int]:
        """Bring an existing relay schema to the current version in one transaction.

        Returns ``(from_version, to_version)``; equal when nothing was due.
        """
        with _admin_transaction(url) as conn:
            current = pg_schema.installed_version(conn)
            if current is None:
                pg_schema.require_current(None)
                raise AssertionError("unreachable")  # pragma: no cover
            target = pg_schema.apply_migrations(conn, current)
            conn.execute("COMMIT")
        return current, target

    @property
    def server_instance_id(self) -> str:
        return self._server_instance_id

    def close(self) -> None:
        self._pool.close()

    # -- transactions ------------------------------------------------------------------
    @contextmanager
    def _tx(self, write: bool, name: str | None) -> Iterator[Conn]:
        with self._pool.connection() as conn:
            conn.execute(_BEGIN_WRITE if write else _BEGIN_READ)
            try:
                yield conn
            except BaseException:
                with suppress(psycopg.Error):  # a broken connection is discarded by the pool
                    conn.execute("ROLLBACK")
                raise
            named = write and name is not None
            if named:
                crash_point(f"{name}.before_commit")
            conn.execute("COMMIT")
            if named:
                crash_point(f"{name}.after_commit")

    def _run(self, write: bool, body: Callable[[Conn], T], name: str | None = None) -> T:
        """Run ``body`` as one transaction, retrying aborts, mapping failures to 503/500."""
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                with self._tx(write, name) as conn:
                    return body(conn)
            except (RelayError, OperatorError):
                raise
            except _RETRYABLE as exc:
                if attempt == _ATTEMPTS:
                    _log.warning("transaction aborted %d times: %s", attempt, type(exc).__name__)
                    raise _unavailable() from None
                time.sleep(random.uniform(0.005, 0.02) * attempt)
            except _UNAVAILABLE as exc:
                _log.warning("database unavailable: %s", type(exc).__name__)
                raise _unavailable() from None
            except psycopg.Error as exc:
                _log.error("database error: %s", type(exc).__name__)
                raise InternalError() from None
        raise AssertionError("unreachable")  # pragma: no cover

    # -- shared reads --------------------------------------------------------------------
    @staticmethod
    def _read_instance_id(conn: Conn) -> str:
        row = conn.execute(
            "SELECT value FROM relay_meta WHERE key = 'server_instance_id'"
        ).fetchone()
        if row is None:
            raise _unavailable()
        return str(row[0])

    @staticmethod
    def _team(conn: Conn, team_id: str, *, lock: bool = False) -> _Team | None:
        suffix = " FOR NO KEY UPDATE" if lock else ""
        row = conn.execute(
            f"SELECT {_TEAM_COLUMNS} FROM teams WHERE team_id = %s{suffix}", (team_id,)
        ).fetchone()
        return None if row is None else _Team(*row)

    def _team_or_operator_error(self, conn: Conn, team_id: str, *, lock: bool = False) -> _Team:
        team = self._team(conn, team_id, lock=lock)
        if team is None:
            raise OperatorError(
                f"team {team_id} is not provisioned",
                "apply a provisioning document first: syncengine relay team apply DOC.json",
            )
        return team

    def _authenticate(
        self, conn: Conn, access: Access, *, lock: str = "", allow_revoked: bool = False
    ) -> tuple[_Team, str]:
        """401, then 404 for an unprovisioned team, then 403 for another team's.

        ``lock`` is ``""`` (a read snapshot), ``"SHARE"`` (a write that must
        not outrun a revocation; also locks the team row) or ``"UPDATE"``
        (self-revocation, which changes the credential itself).
        """
        suffix = f" FOR {lock}" if lock else ""
        row = conn.execute(
            f"SELECT credential_id, team_pk, revoked_at FROM credentials "
            f"WHERE secret_hash = %s{suffix}",
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
        if lock == "SHARE":
            locked = self._team(conn, access.team_id, lock=True)
            assert locked is not None  # team rows are never deleted
            team = locked
        return team, str(credential_id)

    @staticmethod
    def _policy_history(conn: Conn, team_pk: int) -> tuple[PolicyEntry, ...]:
        rows = conn.execute(
            "SELECT policy_revision, effective_from_seq, accepted_envelope_versions, "
            "write_allowed_ciphers FROM policy_history WHERE team_pk = %s "
            "ORDER BY effective_from_seq",
            (team_pk,),
        ).fetchall()
        return tuple(
            PolicyEntry(int(rev), int(eff), tuple(versions), tuple(ciphers))
            for rev, eff, versions, ciphers in rows
        )

    def _snapshot(self, conn: Conn, team: _Team) -> CapabilitySnapshot:
        return CapabilitySnapshot(
            team.binding, team.current_seq, self._policy_history(conn, team.pk), MAX_BLOB_BYTES
        )

    # -- readiness ---------------------------------------------------------------------
    def probe(self) -> str:
        """Open a fresh connection (not a pooled one) and read the instance ID."""
        try:
            conn = _connect_direct(self._url)
        except psycopg.Error:
            raise _unavailable() from None
        try:
            return self._read_instance_id(conn)
        except psycopg.Error:
            raise _unavailable() from None
        finally:
            conn.close()

    # -- data plane ----------------------------------------------------------------------
    def authorize(self, access: Access) -> TeamBinding:
        return self._run(False, lambda c: self._authenticate(c, access)[0].binding)

    def capabilities(self, access: Access) -> CapabilitySnapshot:
        def body(conn: Conn) -> CapabilitySnapshot:
            team, _ = self._authenticate(conn, access)
            return self._snapshot(conn, team)

        return self._run(False, body)

    def post_messages(
        self, access: Access, batch: Sequence[IncomingMessage], received_at: str
    ) -> PostResult:
        def body(conn: Conn) -> PostResult:
            team, _ = self._authenticate(conn, access, lock="SHARE")
            ids = sorted({m.wire_id for m in batch})
            existing = {
                wire_id: ExistingId(bytes(digest), int(seq))
                for wire_id, digest, seq in conn.execute(
                    "SELECT wire_id, envelope_digest, team_seq FROM wire_ids "
                    "WHERE team_pk = %s AND wire_id = ANY(%s)",
                    (team.pk, ids),
                )
            }
            policy = self._policy_history(conn, team.pk)[-1]
            plan = plan_batch(batch, existing, policy, team.current_seq)
            if plan.inserts:
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO messages(team_pk, team_seq, wire_id, server_received_at, "
                        "v, cipher, key_id, blob) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
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
                    cur.executemany(
                        "INSERT INTO wire_ids(team_pk, wire_id, envelope_digest, team_seq) "
                        "VALUES (%s, %s, %s, %s)",
                        [(team.pk, m.wire_id, m.digest, seq) for seq, m in plan.inserts],
                    )
                conn.execute(
                    "UPDATE teams SET current_seq = %s WHERE team_pk = %s",
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
        def body(conn: Conn) -> MessagePage:
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
                "FROM messages WHERE team_pk = %s AND team_seq > %s ORDER BY team_seq LIMIT %s",
                (team.pk, after, limit + 1),
            ).fetchall()
            has_more = len(rows) > limit
            messages = tuple(StoredMessage(*row) for row in rows[:limit])
            next_after = messages[-1].server_seq if messages else after
            return MessagePage(team.binding, messages, next_after, has_more)

        return self._run(False, body)

    def members(self, access: Access) -> Roster:
        def body(conn: Conn) -> Roster:
            team, _ = self._authenticate(conn, access)
            return Roster(team.binding, team.members_revision, self._active_members(conn, team))

        return self._run(False, body)

    @staticmethod
    def _active_members(conn: Conn, team: _Team) -> tuple[Member, ...]:
        registrations: dict[str, list[Registration]] = {}
        for member_id, reg_id, inst_id, reg_type in conn.execute(
            "SELECT member_id, registration_id, installation_id, type FROM registrations "
            "WHERE team_pk = %s AND active ORDER BY registration_id",
            (team.pk,),
        ):
            registrations.setdefault(member_id, []).append(Registration(reg_id, inst_id, reg_type))
        return tuple(
            Member(member_id, name, tuple(registrations.get(member_id, ())))
            for member_id, name in conn.execute(
                "SELECT member_id, name FROM members WHERE team_pk = %s AND active "
                "ORDER BY member_id",
                (team.pk,),
            )
        )

    # -- read state ------------------------------------------------------------------------
    def sync_read_state(self, access: Access, request: ReadStateRequest) -> ReadStatePage:
        write = bool(request.updates)

        def body(conn: Conn) -> ReadStatePage:
            team, _ = self._authenticate(conn, access, lock="SHARE" if write else "")
            if write:
                self._merge_read_updates(conn, team, request)
            items, has_more = self._read_page(conn, team, request.page_after, request.page_limit)
            return ReadStatePage(team.binding, team.current_seq, items, has_more)

        return self._run(write, body, "relay.read_state")

    def _merge_read_updates(self, conn: Conn, team: _Team, request: ReadStateRequest) -> None:
        """Validate, max-merge, set-union, GC on proof, then enforce the bounds.

        Runs under the team row lock, so merges, retention and roster changes
        of one team never interleave.
        """
        member_ids = [u.member_id for u in request.updates]
        active = {
            row[0]
            for row in conn.execute(
                "SELECT member_id FROM members WHERE team_pk = %s AND active "
                "AND member_id = ANY(%s)",
                (team.pk, member_ids),
            )
        }
        all_exact = sorted({w for u in request.updates for w in u.exact_wire_ids})
        resolved = {
            wire_id: int(seq)
            for wire_id, seq in conn.execute(
                "SELECT wire_id, team_seq FROM wire_ids WHERE team_pk = %s AND wire_id = ANY(%s)",
                (team.pk, all_exact),
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
                "SELECT server_seq FROM read_frontiers WHERE team_pk = %s AND member_id = %s",
                (team.pk, update.member_id),
            ).fetchone()
            stored = int(row[0]) if row is not None else 0
            frontier = max(stored, update.server_seq, team.min_available_seq)
            if row is None or frontier != stored:
                conn.execute(
                    "INSERT INTO read_frontiers(team_pk, member_id, server_seq) "
                    "VALUES (%s, %s, %s) ON CONFLICT (team_pk, member_id) "
                    "DO UPDATE SET server_seq = excluded.server_seq",
                    (team.pk, update.member_id, frontier),
                )
            conn.execute(
                "DELETE FROM read_exact WHERE team_pk = %s AND member_id = %s AND team_seq <= %s",
                (team.pk, update.member_id, frontier),
            )
            fresh = 0
            for wire_id in update.exact_wire_ids:
                seq = resolved[wire_id]
                if seq <= frontier:
                    continue  # already covered: never stored, nothing to collect
                cur = conn.execute(
                    "INSERT INTO read_exact(team_pk, member_id, wire_id, team_seq) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (team.pk, update.member_id, wire_id, seq),
                )
                fresh += max(cur.rowcount, 0)
            added[update.member_id] = fresh

        total_row = conn.execute(
            "SELECT count(*) FROM read_exact WHERE team_pk = %s", (team.pk,)
        ).fetchone()
        counts = {
            member_id: int(count)
            for member_id, count in conn.execute(
                "SELECT member_id, count(*) FROM read_exact WHERE team_pk = %s "
                "AND member_id = ANY(%s) GROUP BY member_id",
                (team.pk, sorted(added)),
            )
        }
        check_read_state_bounds(
            added,
            counts,
            int(total_row[0]) if total_row is not None else 0,
            max_per_member=MAX_EXACT_PER_MEMBER,
            max_per_team=MAX_EXACT_PER_TEAM,
        )

    @staticmethod
    def _read_page(
        conn: Conn, team: _Team, after: ReadKey | None, limit: int
    ) -> tuple[tuple[ReadItem, ...], bool]:
        """One keyset page of the canonical (member_id, kind, wire_id) stream."""
        want = limit + 1
        items: list[ReadItem] = []
        start = after.member_id if after is not None else ""
        frontiers: dict[str, int] = {
            member_id: int(seq)
            for member_id, seq in conn.execute(
                "SELECT member_id, server_seq FROM read_frontiers WHERE team_pk = %s", (team.pk,)
            )
        }
        for (member_id,) in conn.execute(
            "SELECT member_id FROM members WHERE team_pk = %s AND active AND member_id >= %s "
            "ORDER BY member_id",
            (team.pk, start),
        ).fetchall():
            frontier_key = ReadKey(member_id, 0)
            if after is None or frontier_key > after:
                effective = max(frontiers.get(member_id, 0), team.min_available_seq)
                items.append(ReadItem(frontier_key, effective))
                if len(items) >= want:
                    break
            wire_floor = ""
            if after is not None and after.member_id == member_id and after.kind_order == 1:
                wire_floor = after.wire_id
            for (wire_id,) in conn.execute(
                "SELECT wire_id FROM read_exact WHERE team_pk = %s AND member_id = %s "
                "AND wire_id > %s ORDER BY wire_id LIMIT %s",
                (team.pk, member_id, wire_floor, want - len(items)),
            ).fetchall():
                items.append(ReadItem(ReadKey(member_id, 1, wire_id)))
            if len(items) >= want:
                break
        has_more = len(items) > limit
        return tuple(items[:limit]), has_more

    # -- pairing and credentials -------------------------------------------------------------
    def exchange_pairing_token(
        self, token_hash: bytes, credential_id: str, credential_hash: bytes, now: str
    ) -> ExchangeResult:
        def body(conn: Conn) -> ExchangeResult:
            # The token row lock makes a concurrent exchange wait, then re-read
            # the token as consumed: one token, one credential.
            row = conn.execute(
                "SELECT t.team_pk, t.device_name, t.expires_at, t.consumed_at, teams.team_id "
                "FROM pairing_tokens t JOIN teams USING (team_pk) WHERE t.token_hash = %s "
                "FOR UPDATE OF t",
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
                "paired_at) VALUES (%s, %s, %s, %s, %s)",
                (credential_id, team_pk, credential_hash, device_name, now),
            )
            conn.execute(
                "UPDATE pairing_tokens SET consumed_at = %s, credential_id = %s "
                "WHERE token_hash = %s",
                (now, credential_id, token_hash),
            )
            team = self._team(conn, team_id)
            assert team is not None
            return ExchangeResult(credential_id, self._snapshot(conn, team))

        return self._run(True, body, "relay.pairing")

    def revoke_own_credential(self, access: Access, credential_id: str, now: str) -> RevokeResult:
        def body(conn: Conn) -> RevokeResult:
            team, own_id = self._authenticate(conn, access, lock="UPDATE", allow_revoked=True)
            if credential_id != own_id:
                raise CredentialScopeViolation(team_id=team.team_id)
            conn.execute(
                "UPDATE credentials SET revoked_at = %s WHERE credential_id = %s "
                "AND revoked_at IS NULL",
                (now, own_id),
            )
            row = conn.execute(
                "SELECT revoked_at FROM credentials WHERE credential_id = %s", (own_id,)
            ).fetchone()
            assert row is not None
            return RevokeResult(team.binding, own_id, str(row[0]))

        return self._run(True, body, "relay.revoke")

    # -- operator control plane ----------------------------------------------------------------
    def apply_provisioning(self, document: ProvisioningDocument, now: str) -> TeamSummary:
        """Atomic replace of one team's roster (v1.md "GET /v1/members").

        A first apply inserts the team with ``ON CONFLICT DO NOTHING``, so two
        operators racing to create one team end with one row: the loser waits
        for the winner's commit and then updates it like any re-apply.
        """
        check_document_shape(document)

        def body(conn: Conn) -> TeamSummary:
            inserted = conn.execute(
                "INSERT INTO teams(team_id, team_name, provisioned_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (team_id) DO NOTHING RETURNING team_pk",
                (document.team_id, document.team_name, now),
            ).fetchone()
            created = inserted is not None
            team = self._team(conn, document.team_id, lock=True)
            assert team is not None
            if created:
                conn.execute(
                    "INSERT INTO policy_history(team_pk, effective_from_seq, policy_revision, "
                    "accepted_envelope_versions, write_allowed_ciphers) "
                    "VALUES (%s, 1, 0, %s, %s)",
                    (
                        team.pk,
                        Jsonb(list(ACCEPTED_ENVELOPE_VERSIONS)),
                        Jsonb(sorted(DEFAULT_WRITE_ALLOWED_CIPHERS)),
                    ),
                )
            elif team.members_revision >= MAX_SEQ:
                raise ProvisioningRejected("members_revision is at its maximum")
            self._replace_roster(conn, team, document)
            revision = team.members_revision if created else team.members_revision + 1
            conn.execute(
                "UPDATE teams SET team_name = %s, members_revision = %s WHERE team_pk = %s",
                (document.team_name, revision, team.pk),
            )
            return TeamSummary(
                document.team_id, document.team_name, revision, len(document.members), created
            )

        return self._run(True, body, "relay.provision")

    @staticmethod
    def _replace_roster(conn: Conn, team: _Team, document: ProvisioningDocument) -> None:
        existing: dict[str, bool] = {
            member_id: bool(active)
            for member_id, active in conn.execute(
                "SELECT member_id, active FROM members WHERE team_pk = %s", (team.pk,)
            )
        }
        names: dict[str, str] = {
            name: member_id
            for name, member_id in conn.execute(
                "SELECT name, member_id FROM member_names WHERE team_pk = %s", (team.pk,)
            )
        }
        regs: dict[str, tuple[str, bool]] = {
            reg_id: (member_id, bool(active))
            for reg_id, member_id, active in conn.execute(
                "SELECT registration_id, member_id, active FROM registrations WHERE team_pk = %s",
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
                "INSERT INTO members(team_pk, member_id, name, active) VALUES (%s, %s, %s, true) "
                "ON CONFLICT (team_pk, member_id) DO UPDATE SET name = excluded.name",
                (team.pk, member.member_id, member.name),
            )
            conn.execute(
                "INSERT INTO member_names(team_pk, name, member_id) VALUES (%s, %s, %s) "
                "ON CONFLICT DO NOTHING",
                (team.pk, member.name, member.member_id),
            )
            keep = {r.registration_id for r in member.registrations}
            for reg_id, (owner, active) in regs.items():
                if owner == member.member_id and active and reg_id not in keep:
                    conn.execute(
                        "UPDATE registrations SET active = false WHERE team_pk = %s "
                        "AND registration_id = %s",
                        (team.pk, reg_id),
                    )
            for reg in member.registrations:
                conn.execute(
                    "INSERT INTO registrations(team_pk, registration_id, member_id, "
                    "installation_id, type, active) VALUES (%s, %s, %s, %s, %s, true) "
                    "ON CONFLICT (team_pk, registration_id) DO UPDATE SET "
                    "installation_id = excluded.installation_id, type = excluded.type",
                    (team.pk, reg.registration_id, member.member_id, reg.installation_id, reg.type),
                )

    def issue_pairing_token(
        self, team_id: str, token_hash: bytes, device_name: str | None, now: str, expires_at: str
    ) -> IssuedToken:
        def body(conn: Conn) -> IssuedToken:
            team = self._team_or_operator_error(conn, team_id)
            conn.execute(
                "INSERT INTO pairing_tokens(token_hash, team_pk, device_name, issued_at, "
                "expires_at) VALUES (%s, %s, %s, %s, %s)",
                (token_hash, team.pk, device_name, now, expires_at),
            )
            return IssuedToken(team_id, device_name, now, expires_at)

        return self._run(True, body, "relay.token_issue")

    def list_credentials(self, team_id: str | None) -> tuple[CredentialInfo, ...]:
        def body(conn: Conn) -> tuple[CredentialInfo, ...]:
            params: tuple[Any, ...] = ()
            where = ""
            if team_id is not None:
                team = self._team_or_operator_error(conn, team_id)
                where, params = "WHERE c.team_pk = %s", (team.pk,)
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
        def body(conn: Conn) -> CredentialInfo:
            team = self._team_or_operator_error(conn, team_id)
            # The UPDATE's row lock waits out a write holding the credential
            # FOR SHARE; once it commits, no later write can authenticate.
            conn.execute(
                "UPDATE credentials SET revoked_at = %s WHERE credential_id = %s "
                "AND team_pk = %s AND revoked_at IS NULL",
                (now, credential_id, team.pk),
            )
            row = conn.execute(
                "SELECT credential_id, device_name, paired_at, revoked_at FROM credentials "
                "WHERE credential_id = %s AND team_pk = %s",
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

        The team row lock pins ``current_seq`` while the boundary is chosen, so
        no write can commit between choosing it and recording the revision.
        """
        ciphers = tuple(sorted(set(write_allowed_ciphers)))
        unknown = [c for c in ciphers if c not in STORABLE_CIPHERS]
        if unknown:
            raise ProvisioningRejected(
                f"cipher {unknown[0]!r} is not storable by this relay",
                f"choose from: {', '.join(STORABLE_CIPHERS)} (or none of them)",
            )

        def body(conn: Conn) -> PolicyEntry:
            team = self._team_or_operator_error(conn, team_id, lock=True)
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
                "accepted_envelope_versions, write_allowed_ciphers) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (team_pk, effective_from_seq) DO UPDATE SET "
                "policy_revision = excluded.policy_revision, "
                "accepted_envelope_versions = excluded.accepted_envelope_versions, "
                "write_allowed_ciphers = excluded.write_allowed_ciphers",
                (
                    team.pk,
                    boundary,
                    revision,
                    Jsonb(list(ACCEPTED_ENVELOPE_VERSIONS)),
                    Jsonb(list(ciphers)),
                ),
            )
            conn.execute(
                "UPDATE teams SET policy_revision = %s WHERE team_pk = %s", (revision, team.pk)
            )
            return PolicyEntry(revision, boundary, ACCEPTED_ENVELOPE_VERSIONS, ciphers)

        return self._run(True, body, "relay.policy")

    def retain(self, team_id: str, through_seq: int) -> RetentionResult:
        def body(conn: Conn) -> RetentionResult:
            team = self._team_or_operator_error(conn, team_id, lock=True)
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
    def _retain_locked(conn: Conn, team: _Team, through_seq: int) -> RetentionResult:
        """The one retention primitive, inside a transaction holding the team row lock.

        Same steps as SQLite's: tombstones already exist in ``wire_ids``;
        delete the live prefix, raise the floor, max-merge frontiers to it,
        drop the exact reads it covers.
        """
        new_floor = max(team.min_available_seq, through_seq)
        if new_floor == team.min_available_seq:
            return RetentionResult(team.team_id, team.min_available_seq, new_floor, 0)
        cur = conn.execute(
            "DELETE FROM messages WHERE team_pk = %s AND team_seq <= %s", (team.pk, new_floor)
        )
        removed = max(cur.rowcount, 0)
        conn.execute(
            "UPDATE teams SET min_available_seq = %s WHERE team_pk = %s", (new_floor, team.pk)
        )
        conn.execute(
            "UPDATE read_frontiers SET server_seq = %s WHERE team_pk = %s AND server_seq < %s",
            (new_floor, team.pk, new_floor),
        )
        conn.execute(
            "DELETE FROM read_exact WHERE team_pk = %s AND team_seq <= %s", (team.pk, new_floor)
        )
        return RetentionResult(team.team_id, team.min_available_seq, new_floor, removed)

    def status(self) -> StoreStatus:
        def body(conn: Conn) -> StoreStatus:
            teams = []
            for row in conn.execute(
                f"SELECT {_TEAM_COLUMNS} FROM teams ORDER BY team_id"
            ).fetchall():
                team = _Team(*row)
                counts = conn.execute(
                    "SELECT (SELECT count(*) FROM messages WHERE team_pk = %(pk)s), "
                    "(SELECT count(*) FROM members WHERE team_pk = %(pk)s AND active), "
                    "(SELECT count(*) FROM credentials WHERE team_pk = %(pk)s "
                    "AND revoked_at IS NULL)",
                    {"pk": team.pk},
                ).fetchone()
                assert counts is not None
                live, members, creds = (int(n) for n in counts)
                policy = self._policy_history(conn, team.pk)[-1]
                teams.append(
                    TeamStatus(
                        team.team_id,
                        team.team_name,
                        team.current_seq,
                        team.min_available_seq,
                        live,
                        team.members_revision,
                        members,
                        policy.policy_revision,
                        policy.write_allowed_ciphers,
                        creds,
                    )
                )
            return StoreStatus(self._read_instance_id(conn), tuple(teams))

        return self._run(False, body)

    def counts(self) -> StoreCounts:
        """One aggregate over the team rows (records.StoreCounts says why it equals the rows)."""

        def body(conn: Conn) -> StoreCounts:
            row = conn.execute(
                "SELECT count(*), coalesce(sum(current_seq - min_available_seq), 0), "
                "coalesce(sum(current_seq), 0) FROM teams"
            ).fetchone()
            assert row is not None
            return StoreCounts(int(row[0]), int(row[1]), int(row[2]))

        return self._run(False, body)

    def pool_state(self) -> PoolState:
        """psycopg_pool's own measures (``get_stats`` reads them without I/O)."""
        stats = self._pool.get_stats()
        return PoolState(
            size=stats.get("pool_size", 0),
            max_size=stats.get("pool_max"),
            available=stats.get("pool_available"),
            waiting=stats.get("requests_waiting", 0),
        )
