"""A binding's sync state for operators and tests (specs/sync-stage1.md §5).

This is the "what is pending, what is stuck" answer: cursors, revision,
counts of reservations and quarantine rows per durable state, the blocked
messages by name (they hold the push cursor and need an operator), and the
conflict count, and the retention gaps an operator accepted (so imported
history and an accepted unavailable interval stay distinguishable). It is
an operator query, not a hot path. It also shows each roster member's
read state: local frontier and exact exceptions above it, the effective
remote frontier, the relay's exact reads, reads waiting for upload, and a
block with its reason. The per-state counts never read the history: the
states that stay small are counted through their partial indexes, the rest
come from totals the writers keep (``sync_history_counts``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from syncengine.ops.bindings import BindingKey, SyncBinding, load_binding
from syncengine.ops.history_counts import history_counts
from syncengine.ops.states import QuarantineState
from syncengine.store.connection import all_rows, one_row

if TYPE_CHECKING:
    import apsw

    from syncengine.ops.resync import SyncResyncAudit

__all__ = ["BlockedMessage", "MemberReadStatus", "SyncStatus", "sync_status"]

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
class MemberReadStatus:
    """One roster member's read state on this binding (specs/read-state.md §9)."""

    name: str
    member_id: str
    local_frontier: int
    remote_frontier: int
    local_exact: int
    remote_exact: int
    pending_upload: int
    blocked_reason: str | None
    blocked_detail: str | None


@dataclass(frozen=True, slots=True)
class SyncStatus:
    binding: SyncBinding | None
    reservations: dict[str, int]
    quarantine: dict[str, int]
    conflicts: int
    blocked: tuple[BlockedMessage, ...]
    accepted_gaps: tuple[SyncResyncAudit, ...] = ()
    read_floor: int = 0
    read_members: tuple[MemberReadStatus, ...] = ()


#: The held quarantine statuses (blocking, and the settled ``before_join``),
#: in the order of their partial index's ``IN`` list (migration 14; the
#: planner uses the index only on a match).
_HELD = ", ".join(f"'{state.value}'" for state in QuarantineState if state.held)


def _state_counts(conn: apsw.Connection, binding_pk: int) -> tuple[dict[str, int], dict[str, int]]:
    """Reservations and quarantine rows per state, without reading the
    history (issue #17): the states that stay small through their partial
    indexes, ``acked``, ``reconciled`` and ``imported`` from the totals the
    writers keep (:mod:`syncengine.ops.history_counts`)."""
    push_rows, quarantine_rows, reconciled = history_counts(conn, binding_pk)
    push: dict[str, int] = dict(
        all_rows(
            conn.execute(
                "SELECT state, count(*) FROM sync_push INDEXED BY sync_push_open"
                " WHERE binding_pk = ? AND state != 'acked' GROUP BY state",
                (binding_pk,),
            )
        )
    )
    push["acked"] = push_rows - sum(push.values())
    quarantine: dict[str, int] = dict(
        all_rows(
            conn.execute(
                "SELECT status, count(*) FROM sync_quarantine INDEXED BY sync_quarantine_blocking"
                f" WHERE binding_pk = ? AND status IN ({_HELD}) GROUP BY status",
                (binding_pk,),
            )
        )
    )
    quarantine["corrupt_state"] = one_row(
        conn.execute(
            "SELECT count(*) FROM sync_quarantine INDEXED BY sync_quarantine_corrupt"
            " WHERE binding_pk = ? AND status = 'corrupt_state'",
            (binding_pk,),
        )
    )[0]
    quarantine["reconciled"] = reconciled
    quarantine["imported"] = quarantine_rows - sum(quarantine.values())
    return (
        {state: n for state, n in sorted(push.items()) if n},
        {status: n for status, n in sorted(quarantine.items()) if n},
    )


def sync_status(conn: apsw.Connection, key: BindingKey) -> SyncStatus:
    binding = load_binding(conn, key)
    if binding is None:
        return SyncStatus(None, {}, {}, 0, ())
    reservations, quarantine = _state_counts(conn, binding.pk)
    conflicts = one_row(
        conn.execute("SELECT count(*) FROM sync_conflicts WHERE binding_pk = ?", (binding.pk,))
    )[0]
    # Through the open reservations' index, in position order: the blocked
    # few, not every acknowledged reservation of the history (issue #17).
    # ``state != 'acked'`` is the index's own condition, which lets it serve.
    blocked = tuple(
        BlockedMessage(*row)
        for row in conn.execute(
            "SELECT p.local_position, m.id, p.blocked_limit, p.blocked_reason"
            " FROM sync_push AS p INDEXED BY sync_push_open"
            " JOIN messages AS m ON m.seq = p.local_position"
            " WHERE p.binding_pk = ? AND p.state != 'acked' AND p.state = 'blocked'"
            " ORDER BY p.local_position LIMIT ?",
            (binding.pk, MAX_LISTED_BLOCKED),
        )
    )
    gaps = conn.execute(
        "SELECT expected_transport_cursor, accepted_floor FROM sync_resync_audits"
        " WHERE binding_pk = ? AND driver_generation = ? ORDER BY accepted_floor DESC LIMIT ?",
        (binding.pk, binding.driver_generation, MAX_LISTED_GAPS),
    ).fetchall()
    if gaps:  # ``syncengine status`` loads the resync records only for a gap (issue #17)
        # start-up pin: status loads no syncengine.ops.resync
        from syncengine.ops.resync import SyncResyncAudit
    accepted = tuple(SyncResyncAudit(row[0], row[1]) for row in reversed(gaps))
    floor = one_row(
        conn.execute("SELECT read_floor FROM sync_bindings WHERE binding_pk = ?", (binding.pk,))
    )[0]
    members = tuple(
        MemberReadStatus(*row)
        for row in conn.execute(
            """
            SELECT r.name, r.member_id,
                   coalesce((SELECT local_position FROM read_frontiers
                             WHERE member_pk = r.member_pk), 0),
                   max(:floor, coalesce((SELECT server_seq FROM read_remote_frontiers
                             WHERE binding_pk = :b AND member_id = r.member_id), 0)),
                   (SELECT count(*) FROM message_reads AS x JOIN messages AS m
                      ON m.seq = x.msg_seq
                    WHERE x.reader_pk = r.member_pk AND m.recipient_pk = r.member_pk
                      AND x.msg_seq > coalesce((SELECT local_position FROM read_frontiers
                                                WHERE member_pk = r.member_pk), 0)),
                   (SELECT count(*) FROM read_remote_exact
                    WHERE binding_pk = :b AND member_id = r.member_id),
                   (SELECT count(*) FROM read_outbox
                    WHERE binding_pk = :b AND member_id = r.member_id),
                   k.reason, k.detail
            FROM members AS r
            LEFT JOIN read_blocks AS k ON k.binding_pk = :b AND k.member_id = r.member_id
            WHERE r.team_pk = :team AND r.roster = 1
            ORDER BY r.name
            """,
            {"b": binding.pk, "team": binding.team_pk, "floor": floor},
        )
    )
    return SyncStatus(
        binding, reservations, quarantine, conflicts, blocked, accepted, floor, members
    )
