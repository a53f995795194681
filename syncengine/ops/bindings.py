"""Sync bindings: which remote stream a local team replicates to
(message-synchronization.md "Optional synchronization extension"; ADR 0005
"Local durability is authoritative"; specs/sync-stage1.md §2.1).

A binding is keyed by the immutable ``(server_instance_id, remote_team_id,
protocol_version)`` and records the store's persistent driver generation,
against which every local position is interpreted. The endpoint URL is not
part of it, and it carries no secret: it is a local record, not an
authorization. Every write to a binding row advances its ``revision`` with a
compare-and-set (``… WHERE revision = expected``), so a writer that read an
older revision can never overwrite a newer binding (:class:`StaleBinding`).

The local team selects local messages; a binding belongs to exactly one
local team (by key, so a team rename keeps it). Reusing a remote binding for
another local team is refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syncengine.ops.errors import BindingMismatch, StaleBinding, SyncUsageError
from syncengine.ops.states import BindingEvent, BindingState, binding_next
from syncengine.store.connection import write_transaction
from syncengine.store.errors import CorruptStore, InvalidInput, StoreError
from syncengine.store.names import check_local_team
from syncengine.store.teams import find_team, intern_team
from wire.errors import WireError
from wire.limits import PROTOCOL_VERSION
from wire.scalars import check_uuid7

if TYPE_CHECKING:
    import apsw

__all__ = [
    "BindingKey",
    "SyncBinding",
    "advance_binding",
    "load_binding",
    "open_binding",
    "retire_binding",
    "store_generation",
    "sync_transaction",
]

_COLUMNS = (
    "binding_pk, team_pk, server_instance_id, remote_team_id, protocol_version, "
    "driver_generation, state, revision, push_cursor, transport_cursor, corrupt_count"
)


@dataclass(frozen=True, slots=True)
class BindingKey:
    """The binding arguments of every sync verb: local team + remote stream."""

    local_team: str
    server_instance_id: str
    remote_team_id: str
    protocol_version: int = PROTOCOL_VERSION

    def __post_init__(self) -> None:
        check_local_team(self.local_team, "local-team")
        try:
            check_uuid7(self.server_instance_id, "server-instance-id")
            check_uuid7(self.remote_team_id, "remote-team-id")
        except WireError as exc:
            raise InvalidInput(exc.field, exc.rule) from None
        version = self.protocol_version
        if isinstance(version, bool) or not isinstance(version, int):
            raise InvalidInput("protocol-version", "must be an integer")
        if version != PROTOCOL_VERSION:
            raise InvalidInput(
                "protocol-version", f"protocol version {version} is not supported (only 1)"
            )

    @classmethod
    def from_argv(cls, args: Sequence[str]) -> BindingKey:
        """``<local-team> <server-instance-id> <remote-team-id> <protocol-version>``."""
        if len(args) != 4:
            raise SyncUsageError(
                "binding arguments: <local-team> <server-instance-id> <remote-team-id> "
                "<protocol-version>"
            )
        version = args[3]
        if not version.isascii() or not version.isdigit() or version != str(int(version)):
            raise InvalidInput("protocol-version", "must be canonical decimal digits")
        return cls(args[0], args[1], args[2], int(version))


@dataclass(frozen=True, slots=True)
class SyncBinding:
    """One stored binding row (cursors as integers)."""

    pk: int
    team_pk: int
    key: BindingKey
    driver_generation: str
    state: BindingState
    revision: int
    push_cursor: int
    transport_cursor: int
    corrupt_count: int


def sync_transaction(
    conn: apsw.Connection, path: Path, name: str
) -> contextlib.AbstractContextManager[Any]:
    """One state transition: ``BEGIN IMMEDIATE`` … ``COMMIT`` with the named
    crash points ``<name>.before_commit`` and ``<name>.after_commit``."""
    return write_transaction(conn, path, name)


def store_generation(conn: apsw.Connection) -> str:
    row = conn.execute("SELECT value FROM store_meta WHERE key = 'driver_generation'").fetchone()
    if row is None:
        raise CorruptStore("the store has no driver generation")
    value: str = row[0]
    return value


def _row_to_binding(row: tuple[Any, ...], key: BindingKey) -> SyncBinding:
    return SyncBinding(
        pk=row[0],
        team_pk=row[1],
        key=key,
        driver_generation=row[5],
        state=BindingState(row[6]),
        revision=row[7],
        push_cursor=row[8],
        transport_cursor=row[9],
        corrupt_count=row[10],
    )


def load_binding(conn: apsw.Connection, key: BindingKey) -> SyncBinding | None:
    """The stored binding for ``key`` or ``None`` — also for a local team
    this store has never seen, which a host's first sync call on a fresh
    machine names (driver-interface §2: the storage axis registers nothing).
    Refuses a clash with another local team or generation (the binding would
    be misinterpreted)."""
    tkey = find_team(conn, key.local_team)
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM sync_bindings"
        " WHERE server_instance_id = ? AND remote_team_id = ? AND protocol_version = ?",
        (key.server_instance_id, key.remote_team_id, key.protocol_version),
    ).fetchone()
    if row is None:
        return None
    if row[1] != tkey:
        raise BindingMismatch(
            "local-team",
            "this remote team is already bound to another local team; one remote stream "
            "replicates exactly one local team",
        )
    if row[5] != store_generation(conn):
        raise CorruptStore(
            "the binding was recorded under another driver generation; its local positions "
            "cannot be interpreted in this store"
        )
    return _row_to_binding(row, key)


def open_binding(conn: apsw.Connection, key: BindingKey, now: str) -> SyncBinding:
    """The active binding for ``key``, created (revision 1) when absent.

    Runs inside the caller's write transaction. A local team this store has
    not seen is interned in that same transaction, as every storage write
    interns its names (driver-interface §2; specs/store.md §4): a host's
    first sync verb on a fresh machine needs nothing registered first. A
    retired binding is refused.
    """
    team = intern_team(conn, key.local_team, now)
    existing = load_binding(conn, key)
    state = binding_next(existing.state if existing else None, BindingEvent.BIND)
    if existing is not None:
        return existing
    conn.execute(
        "INSERT INTO sync_bindings (team_pk, server_instance_id, remote_team_id,"
        " protocol_version, driver_generation, state, revision, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, 1, ?)",
        (
            team,
            key.server_instance_id,
            key.remote_team_id,
            key.protocol_version,
            store_generation(conn),
            state.value,
            now,
        ),
    )
    created = load_binding(conn, key)
    assert created is not None
    return created


def advance_binding(
    conn: apsw.Connection,
    binding: SyncBinding,
    *,
    push_cursor: int | None = None,
    transport_cursor: int | None = None,
    corrupt_delta: int = 0,
) -> SyncBinding:
    """Write cursors / the corrupt count with a revision compare-and-set.

    Cursors only move forward; a call that changes nothing writes nothing
    (and so does not advance the revision).
    """
    binding_next(binding.state, BindingEvent.ADVANCE)
    push = binding.push_cursor if push_cursor is None else push_cursor
    transport = binding.transport_cursor if transport_cursor is None else transport_cursor
    if push < binding.push_cursor or transport < binding.transport_cursor:
        raise StoreError("internal error: a sync cursor would move backwards")  # pragma: no cover
    if (push, transport, corrupt_delta) == (binding.push_cursor, binding.transport_cursor, 0):
        return binding
    conn.execute(
        "UPDATE sync_bindings SET push_cursor = ?, transport_cursor = ?,"
        " corrupt_count = corrupt_count + ?, revision = revision + 1"
        " WHERE binding_pk = ? AND revision = ? AND state = 'active'",
        (push, transport, corrupt_delta, binding.pk, binding.revision),
    )
    if conn.changes() != 1:
        raise StaleBinding(
            f"binding revision {binding.revision} is no longer current; re-read and retry"
        )
    return SyncBinding(
        binding.pk,
        binding.team_pk,
        binding.key,
        binding.driver_generation,
        binding.state,
        binding.revision + 1,
        push,
        transport,
        binding.corrupt_count + corrupt_delta,
    )


def retire_binding(conn: apsw.Connection, key: BindingKey, expected_revision: int) -> SyncBinding:
    """Retire the binding if it is still at ``expected_revision``."""
    binding = load_binding(conn, key)
    if binding is None:
        raise InvalidInput("binding", "no such binding")
    state = binding_next(binding.state, BindingEvent.RETIRE)
    conn.execute(
        "UPDATE sync_bindings SET state = ?, revision = revision + 1"
        " WHERE binding_pk = ? AND revision = ?",
        (state.value, binding.pk, expected_revision),
    )
    if conn.changes() != 1:
        raise StaleBinding(
            f"binding is at revision {binding.revision}, not {expected_revision}; "
            "it changed since you read it"
        )
    retired = load_binding(conn, key)
    assert retired is not None
    return retired
