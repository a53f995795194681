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

An ack is the relay's word: a ``duplicate`` at a sequence this machine has
not pulled yet cannot be verified when it arrives. When a pulled page later
contradicts such an *ack-only* mapping (no echo ever confirmed it), apply
halts the binding; :func:`repair_contradicted_acks`, run by the operator's
``resume`` inside its transaction, puts those reservations back to
published with their exact wire ID and envelope, so the genuine page imports
and the next push takes the relay's answer again (specs/sync-stage1.md §8.21).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from syncengine.ops.bindings import BindingKey, advance_binding, open_binding, sync_transaction
from syncengine.ops.errors import StaleBinding, SyncCorruptState
from syncengine.ops.states import (
    RESERVATION_STATES,
    ReservationEvent,
    ReservationState,
    reservation_next,
)
from syncengine.ops.sync_records import SyncPushAck, SyncReconcileResult
from syncengine.store import read_overlay
from syncengine.store.bulk import dense
from syncengine.store.connection import Row, all_rows, one_row
from syncengine.store.errors import InvalidInput

if TYPE_CHECKING:
    import apsw

__all__ = [
    "AckRepair",
    "ConflictRow",
    "OwnAck",
    "ReconcilePlan",
    "StoredReservation",
    "contiguous_push_cursor",
    "insert_conflicts",
    "load_seq_owners",
    "plan_ack_repair",
    "plan_reconcile",
    "reconcile_push",
    "record_acks",
    "repair_contradicted_acks",
]

#: SQLite host parameters per IN (...) list.
_IN_CHUNK = 500


class StoredReservation(NamedTuple):
    """One reservation row as reconcile reads it. A named tuple, built once
    per acked row straight from the SQL row (a batch holds up to 1,000):
    about a third of a frozen dataclass's construction cost, same fields."""

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
    # The transition table is a pure function of the stored state: each
    # state's ACK edge is checked once per call, not once per ack (a batch
    # answer holds up to 1,000 acks of one or two states).
    edge_checked: set[ReservationState] = set()
    blocked = ReservationState.BLOCKED
    for index, ack in enumerate(acks):
        # The field name ("ack N") is formatted only on the refusal paths.
        position = ack.local_position
        earlier = seen_positions.get(position)
        if earlier is not None:
            if earlier != ack:
                raise InvalidInput(f"ack {index + 1}", "two different acks for one local position")
            continue
        seen_positions[position] = ack
        stored = reservations.get(position)
        if stored is None or stored.state is blocked:
            raise InvalidInput(
                f"ack {index + 1}.local_position",
                "no published reservation at this local position",
            )
        if stored.wire_id != ack.wire_id:
            raise InvalidInput(f"ack {index + 1}.id", "the wire ID differs from the reservation's")
        server_seq = ack.server_seq
        owner = seq_owners.get(server_seq)
        if owner is None:
            owner = batch_owner.get(server_seq)
        if stored.server_seq is not None and stored.server_seq != server_seq:
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
        batch_owner[server_seq] = ack.wire_id
        if stored.state not in edge_checked:
            reservation_next(stored.state, ReservationEvent.ACK)
            edge_checked.add(stored.state)
        if stored.server_seq is None:
            record.append((server_seq, position))
    return ReconcilePlan(tuple(record), tuple(conflicts))


def contiguous_push_cursor(conn: apsw.Connection, binding_pk: int, current: int) -> int:
    """Highest position such that every reservation at or below it is acked.

    Two index probes: the first open (unacked or blocked) position via
    ``sync_push_open``, then the greatest position below it via the primary
    key. Positions are contiguous over the team's local-origin messages
    (prepare reserves in order), so nothing unreserved hides below.
    """
    gap = one_row(
        conn.execute(
            "SELECT min(local_position) FROM sync_push INDEXED BY sync_push_open"
            " WHERE binding_pk = ? AND state != 'acked'",
            (binding_pk,),
        )
    )[0]
    if gap is None:
        top = one_row(
            conn.execute(
                "SELECT max(local_position) FROM sync_push WHERE binding_pk = ?", (binding_pk,)
            )
        )[0]
    else:
        top = one_row(
            conn.execute(
                "SELECT max(local_position) FROM sync_push"
                " WHERE binding_pk = ? AND local_position < ?",
                (binding_pk, gap),
            )
        )[0]
    return max(current, top or 0)


def insert_conflicts(
    conn: apsw.Connection, binding_pk: int, conflicts: Sequence[ConflictRow], now: str
) -> int:
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
    conn: apsw.Connection, binding_pk: int, acks: Sequence[SyncPushAck]
) -> tuple[dict[int, StoredReservation], dict[int, str]]:
    reservations: dict[int, StoredReservation] = {}
    wanted = {a.local_position for a in acks}
    positions = sorted(wanted)
    select = "SELECT local_position, state, wire_id, server_seq FROM sync_push WHERE binding_pk = ?"
    states = RESERVATION_STATES
    # tuple.__new__ builds the named tuple from the row's values without the
    # generated __new__'s Python frame (a row per ack, up to 1,000 a batch).
    make = tuple.__new__
    if dense(positions):
        for position, state, wire_id, server_seq in all_rows(
            conn.execute(
                select + " AND local_position BETWEEN ? AND ?",
                (binding_pk, positions[0], positions[-1]),
            )
        ):
            if position in wanted:
                reservations[position] = make(
                    StoredReservation, (position, states[state], wire_id, server_seq)
                )
    else:
        for part in _chunks(positions):
            marks = ",".join("?" * len(part))
            for position, state, wire_id, server_seq in conn.execute(
                select + f" AND local_position IN ({marks})", (binding_pk, *part)
            ):
                reservations[position] = make(
                    StoredReservation, (position, states[state], wire_id, server_seq)
                )
    return reservations, load_seq_owners(conn, binding_pk, [a.server_seq for a in acks])


def _is_run(values: list[int]) -> bool:
    """Whether ``values`` are ``v, v + 1, …, v + n - 1`` (one C-speed compare)."""
    return bool(values) and values == list(range(values[0], values[0] + len(values)))


def _plan_acks(
    conn: apsw.Connection, binding_pk: int, acks: Sequence[SyncPushAck]
) -> ReconcilePlan:
    """:func:`plan_reconcile` of the durable facts :func:`_load_facts` reads,
    with the answer to a fresh batch judged by whole columns.

    A batch the relay stored fresh is one run twice over: positions
    consecutive (prepare reserves in order) and sequences consecutive
    (v1.md "POST /v1/messages": new ids take consecutive sequences). For a
    run, the one range read of :func:`_load_facts` names exactly the acked
    rows, so when it returns one row per ack, every one ``reserved`` with no
    ``server_seq`` and the acks' wire IDs in order, and no row of the
    binding holds any of the sequences, then every ack passes each check of
    :func:`plan_reconcile` (a published reservation, its wire ID, no recorded
    or foreign sequence, positions and sequences distinct) and the plan is
    every ``(server_seq, position)`` in ack order, with the ``reserved``
    ACK edge checked once as there. Anything else is planned by
    :func:`plan_reconcile` itself from the same rows (specs/sync-stage1.md
    §4.2; ``tests/syncengine/ops/test_reconcile_push.py`` pins both paths).
    """
    positions = [a.local_position for a in acks]
    seqs = [a.server_seq for a in acks]
    if not (_is_run(positions) and _is_run(seqs)):
        reservations, owners = _load_facts(conn, binding_pk, acks)
        return plan_reconcile(acks, reservations, owners)
    rows: list[Row] = conn.execute(
        "SELECT local_position, state, wire_id, server_seq FROM sync_push"
        " WHERE binding_pk = ? AND local_position BETWEEN ? AND ? ORDER BY local_position",
        (binding_pk, positions[0], positions[-1]),
    ).fetchall()
    owners = load_seq_owners(conn, binding_pk, seqs)
    if len(rows) == len(positions) and not owners:
        _, states, wire_ids, stored_seqs = zip(*rows, strict=True)
        if (
            set(states) == {ReservationState.RESERVED.value}
            and set(stored_seqs) == {None}
            and list(wire_ids) == [a.wire_id for a in acks]
        ):
            reservation_next(ReservationState.RESERVED, ReservationEvent.ACK)
            return ReconcilePlan(tuple(zip(seqs, positions, strict=True)), ())
    make, states_of = tuple.__new__, RESERVATION_STATES
    reservations = {
        row[0]: make(StoredReservation, (row[0], states_of[row[1]], row[2], row[3])) for row in rows
    }
    return plan_reconcile(acks, reservations, owners)


def load_seq_owners(conn: apsw.Connection, binding_pk: int, seqs: Iterable[int]) -> dict[int, str]:
    """The wire ID that already holds each of ``seqs`` in this binding, as a
    reservation or a quarantine row (one ``server_seq`` has one owner; should
    both tables name one, the quarantine row's is the one kept)."""
    owners: dict[int, str] = {}
    wanted = sorted(set(seqs))
    if dense(wanted):
        members = set(wanted)
        for table in ("sync_push", "sync_quarantine"):
            for row in conn.execute(
                f"SELECT server_seq, wire_id FROM {table}"
                " WHERE binding_pk = ? AND server_seq BETWEEN ? AND ?",
                (binding_pk, wanted[0], wanted[-1]),
            ):
                if row[0] in members:
                    owners[row[0]] = row[1]
        return owners
    for part in _chunks(wanted):
        marks = ",".join("?" * len(part))
        for table in ("sync_push", "sync_quarantine"):
            for row in conn.execute(
                f"SELECT server_seq, wire_id FROM {table}"
                f" WHERE binding_pk = ? AND server_seq IN ({marks})",
                (binding_pk, *part),
            ):
                owners[row[0]] = row[1]
    return owners


#: A run of at least this many acks is recorded by one range statement.
_RUN_MIN = 8


def _runs(acks: Sequence[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """``(first position, last position, server_seq - position)`` of each
    maximal run in which both the position and the sequence go up by one.
    A fresh batch's acks are a single run, recognised by one C-speed compare."""
    if acks:
        seq, position = acks[0]
        count = len(acks)
        if list(acks) == list(
            zip(range(seq, seq + count), range(position, position + count), strict=True)
        ):
            return [(position, position + count - 1, seq - position)]
    runs: list[tuple[int, int, int]] = []
    start = 0
    for index in range(1, len(acks) + 1):
        if (
            index == len(acks)
            or acks[index][1] != acks[index - 1][1] + 1
            or acks[index][0] != acks[index - 1][0] + 1
        ):
            seq, position = acks[start]
            runs.append((position, acks[index - 1][1], seq - position))
            start = index
    return runs


def record_acks(conn: apsw.Connection, binding_pk: int, acks: Sequence[tuple[int, int]]) -> None:
    """Mark each ``(server_seq, position)`` reservation acknowledged.

    The effect is exactly that of the one-row statement per ack
    (``SET state = 'acked', server_seq = ? … AND local_position = ? AND
    state = 'reserved'``). A batch the relay stored fresh is one run —
    positions consecutive (prepare reserves in order) and sequences
    consecutive (v1.md: new ids take consecutive sequences) — and a run is
    one range statement: every position of ``first..last`` is in the run, so
    the range names exactly the rows the one-row statements would, and
    ``server_seq = local_position + offset`` is each row's own sequence.
    Short runs (replays, mixed answers) keep the one-row statement. Measured
    (issue #17): a 1,000-ack batch costs about a third of ``executemany``.
    """
    single: list[tuple[int, int, int]] = []
    for first, last, offset in _runs(acks):
        if last - first + 1 >= _RUN_MIN:
            conn.execute(
                "UPDATE sync_push SET state = 'acked', server_seq = local_position + ?"
                " WHERE binding_pk = ? AND local_position BETWEEN ? AND ? AND state = 'reserved'",
                (offset, binding_pk, first, last),
            )
        else:
            single.extend(
                (position + offset, binding_pk, position) for position in range(first, last + 1)
            )
    if single:
        conn.executemany(
            "UPDATE sync_push SET state = 'acked', server_seq = ?"
            " WHERE binding_pk = ? AND local_position = ? AND state = 'reserved'",
            single,
        )


def reconcile_push(
    conn: apsw.Connection, path: Path, key: BindingKey, acks: Sequence[SyncPushAck], now: str
) -> SyncReconcileResult:
    """Apply one complete acknowledgement set; returns the push cursor."""
    conflicts: tuple[ConflictRow, ...] = ()
    with sync_transaction(conn, path, "reconcile.commit"):
        binding = open_binding(conn, key, now)
        plan = _plan_acks(conn, binding.pk, acks)
        if plan.conflicts:
            # Record the contradiction durably and nothing else.
            conflicts = plan.conflicts
            added = insert_conflicts(conn, binding.pk, conflicts, now)
            advance_binding(conn, binding, corrupt_delta=added)
            cursor = binding.push_cursor
        else:
            record_acks(conn, binding.pk, plan.acks)
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


# -- the operator's repair of contradicted ack-only mappings ---------------------------

#: The apply conflicts that can contradict a mapping: a sequence held by
#: another wire ID, and a held wire ID served at another sequence.
_MAPPING_CONFLICTS = ("sequence_wire_conflict", "wire_envelope_mismatch")


@dataclass(frozen=True, slots=True)
class OwnAck:
    """An acknowledged reservation whose ``server_seq`` rests on the relay's
    acknowledgement alone: no pulled echo (quarantine row) ever confirmed it."""

    position: int
    wire_id: str
    server_seq: int


@dataclass(frozen=True, slots=True)
class AckRepair:
    """What :func:`repair_contradicted_acks` changed."""

    #: The reservations published again, with the sequence the lie had given.
    reverted: tuple[OwnAck, ...]
    #: The ``sync_conflicts`` rows that named those mappings (cleared).
    conflicts: tuple[int, ...]
    push_cursor: int


def plan_ack_repair(
    conflicts: Sequence[tuple[int, ConflictRow]], own: Sequence[OwnAck]
) -> tuple[tuple[OwnAck, ...], tuple[int, ...]]:
    """The ack-only mappings the recorded conflicts contradict (pure).

    ``conflicts`` are ``(conflict_pk, row)``; ``own`` the binding's ack-only
    reservations. A ``sequence_wire_conflict`` contradicts the one holding
    its sequence under another wire ID; a ``wire_envelope_mismatch``
    contradicts the one holding its wire ID at another sequence. A mapping an
    echo confirmed is never in ``own``: a page contradicting a page is the
    relay contradicting itself, and stays halted until it stops. Returns the
    reservations to publish again (each once, by position) and the conflict
    rows they resolve.
    """
    by_seq = {row.server_seq: row for row in own}
    by_wire = {row.wire_id: row for row in own}
    chosen: dict[int, OwnAck] = {}
    resolved: list[int] = []
    for conflict_pk, conflict in conflicts:
        if conflict.kind == "sequence_wire_conflict":
            row = by_seq.get(conflict.server_seq)
            hit = row is not None and row.wire_id != conflict.wire_id
        elif conflict.kind == "wire_envelope_mismatch":
            row = by_wire.get(conflict.wire_id)
            hit = row is not None and row.server_seq != conflict.server_seq
        else:
            continue
        if hit and row is not None:
            reservation_next(ReservationState.ACKED, ReservationEvent.CONTRADICTED)
            chosen[row.position] = row
            resolved.append(conflict_pk)
    return tuple(chosen[p] for p in sorted(chosen)), tuple(resolved)


def _load_repair_facts(
    conn: apsw.Connection, binding_pk: int
) -> tuple[list[tuple[int, ConflictRow]], list[OwnAck]]:
    conflicts = [
        (int(row[0]), ConflictRow(row[1], row[2], int(row[3]), row[4], row[5]))
        for row in conn.execute(
            "SELECT conflict_pk, kind, wire_id, server_seq, envelope_digest, reason"
            " FROM sync_conflicts WHERE binding_pk = ? AND kind IN (?, ?)"
            " ORDER BY conflict_pk",
            (binding_pk, *_MAPPING_CONFLICTS),
        )
    ]
    if not conflicts:
        return conflicts, []
    seqs = sorted({c.server_seq for _, c in conflicts})
    wires = sorted({c.wire_id for _, c in conflicts})
    own: dict[int, OwnAck] = {}
    for column, values in (("server_seq", seqs), ("wire_id", wires)):
        for start in range(0, len(values), _IN_CHUNK):
            part = values[start : start + _IN_CHUNK]
            marks = ",".join("?" * len(part))
            for row in conn.execute(
                "SELECT p.local_position, p.wire_id, p.server_seq FROM sync_push AS p"
                " WHERE p.binding_pk = ? AND p.state = 'acked'"
                f" AND p.{column} IN ({marks}) AND NOT EXISTS (SELECT 1 FROM sync_quarantine"
                " AS q WHERE q.binding_pk = p.binding_pk AND q.wire_id = p.wire_id)",
                (binding_pk, *part),
            ):
                own[int(row[0])] = OwnAck(int(row[0]), str(row[1]), int(row[2]))
    return conflicts, list(own.values())


def repair_contradicted_acks(conn: apsw.Connection, binding_pk: int) -> AckRepair:
    """Publish again every ack-only reservation a recorded conflict
    contradicts (inside the caller's transaction: the operator's ``resume``).

    This machine cannot tell which answer was the lie — the relay gave both —
    but forgetting an unconfirmed ack loses nothing: the next pull imports
    what the relay serves at the contested sequence, and the next push
    re-posts ours under the same wire ID and byte-identical envelope (never
    re-sealed: message-synchronization.md "Prepare push"), so an honest relay
    answers ``duplicate`` at its genuine sequence or stores it once. A relay
    repeating either lie is recorded and halts again (specs/sync-stage1.md
    §8.21). In one go:

    - each such reservation goes from ``acked`` back to ``reserved``
      (``server_seq`` cleared; wire ID and envelope untouched);
    - the read-state uploads queued under the false sequence are dropped
      (promotion queues them again once the mapping is durable anew);
    - the conflicts that named these mappings are cleared (``corrupt_count``
      stays: it counts every contradiction ever seen);
    - the push cursor moves back below the first reservation now open, so it
      never claims a message is on the relay that is not known to be.
    """
    conflicts, own = _load_repair_facts(conn, binding_pk)
    reverted, resolved = plan_ack_repair(conflicts, own)
    binding = conn.execute(
        "SELECT revision, push_cursor, state FROM sync_bindings WHERE binding_pk = ?",
        (binding_pk,),
    ).fetchone()
    if not reverted or binding is None or binding[2] != "active":
        return AckRepair((), (), int(binding[1]) if binding is not None else 0)
    conn.executemany(
        "UPDATE sync_push SET state = 'reserved', server_seq = NULL"
        " WHERE binding_pk = ? AND local_position = ? AND state = 'acked'",
        [(binding_pk, row.position) for row in reverted],
    )
    conn.executemany(
        "DELETE FROM read_outbox WHERE binding_pk = ? AND wire_id = ?",
        [(binding_pk, row.wire_id) for row in reverted],
    )
    conn.executemany("DELETE FROM sync_conflicts WHERE conflict_pk = ?", [(pk,) for pk in resolved])
    revision, cursor = int(binding[0]), int(binding[1])
    first_open = reverted[0].position
    if first_open <= cursor:
        below = one_row(
            conn.execute(
                "SELECT max(local_position) FROM sync_push"
                " WHERE binding_pk = ? AND local_position < ?",
                (binding_pk, first_open),
            )
        )[0]
        cursor = min(cursor, int(below or 0))
        conn.execute(
            "UPDATE sync_bindings SET push_cursor = ?, revision = revision + 1"
            " WHERE binding_pk = ? AND revision = ? AND state = 'active'",
            (cursor, binding_pk, revision),
        )
        if conn.changes() != 1:
            raise StaleBinding(f"binding revision {revision} is no longer current; retry")
    return AckRepair(reverted, resolved, cursor)
