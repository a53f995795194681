"""Strict request schemas → storage records (v1.md, one function per request).

The shapes are owned by :mod:`wire.http_v1` (closed objects, canonical
scalars, bounds); this module maps its typed values onto storage records,
adds the one rule the relay enforces on top (``key_id`` discipline of the
ciphers it recognizes), and turns every :class:`wire.errors.WireError` into
``400 invalid-request`` naming the offending field — never its value.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from relay.errors import InvalidRequest
from relay.storage.records import IncomingMessage, ReadKey, ReadStateRequest, ReadUpdate
from wire.errors import WireError
from wire.http_v1.messages import MessageBatch, MessagesQuery
from wire.http_v1.pairing import PairingRequest
from wire.http_v1.read_state import ItemKind
from wire.http_v1.read_state import ReadStateRequest as WireReadStateRequest
from wire.schema import join_field

#: Ciphers whose key_id discipline the relay knows: ``none`` carries none
#: (v1.md "Message representation"), ``age-v1`` always names an epoch.
_KEYLESS_CIPHERS = frozenset({"none"})
_KEYED_CIPHERS = frozenset({"age-v1"})


def _invalid(exc: WireError) -> InvalidRequest:
    return InvalidRequest(exc.rule, details={"field": exc.field})


def parse_message_batch(value: Any) -> tuple[IncomingMessage, ...]:
    """``{"messages": [{"id", "envelope"}, …]}`` with 1..1000 elements."""
    try:
        batch = MessageBatch.from_obj(value)
    except WireError as exc:
        raise _invalid(exc) from None
    parsed: list[IncomingMessage] = []
    for index, message in enumerate(batch.messages):
        envelope = message.envelope
        if envelope.cipher in _KEYLESS_CIPHERS and envelope.key_id is not None:
            raise _key_id_error(index, "key_id must be null for cipher none")
        if envelope.cipher in _KEYED_CIPHERS and envelope.key_id is None:
            raise _key_id_error(index, "key_id is required for an encrypted cipher")
        parsed.append(IncomingMessage(message.id, envelope, envelope.digest()))
    return tuple(parsed)


def _key_id_error(index: int, rule: str) -> InvalidRequest:
    field = join_field(join_field(join_field("request.messages", index), "envelope"), "key_id")
    return InvalidRequest(rule, details={"field": field})


def parse_messages_query(pairs: Iterable[tuple[str, str]]) -> tuple[int, int]:
    """``after`` (required) and ``limit`` (default 100) of ``GET /v1/messages``."""
    try:
        query = MessagesQuery.from_params(pairs)
    except WireError as exc:
        raise _invalid(exc) from None
    return query.after, query.effective_limit


def parse_read_state_request(value: Any) -> ReadStateRequest:
    """``{"updates", "page_after", "page_limit"}`` (read-state spec "HTTP operation")."""
    try:
        request = WireReadStateRequest.from_obj(value)
    except WireError as exc:
        raise _invalid(exc) from None
    after = request.page_after
    key = None
    if after is not None:
        exact = after.kind is ItemKind.EXACT
        key = ReadKey(after.member_id, 1 if exact else 0, after.wire_id or "")
    updates = tuple(
        ReadUpdate(u.member_id, u.server_seq, u.exact_wire_ids) for u in request.updates
    )
    return ReadStateRequest(updates, key, request.page_limit)


def parse_pairing_exchange(value: Any) -> str:
    """``{"token": …}``: the token is the only member; its value is never echoed."""
    try:
        return PairingRequest.from_obj(value).token
    except WireError as exc:
        raise _invalid(exc) from None
