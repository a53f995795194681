"""The :class:`Store` facade: one object per store file, one transaction per
state transition (specs/store.md §3).

It sits above both :mod:`syncengine.store` (the tables and the
transactions over them) and :mod:`syncengine.ops` (the sync operations),
because it is the one door to both: the storage-contract verbs call
``store`` modules, the sync verbs call ``ops`` ones. Kept inside either
package it would make the two import each other; here the layering stays
one-way — ``ops`` imports ``store``, ``store`` never imports ``ops``
(ARCHITECTURE.md, "Inside syncengine"; tests/test_import_graph.py).

The export/import module is imported only by the operations that use it:
each bash-driver call is a process start, so a send pays for what it runs.

Every mutating method runs in exactly one ``BEGIN IMMEDIATE`` transaction,
so a crash leaves it wholly applied or wholly absent; every multi-statement
read runs in one snapshot.

A storage-contract write creates the store on first use, as the bundled
driver does — a host's first ``storage_send`` on a fresh machine simply
works. A contract read never creates one: on a machine that never used
syncengine it answers "nothing yet" (no messages, cursor ``0``) and leaves
the disk alone, so ``storage_store_exists`` stays a pure probe
(driver-interface §2.1).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from syncengine import __version__
from syncengine.store import messages, read_state, teams
from syncengine.store.connection import (
    DEFAULT_BUSY_TIMEOUT_MS,
    close_connection,
    one_row,
    open_connection,
    read_transaction,
    translate_sqlite_errors,
    write_transaction,
)
from syncengine.store.errors import CorruptStore, InvalidInput, StoreNotInitialized
from syncengine.store.log_records import MessageSent, Team, WatchResult
from syncengine.store.messages import OutgoingMessage
from syncengine.store.migrations import LATEST_VERSION, migrate, missing_tables, schema_version
from syncengine.store.paths import resolve_store_path
from wire.scalars import format_timestamp

if TYPE_CHECKING:
    import apsw

    from syncengine.ops.apply_pull import ApplyResult
    from syncengine.ops.bindings import BindingKey, SyncBinding
    from syncengine.ops.prepare_push import PrepareResult, SealAll
    from syncengine.ops.read_records import (
        SyncReadApplyResult,
        SyncReadBlock,
        SyncReadBlocked,
        SyncReadContext,
        SyncReadExact,
        SyncReadFrontier,
        SyncReadSnapshot,
        SyncReadUnblock,
        SyncReadUnblocked,
    )
    from syncengine.ops.read_state import PrepareReadResult
    from syncengine.ops.reprocess import ReprocessResult
    from syncengine.ops.resync import SyncResync, SyncResyncResult, SyncResyncStatus
    from syncengine.ops.status import SyncStatus
    from syncengine.ops.sync_records import (
        SyncPrepare,
        SyncPullCursor,
        SyncPullMessage,
        SyncPushAck,
        SyncReconcileResult,
    )

__all__ = ["CAPABILITIES", "Store"]

#: Advertised by ``describe`` (driver-interface §2.8): the four Stage-1 sync
#: operations (specs/sync-stage1.md) and the retention-gap resync pair
#: (specs/sync-stage1.md §4.5), and read-state sync (specs/read-state.md).
CAPABILITIES: tuple[str, ...] = ("stage1-sync", "stage1-resync", "stage2-read-state")


def _now() -> str:
    return format_timestamp(datetime.now(UTC))


class Store:
    """A local message store in one SQLite file.

    ``path`` defaults to ``SYNCENGINE_STORE`` or the XDG state location. The
    connection opens lazily on first use and is closed by :meth:`close` or by
    leaving a ``with`` block.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    ) -> None:
        self.path: Path = resolve_store_path(path)
        self.busy_timeout_ms = busy_timeout_ms
        self._conn: apsw.Connection | None = None

    # -- lifecycle -----------------------------------------------------------------

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection; one that wrote folds its WAL in first, so the
        last one out leaves no grown WAL behind (specs/store.md §12.2)."""
        if self._conn is not None:
            conn, self._conn = self._conn, None
            close_connection(conn, self.path)

    def _connect(self, *, create: bool) -> apsw.Connection:
        if self._conn is None:
            conn = open_connection(self.path, create=create, busy_timeout_ms=self.busy_timeout_ms)
            try:
                with translate_sqlite_errors(self.path):
                    version = schema_version(conn)
                    if version == 0 and not create:
                        raise StoreNotInitialized(
                            f"store at {self.path} is not initialized; run 'syncengine driver init'"
                        )
                    if version != LATEST_VERSION:
                        migrate(conn, self.path)
                    self._check_meta(conn)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _check_meta(self, conn: apsw.Connection) -> None:
        lost = missing_tables(conn)
        if lost:
            raise CorruptStore(
                f"store {self.path} is damaged: missing table(s) {', '.join(lost)}; restore it "
                "from an export or move it aside and run 'init'"
            )
        row = conn.execute(
            "SELECT value FROM store_meta WHERE key = 'driver_generation'"
        ).fetchone()
        if row is None:
            raise CorruptStore(f"store {self.path} has no driver generation")

    @property
    def conn(self) -> apsw.Connection:
        return self._connect(create=False)

    def _write_conn(self) -> apsw.Connection:
        """The connection for a contract write: the store is created on first use."""
        return self._connect(create=True)

    def _read_conn(self) -> apsw.Connection | None:
        """The connection for a contract read, or ``None`` when there is no
        store yet (a read never creates one). A damaged file still fails."""
        if self._conn is not None:
            return self._conn
        if not self.path.exists():
            return None
        try:
            return self._connect(create=False)
        except StoreNotInitialized:
            return None

    def init(self) -> None:
        """Create the store (file, schema, generation) if absent; idempotent."""
        self._connect(create=True)

    def exists(self) -> bool:
        """Whether an initialized store is at the path — never creates one."""
        if self._conn is not None:
            return True
        if not self.path.is_file():
            return False
        try:
            self._connect(create=False)
        except StoreNotInitialized:
            return False
        return True

    def check(self) -> None:
        """Raise unless the store can be used (dependencies, file, schema)."""
        self._connect(create=False)
        with read_transaction(self.conn, self.path) as conn:
            result = one_row(conn.execute("PRAGMA quick_check(1)"))[0]
        if result != "ok":
            raise CorruptStore(f"store {self.path} failed its integrity check: {result}")

    def driver_generation(self) -> str:
        with translate_sqlite_errors(self.path):
            row = one_row(
                self.conn.execute("SELECT value FROM store_meta WHERE key = 'driver_generation'")
            )
        value: str = row[0]
        return value

    def describe(self) -> dict[str, str]:
        """``key=value`` metadata for ``storage_describe``."""
        return {
            "name": "syncengine",
            "description": "SQLite (APSW) local message store with relay sync",
            "version": __version__,
            "schema": "event-log-v1",
            "store": str(self.path),
            "capabilities": ",".join(CAPABILITIES),
        }

    # -- team registry -------------------------------------------------------------

    def create_team(self, name: str, members: Sequence[str] = ()) -> Team:
        with write_transaction(self.conn, self.path, "team.create") as conn:
            return teams.create_team(conn, name, tuple(members), _now())

    def rename_member(self, team: str, old: str, new: str) -> None:
        """Rename one agent; its messages, reads and relay member ID follow
        (one transaction)."""
        with write_transaction(self.conn, self.path, "team.rename_member") as conn:
            teams.rename_member(conn, team, old, new, _now())

    def add_members(self, team: str, members: Sequence[str]) -> Team:
        with write_transaction(self.conn, self.path, "team.add_members") as conn:
            return teams.add_members(conn, team, tuple(members), _now())

    def rename_team(self, old: str, new: str) -> Team:
        with write_transaction(self.conn, self.path, "team.rename") as conn:
            return teams.rename_team(conn, old, new)

    def team(self, name: str) -> Team:
        with read_transaction(self.conn, self.path) as conn:
            return teams.get_team(conn, name)

    def list_teams(self) -> list[Team]:
        with read_transaction(self.conn, self.path) as conn:
            return teams.list_teams(conn)

    # -- storage contract ----------------------------------------------------------

    def send(self, team: str, sender: str, recipient: str, body: str) -> MessageSent:
        """Append one message in its own transaction; returns the stored record."""
        return self.send_many([OutgoingMessage(team, sender, recipient, body)])[0]

    def send_many(self, outgoing: Iterable[OutgoingMessage]) -> list[MessageSent]:
        """Append a batch in one transaction: all stored, or none."""
        items = list(outgoing)
        if not items:
            return []
        with write_transaction(self._write_conn(), self.path, "store.send") as conn:
            return messages.insert_messages(conn, items, _now())

    def list_unread(self, team: str, agent: str, limit: int | None = None) -> list[MessageSent]:
        conn = self._read_conn()
        if conn is None:
            messages.check_pair_and_limit(team, agent, limit)
            return []
        with read_transaction(conn, self.path) as conn:
            return messages.list_unread(conn, team, agent, limit)

    def mark_read_batch(self, team: str, agent: str, message_ids: Sequence[str]) -> None:
        with write_transaction(self._write_conn(), self.path, "store.mark_read") as conn:
            read_state.mark_read(conn, team, agent, list(message_ids), _now())

    def read_cursor_get(self, team: str, agent: str) -> str:
        conn = self._read_conn()
        if conn is None:
            messages.check_pair_and_limit(team, agent, None)
            return "0"
        with read_transaction(conn, self.path) as conn:
            return read_state.read_cursor_get(conn, team, agent)

    def read_cursor_consume(
        self, team: str, agent: str, cursor: str, message_ids: Sequence[str] = ()
    ) -> str:
        with write_transaction(self._write_conn(), self.path, "store.consume") as conn:
            return read_state.read_cursor_consume(
                conn, team, agent, cursor, list(message_ids), _now()
            )

    def require_reader(self, team: str, agent: str) -> None:
        """Raise :class:`UnknownTeam`/:class:`UnknownAgent` unless ``agent``
        of ``team`` can be waited for (:func:`teams.require_reader`); a
        missing store is :class:`StoreNotInitialized` and is not created."""
        with read_transaction(self.conn, self.path) as conn:
            teams.require_reader(conn, team, agent)

    def data_version(self) -> int:
        """SQLite's change counter as seen by this store's connection
        (``PRAGMA data_version``): two readings differ exactly when another
        connection committed in between. A waiter polls it for almost
        nothing and re-reads the messages only after a change; it takes no
        lock beyond a momentary read. A missing store is not created."""
        with translate_sqlite_errors(self.path):
            row = one_row(self.conn.execute("PRAGMA data_version"))
        return int(row[0])

    def watch_tip(self, pairs: Sequence[str]) -> str:
        conn = self._read_conn()
        if conn is None:
            messages.check_pairs(pairs)
            return "0"
        with read_transaction(conn, self.path) as conn:
            messages.check_pairs(pairs)
            return str(messages.log_tip(conn))

    def watch_after(self, cursor: str, pairs: Sequence[str]) -> WatchResult:
        conn = self._read_conn()
        if conn is None:
            messages.check_pairs(pairs)
            return WatchResult(messages=(), cursor="0")
        with read_transaction(conn, self.path) as conn:
            found, tip = messages.watch_after(conn, cursor, pairs)
        return WatchResult(messages=tuple(found), cursor=tip)

    def history(
        self, team: str, agent: str | None = None, limit: int | None = None
    ) -> list[MessageSent]:
        conn = self._read_conn()
        if conn is None:
            messages.check_pair_and_limit(team, agent or None, limit)
            return []
        with read_transaction(conn, self.path) as conn:
            return messages.history(conn, team, agent, limit)

    def export(self, destination: str | os.PathLike[str]) -> int:
        """Write the event log to ``destination`` (an empty log when there
        is no store yet: nothing is created)."""
        # start-up pin: send loads no syncengine.store.event_log
        from syncengine.store import event_log

        conn = self._read_conn()
        if conn is None:
            return event_log.export_events(None, Path(destination))
        with read_transaction(conn, self.path) as conn:
            return event_log.export_events(conn, Path(destination))

    def import_file(self, source: str | os.PathLike[str]) -> tuple[int, int]:
        """Import an exported log; returns (events added, events already present)."""
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise InvalidInput("file", f"cannot read {source}: {exc.strerror}") from None
        return self.import_bytes(data, str(source))

    def import_bytes(self, data: bytes, source: str = "input") -> tuple[int, int]:
        # start-up pin: send loads no syncengine.store.event_log
        from syncengine.store import event_log

        with write_transaction(self._write_conn(), self.path, "store.import") as conn:
            return event_log.import_events(conn, data, source, _now())

    def compact(self) -> int:
        """Coalesce redundant read markers; returns the number removed (none,
        and nothing created, when there is no store yet)."""
        # start-up pin: send loads no syncengine.store.event_log
        from syncengine.store import event_log

        conn = self._read_conn()
        if conn is None:
            return 0
        with write_transaction(conn, self.path, "store.compact") as conn:
            return event_log.compact(conn)

    # -- Stage-1 sync (specs/sync-stage1.md) --------------------------------------

    def _sync_conn(self) -> apsw.Connection:
        """The connection for a sync verb: the store is created on first use.

        A host clones a team onto a machine that never wrote a message, and
        its first call is a sync verb (``apply`` or ``reprocess``; the
        bundled driver creates its schema there too). Every sync answer
        names the store's driver generation, which exists only once the
        store does — so even the read-only verbs (``reprocess``,
        ``resync-status``) create the empty store; they never write a team,
        binding or cursor (specs/store.md §11.1)."""
        return self._connect(create=True)

    def sync_bind(self, key: BindingKey) -> SyncBinding:
        """Create the binding if absent (one transaction); returns it."""
        # start-up pin: send loads no syncengine.ops.bindings
        from syncengine.ops.bindings import open_binding, sync_transaction

        with sync_transaction(self.conn, self.path, "binding.bind") as conn:
            return open_binding(conn, key, _now())

    def sync_binding(self, key: BindingKey) -> SyncBinding | None:
        # start-up pin: send loads no syncengine.ops.bindings
        from syncengine.ops.bindings import load_binding

        with read_transaction(self.conn, self.path) as conn:
            return load_binding(conn, key)

    def sync_retire_binding(self, key: BindingKey, expected_revision: int) -> SyncBinding:
        """Retire a binding still at ``expected_revision`` (compare-and-set)."""
        # start-up pin: send loads no syncengine.ops.bindings
        from syncengine.ops.bindings import retire_binding, sync_transaction

        with sync_transaction(self.conn, self.path, "binding.retire") as conn:
            return retire_binding(conn, key, expected_revision)

    def sync_prepare_push(
        self,
        key: BindingKey,
        request: SyncPrepare,
        limit: int,
        after: int = 0,
        seal_all: SealAll | None = None,
    ) -> PrepareResult:
        # start-up pin: send loads no syncengine.ops.prepare_push
        from syncengine.ops.prepare_push import prepare_push

        return prepare_push(
            self._sync_conn(), self.path, key, request, limit, _now(), after, seal_all
        )

    def sync_reconcile_push(
        self, key: BindingKey, acks: Sequence[SyncPushAck]
    ) -> SyncReconcileResult:
        # start-up pin: send loads no syncengine.ops.reconcile_push
        from syncengine.ops.reconcile_push import reconcile_push

        return reconcile_push(self._sync_conn(), self.path, key, list(acks), _now())

    def sync_apply_pull(
        self, key: BindingKey, messages: Sequence[SyncPullMessage], cursor: SyncPullCursor
    ) -> ApplyResult:
        # start-up pin: send loads no syncengine.ops.apply_pull
        from syncengine.ops.apply_pull import apply_pull

        return apply_pull(self._sync_conn(), self.path, key, list(messages), cursor, _now())

    def sync_finish_adoption(self, key: BindingKey) -> bool:
        """A pull reached the relay's head: the binding stops adopting local
        messages as its own echoes (syncengine/ops/adopt.py); one transaction."""
        # start-up pin: send loads no syncengine.ops.adopt
        from syncengine.ops.adopt import finish_adoption
        from syncengine.ops.bindings import load_binding, sync_transaction

        with sync_transaction(self.conn, self.path, "engine.adopted") as conn:
            binding = load_binding(conn, key)
            return binding is not None and finish_adoption(conn, binding.pk)

    def sync_adopting(self, key: BindingKey) -> bool:
        # start-up pin: send loads no syncengine.ops.adopt
        from syncengine.ops.adopt import adopting
        from syncengine.ops.bindings import load_binding

        with read_transaction(self.conn, self.path) as conn:
            binding = load_binding(conn, key)
            return binding is not None and adopting(conn, binding.pk)

    def backup(self, output: str | os.PathLike[str]) -> Path:
        """A consistent online snapshot into a new private file (store/backup.py)."""
        # start-up pin: send loads no syncengine.store.backup
        from syncengine.store.backup import backup_store

        with translate_sqlite_errors(self.path):
            return backup_store(self.conn, Path(output))

    def sync_reprocess(
        self, key: BindingKey, limit: int, page_after: str | None = None
    ) -> ReprocessResult:
        # start-up pin: send loads no syncengine.ops.reprocess
        from syncengine.ops.reprocess import reprocess

        return reprocess(self._sync_conn(), self.path, key, limit, page_after)

    def sync_resync_status(
        self, key: BindingKey, accepted_floor: int | None = None
    ) -> SyncResyncStatus:
        """Read-only: generation, transport cursor and the audit of
        ``accepted_floor`` (retention-gap-resynchronization.md)."""
        # start-up pin: send loads no syncengine.ops.resync
        from syncengine.ops.resync import resync_status

        return resync_status(self._sync_conn(), self.path, key, accepted_floor)

    def sync_resync(self, key: BindingKey, request: SyncResync) -> SyncResyncResult:
        """Accept a retention gap: audit row + transport cursor to the floor,
        one transaction."""
        # start-up pin: send loads no syncengine.ops.resync
        from syncengine.ops.resync import resync

        return resync(self._sync_conn(), self.path, key, request, _now())

    # -- stage-2 read state (specs/read-state.md) --------------------------------

    def sync_prepare_read_state(
        self, key: BindingKey, context: SyncReadContext
    ) -> PrepareReadResult:
        # start-up pin: send loads no syncengine.ops.read_state
        from syncengine.ops.read_state import prepare_read_state

        return prepare_read_state(self._sync_conn(), self.path, key, context, _now())

    def sync_apply_read_state(
        self,
        key: BindingKey,
        snapshot: SyncReadSnapshot,
        items: Sequence[SyncReadFrontier | SyncReadExact],
    ) -> SyncReadApplyResult:
        # start-up pin: send loads no syncengine.ops.read_state
        from syncengine.ops.read_state import apply_read_state

        return apply_read_state(self._sync_conn(), self.path, key, snapshot, items, _now())

    def sync_block_read_state(self, key: BindingKey, request: SyncReadBlock) -> SyncReadBlocked:
        # start-up pin: send loads no syncengine.ops.read_state
        from syncengine.ops.read_state import block_member

        return block_member(self._sync_conn(), self.path, key, request, _now())

    def sync_unblock_read_state(
        self, key: BindingKey, request: SyncReadUnblock
    ) -> SyncReadUnblocked:
        # start-up pin: send loads no syncengine.ops.read_state
        from syncengine.ops.read_state import unblock_member

        return unblock_member(self._sync_conn(), self.path, key, request, _now())

    def sync_status(self, key: BindingKey) -> SyncStatus:
        """Cursors, revision and counts per durable state, from one snapshot."""
        # start-up pin: send loads no syncengine.ops.status
        from syncengine.ops.status import sync_status

        with read_transaction(self.conn, self.path) as conn:
            return sync_status(conn, key)
