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

import binascii
import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from json.encoder import encode_basestring as _encode_string
from operator import itemgetter
from typing import Any

from wire.envelope import Envelope
from wire.errors import SchemaError
from wire.http_v1.binding import BINDING_MEMBERS, ResponseBinding
from wire.http_v1.body import encode_body
from wire.limits import DEFAULT_PAGE_LIMIT, MAX_BATCH, MAX_BLOB_BYTES, MAX_PAGE_LIMIT, MAX_SEQ
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
        return self._members()

    def _members(self) -> dict[str, Any]:
        return {"messages": [message.to_obj() for message in self.messages]}

    def encode(self) -> bytes:
        """The request body of a batch :meth:`validate` accepted: exactly
        ``encode_body(self.to_obj())`` (members sorted, no whitespace;
        wire/http_v1/body.py), which retries of a durable batch rely on.

        It does not validate again (the client validates first, under its
        own error). Each element is spelled out around
        :func:`json.encoder.encode_basestring` — the function the body's C
        encoder applies to every string (``ensure_ascii=False``) — in sorted
        member order (``envelope`` {``blob``, ``cipher``, ``key_id``, ``v``},
        then ``id``), so 1,000 elements build no dicts and sort nothing. An
        element outside that shape (a ``v`` that is not a plain ``int``), or
        text the UTF-8 encoding refuses (a lone surrogate), is left to
        ``encode_body`` itself, which writes — or refuses — as it always did.
        """
        string = _encode_string
        items: list[str] = []
        for message in self.messages:
            env = message.envelope
            if type(env.v) is not int:
                return encode_body(self._members())
            key_id = "null" if env.key_id is None else string(env.key_id)
            items.append(
                f'{{"envelope":{{"blob":{string(env.blob)},"cipher":{string(env.cipher)},'
                f'"key_id":{key_id},"v":{env.v}}},"id":{string(message.id)}}}'
            )
        try:
            return ('{"messages":[' + ",".join(items) + "]}").encode("utf-8")
        except UnicodeEncodeError:
            return encode_body(self._members())

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
        # Each ack was checked by _parse_acks; what is left is the batch rule.
        return cls(binding, revision, _parse_acks(items, at))._validate_allocation(at)


#: An ack's three members, read in one call per element.
_ACK_MEMBERS = itemgetter("id", "server_seq", "disposition")
#: Sequences one per line, each what :func:`parse_seq` accepts and at least 1:
#: canonical decimal without a leading zero, at most 19 digits (the 64-bit
#: bound is checked on the integers).
_SEQ_LINES = re.compile(r"[1-9][0-9]{0,18}(?:\n[1-9][0-9]{0,18})*")


def _column_seqs(seqs: Sequence[str]) -> list[int] | None:
    """A column of sequence texts as integers when every one is what
    :func:`parse_seq` accepts and at least 1, else ``None``: matched as one
    text, one per line (a line count equal to the column's length proves no
    text held a line break of its own), the 64-bit bound on the integers."""
    lines = "\n".join(seqs)
    if lines.count("\n") != len(seqs) - 1 or _SEQ_LINES.fullmatch(lines) is None:
        return None
    numbers = list(map(int, seqs))
    return numbers if max(numbers) <= MAX_SEQ else None


def _all_uuid4(ids: Sequence[str]) -> bool:
    """Whether :func:`check_uuid4` accepts every ID of a column."""
    try:
        for _ in map(check_uuid4, ids, repeat("id")):
            pass
    except SchemaError:
        return False
    return True


def _acks_by_column(items: list[Any]) -> tuple[PushAck, ...] | None:
    """The acks of an answer whose every element has the usual shape and
    passes every rule of :meth:`PushAck.from_obj`, judged column by column at
    C speed; ``None`` when any element might not (the caller then parses
    element by element, which names the first refusal).

    The rules are the per-element parse's: an object (``dict``) holding
    ``id``, ``server_seq`` and ``disposition`` (other members allowed, as
    there), string values, a disposition from the table, a sequence
    :func:`parse_seq` accepts that is at least 1, and an ``id``
    :func:`check_uuid4` accepts. The sequences are matched as one text, one
    per line; a line count equal to the number of sequences proves that no
    sequence held a line break of its own.
    """
    if set(map(type, items)) != {dict}:
        return None
    try:
        ids, seqs, texts = zip(*map(_ACK_MEMBERS, items), strict=True)
    except KeyError:
        return None
    if {*map(type, ids), *map(type, seqs), *map(type, texts)} != {str}:
        return None
    try:
        dispositions = list(map(_DISPOSITIONS.__getitem__, texts))
    except KeyError:
        return None
    numbers = _column_seqs(seqs)
    if numbers is None or not _all_uuid4(ids):
        return None
    return tuple(map(PushAck, ids, numbers, dispositions))


def _parse_acks(items: list[Any], at: str) -> tuple[PushAck, ...]:
    """Every element through :meth:`PushAck.from_obj`'s rules: by whole
    columns when every element passes (:func:`_acks_by_column`, a batch
    answer holds 1,000 acks), else in one loop.

    In the loop, an element of the usual shape — an object holding the three members,
    string values — is checked right here by the very rule functions
    :meth:`PushAck.from_obj` calls (:func:`parse_seq`, :func:`check_uuid4`,
    the disposition table and the ``>= 1`` bound), without its per-element
    set-up (a batch answer holds 1,000 acks). Anything else, and anything
    one of those rules refuses, goes through :meth:`PushAck.from_obj`
    itself, which raises its own error under the same dotted path; so the
    accepted acks and every refusal are exactly those of the per-element
    parse.
    """
    by_column = _acks_by_column(items)
    if by_column is not None:
        return by_column
    acks: list[PushAck] = []
    append = acks.append
    for index, item in enumerate(items):
        try:
            if type(item) is dict:
                text = item["disposition"]
                if type(text) is str:
                    disposition = _DISPOSITIONS.get(text)
                    if disposition is not None:
                        seq = parse_seq(item["server_seq"], "server_seq")
                        if seq >= 1:
                            append(PushAck(check_uuid4(item["id"], "id"), seq, disposition))
                            continue
        except (KeyError, SchemaError):
            pass  # PushAck.from_obj names the problem
        append(PushAck.from_obj(item, join_field(at, index)))
    return tuple(acks)


class _AllocationError(Exception):
    """(index, member, rule) of the first ack breaking the allocation rule."""


def _all_fresh(acks: Sequence[PushAck]) -> bool:
    """Whether ``acks`` are the answer to a batch stored whole: distinct ids,
    every one ``stored``, sequences consecutive and ascending. Such an
    answer keeps every allocation rule (no repeated id, no shared sequence,
    the new ones consecutive in order, no pre-existing id at all), so
    :func:`_check_allocation` needs no walk for it; three C-speed checks
    tell it apart (a batch answer holds 1,000 acks)."""
    seqs = [ack.server_seq for ack in acks]
    return (
        bool(seqs)
        and seqs == list(range(seqs[0], seqs[0] + len(seqs)))
        and {ack.disposition for ack in acks} == {Disposition.STORED}
        and len({ack.id for ack in acks}) == len(acks)
    )


def _check_allocation(acks: Sequence[PushAck]) -> None:
    if _all_fresh(acks):
        return
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


#: Frozensets, so :func:`~wire.schema.expect_object` and the fast path below
#: never build one per element.
_PULLED_MEMBERS = frozenset(("server_seq", "id", "server_received_at", "envelope"))
_ENVELOPE_MEMBERS = frozenset(("v", "cipher", "key_id", "blob"))
_U32_MAX = 2**32 - 1


class _PageScalars:
    """Scalars one page repeats, each judged once (a page of 1,000 messages
    usually holds one ``server_received_at`` per pushed batch, one cipher and
    one ``key_id``): every value here passed its own check, so an equal
    string passes it again — the verdict is a pure function of the text."""

    __slots__ = ("ciphers", "key_ids", "received")

    def __init__(self) -> None:
        self.received: set[str] = set()
        self.ciphers: set[str] = set()
        self.key_ids: set[str] = set()


def _fast_pulled(item: Any, max_blob_bytes: int, seen: _PageScalars) -> PulledMessage | None:
    """``PulledMessage.from_obj(item)`` when every one of its rules plainly
    holds, else ``None`` (never an error: the caller then runs ``from_obj``,
    which raises exactly what it always raised, in its order of checks).

    Accepts only what ``from_obj`` accepts: an object holding the four
    members; a sequence of 1..18 ASCII digits without a leading zero (so
    canonical, at least 1 and below 2^63; longer ones take the full path);
    the same UUIDv4, timestamp, cipher and key_id checks (a repeated value
    judged once, see :class:`_PageScalars`); a closed envelope object with an
    integer ``v`` in 0..2^32−1 and a blob :func:`~wire.envelope.decode_blob`
    accepts (:func:`_canonical_blob`). It builds the very values ``from_obj``
    builds.
    """
    if type(item) is not dict or not item.keys() >= _PULLED_MEMBERS:
        return None
    text = item["server_seq"]
    received = item["server_received_at"]
    env = item["envelope"]
    if (
        type(text) is not str
        or not 0 < len(text) <= 18
        or not text.isascii()
        or not text.isdigit()
        or text[0] == "0"
        or type(received) is not str
        or type(env) is not dict
        or env.keys() != _ENVELOPE_MEMBERS
    ):
        return None
    v, cipher, key_id, blob = env["v"], env["cipher"], env["key_id"], env["blob"]
    if (
        type(v) is not int
        or not 0 <= v <= _U32_MAX
        or type(cipher) is not str
        or not (key_id is None or type(key_id) is str)
        or type(blob) is not str
    ):
        return None
    try:
        message_id = check_uuid4(item["id"], "id")
        if received not in seen.received:
            seen.received.add(check_timestamp(received, "server_received_at"))
        if cipher not in seen.ciphers:
            seen.ciphers.add(check_cipher(cipher, "cipher"))
        if key_id is not None and key_id not in seen.key_ids:
            check_key_id(key_id, "key_id")
            seen.key_ids.add(key_id)
    except SchemaError:
        return None
    data = _canonical_blob(blob, max_blob_bytes)
    if data is None:
        return None
    return PulledMessage(int(text), message_id, received, Envelope(v, cipher, key_id, blob, data))


def _canonical_blob(text: str, max_blob_bytes: int) -> bytes | None:
    """``decode_blob(text, "blob", max_blob_bytes)`` when it accepts, else
    ``None`` — in two C calls instead of its rule-by-rule checks.

    Canonical padded base64 (v1.md "Message representation") gives each
    byte string exactly one text, the one the encoder writes: so a text the
    strict decoder reads whose bytes re-encode to that very text has the
    right length, padding and zero unused bits, which is all
    :func:`~wire.envelope.decode_blob` checks besides the alphabet (the
    strict decoder's) and the size bounds (checked here, the text's before
    any decoding, as there). Whatever fails goes to ``from_obj``, which
    names the rule.
    """
    limit = min(max_blob_bytes, MAX_BLOB_BYTES)
    if not text or len(text) > 4 * ((limit + 2) // 3) or not text.isascii():
        return None
    raw = text.encode("ascii")
    try:
        data = binascii.a2b_base64(raw, strict_mode=True)
    except binascii.Error:
        return None
    if len(data) > limit or binascii.b2a_base64(data, newline=False) != raw:
        return None
    return data


#: A pulled element's and its envelope's members, read in one call each.
_PULLED_GETTER = itemgetter("server_seq", "id", "server_received_at", "envelope")
_ENVELOPE_GETTER = itemgetter("v", "cipher", "key_id", "blob")


def _pulled_by_column(
    items: Sequence[Any], max_blob_bytes: int
) -> tuple[PulledMessage, ...] | None:
    """A page's elements when every one passes every rule of
    :meth:`PulledMessage.from_obj`, judged column by column at C speed;
    ``None`` when any might not (the caller then goes element by element,
    which names the first refusal).

    The rules are the per-element parse's (v1.md "GET
    /v1/messages?after=<team_seq>"): an object holding the four members
    (others allowed); a sequence :func:`parse_seq`
    accepts that is at least 1 (the column matched as one text, one per
    line — a line count equal to the number of elements proves no sequence
    held a line break — and the 64-bit bound checked on the integers); an
    ``id`` :func:`check_uuid4` accepts; each distinct receipt time, cipher
    and ``key_id`` through its own check once (the verdict is a function
    of the text); an envelope object of exactly its four members, ``v`` an
    ``int`` in 0..2^32−1, a string or null ``key_id``, and a blob
    :func:`_canonical_blob` accepts. It builds the very values ``from_obj``
    builds.
    """
    if not items or set(map(type, items)) != {dict}:
        return None
    try:
        seqs, ids, received, envelopes = zip(*map(_PULLED_GETTER, items), strict=True)
        if set(map(type, envelopes)) != {dict} or set(map(len, envelopes)) != {4}:
            return None
        vs, ciphers, key_ids, blobs = zip(*map(_ENVELOPE_GETTER, envelopes), strict=True)
    except KeyError:
        return None
    if (
        {*map(type, seqs), *map(type, ids), *map(type, received), *map(type, ciphers)} != {str}
        or set(map(type, blobs)) != {str}
        or set(map(type, vs)) != {int}
        or not {*map(type, key_ids)} <= {str, type(None)}
        or min(vs) < 0
        or max(vs) > _U32_MAX
    ):
        return None
    numbers = _column_seqs(seqs)
    if numbers is None or not _all_uuid4(ids):
        return None
    try:
        for text in set(received):
            check_timestamp(text, "server_received_at")
        for cipher in set(ciphers):
            check_cipher(cipher, "cipher")
        for key_id in set(key_ids) - {None}:
            check_key_id(key_id, "key_id")
    except SchemaError:
        return None
    checked = list(map(_canonical_blob, blobs, repeat(max_blob_bytes)))
    data = [blob for blob in checked if blob is not None]
    if len(data) != len(checked):
        return None
    return tuple(
        map(PulledMessage, numbers, ids, received, map(Envelope, vs, ciphers, key_ids, blobs, data))
    )


def _parse_pulled(items: Sequence[Any], at: str, max_blob_bytes: int) -> tuple[PulledMessage, ...]:
    """Every element of a page's ``messages`` as :meth:`PulledMessage.from_obj`
    parses it — by whole columns when every element passes
    (:func:`_pulled_by_column`), else one by one: through
    :func:`_fast_pulled` when it accepts, else through ``from_obj`` under
    the element's own path (``at[index]``), which is where any error is
    raised."""
    whole = _pulled_by_column(items, max_blob_bytes)
    if whole is not None:
        return whole
    seen = _PageScalars()
    parsed = []
    for index, item in enumerate(items):
        message = _fast_pulled(item, max_blob_bytes, seen)
        if message is None:
            message = PulledMessage.from_obj(item, join_field(at, index), max_blob_bytes)
        parsed.append(message)
    return tuple(parsed)


def _plainly_ordered(messages: Sequence[PulledMessage], floor: int) -> bool:
    """The page rules of :meth:`MessagePage.validate`'s loop, checked for the
    whole page at C speed: sequences above ``floor`` ascending by exactly
    one, ids distinct. ``False`` only sends the page through the loop."""
    if not messages:
        return True
    first = messages[0].server_seq
    seqs = [m.server_seq for m in messages]
    return (
        first > floor
        and seqs == list(range(first, first + len(seqs)))
        and len({m.id for m in messages}) == len(messages)
    )


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
        # When the cheap whole-page check passes, the loop below would find
        # nothing; when it fails, the loop names the first offending message.
        ordered = not elements and _plainly_ordered(self.messages, floor)
        ids: set[str] = set()
        for index, message in enumerate(() if ordered else self.messages):
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
        messages = _parse_pulled(items, at, max_blob_bytes)
        next_after = parse_seq(obj["next_after"], join_field(field, "next_after"))
        has_more = expect_bool(obj["has_more"], join_field(field, "has_more"))
        return cls(binding, messages, next_after, has_more).validate(field, elements=False)
