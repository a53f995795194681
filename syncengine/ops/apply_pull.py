"""``apply_pull``: give every envelope of a pulled page a durable outcome,
then move the transport cursor — all in one transaction
(message-synchronization.md "Apply pull", "Three independent progress
layers"; ADR 0005 "Ack before echo / echo before ack"; specs/sync-stage1.md §4.3).

Per envelope, against durable state (quarantine row by wire ID, the
reservation by wire ID, and whoever holds the sequence):

* an unchanged replay keeps its row and reports ``reconciled`` (or its
  blocking / corrupt status); a blocking row evaluated importable now is
  imported (or reconciled, for an echo) — the reprocess path;
* the echo of our own reservation with the same envelope records the
  ``server_seq`` on the reservation (if the ack was lost or has not come
  yet) and creates no local event;
* an unmapped importable message gets exactly one new local UUIDv7 message
  (``origin = 'imported'``, so it can never become a push candidate, agmsg
  #949) through the store's import path;
* a different envelope under a known wire ID, a wire ID at another
  sequence, or a sequence held by another wire ID is an integrity
  violation: the whole page is refused — only its conflicts are recorded in
  ``sync_conflicts``, nothing is imported and the cursor does not move;
* blocking statuses (and the settled ``before_join``) are stored as they
  are, without importing; a held row judged again is rewritten with its new
  status and reason, so a ``pending_key`` becomes ``before_join`` (or back).

The cursor moves to the page's ``next_after`` in the same transaction
(``apply.commit``). Importing never marks anything read. The pure core
:func:`plan_apply` decides; :func:`apply_pull` loads facts and writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syncengine.ids import new_uuid7s
from syncengine.ops.adopt import adopt_held_imports, adopt_own_messages, adopting
from syncengine.ops.bindings import (
    BindingKey,
    SyncBinding,
    advance_binding,
    open_binding,
    sync_transaction,
)
from syncengine.ops.errors import SyncCorruptState
from syncengine.ops.history_counts import add_history
from syncengine.ops.reconcile_push import (
    ConflictRow,
    contiguous_push_cursor,
    insert_conflicts,
    load_seq_owners,
)
from syncengine.ops.states import (
    QUARANTINE_STATES,
    RESERVATION_STATES,
    Evidence,
    QuarantineState,
    ReservationEvent,
    ReservationState,
    quarantine_next,
    reservation_next,
)
from syncengine.ops.sync_records import (
    SyncApplyOutcome,
    SyncApplyResult,
    SyncPullCursor,
    SyncPullMessage,
)
from syncengine.store import read_overlay
from syncengine.store.bulk import insert_rows
from syncengine.store.errors import InvalidInput
from syncengine.store.event_log import import_projected_sent
from wire.message import Message

if TYPE_CHECKING:
    import apsw

__all__ = ["ApplyPlan", "ApplyResult", "StoredPull", "StoredPush", "apply_pull", "plan_apply"]

_IN_CHUNK = 400
#: Each state's text, read once: ``state.value`` is a Python-level property,
#: and a page asks for it twice per envelope (its row and its outcome).
_VALUES: dict[QuarantineState, str] = {state: state.value for state in QuarantineState}
#: Characters of a sealed blob the replay index holds (migration 9): the
#: age header's first recipient stanza, random per seal.
ENVELOPE_HEAD = 160

EnvelopeKey = tuple[int, str, str | None, str]


@dataclass(frozen=True, slots=True)
class StoredPull:
    """A quarantine row as the plan needs it."""

    wire_id: str
    server_seq: int
    envelope: EnvelopeKey
    status: QuarantineState


@dataclass(frozen=True, slots=True)
class StoredPush:
    """A published reservation as the plan needs it."""

    wire_id: str
    position: int
    state: ReservationState
    envelope: EnvelopeKey
    server_seq: int | None


@dataclass(slots=True)
class ApplyPlan:
    """What one page writes and reports (built by :func:`plan_apply`)."""

    #: Page indexes to import as new local messages (quarantine status imported).
    imports: list[int] = field(default_factory=list)
    #: (page index, status) for new quarantine rows not created by an import.
    new_rows: list[tuple[int, QuarantineState]] = field(default_factory=list)
    #: (page index, status) for existing rows whose status changes.
    updates: list[tuple[int, QuarantineState]] = field(default_factory=list)
    #: (server_seq, position): reservations acknowledged by their echo.
    echo_acks: list[tuple[int, int]] = field(default_factory=list)
    conflicts: list[ConflictRow] = field(default_factory=list)
    outcomes: list[QuarantineState] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ApplyResult:
    result: SyncApplyResult
    outcomes: tuple[SyncApplyOutcome, ...]

    def records(self) -> list[dict[str, Any]]:
        return [self.result.to_obj(), *(o.to_obj() for o in self.outcomes)]


def _envelope_key(message: SyncPullMessage) -> EnvelopeKey:
    env = message.envelope
    return (env.v, env.cipher, env.key_id, env.blob)


def check_page(messages: Sequence[SyncPullMessage], cursor: SyncPullCursor, transport: int) -> None:
    """Page-level rules, before anything is read or written (pure)."""
    if cursor.next_after < transport:
        raise InvalidInput(
            "sync_pull_cursor.next_after",
            f"would move the transport cursor backwards (it is at {transport})",
        )
    if _plainly_distinct(messages, cursor.next_after):
        return
    wires: set[str] = set()
    seqs: set[int] = set()
    for index, message in enumerate(messages):
        # The field name ("message N") is formatted only on the refusal paths.
        if message.wire_id in wires:
            raise InvalidInput(f"message {index + 1}.id", "wire ID appears twice in one page")
        if message.server_seq in seqs:
            raise InvalidInput(
                f"message {index + 1}.server_seq", "server_seq appears twice in one page"
            )
        if message.server_seq > cursor.next_after:
            raise InvalidInput(
                f"message {index + 1}.server_seq",
                "is beyond the page's next_after (the cursor would skip it)",
            )
        wires.add(message.wire_id)
        seqs.add(message.server_seq)


def _plainly_distinct(messages: Sequence[SyncPullMessage], next_after: int) -> bool:
    """:func:`check_page`'s per-message rules for the whole page at C speed:
    wire IDs distinct, sequences distinct and none beyond ``next_after``.
    ``False`` only sends the page through the loop that names the first
    offender."""
    seqs = {m.server_seq for m in messages}
    return (
        len(seqs) == len(messages)
        and len({m.wire_id for m in messages}) == len(messages)
        and (not seqs or max(seqs) <= next_after)
    )


def _conflict(plan: ApplyPlan, kind: str, message: SyncPullMessage, reason: str) -> None:
    digest = message.envelope.digest().hex()
    plan.conflicts.append(ConflictRow(kind, message.wire_id, message.server_seq, digest, reason))


def plan_apply(
    messages: Sequence[SyncPullMessage],
    pulled: dict[str, StoredPull],
    pushed: dict[str, StoredPush],
    seq_owners: dict[int, str],
    replays: dict[str, str] | None = None,
) -> ApplyPlan:
    """Decide every envelope's outcome from durable facts (pure).

    ``pulled`` / ``pushed`` map the page's wire IDs to their quarantine row
    and reservation; ``seq_owners`` maps the page's sequences to the wire
    ID holding them in the binding (quarantine or reservation);
    ``replays`` maps a page wire ID to another wire ID that already holds
    its (sealed, non-``none``) envelope — a replay, refused like any other
    contradiction (issue #14: a replayed envelope once became a second copy
    of an old message *and* let the cursor pass the genuine one).
    """
    plan = ApplyPlan()
    replays = replays or {}
    for index, message in enumerate(messages):
        blocking = message.status != "importable"
        stored = pulled.get(message.wire_id)
        mine = pushed.get(message.wire_id)
        supplied = message.status if blocking else None

        if stored is not None:
            envelope = _envelope_key(message)
            if stored.server_seq != message.server_seq or stored.envelope != envelope:
                _conflict(
                    plan,
                    "wire_envelope_mismatch",
                    message,
                    "wire ID was pulled before with another sequence or envelope",
                )
                evidence = Evidence.MISMATCH
            elif (
                mine is not None and mine.envelope != envelope
            ):  # pragma: no cover - caught at first arrival
                evidence = Evidence.MISMATCH
            elif blocking:
                evidence = Evidence.BLOCKING
            else:
                evidence = Evidence.IMPORTABLE_ECHO if mine is not None else Evidence.IMPORTABLE_NEW
            after, outcome = quarantine_next(stored.status, evidence, supplied)
            if after is not stored.status or (blocking and after.held):
                plan.updates.append((index, after))
            if after is QuarantineState.IMPORTED and stored.status is not QuarantineState.IMPORTED:
                plan.imports.append(index)
            plan.outcomes.append(outcome)
            continue
        holder = replays.get(message.wire_id)
        if holder is not None and mine is None:
            _conflict(
                plan,
                "wire_envelope_mismatch",
                message,
                f"the envelope is already held under wire ID {holder} (a replayed envelope)",
            )
            plan.outcomes.append(QuarantineState.CORRUPT_STATE)
            continue
        owner = seq_owners.get(message.server_seq)
        if owner is not None and owner != message.wire_id:
            # The sequence belongs to another wire ID: no row can hold this one.
            _conflict(
                plan,
                "sequence_wire_conflict",
                message,
                "server_seq is already held by another wire ID",
            )
            plan.outcomes.append(QuarantineState.CORRUPT_STATE)
            continue
        if mine is not None:
            if mine.envelope != _envelope_key(message) or mine.server_seq not in (
                None,
                message.server_seq,
            ):
                _conflict(
                    plan,
                    "wire_envelope_mismatch",
                    message,
                    "our reservation has another envelope or sequence under this wire ID",
                )
                evidence = Evidence.MISMATCH
            else:
                evidence = Evidence.BLOCKING if blocking else Evidence.IMPORTABLE_ECHO
                # The echo proves the relay holds our envelope at this sequence.
                reservation_next(mine.state, ReservationEvent.ECHO)
                if mine.server_seq is None:
                    plan.echo_acks.append((message.server_seq, mine.position))
        else:
            evidence = Evidence.BLOCKING if blocking else Evidence.IMPORTABLE_NEW
        after, outcome = quarantine_next(None, evidence, supplied)
        if after is QuarantineState.IMPORTED:
            plan.imports.append(index)
        else:
            plan.new_rows.append((index, after))
        plan.outcomes.append(outcome)
    return plan


# -- edge -----------------------------------------------------------------------------


def _chunked(values: list[Any]) -> list[list[Any]]:
    return [values[i : i + _IN_CHUNK] for i in range(0, len(values), _IN_CHUNK)]


def _load_facts(
    conn: apsw.Connection, binding_pk: int, messages: Sequence[SyncPullMessage]
) -> tuple[dict[str, StoredPull], dict[str, StoredPush], dict[int, str]]:
    pulled: dict[str, StoredPull] = {}
    pushed: dict[str, StoredPush] = {}
    for part in _chunked([m.wire_id for m in messages]):
        marks = ",".join("?" * len(part))
        for row in conn.execute(
            "SELECT wire_id, server_seq, envelope_v, cipher, key_id, blob, status"
            f" FROM sync_quarantine WHERE binding_pk = ? AND wire_id IN ({marks})",
            (binding_pk, *part),
        ):
            pulled[row[0]] = StoredPull(
                row[0], row[1], (row[2], row[3], row[4], row[5]), QUARANTINE_STATES[row[6]]
            )
        for row in conn.execute(
            "SELECT wire_id, local_position, state, envelope_v, cipher, key_id, blob, server_seq"
            f" FROM sync_push WHERE binding_pk = ? AND wire_id IN ({marks})",
            (binding_pk, *part),
        ):
            pushed[row[0]] = StoredPush(
                row[0], row[1], RESERVATION_STATES[row[2]], (row[3], row[4], row[5], row[6]), row[7]
            )
    return pulled, pushed, load_seq_owners(conn, binding_pk, (m.server_seq for m in messages))


def find_replays(
    conn: apsw.Connection, binding_pk: int, messages: Sequence[SyncPullMessage]
) -> dict[str, str]:
    """Page wire IDs whose sealed envelope another wire ID already holds — in
    this binding's quarantine or reservations, or earlier in the page itself
    (migration 9's head index finds candidates; they are compared whole)."""
    sealed = [m for m in messages if m.envelope.cipher != "none"]
    if not sealed:
        return {}
    holders: dict[str, list[tuple[str, EnvelopeKey]]] = {}
    for part in _chunked(sorted({m.envelope.blob[:ENVELOPE_HEAD] for m in sealed})):
        marks = ",".join("?" * len(part))
        for table in ("sync_quarantine", "sync_push"):
            for row in conn.execute(
                f"SELECT wire_id, envelope_v, cipher, key_id, blob FROM {table}"
                f" WHERE binding_pk = ? AND cipher <> 'none'"
                f" AND substr(blob, 1, {ENVELOPE_HEAD}) IN ({marks})",
                (binding_pk, *part),
            ):
                key = (row[1], row[2], row[3], row[4])
                holders.setdefault(row[4][:ENVELOPE_HEAD], []).append((row[0], key))
    replays: dict[str, str] = {}
    for message in sealed:
        envelope = _envelope_key(message)
        candidates = holders.setdefault(message.envelope.blob[:ENVELOPE_HEAD], [])
        holder = next((w for w, k in candidates if k == envelope and w != message.wire_id), None)
        if holder is not None:
            replays[message.wire_id] = holder
        candidates.append((message.wire_id, envelope))
    return replays


_INSERT_QUARANTINE = (
    "INSERT INTO sync_quarantine (binding_pk, wire_id, server_seq, server_received_at,"
    " envelope_v, cipher, key_id, blob, status, policy_revision,"
    " local_security_revision, reason, local_position) VALUES"
)


def _quarantine_row(
    binding_pk: int, message: SyncPullMessage, status: QuarantineState, position: int | None
) -> tuple[Any, ...]:
    env = message.envelope
    return (
        binding_pk,
        message.wire_id,
        message.server_seq,
        message.server_received_at,
        env.v,
        env.cipher,
        env.key_id,
        env.blob,
        _VALUES[status],
        message.policy_revision,
        message.local_security_revision,
        message.reason,
        position,
    )


def _import(
    conn: apsw.Connection, team: str, messages: list[SyncPullMessage], now: str
) -> list[int]:
    """Create one local message per importable envelope; returns their seqs.

    Sender and recipient names are interned as names, never enrolled on the
    roster: the roster comes only from the relay's authenticated members
    document (driver-interface §2 intro; specs/store.md §4). The projection
    passed the v1 plaintext rules when it was opened, so the store checks
    only what is its own (the names) — see
    :func:`~syncengine.store.event_log.import_projected_sent`."""
    projected = []
    for message, local_id in zip(messages, new_uuid7s(len(messages)), strict=True):
        plain = message.projection
        assert isinstance(plain, Message)
        projected.append(
            (
                local_id,
                plain.from_agent,
                plain.to_agent,
                plain.body,
                plain.created_at,
                f"pulled message {message.wire_id}",
            )
        )
    return import_projected_sent(conn, team, projected, now)


def _commit_plan(
    conn: apsw.Connection,
    key: BindingKey,
    binding: SyncBinding,
    messages: Sequence[SyncPullMessage],
    cursor: SyncPullCursor,
    plan: ApplyPlan,
    pulled: dict[str, StoredPull],
    now: str,
) -> SyncBinding:
    """Write a conflict-free plan: imports, quarantine rows, echo acks, the
    read-state bridges, then the cursors (inside the caller's transaction)."""
    # A roster control record is recorded as imported with no local
    # message: the host applies it to its own registry.
    chat = [i for i in plan.imports if isinstance(messages[i].projection, Message)]
    imported = [messages[i] for i in chat]
    positions = _import(conn, key.local_team, imported, now) if imported else []
    position_of = {i: p for i, p in zip(chat, positions, strict=True)}
    fresh = [
        _quarantine_row(binding.pk, messages[i], QuarantineState.IMPORTED, position_of.get(i))
        for i in plan.imports
        if messages[i].wire_id not in pulled
    ]
    fresh.extend(
        _quarantine_row(binding.pk, messages[i], status, None) for i, status in plan.new_rows
    )
    insert_rows(conn, _INSERT_QUARANTINE, fresh)
    # ``status`` reads these totals (syncengine/ops/history_counts.py): new
    # rows, and rows moving into or out of ``reconciled``. Every update is of
    # a row this page's wire ID already held (it is in ``pulled``).
    reconciled = QuarantineState.RECONCILED
    add_history(
        conn,
        binding.pk,
        quarantine=len(fresh),
        reconciled=sum(status is reconciled for _, status in plan.new_rows)
        + sum(
            (status is reconciled) - (pulled[messages[i].wire_id].status is reconciled)
            for i, status in plan.updates
        ),
    )
    conn.executemany(
        "UPDATE sync_quarantine SET status = ?, policy_revision = ?,"
        " local_security_revision = ?, reason = ?,"
        " local_position = coalesce(?, local_position)"
        " WHERE binding_pk = ? AND wire_id = ?",
        [
            (
                status.value,
                messages[i].policy_revision,
                messages[i].local_security_revision,
                messages[i].reason,
                position_of.get(i),
                binding.pk,
                messages[i].wire_id,
            )
            for i, status in plan.updates
        ],
    )
    conn.executemany(
        "UPDATE sync_push SET state = 'acked', server_seq = ?"
        " WHERE binding_pk = ? AND local_position = ? AND state = 'reserved'",
        [(seq, binding.pk, position) for seq, position in plan.echo_acks],
    )
    # Imports and echoes are new durable mappings: remote read facts
    # that arrived first apply now, and local reads are queued for upload.
    wire_at = {m.server_seq: m.wire_id for m in messages}
    read_overlay.on_mappings(
        conn,
        binding.pk,
        [(messages[i].wire_id, messages[i].server_seq, position_of[i]) for i in chat]
        + [(wire_at[seq], seq, position) for seq, position in plan.echo_acks],
        now,
    )
    push = (
        contiguous_push_cursor(conn, binding.pk, binding.push_cursor)
        if plan.echo_acks
        else binding.push_cursor
    )
    return advance_binding(conn, binding, push_cursor=push, transport_cursor=cursor.next_after)


def apply_pull(
    conn: apsw.Connection,
    path: Path,
    key: BindingKey,
    messages: Sequence[SyncPullMessage],
    cursor: SyncPullCursor,
    now: str,
) -> ApplyResult:
    """Apply one page atomically; returns the result and one outcome per message.

    A page that contradicts durable facts (a known wire ID at another
    sequence or with another envelope, a sequence another wire ID holds) is
    an integrity violation of the relay: the contradiction is committed to
    ``sync_conflicts`` alone — no import, no outcome, no cursor move — and
    :class:`SyncCorruptState` is raised, so the stream halts before the
    sequence whose genuine envelope it never received (specs/sync-stage1.md
    §8.18). Re-applying the same page records nothing new and halts again.
    """
    with sync_transaction(conn, path, "apply.commit"):
        binding = open_binding(conn, key, now)
        check_page(messages, cursor, binding.transport_cursor)
        pulled, pushed, owners = _load_facts(conn, binding.pk, messages)
        if adopting(conn, binding.pk):
            held = {*pulled, *pushed, *owners.values()}
            if adopt_own_messages(
                conn, binding.pk, binding.team_pk, binding.push_cursor, messages, held
            ):
                pulled, pushed, owners = _load_facts(conn, binding.pk, messages)
        # Not only while adopting: other machines re-publish to a rebuilt
        # relay whenever they rebind (one probe when nothing is adoptable).
        held = {*pulled, *pushed, *owners.values()}
        adopted = adopt_held_imports(conn, binding.pk, messages, held)
        if adopted:
            rows = [_quarantine_row(binding.pk, m, QuarantineState.IMPORTED, p) for m, p in adopted]
            insert_rows(conn, _INSERT_QUARANTINE, rows)
            pulled, pushed, owners = _load_facts(conn, binding.pk, messages)
        replays = find_replays(conn, binding.pk, messages)
        plan = plan_apply(messages, pulled, pushed, owners, replays)
        if plan.conflicts:
            added = insert_conflicts(conn, binding.pk, plan.conflicts, now)
            advance_binding(conn, binding, corrupt_delta=added)
        else:
            binding = _commit_plan(conn, key, binding, messages, cursor, plan, pulled, now)
    if plan.conflicts:
        first = plan.conflicts[0]
        raise SyncCorruptState(
            f"pulled wire ID {first.wire_id} at server_seq {first.server_seq}: {first.reason} "
            f"({len(plan.conflicts)} conflict(s) recorded; nothing applied, the transport "
            f"cursor stays at {binding.transport_cursor})"
        )
    outcomes = tuple(
        SyncApplyOutcome(m.wire_id, m.server_seq, _VALUES[status])
        for m, status in zip(messages, plan.outcomes, strict=True)
    )
    return ApplyResult(SyncApplyResult(binding.transport_cursor, binding.corrupt_count), outcomes)
