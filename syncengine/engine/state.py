"""Durable engine state in the store (migration 4; specs/engine.md §2.3).

Every function here runs inside the caller's storage transaction, so each
engine state transition — connecting, appending a security revision,
recording a cycle's outcome, entering or leaving resync-required — is one
transaction (STYLE: pure decision, one transaction at the edge).

Nothing secret is stored: the bearer credential lives in its own 0600 file
(:mod:`syncengine.http.credentials`); only its path and non-secret ID are
here. The identity file is stored by path, never by content.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from syncengine.engine.epochs import EpochHistory, KeyEpoch
from syncengine.engine.errors import AlreadyConnected, FailureRecord, NotConnected
from syncengine.engine.security import SecurityEntry, SecurityHistory, SecurityMode
from syncengine.http.errors import (
    AccessDenied,
    CredentialStoreError,
    EngineState,
    IntermediaryFailure,
    RedirectRefused,
    RelayUnavailable,
    TeamNotFound,
    TlsVerificationFailed,
    TransportFailure,
    Unauthenticated,
)
from syncengine.ops.bindings import BindingKey, SyncBinding, open_binding
from syncengine.store import teams
from syncengine.store.connection import Row, one_row
from syncengine.store.errors import UnknownTeam

if TYPE_CHECKING:
    import apsw

__all__ = [
    "REPLACE_RESOLVES",
    "ConnectionRecord",
    "EngineStatusRow",
    "append_key_epoch",
    "append_security_entry",
    "clear_halt",
    "clear_resync",
    "connection_for",
    "insert_connection",
    "list_connections",
    "load_halt",
    "load_key_epochs",
    "load_security_history",
    "load_seen",
    "load_status",
    "pending_push_count",
    "record_failure",
    "record_halt",
    "record_resync",
    "record_resync_accepted",
    "record_seen",
    "record_success",
    "remove_connection",
    "replace_credential",
    "set_identity_path",
]

#: The durable outcome states ``status`` shows: the client's engine states
#: plus ``connected`` (never synced yet) and ``ok``.
STATES: tuple[str, ...] = ("connected", "ok", *(state.value for state in EngineState))

_SELECT = """
    SELECT e.binding_pk, t.name, e.endpoint, b.server_instance_id, b.remote_team_id,
           b.protocol_version, e.remote_team_name, e.credential_id, e.credential_path,
           e.connected_at
    FROM engine_bindings AS e
    JOIN sync_bindings AS b ON b.binding_pk = e.binding_pk
    JOIN teams AS t ON t.team_pk = e.team_pk
"""


@dataclass(frozen=True, slots=True)
class ConnectionRecord:
    """The non-secret connection of one local team (``engine_bindings``)."""

    binding_pk: int
    local_team: str
    endpoint: str
    server_instance_id: str
    remote_team_id: str
    protocol_version: int
    remote_team_name: str
    credential_id: str
    credential_path: str
    connected_at: str
    epochs: EpochHistory

    @property
    def key(self) -> BindingKey:
        return BindingKey(
            self.local_team, self.server_instance_id, self.remote_team_id, self.protocol_version
        )

    @property
    def age_configured(self) -> bool:
        return self.epochs.configured

    @property
    def age_key_id(self) -> str | None:
        """The current (newest) epoch's key ID."""
        current = self.epochs.current
        return current.key_id if current else None

    @property
    def age_recipients(self) -> tuple[str, ...]:
        current = self.epochs.current
        return current.recipients if current else ()

    @property
    def identity_path(self) -> str | None:
        """This machine's identity for the current epoch, if installed."""
        current = self.epochs.current
        return current.identity_path if current else None


def _record(conn: apsw.Connection, row: tuple[Any, ...]) -> ConnectionRecord:
    return ConnectionRecord(
        binding_pk=row[0],
        local_team=row[1],
        endpoint=row[2],
        server_instance_id=row[3],
        remote_team_id=row[4],
        protocol_version=row[5],
        remote_team_name=row[6],
        credential_id=row[7],
        credential_path=row[8],
        connected_at=row[9],
        epochs=load_key_epochs(conn, row[0]),
    )


def load_key_epochs(conn: apsw.Connection, binding_pk: int) -> EpochHistory:
    rows: list[Row] = conn.execute(
        "SELECT revision, effective_from_seq, key_id, recipients, identity_path"
        " FROM engine_key_epochs WHERE binding_pk = ? ORDER BY revision",
        (binding_pk,),
    ).fetchall()
    return EpochHistory(
        tuple(KeyEpoch(r[0], r[1], r[2], tuple(r[3].split("\n")), r[4]) for r in rows)
    )


def append_key_epoch(conn: apsw.Connection, binding_pk: int, epoch: KeyEpoch, now: str) -> None:
    """Append one epoch; the primary key and ``UNIQUE (key_id)`` refuse a
    concurrent duplicate revision or a reused key ID."""
    conn.execute(
        "INSERT INTO engine_key_epochs (binding_pk, revision, effective_from_seq, key_id,"
        " recipients, identity_path, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            binding_pk,
            epoch.revision,
            epoch.effective_from_seq,
            epoch.key_id,
            "\n".join(epoch.recipients),
            epoch.identity_path,
            now,
        ),
    )


def list_connections(conn: apsw.Connection) -> list[ConnectionRecord]:
    rows = conn.execute(_SELECT + " ORDER BY t.name").fetchall()
    return [_record(conn, row) for row in rows]


def connection_for(conn: apsw.Connection, local_team: str | None) -> ConnectionRecord:
    """The connection of ``local_team``, or the only one when ``None``."""
    if local_team is None:
        found = list_connections(conn)
        if len(found) == 1:
            return found[0]
        if not found:
            raise NotConnected("no team of this store is connected to a relay")
        names = ", ".join(record.local_team for record in found)
        raise NotConnected(
            f"this store has several connected teams ({names}); choose one",
            remediation="Pass --team TEAM.",
        )
    row = conn.execute(_SELECT + " WHERE t.name = ?", (local_team,)).fetchone()
    if row is None:
        raise NotConnected(f"team {local_team!r} is not connected to a relay")
    return _record(conn, row)


def insert_connection(
    conn: apsw.Connection,
    key: BindingKey,
    *,
    endpoint: str,
    remote_team_name: str,
    credential_id: str,
    credential_path: str,
    epochs: EpochHistory,
    security: SecurityHistory,
    now: str,
) -> SyncBinding:
    """Create the local team if absent, the Stage-1 binding, the connection,
    its key-epoch and security histories (revision 0 from sequence 1, or a
    whole imported history) and the status row — together."""
    try:
        team_key = teams.team_pk(conn, key.local_team)
    except UnknownTeam:
        teams.create_team(conn, key.local_team, (), now)
        team_key = teams.team_pk(conn, key.local_team)
    taken = conn.execute("SELECT 1 FROM engine_bindings WHERE team_pk = ?", (team_key,)).fetchone()
    if taken is not None:
        raise AlreadyConnected(f"team {key.local_team!r} is already connected to a relay")
    # A Stage-1 binding of this remote stream held by another local team is
    # refused by open_binding (one remote stream replicates one local team).
    binding = open_binding(conn, key, now)
    if conn.execute("SELECT 1 FROM messages WHERE team_pk = ? LIMIT 1", (team_key,)).fetchone():
        # The team already holds messages (an earlier binding, a rebuilt
        # relay): the new binding adopts what the relay already has before it
        # pushes anything (syncengine/ops/adopt.py).
        from syncengine.ops.adopt import mark_adoptable  # connect only (start-up, #17)

        conn.execute("UPDATE sync_bindings SET adopt_own = 1 WHERE binding_pk = ?", (binding.pk,))
        mark_adoptable(conn, binding.pk, team_key)
    conn.execute(
        "INSERT INTO engine_bindings (binding_pk, team_pk, endpoint, remote_team_name,"
        " credential_id, credential_path, connected_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (binding.pk, team_key, endpoint, remote_team_name, credential_id, credential_path, now),
    )
    for entry in security.entries:
        append_security_entry(conn, binding.pk, entry, now)
    for epoch in epochs.epochs:
        append_key_epoch(conn, binding.pk, epoch, now)
    conn.execute(
        "INSERT INTO engine_status (binding_pk, state) VALUES (?, 'connected')", (binding.pk,)
    )
    return binding


def load_security_history(conn: apsw.Connection, binding_pk: int) -> SecurityHistory:
    rows: list[Row] = conn.execute(
        "SELECT revision, effective_from_seq, minimum_security_mode"
        " FROM engine_security_history WHERE binding_pk = ? ORDER BY revision",
        (binding_pk,),
    ).fetchall()
    return SecurityHistory(tuple(SecurityEntry(r[0], r[1], SecurityMode(r[2])) for r in rows))


def append_security_entry(
    conn: apsw.Connection, binding_pk: int, entry: SecurityEntry, now: str
) -> None:
    """Append one revision (the primary key refuses a concurrent duplicate)."""
    conn.execute(
        "INSERT INTO engine_security_history (binding_pk, revision, effective_from_seq,"
        " minimum_security_mode, recorded_at) VALUES (?, ?, ?, ?, ?)",
        (binding_pk, entry.revision, entry.effective_from_seq, entry.mode.value, now),
    )


def set_identity_path(conn: apsw.Connection, binding_pk: int, key_id: str, path: str) -> None:
    """This machine's identity for epoch ``key_id`` (a path, never the secret)."""
    conn.execute(
        "UPDATE engine_key_epochs SET identity_path = ? WHERE binding_pk = ? AND key_id = ?",
        (path, binding_pk, key_id),
    )
    if conn.changes() != 1:
        raise RuntimeError(f"epoch {key_id!r} of binding {binding_pk} vanished")


@dataclass(frozen=True, slots=True)
class EngineStatusRow:
    state: str
    last_success_at: str | None
    last_failure_at: str | None
    failures_since_success: int
    last_error_code: str | None
    last_error_class: str | None
    last_error_http_status: int | None
    last_error_message: str | None
    last_error_remediation: str | None
    resync_after: int | None
    resync_min_available_seq: int | None
    resync_recorded_at: str | None
    halt_code: str | None = None
    halt_message: str | None = None
    halt_at: str | None = None

    @property
    def resync_required(self) -> bool:
        return self.resync_after is not None


def load_status(conn: apsw.Connection, binding_pk: int) -> EngineStatusRow:
    row = one_row(
        conn.execute(
            "SELECT state, last_success_at, last_failure_at, failures_since_success,"
            " last_error_code, last_error_class, last_error_http_status, last_error_message,"
            " last_error_remediation, resync_after, resync_min_available_seq, resync_recorded_at,"
            " halt_code, halt_message, halt_at"
            " FROM engine_status WHERE binding_pk = ?",
            (binding_pk,),
        )
    )
    return EngineStatusRow(*row)


def record_success(conn: apsw.Connection, binding_pk: int, now: str) -> None:
    """A completed cycle: ``ok`` unless a durable resync marker still stands."""
    conn.execute(
        "UPDATE engine_status SET state = CASE WHEN resync_after IS NULL THEN 'ok'"
        " ELSE 'resync-required' END, last_success_at = ?, failures_since_success = 0"
        " WHERE binding_pk = ?",
        (now, binding_pk),
    )


def record_failure(
    conn: apsw.Connection, binding_pk: int, failure: FailureRecord, now: str
) -> None:
    conn.execute(
        "UPDATE engine_status SET state = ?, last_failure_at = ?,"
        " failures_since_success = failures_since_success + 1, last_error_code = ?,"
        " last_error_class = ?, last_error_http_status = ?, last_error_message = ?,"
        " last_error_remediation = ? WHERE binding_pk = ?",
        (
            failure.state.value,
            now,
            failure.code,
            failure.error_class,
            failure.http_status,
            failure.message,
            failure.remediation,
            binding_pk,
        ),
    )


def record_resync(conn: apsw.Connection, binding_pk: int, after: int, floor: int, now: str) -> None:
    """The 410 marker: durable, visible, and never cleared by a restart."""
    conn.execute(
        "UPDATE engine_status SET state = 'resync-required', resync_after = ?,"
        " resync_min_available_seq = ?, resync_recorded_at = ? WHERE binding_pk = ?",
        (after, floor, now, binding_pk),
    )


def clear_resync(conn: apsw.Connection, binding_pk: int) -> bool:
    """A page was served from our cursor again (an operator resync moved it)."""
    conn.execute(
        "UPDATE engine_status SET resync_after = NULL, resync_min_available_seq = NULL,"
        " resync_recorded_at = NULL WHERE binding_pk = ? AND resync_after IS NOT NULL",
        (binding_pk,),
    )
    return bool(conn.changes())


def load_seen(conn: apsw.Connection, binding_pk: int) -> tuple[int, int]:
    """The newest relay ``(floor, current_seq)`` this binding has recorded."""
    row = one_row(
        conn.execute(
            "SELECT seen_floor, seen_current_seq FROM engine_status WHERE binding_pk = ?",
            (binding_pk,),
        )
    )
    return int(row[0]), int(row[1])


def record_seen(conn: apsw.Connection, binding_pk: int, floor: int, current: int) -> None:
    """Max-merge what the relay's authenticated snapshots reported."""
    conn.execute(
        "UPDATE engine_status SET seen_floor = max(seen_floor, ?),"
        " seen_current_seq = max(seen_current_seq, ?) WHERE binding_pk = ?",
        (floor, current, binding_pk),
    )


def load_halt(conn: apsw.Connection, binding_pk: int) -> tuple[str, str, str] | None:
    """The durable integrity halt ``(code, message, at)``, if one stands."""
    row = conn.execute(
        "SELECT halt_code, halt_message, halt_at FROM engine_status"
        " WHERE binding_pk = ? AND halt_code IS NOT NULL",
        (binding_pk,),
    ).fetchone()
    return None if row is None else (str(row[0]), str(row[1]), str(row[2]))


def record_halt(conn: apsw.Connection, binding_pk: int, code: str, message: str, now: str) -> None:
    """The relay contradicted this machine: stop the binding until an operator
    resumes it (the first evidence is kept)."""
    conn.execute(
        "UPDATE engine_status SET halt_code = ?, halt_message = ?, halt_at = ?"
        " WHERE binding_pk = ? AND halt_code IS NULL",
        (code, message, now, binding_pk),
    )


#: The failures a completed ``connect --replace`` answers (issue #33: status
#: kept showing them with their old remedy, usually "connect --replace",
#: after the operator had done just that). The pairing exchange has just
#: reached the relay at the recorded endpoint, over verified TLS and without a
#: redirect, and the relay admitted a fresh credential of this very instance
#: and team — so a refused, lost or unreadable credential, an unknown team,
#: and a relay that could not be reached are no longer the binding's state.
#: Anything else (a full disk, a halt, a resync marker, a rejected payload)
#: is untouched by a new credential and keeps its remedy.
REPLACE_RESOLVES: tuple[str, ...] = tuple(
    cls.__name__
    for cls in (
        Unauthenticated,
        AccessDenied,
        TeamNotFound,
        CredentialStoreError,
        TransportFailure,
        IntermediaryFailure,
        RelayUnavailable,
        RedirectRefused,
        TlsVerificationFailed,
    )
)


def replace_credential(
    conn: apsw.Connection,
    binding_pk: int,
    *,
    endpoint: str,
    credential_id: str,
    credential_path: str,
) -> None:
    """``connect --replace``: the binding presents a new credential (and
    reaches the relay at ``endpoint``); nothing else of it changes, except
    that a standing failure of the old credential or address (:data:`REPLACE_RESOLVES`)
    is resolved — state ``ok``, as ``resume`` and ``resync`` leave the binding
    they unblock (specs/engine.md §3.2). The failure itself is kept
    for the record; ``status`` shows it as resolved."""
    conn.execute(
        "UPDATE engine_bindings SET endpoint = ?, credential_id = ?, credential_path = ?"
        " WHERE binding_pk = ?",
        (endpoint, credential_id, credential_path, binding_pk),
    )
    if conn.changes() != 1:
        raise RuntimeError(f"binding {binding_pk} vanished during connect --replace")
    classes = ", ".join("?" * len(REPLACE_RESOLVES))
    conn.execute(
        "UPDATE engine_status SET state = 'ok' WHERE binding_pk = ?"
        f" AND state IN ('refused', 'backoff') AND last_error_class IN ({classes})",
        (binding_pk, *REPLACE_RESOLVES),
    )


def remove_connection(conn: apsw.Connection, binding_pk: int) -> None:
    """``disconnect``: the connection goes (status, security history, the
    engine row); the Stage-1 binding and everything it maps stays."""
    for table in (
        "engine_status",
        "engine_security_history",
        "engine_key_epochs",
        "engine_bindings",
    ):
        conn.execute(f"DELETE FROM {table} WHERE binding_pk = ?", (binding_pk,))


def clear_halt(conn: apsw.Connection, binding_pk: int) -> bool:
    """The operator's ``resume``: returns whether a halt stood.

    The newest snapshot the relay *claimed* (``seen_*``) is forgotten with the
    halt: the operator has verified the relay, and a claim it contradicted
    (a read-state page announcing a longer stream, say) must not halt every
    later snapshot for good. What this machine itself pulled still bounds the
    relay: ``current_seq`` below the transport cursor halts again."""
    conn.execute(
        "UPDATE engine_status SET halt_code = NULL, halt_message = NULL, halt_at = NULL,"
        " seen_floor = 0, seen_current_seq = 0,"
        " state = CASE WHEN state = 'halted' THEN 'ok' ELSE state END"
        " WHERE binding_pk = ? AND halt_code IS NOT NULL",
        (binding_pk,),
    )
    return bool(conn.changes())


def record_resync_accepted(conn: apsw.Connection, binding_pk: int) -> None:
    """An operator accepted the gap: the marker goes, and a binding that was
    stopped only by it is ``ok`` again (its next pull starts at the floor)."""
    conn.execute(
        "UPDATE engine_status SET state = CASE WHEN state = 'resync-required' THEN 'ok'"
        " ELSE state END, resync_after = NULL, resync_min_available_seq = NULL,"
        " resync_recorded_at = NULL WHERE binding_pk = ?",
        (binding_pk,),
    )


def pending_push_count(conn: apsw.Connection, binding: SyncBinding) -> int:
    """Local-origin messages of the team not yet acknowledged by the relay."""
    after_cursor = one_row(
        conn.execute(
            "SELECT count(*) FROM messages INDEXED BY messages_local_by_team"
            " WHERE team_pk = ? AND origin = 'local' AND seq > ?",
            (binding.team_pk, binding.push_cursor),
        )
    )[0]
    acked_above = one_row(
        conn.execute(
            "SELECT count(*) FROM sync_push WHERE binding_pk = ? AND state = 'acked'"
            " AND local_position > ?",
            (binding.pk, binding.push_cursor),
        )
    )[0]
    return int(after_cursor - acked_above)
