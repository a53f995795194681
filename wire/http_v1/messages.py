"""``POST /v1/messages`` and ``GET /v1/messages``: batches, acks and pages.

server/spec/v1.md "POST /v1/messages", "GET /v1/messages?after=<team_seq>"
and "Team sequence allocation and visibility". What we enforce, and why:

Batch (request): 1..1000 ``{id, envelope}`` elements, closed objects, a
UUIDv4 ``id`` and a valid envelope each. A repeated ``id`` is legal (the
server acks both occurrences with one sequence) unless the envelopes differ,
which the relay answers with ``409`` (:meth:`MessageBatch.conflicting_duplicate`).

Acks (response): one per batch element, same order. Intrinsically (without
the batch): an ``id`` repeated in ``acks`` keeps one ``server_seq`` and only
its first occurrence may be ``stored``; distinct ids have distinct sequences;
the ``stored`` sequences are consecutive and ascending (the locked team row
is incremented once per new id, in first-occurrence order); and every
``duplicate`` of a pre-existing id lies below the first ``stored`` one. We do
*not* demand, as the upstream engine does, that all sequences increase: a
replayed batch may mix old ids in any order (UPSTREAM-RECORDS §9 item 19). Nor
do we compare acks with ``min_available_seq``: retention may advance the
floor in the same transaction, past both tombstoned and new sequences.
Against the batch we sent (:meth:`PushResponse.check_matches`): same length,
same ids position by position.

Page (response): sequences strictly ascending *by one* — allocation never
skips a value (a rollback consumes none) and retention deletes only a prefix,
so the live stream is ``min_available_seq+1..current_seq`` without holes —
each above the floor, ids distinct, ``next_after`` the last sequence, and an
empty page never claims ``has_more``. Against the query
(:meth:`MessagePage.check_matches`): a ``200`` implies ``after >=
min_available_seq``; the first sequence is ``after + 1``; an empty page
echoes ``after``; at most ``limit`` messages; ``has_more`` only on a full page
(it reports a later sequence "excluded by limit").
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from wire.envelope import Envelope
from wire.errors import SchemaError
from wire.http_v1.binding import BINDING_MEMBERS, ResponseBinding
from wire.limits import DEFAULT_PAGE_LIMIT, MAX_BATCH, MAX_BLOB_BYTES, MAX_PAGE_LIMIT
from wire.scalars import (
    check_cipher,
    check_key_id,
    check_timestamp,
    check_uuid4,
    format_seq,
    parse_seq,
)
from wire.schema import expect_bool, expect_list, expect_object, expect_str, join_field

__all__ = [
    "Disposition",
    "MessageBatch",
    "MessagePage",
    "MessagesQuery",
    "OutgoingMessage",
    "PulledMessage",
    "PushAck",
    "PushResponse",
]


def _check_envelope(envelope: object) -> None:
    """Cheap re-check of an Envelope built in code, under relative names.

    Envelope's own constructors (``from_obj``, ``from_blob_bytes``) prove the
    blob canonical; a builder re-decoding up to a thousand 1 MiB blobs per
    document would only repeat that work, so here we check type and header.
    """
    if not isinstance(envelope, Envelope):
        raise SchemaError("envelope", "must be an Envelope")
    check_cipher(envelope.cipher, "envelope.cipher")
    check_key_id(envelope.key_id, "envelope.key_id")
    if not isinstance(envelope.blob, str) or not envelope.blob:
        raise SchemaError("envelope.blob", "blob must be a non-empty string")


def _rebased(exc: SchemaError, field: str) -> SchemaError:
    """The same error under ``field``: elements are checked under relative
    names and the dotted path is built only on failure (a document holds up
    to 1,000 elements)."""
    return type(exc)(join_field(field, exc.field), exc.rule)


class Disposition(enum.StrEnum):
    """``stored``: this transaction inserted the id; ``duplicate``: it existed."""

    STORED = "stored"
    DUPLICATE = "duplicate"


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """One durable reservation as POSTed: its wire id and immutable envelope."""

    id: str
    envelope: Envelope

    def validate(self, field: str) -> OutgoingMessage:
        try:
            check_uuid4(self.id, "id")
            _check_envelope(self.envelope)
        except SchemaError as exc:
            raise _rebased(exc, field) from None
        return self

    def to_obj(self) -> dict[str, Any]:
        return {"id": self.id, "envelope": self.envelope.to_obj()}

    @classmethod
    def from_obj(
        cls, value: Any, field: str, max_blob_bytes: int = MAX_BLOB_BYTES
    ) -> OutgoingMessage:
        # Checked under relative names; the path is built only on failure.
        try:
            obj = expect_object(value, "", ("id", "envelope"))
            message_id = check_uuid4(obj["id"], "id")
            envelope = Envelope.from_obj(obj["envelope"], "envelope", max_blob_bytes)
        except SchemaError as exc:
            raise _rebased(exc, field) from None
        return cls(message_id, envelope)


@dataclass(frozen=True, slots=True)
class MessageBatch:
    """The strict ``POST /v1/messages`` body: ``{"messages": [...]}``."""

    messages: tuple[OutgoingMessage, ...]

    def validate(self, field: str = "request") -> MessageBatch:
        at = join_field(field, "messages")
        if not 1 <= len(self.messages) <= MAX_BATCH:
            raise SchemaError(at, f"must hold 1..{MAX_BATCH} messages")
        for index, message in enumerate(self.messages):
            if not isinstance(message, OutgoingMessage):
                raise SchemaError(join_field(at, index), "must be an OutgoingMessage")
            try:
                message.validate("")
            except SchemaError as exc:
                raise _rebased(exc, join_field(at, index)) from None
        return self

    def to_obj(self) -> dict[str, Any]:
        self.validate()
        return {"messages": [message.to_obj() for message in self.messages]}

    @classmethod
    def from_obj(
        cls, value: Any, field: str = "request", max_blob_bytes: int = MAX_BLOB_BYTES
    ) -> MessageBatch:
        obj = expect_object(value, field, ("messages",))
        at = join_field(field, "messages")
        items = expect_list(obj["messages"], at, min_items=1, max_items=MAX_BATCH)
        return cls(
            tuple(
                OutgoingMessage.from_obj(item, join_field(at, index), max_blob_bytes)
                for index, item in enumerate(items)
            )
        ).validate(field)

    def conflicting_duplicate(self) -> str | None:
        """The first id repeated with a different envelope (the relay's ``409``)."""
        seen: dict[str, bytes] = {}
        for message in self.messages:
            canonical = message.envelope.canonical_bytes()
            if seen.setdefault(message.id, canonical) != canonical:
                return message.id
        return None


_DISPOSITIONS = {d.value: d for d in Disposition}


@dataclass(frozen=True, slots=True)
class PushAck:
    """Where one batch element lives in the team stream."""

    id: str
    server_seq: int
    disposition: Disposition

    def validate(self, field: str) -> PushAck:
        try:
            check_uuid4(self.id, "id")
            format_seq(self.server_seq, "server_seq")
            if self.server_seq < 1:
                raise SchemaError("server_seq", "message sequences begin at 1")
        except SchemaError as exc:
            raise _rebased(exc, field) from None
        Disposition(self.disposition)
        return self

    def to_obj(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "server_seq": format_seq(self.server_seq),
            "disposition": Disposition(self.disposition).value,
        }

    @classmethod
    def from_obj(cls, value: Any, field: str) -> PushAck:
        # validate()'s rules, applied once under relative names; the dotted
        # path is built only on failure (a batch answer holds 1,000 acks).
        try:
            obj = expect_object(value, "", ("id", "server_seq", "disposition"), closed=False)
            text = expect_str(obj["disposition"], "disposition")
            if text not in _DISPOSITIONS:
                raise SchemaError("disposition", "must be 'stored' or 'duplicate'")
            seq = parse_seq(obj["server_seq"], "server_seq")
            if seq < 1:
                raise SchemaError("server_seq", "message sequences begin at 1")
            message_id = check_uuid4(obj["id"], "id")
        except SchemaError as exc:
            raise _rebased(exc, field) from None
        return cls(message_id, seq, _DISPOSITIONS[text])


@dataclass(frozen=True, slots=True)
class PushResponse:
    """The ``200`` answer to a batch (new and replayed batches alike)."""

    binding: ResponseBinding
    policy_revision: int
    acks: tuple[PushAck, ...]

    def validate(self, field: str = "response") -> PushResponse:
        self.binding.validate(field)
        format_seq(self.policy_revision, join_field(field, "policy_revision"))
        at = join_field(field, "acks")
        if not 1 <= len(self.acks) <= MAX_BATCH:
            raise SchemaError(at, f"must hold 1..{MAX_BATCH} acks")
        for index, ack in enumerate(self.acks):
            ack.validate(join_field(at, index))
        return self._validate_allocation(at)

    def _validate_allocation(self, at: str) -> PushResponse:
        """v1.md "POST /v1/messages": how acks may share and order sequences."""
        try:
            _check_allocation(self.acks)
        except _AllocationError as exc:
            index, member, rule = exc.args
            raise SchemaError(join_field(join_field(at, index), member), rule) from None
        return self

    def check_matches(self, batch: MessageBatch, field: str = "response") -> PushResponse:
        """Acks answer exactly this batch: same length, same ids in the same order."""
        at = join_field(field, "acks")
        if len(self.acks) != len(batch.messages):
            raise SchemaError(at, "must have one ack per batch element")
        for index, (ack, message) in enumerate(zip(self.acks, batch.messages, strict=True)):
            if ack.id != message.id:
                raise SchemaError(
                    join_field(join_field(at, index), "id"), "ack order must match the batch"
                )
        return self

    def to_obj(self) -> dict[str, Any]:
        self.validate()
        return {
            **self.binding.to_members(),
            "policy_revision": format_seq(self.policy_revision),
            "acks": [ack.to_obj() for ack in self.acks],
        }

    @classmethod
    def from_obj(cls, value: Any, field: str = "response") -> PushResponse:
        obj = expect_object(
            value, field, (*BINDING_MEMBERS, "policy_revision", "acks"), closed=False
        )
        binding = ResponseBinding.from_members(obj, field)
        revision = parse_seq(obj["policy_revision"], join_field(field, "policy_revision"))
        at = join_field(field, "acks")
        items = expect_list(obj["acks"], at, min_items=1, max_items=MAX_BATCH)
        acks = tuple(PushAck.from_obj(item, join_field(at, i)) for i, item in enumerate(items))
        # Each ack was checked by PushAck.from_obj; what is left is the batch rule.
        return cls(binding, revision, acks)._validate_allocation(at)


class _AllocationError(Exception):
    """(index, member, rule) of the first ack breaking the allocation rule."""


def _check_allocation(acks: Sequence[PushAck]) -> None:
    seq_of: dict[str, int] = {}
    id_of: dict[int, str] = {}
    stored: list[int] = []
    for index, ack in enumerate(acks):
        if ack.id in seq_of:
            if seq_of[ack.id] != ack.server_seq:
                raise _AllocationError(index, "server_seq", "a repeated id must keep one sequence")
            if ack.disposition is Disposition.STORED:
                raise _AllocationError(
                    index, "disposition", "only the first occurrence of an id can be 'stored'"
                )
            continue
        if id_of.setdefault(ack.server_seq, ack.id) != ack.id:
            raise _AllocationError(index, "server_seq", "two different ids cannot share a sequence")
        seq_of[ack.id] = ack.server_seq
        if ack.disposition is Disposition.STORED:
            if stored and ack.server_seq != stored[-1] + 1:
                raise _AllocationError(
                    index,
                    "server_seq",
                    "new ids take consecutive ascending sequences in first-occurrence order",
                )
            stored.append(ack.server_seq)
    if stored:
        stored_set = set(stored)
        for index, ack in enumerate(acks):
            if seq_of[ack.id] not in stored_set and ack.server_seq >= stored[0]:
                raise _AllocationError(
                    index,
                    "server_seq",
                    "a pre-existing id must precede every newly stored sequence",
                )


_LIMIT = re.compile(r"[1-9][0-9]{0,3}")


@dataclass(frozen=True, slots=True)
class MessagesQuery:
    """``GET /v1/messages?after=<seq>[&limit=<1..1000>]``."""

    after: int
    limit: int | None = None

    @property
    def effective_limit(self) -> int:
        return DEFAULT_PAGE_LIMIT if self.limit is None else self.limit

    def validate(self, field: str = "query") -> MessagesQuery:
        format_seq(self.after, join_field(field, "after"))
        if self.limit is not None and (
            isinstance(self.limit, bool)
            or not isinstance(self.limit, int)
            or not 1 <= self.limit <= MAX_PAGE_LIMIT
        ):
            raise SchemaError(join_field(field, "limit"), f"must be an integer 1..{MAX_PAGE_LIMIT}")
        return self

    def to_params(self) -> list[tuple[str, str]]:
        self.validate()
        params = [("after", format_seq(self.after))]
        if self.limit is not None:
            params.append(("limit", str(self.limit)))
        return params

    @classmethod
    def from_params(cls, pairs: Iterable[tuple[str, str]], field: str = "query") -> MessagesQuery:
        """Strict query parsing: ``after`` required, ``limit`` optional, nothing else, once each."""
        seen: dict[str, str] = {}
        for name, text in pairs:
            at = join_field(field, name)
            if name not in ("after", "limit"):
                raise SchemaError(at, "unknown query parameter")
            if name in seen:
                raise SchemaError(at, "query parameter given more than once")
            seen[name] = expect_str(text, at)
        if "after" not in seen:
            raise SchemaError(join_field(field, "after"), "required query parameter is missing")
        after = parse_seq(seen["after"], join_field(field, "after"))
        limit: int | None = None
        if "limit" in seen:
            text = seen["limit"]
            if _LIMIT.fullmatch(text) is None or int(text) > MAX_PAGE_LIMIT:
                raise SchemaError(
                    join_field(field, "limit"), f"must be a canonical decimal 1..{MAX_PAGE_LIMIT}"
                )
            limit = int(text)
        return cls(after, limit).validate(field)


_PULLED_MEMBERS = ("server_seq", "id", "server_received_at", "envelope")


@dataclass(frozen=True, slots=True)
class PulledMessage:
    """A stored message as the relay returns it: sequence, id, receipt time, envelope."""

    server_seq: int
    id: str
    server_received_at: str
    envelope: Envelope

    def validate(self, field: str) -> PulledMessage:
        format_seq(self.server_seq, join_field(field, "server_seq"))
        if self.server_seq < 1:
            raise SchemaError(join_field(field, "server_seq"), "message sequences begin at 1")
        check_uuid4(self.id, join_field(field, "id"))
        check_timestamp(self.server_received_at, join_field(field, "server_received_at"))
        try:
            _check_envelope(self.envelope)
        except SchemaError as exc:
            raise _rebased(exc, field) from None
        return self

    def to_obj(self) -> dict[str, Any]:
        return {
            "server_seq": format_seq(self.server_seq),
            "id": self.id,
            "server_received_at": self.server_received_at,
            "envelope": self.envelope.to_obj(),
        }

    @classmethod
    def from_obj(
        cls, value: Any, field: str, max_blob_bytes: int = MAX_BLOB_BYTES
    ) -> PulledMessage:
        # Every rule of validate() is applied here once, under relative names;
        # the dotted path is built only on failure (a page holds 1,000 of these).
        try:
            obj = expect_object(value, "", _PULLED_MEMBERS, closed=False)
            seq = parse_seq(obj["server_seq"], "server_seq")
            if seq < 1:
                raise SchemaError("server_seq", "message sequences begin at 1")
            message_id = check_uuid4(obj["id"], "id")
            received = check_timestamp(obj["server_received_at"], "server_received_at")
            envelope = Envelope.from_obj(obj["envelope"], "envelope", max_blob_bytes)
        except SchemaError as exc:
            raise _rebased(exc, field) from None
        return cls(seq, message_id, received, envelope)


@dataclass(frozen=True, slots=True)
class MessagePage:
    """One ``GET /v1/messages`` page from a single server snapshot."""

    binding: ResponseBinding
    messages: tuple[PulledMessage, ...]
    next_after: int
    has_more: bool

    def validate(self, field: str = "page", *, elements: bool = True) -> MessagePage:
        """Check the page invariants; ``elements=False`` skips re-checking each
        message when the parser has just validated every one of them."""
        self.binding.validate(field)
        floor = self.binding.min_available_seq
        at = join_field(field, "messages")
        if len(self.messages) > MAX_PAGE_LIMIT:
            raise SchemaError(at, f"must hold at most {MAX_PAGE_LIMIT} messages")
        ids: set[str] = set()
        for index, message in enumerate(self.messages):
            if elements:
                message.validate(join_field(at, index))
            if message.server_seq <= floor:
                raise SchemaError(
                    join_field(join_field(at, index), "server_seq"),
                    "lies at or below min_available_seq",
                )
            if index and message.server_seq != self.messages[index - 1].server_seq + 1:
                raise SchemaError(
                    join_field(join_field(at, index), "server_seq"),
                    "sequences must ascend by exactly one (the team stream has no holes)",
                )
            if message.id in ids:
                raise SchemaError(
                    join_field(join_field(at, index), "id"), "an id appears twice in one page"
                )
            ids.add(message.id)
        next_at = join_field(field, "next_after")
        format_seq(self.next_after, next_at)
        if not isinstance(self.has_more, bool):
            raise SchemaError(join_field(field, "has_more"), "must be a boolean")
        if self.messages:
            if self.next_after != self.messages[-1].server_seq:
                raise SchemaError(next_at, "must equal the last returned server_seq")
        else:
            if self.has_more:
                raise SchemaError(join_field(field, "has_more"), "an empty page has nothing more")
            if self.next_after < floor:
                raise SchemaError(next_at, "an empty page's cursor cannot be below the floor")
        return self

    def check_matches(self, query: MessagesQuery, field: str = "page") -> MessagePage:
        """The page answers exactly this query (see the module docstring)."""
        if query.after < self.binding.min_available_seq:
            raise SchemaError(
                join_field(field, "min_available_seq"),
                "a cursor below the floor must get 410 resync-required, not a page",
            )
        at = join_field(field, "messages")
        if len(self.messages) > query.effective_limit:
            raise SchemaError(at, "holds more messages than the requested limit")
        if self.messages:
            if self.messages[0].server_seq != query.after + 1:
                raise SchemaError(
                    join_field(join_field(at, 0), "server_seq"), "the page must start at after + 1"
                )
        elif self.next_after != query.after:
            raise SchemaError(join_field(field, "next_after"), "an empty page must echo after")
        if self.has_more and len(self.messages) != query.effective_limit:
            raise SchemaError(join_field(field, "has_more"), "only a full page can have more")
        return self

    def to_obj(self) -> dict[str, Any]:
        self.validate()
        return {
            **self.binding.to_members(),
            "messages": [message.to_obj() for message in self.messages],
            "next_after": format_seq(self.next_after),
            "has_more": self.has_more,
        }

    @classmethod
    def from_obj(
        cls, value: Any, field: str = "page", max_blob_bytes: int = MAX_BLOB_BYTES
    ) -> MessagePage:
        members = (*BINDING_MEMBERS, "messages", "next_after", "has_more")
        obj = expect_object(value, field, members, closed=False)
        binding = ResponseBinding.from_members(obj, field)
        at = join_field(field, "messages")
        items = expect_list(obj["messages"], at, max_items=MAX_PAGE_LIMIT)
        messages = tuple(
            PulledMessage.from_obj(item, join_field(at, index), max_blob_bytes)
            for index, item in enumerate(items)
        )
        next_after = parse_seq(obj["next_after"], join_field(field, "next_after"))
        has_more = expect_bool(obj["has_more"], join_field(field, "has_more"))
        return cls(binding, messages, next_after, has_more).validate(field, elements=False)
