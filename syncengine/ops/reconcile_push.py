"""``reconcile_push``: record relay acknowledgements and advance the push
cursor through the contiguous acknowledged prefix only
(message-synchronization.md "Reconcile push"; ADR 0005; specs/sync-stage1.md §4.2).

One transaction (``reconcile.commit``). Every ack must name a durable
reservation — same local position, same wire ID — or the whole input is
refused and nothing changes. An ack that repeats the recorded ``server_seq``
is an idempotent replay. An ack whose ``server_seq`` differs from the one
recorded, or names a sequence that another wire ID of the binding already
holds (pushed or pulled), is a contradiction from the relay: it is recorded
durably in ``sync_conflicts`` (the transaction commits the record and
nothing else) and the operation reports ``corrupt_state``.

The push cursor is the highest position below the first reservation that is
not acknowledged — found with the partial index ``sync_push_open`` — so the
cost is a few index probes whatever the history (agmsg #912: the quadratic
version took 153 s on a 17,300-message join).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syncengine.ops.bindings import BindingKey, advance_binding, open_binding, sync_transaction
from syncengine.ops.errors import SyncCorruptState
from syncengine.ops.records import SyncPushAck, SyncReconcileResult
from syncengine.ops.states import ReservationEvent, ReservationState, reservation_next
from syncengine.store import read_overlay
from syncengine.store.errors import InvalidInput

__all__ = [
    "ConflictRow",
    "ReconcilePlan",
    "StoredReservation",
    "contiguous_push_cursor",
    "insert_conflicts",
    "load_seq_owners",
    "plan_reconcile",
    "reconcile_push",
]

#: SQLite host parameters per IN (...) list.
_IN_CHUNK = 500


@dataclass(frozen=True, slots=True)
class StoredReservation:
    position: int
    state: ReservationState
    wire_id: str | None
    server_seq: int | None


@dataclass(frozen=True, slots=True)
class ConflictRow:
    """One durable contradiction (``sync_conflicts``)."""

    kind: str
    wire_id: str
    server_seq: int
    envelope_digest: str
    reason: str


@dataclass(frozen=True, slots=True)
class ReconcilePlan:
    acks: tuple[tuple[int, int], ...]  # (server_seq, position) to record
    conflicts: tuple[ConflictRow, ...]


def plan_reconcile(
    acks: Sequence[SyncPushAck],
    reservations: dict[int, StoredReservation],
    seq_owners: dict[int, str],
) -> ReconcilePlan:
    """Classify every ack against durable state (pure).

    ``reservations`` maps each acked position to its stored row;
    ``seq_owners`` maps each acked ``server_seq`` to the wire ID that holds
    it in the binding (push or quarantine), if any. Raises
    :class:`InvalidInput` for an ack that names no such reservation.
    """
    record: list[tuple[int, int]] = []
    conflicts: list[ConflictRow] = []
    seen_positions: dict[int, SyncPushAck] = {}
    batch_owner: dict[int, str] = {}
    for index, ack in enumerate(acks):
        where = f"ack {index + 1}"
        earlier = seen_positions.get(ack.local_position)
        if earlier is not None:
            if earlier != ack:
                raise InvalidInput(where, "two different acks for one local position")
            continue
        seen_positions[ack.local_position] = ack
        stored = reservations.get(ack.local_position)
        if stored is None or stored.state is ReservationState.BLOCKED:
            raise InvalidInput(
                f"{where}.local_position", "no published reservation at this local position"
            )
        if stored.wire_id != ack.wire_id:
            raise InvalidInput(f"{where}.id", "the wire ID differs from the reservation's")
        owner = seq_owners.get(ack.server_seq, batch_owner.get(ack.server_seq))
        if stored.server_seq is not None and stored.server_seq != ack.server_seq:
            conflicts.append(
                ConflictRow(
                    "ack_sequence_conflict",
                    ack.wire_id,
                    ack.server_seq,
                    "",
                    f"reservation already acknowledged at server_seq {stored.server_seq}",
                )
            )
            continue
        if owner is not None and owner != ack.wire_id:
            conflicts.append(
                ConflictRow(
                    "ack_wire_conflict",
                    ack.wire_id,
                    ack.server_seq,
                    "",
                    "server_seq is already held by another wire ID of this binding",
                )
            )
            continue
        batch_owner[ack.server_seq] = ack.wire_id
        reservation_next(stored.state, ReservationEvent.ACK)
        if stored.server_seq is None:
            record.append((ack.server_seq, ack.local_position))
    return ReconcilePlan(tuple(record), tuple(conflicts))


def contiguous_push_cursor(conn: Any, binding_pk: int, current: int) -> int:
    """Highest position such that every reservation at or below it is acked.

    Two index probes: the first open (unacked or blocked) position via
    ``sync_push_open``, then the greatest position below it via the primary
    key. Positions are contiguous over the team's local-origin messages
    (prepare reserves in order), so nothing unreserved hides below.
    """
    gap = conn.execute(
        "SELECT min(local_position) FROM sync_push INDEXED BY sync_push_open"
        " WHERE binding_pk = ? AND state != 'acked'",
        (binding_pk,),
    ).fetchone()[0]
    if gap is None:
        top = conn.execute(
            "SELECT max(local_position) FROM sync_push WHERE binding_pk = ?", (binding_pk,)
        ).fetchone()[0]
    else:
        top = conn.execute(
            "SELECT max(local_position) FROM sync_push WHERE binding_pk = ? AND local_position < ?",
            (binding_pk, gap),
        ).fetchone()[0]
    return max(current, top or 0)


def insert_conflicts(conn: Any, binding_pk: int, conflicts: Sequence[ConflictRow], now: str) -> int:
    """Record conflicts idempotently; returns how many were new."""
    added = 0
    for row in conflicts:
        conn.execute(
            "INSERT OR IGNORE INTO sync_conflicts (binding_pk, kind, wire_id, server_seq,"
            " envelope_digest, reason, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                binding_pk,
                row.kind,
                row.wire_id,
                row.server_seq,
                row.envelope_digest,
                row.reason,
                now,
            ),
        )
        added += conn.changes()
    return added


def _chunks(values: list[int]) -> list[list[int]]:
    return [values[i : i + _IN_CHUNK] for i in range(0, len(values), _IN_CHUNK)]


def _load_facts(
    conn: Any, binding_pk: int, acks: Sequence[SyncPushAck]
) -> tuple[dict[int, StoredReservation], dict[int, str]]:
    reservations: dict[int, StoredReservation] = {}
    for part in _chunks(sorted({a.local_position for a in acks})):
        marks = ",".join("?" * len(part))
        for row in conn.execute(
            f"SELECT local_position, state, wire_id, server_seq FROM sync_push"
            f" WHERE binding_pk = ? AND local_position IN ({marks})",
            (binding_pk, *part),
        ):
            reservations[row[0]] = StoredReservation(
                row[0], ReservationState(row[1]), row[2], row[3]
            )
    return reservations, load_seq_owners(conn, binding_pk, (a.server_seq for a in acks))


def load_seq_owners(conn: Any, binding_pk: int, seqs: Iterable[int]) -> dict[int, str]:
    """The wire ID that already holds each of ``seqs`` in this binding, as a
    reservation or a quarantine row (one ``server_seq`` has one owner)."""
    owners: dict[int, str] = {}
    for part in _chunks(sorted(set(seqs))):
        marks = ",".join("?" * len(part))
        for table in ("sync_push", "sync_quarantine"):
            for row in conn.execute(
                f"SELECT server_seq, wire_id FROM {table}"
                f" WHERE binding_pk = ? AND server_seq IN ({marks})",
                (binding_pk, *part),
            ):
                owners[row[0]] = row[1]
    return owners


def reconcile_push(
    conn: Any, path: Path, key: BindingKey, acks: Sequence[SyncPushAck], now: str
) -> SyncReconcileResult:
    """Apply one complete acknowledgement set; returns the push cursor."""
    conflicts: tuple[ConflictRow, ...] = ()
    with sync_transaction(conn, path, "reconcile.commit"):
        binding = open_binding(conn, key, now)
        reservations, owners = _load_facts(conn, binding.pk, acks)
        plan = plan_reconcile(acks, reservations, owners)
        if plan.conflicts:
            # Record the contradiction durably and nothing else.
            conflicts = plan.conflicts
            added = insert_conflicts(conn, binding.pk, conflicts, now)
            advance_binding(conn, binding, corrupt_delta=added)
            cursor = binding.push_cursor
        else:
            conn.executemany(
                "UPDATE sync_push SET state = 'acked', server_seq = ?"
                " WHERE binding_pk = ? AND local_position = ? AND state = 'reserved'",
                [(seq, binding.pk, position) for seq, position in plan.acks],
            )
            wire_of = {a.local_position: a.wire_id for a in acks}
            read_overlay.on_mappings(
                conn,
                binding.pk,
                [(wire_of[position], seq, position) for seq, position in plan.acks],
                now,
            )
            cursor = contiguous_push_cursor(conn, binding.pk, binding.push_cursor)
            advance_binding(conn, binding, push_cursor=cursor)
    if conflicts:
        first = conflicts[0]
        raise SyncCorruptState(
            f"ack for wire ID {first.wire_id} at server_seq {first.server_seq}: "
            f"{first.reason} ({len(conflicts)} conflict(s) recorded; no ack applied)"
        )
    return SyncReconcileResult(cursor)
