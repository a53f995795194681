"""A binding's sync state for operators and tests (specs/sync-stage1.md §5).

This is the "what is pending, what is stuck" answer: cursors, revision,
counts of reservations and quarantine rows per durable state, the blocked
messages by name (they hold the push cursor and need an operator), and the
conflict count, and the retention gaps an operator accepted (so imported
history and an accepted unavailable interval stay distinguishable). It is
an operator query, not a hot path: the counts are
grouped scans of the binding's rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from syncengine.ops.bindings import BindingKey, SyncBinding, load_binding
from syncengine.ops.resync import SyncResyncAudit

__all__ = ["BlockedMessage", "SyncStatus", "sync_status"]

#: At most this many blocked messages are listed by name.
MAX_LISTED_BLOCKED = 100
#: At most this many accepted retention gaps are listed (the newest).
MAX_LISTED_GAPS = 20


@dataclass(frozen=True, slots=True)
class BlockedMessage:
    local_position: int
    local_id: str
    limit: int
    reason: str


@dataclass(frozen=True, slots=True)
class SyncStatus:
    binding: SyncBinding | None
    reservations: dict[str, int]
    quarantine: dict[str, int]
    conflicts: int
    blocked: tuple[BlockedMessage, ...]
    accepted_gaps: tuple[SyncResyncAudit, ...] = ()


def sync_status(conn: Any, key: BindingKey) -> SyncStatus:
    binding = load_binding(conn, key)
    if binding is None:
        return SyncStatus(None, {}, {}, 0, ())
    reservations = dict(
        conn.execute(
            "SELECT state, count(*) FROM sync_push WHERE binding_pk = ? GROUP BY state",
            (binding.pk,),
        ).fetchall()
    )
    quarantine = dict(
        conn.execute(
            "SELECT status, count(*) FROM sync_quarantine WHERE binding_pk = ? GROUP BY status",
            (binding.pk,),
        ).fetchall()
    )
    conflicts = conn.execute(
        "SELECT count(*) FROM sync_conflicts WHERE binding_pk = ?", (binding.pk,)
    ).fetchone()[0]
    blocked = tuple(
        BlockedMessage(*row)
        for row in conn.execute(
            "SELECT p.local_position, m.id, p.blocked_limit, p.blocked_reason"
            " FROM sync_push AS p JOIN messages AS m ON m.seq = p.local_position"
            " WHERE p.binding_pk = ? AND p.state = 'blocked'"
            " ORDER BY p.local_position LIMIT ?",
            (binding.pk, MAX_LISTED_BLOCKED),
        )
    )
    gaps = conn.execute(
        "SELECT expected_transport_cursor, accepted_floor FROM sync_resync_audits"
        " WHERE binding_pk = ? AND driver_generation = ? ORDER BY accepted_floor DESC LIMIT ?",
        (binding.pk, binding.driver_generation, MAX_LISTED_GAPS),
    ).fetchall()
    accepted = tuple(SyncResyncAudit(row[0], row[1]) for row in reversed(gaps))
    return SyncStatus(binding, reservations, quarantine, conflicts, blocked, accepted)
