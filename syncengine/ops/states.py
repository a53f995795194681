"""Durable sync states as small enums with transition tables (specs/sync-stage1.md §3).

Theory of operation. Three kinds of rows carry sync state, and each moves
only along the edges listed here:

* a **binding** (:class:`BindingState`) is created active, advances (every
  write bumps its revision), and may be retired; nothing moves a retired one;
* a **reservation** (:class:`ReservationState`, one per local position of a
  binding) is published with its wire ID and envelope, or blocked when it can
  never fit the blob limit; a published one becomes acknowledged by a relay
  ack or by its pulled echo — in either order. An acknowledgement that a
  pulled page later contradicted, and that no echo ever confirmed, goes back
  to published by the operator's ``resume`` alone, keeping its wire ID and
  envelope (specs/sync-stage1.md §8.21);
* a **quarantine row** (:class:`QuarantineState`, one per pulled wire ID) is
  created with the envelope's evaluated outcome; a blocking row may later be
  imported or reconciled through the same apply transition; imported,
  reconciled and corrupt rows are final.

House rules: the tables are data, not scattered ``if`` chains, and a move
that is not in a table raises :class:`IllegalTransition` naming the state and
the event, leaving every row unchanged (the enclosing transaction rolls back).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping

from syncengine.store.errors import StoreError
from wire.block_states import SETTLED, BlockState

__all__ = [
    "BINDING_TRANSITIONS",
    "QUARANTINE_STATES",
    "QUARANTINE_TRANSITIONS",
    "RESERVATION_STATES",
    "RESERVATION_TRANSITIONS",
    "BindingEvent",
    "BindingState",
    "Evidence",
    "IllegalTransition",
    "Next",
    "QuarantineState",
    "ReservationEvent",
    "ReservationState",
    "binding_next",
    "quarantine_next",
    "reservation_next",
]


class IllegalTransition(StoreError):
    """A state machine was asked to take an edge it does not have."""

    def __init__(self, machine: str, state: object, event: object) -> None:
        shown = "absent" if state is None else getattr(state, "value", state)
        super().__init__(
            f"{machine}: no transition from state {shown!r} on event "
            f"{getattr(event, 'value', event)!r}; nothing was changed"
        )
        self.state = state
        self.event = event


# -- bindings -------------------------------------------------------------------------


class BindingState(enum.StrEnum):
    ACTIVE = "active"
    RETIRED = "retired"


class BindingEvent(enum.StrEnum):
    BIND = "bind"  # create, or find the existing active binding
    ADVANCE = "advance"  # move a cursor / the corrupt count (revision + 1)
    RETIRE = "retire"  # stop using the binding for good (revision + 1)


BINDING_TRANSITIONS: Mapping[tuple[BindingState | None, BindingEvent], BindingState] = {
    (None, BindingEvent.BIND): BindingState.ACTIVE,
    (BindingState.ACTIVE, BindingEvent.BIND): BindingState.ACTIVE,
    (BindingState.ACTIVE, BindingEvent.ADVANCE): BindingState.ACTIVE,
    (BindingState.ACTIVE, BindingEvent.RETIRE): BindingState.RETIRED,
}


def binding_next(state: BindingState | None, event: BindingEvent) -> BindingState:
    try:
        return BINDING_TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalTransition("binding", state, event) from None


# -- push reservations ----------------------------------------------------------------


class ReservationState(enum.StrEnum):
    RESERVED = "reserved"  # wire ID + envelope published, not yet acknowledged
    ACKED = "acked"  # server_seq recorded (relay ack or pulled echo)
    BLOCKED = "blocked"  # can never fit the blob limit it was sealed for; no wire ID


#: Stored text → state, for the hot loaders: a dict lookup, where calling the
#: enum costs a few times more per row (the column's CHECK admits only these).
RESERVATION_STATES: Mapping[str, ReservationState] = {s.value: s for s in ReservationState}


class ReservationEvent(enum.StrEnum):
    PUBLISH = "publish"  # sealed under a fresh wire ID and committed
    BLOCK = "block"  # sealing showed the message cannot fit
    ACK = "ack"  # relay acknowledgement with the same server_seq
    ECHO = "echo"  # the pulled echo of the same envelope
    #: The operator's resume repairs an ack-only mapping a pulled page
    #: contradicted (never taken by any sync operation itself).
    CONTRADICTED = "contradicted"


RESERVATION_TRANSITIONS: Mapping[
    tuple[ReservationState | None, ReservationEvent], ReservationState
] = {
    (None, ReservationEvent.PUBLISH): ReservationState.RESERVED,
    (None, ReservationEvent.BLOCK): ReservationState.BLOCKED,
    # A larger blob limit may let a blocked message fit; it gets its first wire ID.
    (ReservationState.BLOCKED, ReservationEvent.PUBLISH): ReservationState.RESERVED,
    (ReservationState.BLOCKED, ReservationEvent.BLOCK): ReservationState.BLOCKED,
    (ReservationState.RESERVED, ReservationEvent.ACK): ReservationState.ACKED,
    (ReservationState.RESERVED, ReservationEvent.ECHO): ReservationState.ACKED,
    # Replays (same server_seq; a different one is a conflict, not an edge).
    (ReservationState.ACKED, ReservationEvent.ACK): ReservationState.ACKED,
    (ReservationState.ACKED, ReservationEvent.ECHO): ReservationState.ACKED,
    # Same wire ID, same envelope, published again: the next push re-posts
    # it byte for byte and takes the relay's answer (or its echo).
    (ReservationState.ACKED, ReservationEvent.CONTRADICTED): ReservationState.RESERVED,
}


def reservation_next(state: ReservationState | None, event: ReservationEvent) -> ReservationState:
    try:
        return RESERVATION_TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalTransition("reservation", state, event) from None


# -- quarantine -----------------------------------------------------------------------


class QuarantineState(enum.StrEnum):
    IMPORTED = "imported"
    RECONCILED = "reconciled"
    CORRUPT_STATE = "corrupt_state"
    UNSUPPORTED_CIPHER = BlockState.UNSUPPORTED_CIPHER.value
    PENDING_KEY = BlockState.PENDING_KEY.value
    AUTHENTICATION_FAILED = BlockState.AUTHENTICATION_FAILED.value
    MALFORMED = BlockState.MALFORMED.value
    POLICY_VIOLATION = BlockState.POLICY_VIOLATION.value
    MANIFEST_MISMATCH = BlockState.MANIFEST_MISMATCH.value
    BEFORE_JOIN = BlockState.BEFORE_JOIN.value

    @property
    def blocking(self) -> bool:
        """Held, and someone must act (``status`` says ``blocked``)."""
        return self.value in _BLOCKING

    @property
    def held(self) -> bool:
        """Not final: unprojected, and ``reprocess`` judges it again (every
        blocking state, and the settled ones such as ``before_join``)."""
        return self.value in _HELD


_HELD = frozenset(state.value for state in BlockState)
_BLOCKING = frozenset(state.value for state in BlockState if state not in SETTLED)

#: Stored text → state (see :data:`RESERVATION_STATES`).
QUARANTINE_STATES: Mapping[str, QuarantineState] = {s.value: s for s in QuarantineState}


class Evidence(enum.StrEnum):
    """What one pulled envelope, compared with durable state, amounts to."""

    IMPORTABLE_NEW = "importable_unmapped"  # importable, wire ID maps to nothing local
    IMPORTABLE_ECHO = "importable_echo"  # importable, wire ID is our own reservation
    BLOCKING = "blocking"  # the engine could not import it (status carried)
    MISMATCH = "mismatch"  # contradicts the stored envelope or sequence


class Next(enum.Enum):
    """Symbolic targets of a quarantine edge."""

    IMPORTED = "imported"
    RECONCILED = "reconciled"
    CORRUPT = "corrupt_state"
    INPUT_STATUS = "the blocking status supplied"
    UNCHANGED = "the stored state"


#: (stored kind, evidence) → (next row state, reported outcome). Stored kind
#: is ``None`` (no row yet), ``"blocking"`` (any held state: the blocking
#: ones and ``before_join``), or the final state itself.
QUARANTINE_TRANSITIONS: Mapping[tuple[str | None, Evidence], tuple[Next, Next]] = {
    (None, Evidence.IMPORTABLE_NEW): (Next.IMPORTED, Next.IMPORTED),
    (None, Evidence.IMPORTABLE_ECHO): (Next.RECONCILED, Next.RECONCILED),
    (None, Evidence.BLOCKING): (Next.INPUT_STATUS, Next.INPUT_STATUS),
    (None, Evidence.MISMATCH): (Next.CORRUPT, Next.CORRUPT),
    ("blocking", Evidence.IMPORTABLE_NEW): (Next.IMPORTED, Next.IMPORTED),
    ("blocking", Evidence.IMPORTABLE_ECHO): (Next.RECONCILED, Next.RECONCILED),
    ("blocking", Evidence.BLOCKING): (Next.INPUT_STATUS, Next.INPUT_STATUS),
    ("blocking", Evidence.MISMATCH): (Next.UNCHANGED, Next.CORRUPT),
    ("imported", Evidence.IMPORTABLE_NEW): (Next.UNCHANGED, Next.RECONCILED),
    ("imported", Evidence.IMPORTABLE_ECHO): (Next.UNCHANGED, Next.RECONCILED),
    ("imported", Evidence.BLOCKING): (Next.UNCHANGED, Next.RECONCILED),
    ("imported", Evidence.MISMATCH): (Next.UNCHANGED, Next.CORRUPT),
    ("reconciled", Evidence.IMPORTABLE_NEW): (Next.UNCHANGED, Next.RECONCILED),
    ("reconciled", Evidence.IMPORTABLE_ECHO): (Next.UNCHANGED, Next.RECONCILED),
    ("reconciled", Evidence.BLOCKING): (Next.UNCHANGED, Next.RECONCILED),
    ("reconciled", Evidence.MISMATCH): (Next.UNCHANGED, Next.CORRUPT),
    ("corrupt_state", Evidence.IMPORTABLE_NEW): (Next.UNCHANGED, Next.CORRUPT),
    ("corrupt_state", Evidence.IMPORTABLE_ECHO): (Next.UNCHANGED, Next.CORRUPT),
    ("corrupt_state", Evidence.BLOCKING): (Next.UNCHANGED, Next.CORRUPT),
    ("corrupt_state", Evidence.MISMATCH): (Next.UNCHANGED, Next.CORRUPT),
}


def _kind(state: QuarantineState | None) -> str | None:
    if state is None:
        return None
    return "blocking" if state.held else state.value


def _resolve(target: Next, stored: QuarantineState | None, supplied: str | None) -> QuarantineState:
    if target is Next.INPUT_STATUS:
        if supplied is None or supplied not in _HELD:
            raise IllegalTransition("quarantine", stored, "blocking without a blocking status")
        return QuarantineState(supplied)
    if target is Next.UNCHANGED:
        assert stored is not None  # the table never keeps an absent row
        return stored
    return QuarantineState(target.value)


@functools.lru_cache(maxsize=1024)
def quarantine_next(
    stored: QuarantineState | None, evidence: Evidence, supplied: str | None = None
) -> tuple[QuarantineState, QuarantineState]:
    """(next row state, outcome to report) for one pulled envelope.

    ``supplied`` is the blocking status the engine evaluated, for
    :attr:`Evidence.BLOCKING`. A pure function of a few hundred possible
    arguments, asked once per pulled envelope, so answers are memoized
    (an illegal transition raises every time: exceptions are not cached).
    """
    try:
        target, outcome = QUARANTINE_TRANSITIONS[(_kind(stored), evidence)]
    except KeyError:
        raise IllegalTransition("quarantine", stored, evidence) from None
    return _resolve(target, stored, supplied), _resolve(outcome, stored, supplied)
