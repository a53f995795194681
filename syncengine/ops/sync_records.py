"""The Stage-1 sync JSONL records: dataclasses, strict parsers, exact output.

Record names and field shapes are the agmsg driver ABI
(message-synchronization.md "Prepare push" … "Three independent progress
layers"; UPSTREAM-RECORDS §2.1–§2.5), so an agmsg engine can drive
``syncengine driver`` unchanged. Every sequence, cursor and revision is an
``int`` here and a canonical decimal string on the wire
(``wire.scalars.parse_seq`` / ``format_seq``).

Parsing is strict everywhere (UPSTREAM-RECORDS §9.5): one complete JSON
object per LF-terminated line, decoded by the I-JSON decoder
(``wire.jcs.loads``: duplicate members, lone surrogates and unsafe numbers
refused), a stray carriage return refused rather than stripped (agmsg #829),
an exact member set per record type, and every scalar in its canonical
spelling. A failure names the line and the field and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from syncengine.ops.record_fields import bad as _bad
from syncengine.ops.record_fields import dump_line, parse_jsonl
from syncengine.ops.record_fields import record_fields as _fields
from syncengine.ops.record_fields import seq_field as _seq
from syncengine.ops.record_fields import wire_id_field as _wire_id
from syncengine.ops.record_fields import wrapped as _wrap
from wire import jcs
from wire.block_states import BlockState
from wire.envelope import Envelope
from wire.errors import ProfileError, WireError
from wire.limits import ENVELOPE_VERSION, MAX_BLOB_BYTES
from wire.message import Message
from wire.scalars import (
    check_cipher,
    check_profile_key_id,
    check_timestamp,
    format_seq,
)
from wire.schema import expect_bool, expect_int, expect_list, expect_str

__all__ = [
    "APPLY_STATUSES",
    "BLOCKING_STATUSES",
    "CAPABILITY_STAGE1_SYNC",
    "ROSTER_KINDS",
    "RosterProjection",
    "SyncApplyOutcome",
    "SyncApplyResult",
    "SyncDriverCapabilities",
    "SyncPrepare",
    "SyncPullCursor",
    "SyncPullMessage",
    "SyncPushAck",
    "SyncPushCandidate",
    "SyncReconcileResult",
    "SyncReprocessCandidate",
    "SyncReprocessPage",
    "SyncState",
    "dump_line",
    "format_page_key",
    "parse_jsonl",
    "parse_page_key",
]

CAPABILITY_STAGE1_SYNC = "stage1-sync"

#: Durable blocking import states (UPSTREAM-RECORDS §2.10), reprocessable.
BLOCKING_STATUSES: frozenset[str] = frozenset(state.value for state in BlockState)
#: Statuses an engine may hand to apply: importable or one blocking state.
APPLY_STATUSES: frozenset[str] = BLOCKING_STATUSES | {"importable"}

_ACK_DISPOSITIONS = frozenset({"stored", "duplicate"})
#: A human reason is for an operator's screen; bound it like other free text.
MAX_REASON_CHARS = 4096
#: The authenticated cipher profile's name (wire.age_profile.CIPHER, without importing it).
AGE_V1 = "age-v1"
_NONE_CIPHER = "none"


def _envelope(value: Any, field: str, max_blob_bytes: int = MAX_BLOB_BYTES) -> Envelope:
    """A complete, valid envelope: the driver checks it itself (UPSTREAM §9.13:
    an empty blob once passed the driver unnoticed)."""
    try:
        return Envelope.from_obj(value, field, max_blob_bytes)
    except WireError as exc:
        raise _bad(exc.field, exc.rule) from None


# -- prepare --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SyncPrepare:
    """``sync_prepare``: the engine's write profile and limits for one prepare."""

    envelope_v: int
    cipher: str
    key_id: str | None
    recipients: tuple[str, ...]
    max_blob_bytes: int
    allow_new: bool

    _KEYS = ("envelope_v", "cipher", "key_id", "recipients", "max_blob_bytes", "allow_new")

    @classmethod
    def from_obj(cls, value: dict[str, Any], where: str = "sync_prepare") -> SyncPrepare:
        obj = _fields(value, where, "sync_prepare", cls._KEYS)
        envelope_v = _wrap(expect_int, obj["envelope_v"], f"{where}.envelope_v")
        if envelope_v != ENVELOPE_VERSION:
            raise _bad(f"{where}.envelope_v", f"only envelope version {ENVELOPE_VERSION} is minted")
        cipher = _wrap(check_cipher, obj["cipher"], f"{where}.cipher")
        recipients = _wrap(expect_list, obj["recipients"], f"{where}.recipients")
        for index, item in enumerate(recipients):
            _wrap(expect_str, item, f"{where}.recipients[{index}]")
        max_blob = _wrap(
            expect_int,
            obj["max_blob_bytes"],
            f"{where}.max_blob_bytes",
            minimum=1,
            maximum=MAX_BLOB_BYTES,
        )
        allow_new = _wrap(expect_bool, obj["allow_new"], f"{where}.allow_new")
        key_id = obj["key_id"]
        if cipher == _NONE_CIPHER:
            if key_id is not None:
                raise _bad(f"{where}.key_id", "must be null for cipher 'none'")
            if recipients:
                raise _bad(f"{where}.recipients", "must be [] for cipher 'none'")
        elif cipher == AGE_V1:
            _wrap(check_profile_key_id, key_id, f"{where}.key_id")
            # start-up pin (CRYPTO): only this path loads wire.age_profile
            from wire.age_profile import EpochManifest

            try:
                EpochManifest.from_strings(key_id, recipients)
            except ProfileError as exc:
                raise _bad(f"{where}.{exc.field}", exc.rule) from None
        else:
            raise _bad(f"{where}.cipher", f"cipher {cipher!r} is not implemented by this driver")
        return cls(envelope_v, cipher, key_id, tuple(recipients), max_blob, allow_new)

    def to_obj(self) -> dict[str, Any]:
        return {
            "type": "sync_prepare",
            "envelope_v": self.envelope_v,
            "cipher": self.cipher,
            "key_id": self.key_id,
            "recipients": list(self.recipients),
            "max_blob_bytes": self.max_blob_bytes,
            "allow_new": self.allow_new,
        }


@dataclass(frozen=True, slots=True)
class SyncState:
    """``sync_state``: the driver generation and the durable transport cursor."""

    driver_generation: str
    transport_cursor: int

    def to_obj(self) -> dict[str, Any]:
        return {
            "type": "sync_state",
            "driver_generation": self.driver_generation,
            "transport_cursor": format_seq(self.transport_cursor),
        }

    @classmethod
    def from_obj(cls, value: dict[str, Any], where: str = "sync_state") -> SyncState:
        obj = _fields(value, where, "sync_state", ("driver_generation", "transport_cursor"))
        generation = _wrap(expect_str, obj["driver_generation"], f"{where}.driver_generation")
        return cls(generation, _seq(obj["transport_cursor"], f"{where}.transport_cursor"))


@dataclass(frozen=True, slots=True)
class SyncPushCandidate:
    """``sync_push_candidate``: one durable reservation, exactly as published."""

    local_position: int
    local_id: str
    wire_id: str
    envelope: Envelope

    def to_obj(self) -> dict[str, Any]:
        return {
            "type": "sync_push_candidate",
            "local_position": format_seq(self.local_position),
            "local_id": self.local_id,
            "id": self.wire_id,
            "envelope": self.envelope.to_obj(),
        }

    @classmethod
    def from_obj(
        cls, value: dict[str, Any], where: str = "sync_push_candidate"
    ) -> SyncPushCandidate:
        obj = _fields(
            value, where, "sync_push_candidate", ("local_position", "local_id", "id", "envelope")
        )
        return cls(
            _seq(obj["local_position"], f"{where}.local_position", minimum=1),
            _wrap(expect_str, obj["local_id"], f"{where}.local_id"),
            _wire_id(obj["id"], f"{where}.id"),
            _envelope(obj["envelope"], f"{where}.envelope"),
        )


# -- reconcile ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SyncPushAck:
    """``sync_push_ack``: the relay's acknowledgement of one candidate."""

    local_position: int
    wire_id: str
    server_seq: int
    disposition: str

    @classmethod
    def from_obj(cls, value: dict[str, Any], where: str = "sync_push_ack") -> SyncPushAck:
        obj = _fields(
            value, where, "sync_push_ack", ("local_position", "id", "server_seq", "disposition")
        )
        disposition = _wrap(expect_str, obj["disposition"], f"{where}.disposition")
        if disposition not in _ACK_DISPOSITIONS:
            raise _bad(f"{where}.disposition", "must be 'stored' or 'duplicate'")
        return cls(
            _seq(obj["local_position"], f"{where}.local_position", minimum=1),
            _wire_id(obj["id"], f"{where}.id"),
            _seq(obj["server_seq"], f"{where}.server_seq", minimum=1),
            disposition,
        )

    def to_obj(self) -> dict[str, Any]:
        return {
            "type": "sync_push_ack",
            "local_position": format_seq(self.local_position),
            "id": self.wire_id,
            "server_seq": format_seq(self.server_seq),
            "disposition": self.disposition,
        }


@dataclass(frozen=True, slots=True)
class SyncReconcileResult:
    """``sync_reconcile_result``: the push cursor after the acknowledgements."""

    push_cursor: int

    def to_obj(self) -> dict[str, Any]:
        return {"type": "sync_reconcile_result", "push_cursor": format_seq(self.push_cursor)}

    @classmethod
    def from_obj(
        cls, value: dict[str, Any], where: str = "sync_reconcile_result"
    ) -> SyncReconcileResult:
        obj = _fields(value, where, "sync_reconcile_result", ("push_cursor",))
        return cls(_seq(obj["push_cursor"], f"{where}.push_cursor"))


# -- apply ----------------------------------------------------------------------------


#: The roster control records a host's engine projects (UPSTREAM-RECORDS
#: §2.4): they are applied by the host's roster driver, never as a message.
ROSTER_KINDS = frozenset({"member_joined", "member_left", "member_renamed", "key_rotated"})


@dataclass(frozen=True, slots=True)
class RosterProjection:
    """The projection of a roster control record: ``kind`` plus its fields,
    kept as given. The storage driver records it (outcome ``imported``) and
    creates no chat message; the roster itself is the host's registry."""

    fields: dict[str, Any]

    @property
    def kind(self) -> str:
        kind: str = self.fields["kind"]
        return kind

    @classmethod
    def from_obj(cls, value: Any, where: str) -> RosterProjection:
        if not isinstance(value, dict):
            raise _bad(where, "must be a JSON object")
        obj: dict[str, Any] = value
        kind = obj.get("kind")
        if kind not in ROSTER_KINDS:
            raise _bad(
                f"{where}.kind",
                "a projection without a body must be a roster record, kind one of "
                + ", ".join(sorted(ROSTER_KINDS)),
            )
        try:
            jcs.canonicalize(obj)
        except WireError as exc:
            raise _bad(where, f"not canonical JSON ({exc})") from None
        return cls(dict(obj))

    def to_obj(self) -> dict[str, Any]:
        return dict(self.fields)

    def to_jcs(self) -> bytes:
        return jcs.canonicalize(self.fields)


def _projection(value: Any, where: str) -> Message | RosterProjection:
    if isinstance(value, dict) and "body" not in value and "kind" in value:
        return RosterProjection.from_obj(value, where)
    projection: Message = _wrap(Message.from_obj, value, where)
    return projection


@dataclass(frozen=True, slots=True)
class SyncPullMessage:
    """``sync_pull_message``: one pulled envelope with the engine's evaluation.

    ``projection`` is present exactly when ``status`` is ``importable``: a
    validated :class:`wire.message.Message`, or a :class:`RosterProjection`
    when the host's engine projected a roster control record.
    """

    server_seq: int
    wire_id: str
    server_received_at: str
    envelope: Envelope
    status: str
    policy_revision: int
    local_security_revision: int
    reason: str | None
    projection: Message | RosterProjection | None

    _REQUIRED = (
        "server_seq",
        "id",
        "server_received_at",
        "envelope",
        "status",
        "policy_revision",
        "local_security_revision",
    )

    @classmethod
    def from_obj(cls, value: dict[str, Any], where: str = "sync_pull_message") -> SyncPullMessage:
        obj = _fields(value, where, "sync_pull_message", cls._REQUIRED, ("reason", "projection"))
        status = _wrap(expect_str, obj["status"], f"{where}.status")
        if status not in APPLY_STATUSES:
            raise _bad(
                f"{where}.status",
                "must be importable or one of " + ", ".join(sorted(BLOCKING_STATUSES)),
            )
        reason = obj.get("reason")
        if reason is not None:
            _wrap(expect_str, reason, f"{where}.reason")
            if len(reason) > MAX_REASON_CHARS:
                raise _bad(f"{where}.reason", f"must be at most {MAX_REASON_CHARS} characters")
        elif "reason" in obj:
            raise _bad(f"{where}.reason", "must be a string when present")
        envelope = _envelope(obj["envelope"], f"{where}.envelope")
        projection: Message | RosterProjection | None = None
        if status == "importable":
            if "projection" not in obj:
                raise _bad(f"{where}.projection", "required when status is importable")
            projection = _projection(obj["projection"], f"{where}.projection")
            if envelope.cipher == _NONE_CIPHER and envelope.blob_bytes() != projection.to_jcs():
                raise _bad(
                    f"{where}.projection", "does not match the plaintext of its 'none' envelope"
                )
        elif "projection" in obj:
            raise _bad(f"{where}.projection", f"a {status} envelope carries no projection")
        return cls(
            _seq(obj["server_seq"], f"{where}.server_seq", minimum=1),
            _wire_id(obj["id"], f"{where}.id"),
            _wrap(check_timestamp, obj["server_received_at"], f"{where}.server_received_at"),
            envelope,
            status,
            _seq(obj["policy_revision"], f"{where}.policy_revision"),
            _seq(obj["local_security_revision"], f"{where}.local_security_revision"),
            reason,
            projection,
        )

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "type": "sync_pull_message",
            "server_seq": format_seq(self.server_seq),
            "id": self.wire_id,
            "server_received_at": self.server_received_at,
            "envelope": self.envelope.to_obj(),
            "status": self.status,
            "policy_revision": format_seq(self.policy_revision),
            "local_security_revision": format_seq(self.local_security_revision),
        }
        if self.reason is not None:
            obj["reason"] = self.reason
        if self.projection is not None:
            obj["projection"] = self.projection.to_obj()
        return obj


@dataclass(frozen=True, slots=True)
class SyncPullCursor:
    """``sync_pull_cursor``: where the transport cursor moves with this page."""

    next_after: int

    @classmethod
    def from_obj(cls, value: dict[str, Any], where: str = "sync_pull_cursor") -> SyncPullCursor:
        obj = _fields(value, where, "sync_pull_cursor", ("next_after",))
        return cls(_seq(obj["next_after"], f"{where}.next_after"))

    def to_obj(self) -> dict[str, Any]:
        return {"type": "sync_pull_cursor", "next_after": format_seq(self.next_after)}


@dataclass(frozen=True, slots=True)
class SyncApplyResult:
    """``sync_apply_result``: transport cursor after the page, cumulative conflicts."""

    transport_cursor: int
    corrupt_count: int

    def to_obj(self) -> dict[str, Any]:
        return {
            "type": "sync_apply_result",
            "transport_cursor": format_seq(self.transport_cursor),
            "corrupt_count": self.corrupt_count,
        }

    @classmethod
    def from_obj(cls, value: dict[str, Any], where: str = "sync_apply_result") -> SyncApplyResult:
        obj = _fields(value, where, "sync_apply_result", ("transport_cursor", "corrupt_count"))
        return cls(
            _seq(obj["transport_cursor"], f"{where}.transport_cursor"),
            _wrap(expect_int, obj["corrupt_count"], f"{where}.corrupt_count", minimum=0),
        )


@dataclass(frozen=True, slots=True)
class SyncApplyOutcome:
    """``sync_apply_outcome``: the durable outcome of one pulled envelope."""

    wire_id: str
    server_seq: int
    status: str

    def to_obj(self) -> dict[str, Any]:
        return {
            "type": "sync_apply_outcome",
            "id": self.wire_id,
            "server_seq": format_seq(self.server_seq),
            "status": self.status,
        }

    @classmethod
    def from_obj(cls, value: dict[str, Any], where: str = "sync_apply_outcome") -> SyncApplyOutcome:
        obj = _fields(value, where, "sync_apply_outcome", ("id", "server_seq", "status"))
        return cls(
            _wire_id(obj["id"], f"{where}.id"),
            _seq(obj["server_seq"], f"{where}.server_seq", minimum=1),
            _wrap(expect_str, obj["status"], f"{where}.status"),
        )


# -- reprocess ------------------------------------------------------------------------


def format_page_key(server_seq: int, wire_id: str) -> str:
    """The opaque reprocess keyset token ``"<server_seq>:<wire_id>"``."""
    return f"{format_seq(server_seq)}:{wire_id}"


def parse_page_key(text: str, field: str = "page-after") -> tuple[int, str]:
    """``"<seq>:<uuid4>"`` → (seq, wire id); anything else is refused."""
    if not isinstance(text, str) or text.count(":") != 1:
        raise _bad(field, "must be <server_seq>:<wire_id> from the previous page")
    seq_text, wire = text.split(":")
    return _seq(seq_text, field, minimum=1), _wire_id(wire, field)


@dataclass(frozen=True, slots=True)
class SyncReprocessCandidate:
    """``sync_reprocess_candidate``: one durable blocking envelope to re-evaluate."""

    server_seq: int
    wire_id: str
    server_received_at: str
    envelope: Envelope
    prior_status: str

    def to_obj(self) -> dict[str, Any]:
        return {
            "type": "sync_reprocess_candidate",
            "server_seq": format_seq(self.server_seq),
            "id": self.wire_id,
            "server_received_at": self.server_received_at,
            "envelope": self.envelope.to_obj(),
            "prior_status": self.prior_status,
        }

    @classmethod
    def from_obj(
        cls, value: dict[str, Any], where: str = "sync_reprocess_candidate"
    ) -> SyncReprocessCandidate:
        obj = _fields(
            value,
            where,
            "sync_reprocess_candidate",
            ("server_seq", "id", "server_received_at", "envelope", "prior_status"),
        )
        prior = _wrap(expect_str, obj["prior_status"], f"{where}.prior_status")
        if prior not in BLOCKING_STATUSES:
            raise _bad(f"{where}.prior_status", "must be a blocking status")
        return cls(
            _seq(obj["server_seq"], f"{where}.server_seq", minimum=1),
            _wire_id(obj["id"], f"{where}.id"),
            _wrap(check_timestamp, obj["server_received_at"], f"{where}.server_received_at"),
            _envelope(obj["envelope"], f"{where}.envelope"),
            prior,
        )


@dataclass(frozen=True, slots=True)
class SyncReprocessPage:
    """``sync_reprocess_page``: the trailer; ``next_after`` non-null iff ``has_more``."""

    next_after: str | None
    has_more: bool

    def __post_init__(self) -> None:
        if (self.next_after is not None) != self.has_more:
            raise ValueError("next_after is non-null exactly when has_more is true")

    def to_obj(self) -> dict[str, Any]:
        return {
            "type": "sync_reprocess_page",
            "next_after": self.next_after,
            "has_more": self.has_more,
        }

    @classmethod
    def from_obj(
        cls, value: dict[str, Any], where: str = "sync_reprocess_page"
    ) -> SyncReprocessPage:
        obj = _fields(value, where, "sync_reprocess_page", ("next_after", "has_more"))
        has_more = _wrap(expect_bool, obj["has_more"], f"{where}.has_more")
        next_after = obj["next_after"]
        if next_after is not None:
            parse_page_key(next_after, f"{where}.next_after")
        if (next_after is not None) != has_more:
            raise _bad(f"{where}.next_after", "must be non-null exactly when has_more is true")
        return cls(next_after, has_more)


@dataclass(frozen=True, slots=True)
class SyncDriverCapabilities:
    """``sync_driver_capabilities``: what the adapter's ``capabilities`` verb reports."""

    capabilities: tuple[str, ...]

    def to_obj(self) -> dict[str, Any]:
        return {"type": "sync_driver_capabilities", "capabilities": list(self.capabilities)}
