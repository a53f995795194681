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

Every operation is written once, for both backends, in
:class:`relay.storage.operations.SqlRelayStore` over the shared steps
(relay/storage/steps.py); the locks above are the fragments of
:data:`POSTGRES`, and every write transaction passes the same named crash
points as SQLite's (relay/crash.py). What this module keeps is PostgreSQL's
own: the pool, the transactions and their retries, the error mapping, the
one apply step that needs an upsert, and the schema (relay/storage/pg_schema.py).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from relay.crash import crash_point
from relay.errors import InternalError, OperatorError, RelayError, Unavailable
from relay.limits import RETRY_AFTER_SECONDS
from relay.secrets import new_uuid7
from relay.storage import pg_schema, steps
from relay.storage.dialect import BulkTable, Dialect, Tx
from relay.storage.operations import SqlRelayStore, commit
from relay.storage.pg_live import CHANNEL, PgLiveFeed
from relay.storage.pg_schema import RELAY_SCHEMA
from relay.storage.records import PoolState, ProvisioningDocument
from relay.storage.steps import TeamRow

__all__ = ["POSTGRES", "PostgresRelayStore"]

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


def _copy_rows(conn: Conn, table: BulkTable, rows: Sequence[Sequence[Any]]) -> None:
    """Append ``rows`` with one binary ``COPY … FROM STDIN`` (issue #35).

    A POST's rows are new by construction — the batch plan dropped every wire
    ID the team already holds, and the team row lock keeps any other writer of
    this team out until commit — so there is no conflict to resolve and COPY
    can append directly; a violated key or reference still fails the COPY and
    the transaction rolls back whole, as a failed INSERT's would. Binary
    format with the column types set up front: psycopg encodes each row in C
    and the server parses no text.
    """
    statement = f"COPY {table.name}({', '.join(table.columns)}) FROM STDIN (FORMAT BINARY)"
    with conn.cursor() as cursor, cursor.copy(statement) as copy:
        copy.set_types(list(table.pg_types))
        for row in rows:
            copy.write_row(row)


#: The shared statements on PostgreSQL: real booleans, ID lists bound as
#: arrays, ``jsonb`` columns, and the row locks the module docstring lists.
POSTGRES = Dialect(
    name="postgres",
    placeholder="%s",
    active="active",
    true="true",
    false="false",
    any="= ANY(?)",
    row_locks=True,
    lock_team=" FOR NO KEY UPDATE",
    lock_share=" FOR SHARE",
    lock_update=" FOR UPDATE",
    lock_token=" FOR UPDATE OF t",
    encode_ids=list,
    encode_json=Jsonb,
    decode_json=lambda value: value,
    changes=lambda _conn, cursor: max(int(cursor.rowcount), 0),
    insert_rows=_copy_rows,
)


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


class PostgresRelayStore(SqlRelayStore):
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
            version = self._run(False, lambda tx: pg_schema.installed_version(tx.conn))
            pg_schema.require_current(version)
            self._server_instance_id = self._run(False, self._read_instance_id)
        except BaseException:
            self._pool.close()
            raise

    # -- lifecycle -------------------------------------------------------------------
    @classmethod
    def initialize(cls, url: str, instance_id: str | None = None) -> str:
        """Create the relay schema at the current version and mint the instance ID.

        Refuses a database that already holds a relay schema (a second ``init``
        would mint a new identity for data clients are bound to) or whose
        :data:`~relay.storage.pg_schema.RELAY_SCHEMA` holds anything at all; an
        empty schema an operator created for the relay (say, to grant it) is used.
        Nothing else in the database is read or touched. ``instance_id`` joins
        the database to an existing deployment instead of minting one: every
        database of a team placement (relay/storage/placement.py) carries the
        one ``server_instance_id`` its clients are bound to.
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
            instance_id = instance_id or new_uuid7()
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
    def _tx(self, write: bool, name: str | None) -> Iterator[Tx]:
        with self._pool.connection() as conn:
            conn.execute(_BEGIN_WRITE if write else _BEGIN_READ)
            try:
                yield Tx(conn, POSTGRES)
            except BaseException:
                with suppress(psycopg.Error):  # a broken connection is discarded by the pool
                    conn.execute("ROLLBACK")
                raise
            commit(conn, name if write else None)

    def _run(self, write: bool, body: Callable[[Tx], T], name: str | None = None) -> T:
        """Run ``body`` as one transaction, retrying aborts, mapping failures to 503/500."""
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                with self._tx(write, name) as tx:
                    return body(tx)
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

    # -- PostgreSQL's own steps ------------------------------------------------------------
    def _read_instance_id(self, tx: Tx) -> str:
        instance_id = steps.read_instance_id(tx)
        if instance_id is None:
            raise _unavailable()
        return instance_id

    def _claim_team(self, tx: Tx, document: ProvisioningDocument, now: str) -> tuple[TeamRow, bool]:
        """Insert the team with ``ON CONFLICT DO NOTHING``, then lock its row.

        Two operators racing to create one team end with one row: the loser
        waits for the winner's commit and then updates it like any re-apply.
        """
        inserted = tx.one(
            "INSERT INTO teams(team_id, team_name, provisioned_at) VALUES (?, ?, ?) "
            "ON CONFLICT (team_id) DO NOTHING RETURNING team_pk",
            (document.team_id, document.team_name, now),
        )
        team = steps.load_team(tx, document.team_id, lock=True)
        assert team is not None
        return team, inserted is not None

    def _announce(self, tx: Tx, team_id: str) -> None:
        """NOTIFY every relay process at commit (relay/storage/pg_live.py);
        PostgreSQL drops it with a rolled-back transaction."""
        tx.one("SELECT pg_notify(?, ?)", (CHANNEL, team_id))

    def live_feed(self) -> PgLiveFeed:
        """A new LISTEN connection of this process (the app starts it once)."""
        return PgLiveFeed(self._url)

    def _team_counts(self, tx: Tx, team_pk: int) -> tuple[int, int, int]:
        """One round trip for the three counts of ``relay status``."""
        counts = tx.one(
            "SELECT (SELECT count(*) FROM messages WHERE team_pk = %(pk)s), "
            "(SELECT count(*) FROM members WHERE team_pk = %(pk)s AND active), "
            "(SELECT count(*) FROM credentials WHERE team_pk = %(pk)s "
            "AND revoked_at IS NULL)",
            {"pk": team_pk},
        )
        assert counts is not None
        live, members, creds = (int(n) for n in counts)
        return live, members, creds

    # -- readiness ---------------------------------------------------------------------
    def probe(self) -> str:
        """Open a fresh connection (not a pooled one) and read the instance ID."""
        try:
            conn = _connect_direct(self._url)
        except psycopg.Error:
            raise _unavailable() from None
        try:
            return self._read_instance_id(Tx(conn, POSTGRES))
        except psycopg.Error:
            raise _unavailable() from None
        finally:
            conn.close()

    def pool_state(self) -> PoolState:
        """psycopg_pool's own measures (``get_stats`` reads them without I/O)."""
        stats = self._pool.get_stats()
        return PoolState(
            size=stats.get("pool_size", 0),
            max_size=stats.get("pool_max"),
            available=stats.get("pool_available"),
            waiting=stats.get("requests_waiting", 0),
        )
