"""``resync-status`` and ``resync``: operator-approved recovery from a
retention gap (retention-gap-resynchronization.md "Driver transaction and
audit record"; UPSTREAM-RECORDS §2.6; specs/sync-stage1.md §4.5).

A ``410 resync-required`` means the relay no longer holds the sequences
``transport_cursor + 1 .. min_available_seq``. Nothing can import them, so
recovery does not pretend to: it records the operator's acceptance of that
loss as an immutable audit row and moves only the transport cursor to the
floor, in one transaction. Everything else a binding holds — unacknowledged
reservations, acknowledgements, wire mappings, quarantine, conflicts, local
messages, the push cursor, read state — stays exactly as it was, so an
unacknowledged message is still retried byte for byte, a replay whose wire
ID became a relay tombstone still reconciles to its original sequence, and
blocking quarantine is still offered to reprocess.

``resync-status`` is the read-only seam the engine uses before and after:
the generation, the transport cursor and the audit row for one floor. It
never opens a binding, reserves, seals or moves anything.

The records are strict in both directions: exact member sets, canonical
decimal sequences within the signed 64-bit range, the one reason string, and
the sequence arithmetic ``gap_start = expected + 1``, ``gap_end = floor``,
``expected < floor <= current_seq`` checked by whoever reads a record —
the driver for ``sync_resync``, the engine for its two outputs.

The pure :func:`plan_resync` judges an approval against the binding's
loaded facts (:class:`ResyncFacts`) and returns what to write
(:class:`ResyncPlan`); :func:`resync` loads, writes and commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syncengine.ops.bindings import (
    BindingKey,
    SyncBinding,
    advance_binding,
    load_binding,
    open_binding,
    store_generation,
    sync_transaction,
)
from syncengine.ops.errors import StaleBinding
from syncengine.ops.record_fields import bad as _bad
from syncengine.ops.record_fields import record_fields as _fields
from syncengine.ops.record_fields import seq_field as _seq
from syncengine.ops.states import BindingState
from syncengine.store.connection import read_transaction
from syncengine.store.errors import Conflict, InvalidInput
from wire.errors import WireError
from wire.scalars import format_seq
from wire.schema import expect_object

if TYPE_CHECKING:
    # Only annotations: apsw loads with the store's first connection.
    import apsw

__all__ = [
    "CAPABILITY_STAGE1_RESYNC",
    "RESYNC_REASON",
    "ResyncFacts",
    "ResyncPlan",
    "SyncResync",
    "SyncResyncAudit",
    "SyncResyncResult",
    "SyncResyncStatus",
    "plan_resync",
    "resync",
    "resync_status",
]

CAPABILITY_STAGE1_RESYNC = "stage1-resync"

#: The only reason an accepted gap may carry.
RESYNC_REASON = "retention-gap-accepted"

#: ``driver_generation`` is at most this many UTF-8 bytes.
MAX_GENERATION_BYTES = 256

_AUDIT_FIELDS = ("expected_transport_cursor", "accepted_floor", "gap_start", "gap_end", "reason")


def _reason(value: Any, field: str) -> str:
    if value != RESYNC_REASON:
        raise _bad(field, f"must be exactly {RESYNC_REASON!r}")
    return RESYNC_REASON


def _generation(value: Any, field: str) -> str:
    """Non-empty, at most 256 UTF-8 bytes, no control characters."""
    if not isinstance(value, str) or not value:
        raise _bad(field, "must be a non-empty string")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_GENERATION_BYTES:
        raise _bad(field, f"must be at most {MAX_GENERATION_BYTES} UTF-8 bytes")
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in value):
        raise _bad(field, "must not contain control characters")
    return value


def _in_range(value: Any, field: str) -> None:
    try:
        format_seq(value, field)
    except WireError as exc:
        raise _bad(exc.field, exc.rule) from None


def _check_gap(expected: int, floor: int, where: str, floor_field: str) -> None:
    if not expected < floor:
        raise _bad(
            f"{where}.{floor_field}",
            f"the floor {floor} must lie above the expected transport cursor {expected}",
        )


@dataclass(frozen=True, slots=True)
class SyncResync:
    """``sync_resync``: the operator's approval, checked against a fresh 410
    and capability snapshot by the engine, and again by the driver."""

    expected_transport_cursor: int
    min_available_seq: int
    current_seq: int
    reason: str = RESYNC_REASON

    def check(self, where: str = "sync_resync") -> None:
        """The rules a parsed record already met, for one built in Python."""
        for name in ("expected_transport_cursor", "min_available_seq", "current_seq"):
            _in_range(getattr(self, name), f"{where}.{name}")
        _reason(self.reason, f"{where}.reason")
        _check_gap(
            self.expected_transport_cursor, self.min_available_seq, where, "min_available_seq"
        )
        if not self.min_available_seq <= self.current_seq:
            raise _bad(
                f"{where}.min_available_seq",
                f"the floor {self.min_available_seq} lies beyond current_seq {self.current_seq}",
            )

    @classmethod
    def from_obj(cls, value: dict[str, Any], where: str = "sync_resync") -> SyncResync:
        obj = _fields(
            value,
            where,
            "sync_resync",
            ("expected_transport_cursor", "min_available_seq", "current_seq", "reason"),
        )
        expected = _seq(obj["expected_transport_cursor"], f"{where}.expected_transport_cursor")
        floor = _seq(obj["min_available_seq"], f"{where}.min_available_seq")
        current = _seq(obj["current_seq"], f"{where}.current_seq")
        record = cls(expected, floor, current, _reason(obj["reason"], f"{where}.reason"))
        record.check(where)
        return record

    def to_obj(self) -> dict[str, Any]:
        return {
            "type": "sync_resync",
            "expected_transport_cursor": format_seq(self.expected_transport_cursor),
            "min_available_seq": format_seq(self.min_available_seq),
            "current_seq": format_seq(self.current_seq),
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class SyncResyncAudit:
    """One accepted gap: the old cursor and the unavailable inclusive range."""

    expected_transport_cursor: int
    accepted_floor: int

    @property
    def gap_start(self) -> int:
        return self.expected_transport_cursor + 1

    @property
    def gap_end(self) -> int:
        return self.accepted_floor

    @property
    def unavailable(self) -> int:
        """How many sequence numbers the gap covers."""
        return self.gap_end - self.gap_start + 1

    def to_obj(self) -> dict[str, Any]:
        return {
            "expected_transport_cursor": format_seq(self.expected_transport_cursor),
            "accepted_floor": format_seq(self.accepted_floor),
            "gap_start": format_seq(self.gap_start),
            "gap_end": format_seq(self.gap_end),
            "reason": RESYNC_REASON,
        }

    @classmethod
    def read_members(cls, obj: dict[str, Any], where: str) -> SyncResyncAudit:
        """The five audit members of ``obj`` (an audit or a result), with
        the arithmetic every reader must verify."""
        expected = _seq(obj["expected_transport_cursor"], f"{where}.expected_transport_cursor")
        floor = _seq(obj["accepted_floor"], f"{where}.accepted_floor")
        start = _seq(obj["gap_start"], f"{where}.gap_start")
        end = _seq(obj["gap_end"], f"{where}.gap_end")
        _reason(obj["reason"], f"{where}.reason")
        _check_gap(expected, floor, where, "accepted_floor")
        if start != expected + 1:
            raise _bad(f"{where}.gap_start", "must be expected_transport_cursor + 1")
        if end != floor:
            raise _bad(f"{where}.gap_end", "must equal accepted_floor")
        return cls(expected, floor)

    @classmethod
    def from_obj(cls, value: Any, where: str = "audit") -> SyncResyncAudit:
        if not isinstance(value, dict):
            raise _bad(where, "must be null or an audit object")
        try:
            obj = expect_object(value, where, _AUDIT_FIELDS)
        except WireError as exc:
            raise _bad(exc.field, exc.rule) from None
        return cls.read_members(obj, where)


@dataclass(frozen=True, slots=True)
class SyncResyncStatus:
    """``sync_resync_status``: read-only; ``audit`` is the row for the
    requested floor or ``None``."""

    driver_generation: str
    transport_cursor: int
    audit: SyncResyncAudit | None

    def to_obj(self) -> dict[str, Any]:
        return {
            "type": "sync_resync_status",
            "driver_generation": self.driver_generation,
            "transport_cursor": format_seq(self.transport_cursor),
            "audit": None if self.audit is None else self.audit.to_obj(),
        }

    @classmethod
    def from_obj(
        cls,
        value: dict[str, Any],
        where: str = "sync_resync_status",
        requested_floor: int | None = None,
    ) -> SyncResyncStatus:
        """Strict; with ``requested_floor`` also the engine's checks of a
        non-null audit (it is the one asked for, and the cursor reached it)."""
        obj = _fields(
            value, where, "sync_resync_status", ("driver_generation", "transport_cursor", "audit")
        )
        generation = _generation(obj["driver_generation"], f"{where}.driver_generation")
        cursor = _seq(obj["transport_cursor"], f"{where}.transport_cursor")
        audit = None
        if obj["audit"] is not None:
            audit = SyncResyncAudit.from_obj(obj["audit"], f"{where}.audit")
            audit_where = f"{where}.audit.accepted_floor"
            if requested_floor is not None and audit.accepted_floor != requested_floor:
                raise _bad(audit_where, f"must equal the requested floor {requested_floor}")
            if audit.accepted_floor > cursor:
                raise _bad(audit_where, "an accepted floor cannot lie beyond the cursor")
        return cls(generation, cursor, audit)


@dataclass(frozen=True, slots=True)
class SyncResyncResult:
    """``sync_resync_result``: the committed acceptance (``transport_cursor``
    is the floor)."""

    driver_generation: str
    audit: SyncResyncAudit

    @property
    def transport_cursor(self) -> int:
        return self.audit.accepted_floor

    def to_obj(self) -> dict[str, Any]:
        a = self.audit
        return {
            "type": "sync_resync_result",
            "driver_generation": self.driver_generation,
            "expected_transport_cursor": format_seq(a.expected_transport_cursor),
            "transport_cursor": format_seq(self.transport_cursor),
            "accepted_floor": format_seq(a.accepted_floor),
            "gap_start": format_seq(a.gap_start),
            "gap_end": format_seq(a.gap_end),
            "reason": RESYNC_REASON,
        }

    @classmethod
    def from_obj(cls, value: dict[str, Any], where: str = "sync_resync_result") -> SyncResyncResult:
        obj = _fields(
            value,
            where,
            "sync_resync_result",
            ("driver_generation", "transport_cursor", *_AUDIT_FIELDS),
        )
        generation = _generation(obj["driver_generation"], f"{where}.driver_generation")
        cursor = _seq(obj["transport_cursor"], f"{where}.transport_cursor")
        audit = SyncResyncAudit.read_members(obj, where)
        if cursor != audit.accepted_floor:
            raise _bad(f"{where}.transport_cursor", "must equal accepted_floor")
        return cls(generation, audit)


# -- the operations -------------------------------------------------------------------


def _load_audit(conn: apsw.Connection, binding: SyncBinding, floor: int) -> SyncResyncAudit | None:
    row = conn.execute(
        "SELECT expected_transport_cursor, accepted_floor FROM sync_resync_audits"
        " WHERE binding_pk = ? AND driver_generation = ? AND accepted_floor = ?",
        (binding.pk, binding.driver_generation, floor),
    ).fetchone()
    return None if row is None else SyncResyncAudit(row[0], row[1])


def resync_status(
    conn: apsw.Connection, path: Path, key: BindingKey, accepted_floor: int | None
) -> SyncResyncStatus:
    """The generation, transport cursor and the audit for ``accepted_floor``
    (``None`` when no floor is asked for): strictly read-only. A stream this
    store has never bound — a fresh machine, an unseen local team — answers
    as its binding would start: transport cursor 0 and no audit, so a gap
    met on the very first pull can be approved (the approval then creates
    the binding); status itself never creates one."""
    if accepted_floor is not None:
        _in_range(accepted_floor, "accepted-floor")
    with read_transaction(conn, path):
        binding = load_binding(conn, key)
        if binding is None:
            return SyncResyncStatus(store_generation(conn), 0, None)
        audit = None if accepted_floor is None else _load_audit(conn, binding, accepted_floor)
    return SyncResyncStatus(binding.driver_generation, binding.transport_cursor, audit)


@dataclass(frozen=True, slots=True)
class ResyncFacts:
    """What :func:`resync` loads before judging an approval: the binding's
    state (``None`` for a stream never bound here, which the approval
    creates at cursor 0), its transport cursor, and the audit already
    recorded for the requested floor, if any."""

    state: BindingState | None
    transport_cursor: int
    audit: SyncResyncAudit | None


@dataclass(frozen=True, slots=True)
class ResyncPlan:
    """The one acceptance to record, and where the transport cursor goes."""

    audit: SyncResyncAudit

    @property
    def transport_cursor(self) -> int:
        """The accepted floor: nothing below it can be pulled any more."""
        return self.audit.accepted_floor


def plan_resync(facts: ResyncFacts, request: SyncResync) -> ResyncPlan:
    """Judge an approval (already :meth:`SyncResync.check`-ed) against the
    loaded facts. Pure; refusals in this order:

    * a retired binding is never revived (``InvalidInput``);
    * a floor already accepted is not accepted twice (``Conflict``: the
      audit row is immutable, retention-gap-resynchronization.md "Driver
      transaction and audit record");
    * a cursor other than ``expected_transport_cursor`` makes the approval
      stale (``StaleBinding``): a pull or another resync moved it.

    Otherwise the cursor moves to the floor, exactly, never past it, and the
    gap recorded is ``expected + 1 .. floor`` (specs/sync-stage1.md §4.5)."""
    if facts.state is not None and facts.state is not BindingState.ACTIVE:
        raise InvalidInput("binding", "the binding is retired; a resync cannot revive it")
    floor = request.min_available_seq
    if facts.audit is not None:
        raise Conflict(
            f"a retention gap up to {floor} was already accepted for this binding; "
            "run resync-status to read it"
        )
    if facts.transport_cursor != request.expected_transport_cursor:
        raise StaleBinding(
            f"the transport cursor is {facts.transport_cursor}, not the expected "
            f"{request.expected_transport_cursor}; the approval is stale (re-read the "
            "relay's floor and approve again)"
        )
    return ResyncPlan(SyncResyncAudit(request.expected_transport_cursor, floor))


def resync(
    conn: apsw.Connection, path: Path, key: BindingKey, request: SyncResync, now: str
) -> SyncResyncResult:
    """Accept the gap ``expected + 1 .. floor`` and move the transport cursor
    to the floor, in one transaction (crash points ``resync.commit.*``).

    The stored cursor must still be exactly ``expected_transport_cursor``
    (an optimistic check: a pull or another resync that moved it makes this
    approval stale), and no audit may exist for this floor
    (:func:`plan_resync`). Nothing but the binding's transport cursor and
    revision changes besides the new row — except on a stream never bound
    here (a fresh machine whose first pull met the relay's floor), where the
    binding is created at cursor 0 in the same transaction, as any other
    sync write creates it.
    """
    request.check()
    with sync_transaction(conn, path, "resync.commit") as conn:
        found = load_binding(conn, key)
        facts = ResyncFacts(
            None if found is None else found.state,
            0 if found is None else found.transport_cursor,
            None if found is None else _load_audit(conn, found, request.min_available_seq),
        )
        plan = plan_resync(facts, request)
        binding = open_binding(conn, key, now)
        audit = plan.audit
        conn.execute(
            "INSERT INTO sync_resync_audits (binding_pk, driver_generation, accepted_floor,"
            " expected_transport_cursor, gap_start, gap_end, current_seq, reason, accepted_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                binding.pk,
                binding.driver_generation,
                audit.accepted_floor,
                audit.expected_transport_cursor,
                audit.gap_start,
                audit.gap_end,
                request.current_seq,
                RESYNC_REASON,
                now,
            ),
        )
        advance_binding(conn, binding, transport_cursor=plan.transport_cursor)
    return SyncResyncResult(binding.driver_generation, audit)
