"""Strict request-body schemas → storage records (v1.md, one function per body).

Unknown members, wrong types and non-canonical scalars are all
``400 invalid-request`` naming the offending field (never its value). Shape
checks and scalar grammar come from :mod:`wire`; these functions only add the
endpoint-specific rules. Candidates to move into ``wire.http_v1`` once it has
request parsers (listed in the relay report).
"""

from __future__ import annotations

from typing import Any

from relay.errors import InvalidRequest
from relay.limits import (
    MAX_BATCH,
    MAX_READ_EXACT_IDS,
    MAX_READ_PAGE_LIMIT,
    MAX_READ_UPDATE_MEMBERS,
)
from relay.storage.records import IncomingMessage, ReadKey, ReadStateRequest, ReadUpdate
from wire.envelope import Envelope
from wire.errors import WireError
from wire.http_v1.headers import check_opaque_secret
from wire.scalars import check_uuid4, check_uuid7, parse_seq
from wire.schema import expect_int, expect_list, expect_object, join_field

#: Ciphers whose key_id discipline the relay knows: ``none`` carries none,
#: ``age-v1`` always names an epoch (v1.md "Message representation").
_KEYLESS_CIPHERS = frozenset({"none"})
_KEYED_CIPHERS = frozenset({"age-v1"})


def _invalid(exc: WireError) -> InvalidRequest:
    return InvalidRequest(exc.rule, details={"field": exc.field})


def parse_message_batch(value: Any) -> tuple[IncomingMessage, ...]:
    """``{"messages": [{"id", "envelope"}, …]}`` with 1..1000 elements."""
    try:
        obj = expect_object(value, "", ["messages"])
        items = expect_list(obj["messages"], "messages", min_items=1, max_items=MAX_BATCH)
        batch: list[IncomingMessage] = []
        for index, item in enumerate(items):
            where = join_field("messages", index)
            element = expect_object(item, where, ["id", "envelope"])
            wire_id = check_uuid4(element["id"], join_field(where, "id"))
            envelope = Envelope.from_obj(element["envelope"], join_field(where, "envelope"))
            key_field = join_field(join_field(where, "envelope"), "key_id")
            if envelope.cipher in _KEYLESS_CIPHERS and envelope.key_id is not None:
                raise InvalidRequest(
                    "key_id must be null for cipher none", details={"field": key_field}
                )
            if envelope.cipher in _KEYED_CIPHERS and envelope.key_id is None:
                raise InvalidRequest(
                    "key_id is required for an encrypted cipher", details={"field": key_field}
                )
            batch.append(IncomingMessage(wire_id, envelope, envelope.digest()))
    except WireError as exc:
        raise _invalid(exc) from None
    return tuple(batch)


def parse_read_state_request(value: Any) -> ReadStateRequest:
    """``{"updates", "page_after", "page_limit"}`` (read-state spec "HTTP operation")."""
    try:
        obj = expect_object(value, "", ["updates", "page_after", "page_limit"])
        raw_updates = expect_list(obj["updates"], "updates", max_items=MAX_READ_UPDATE_MEMBERS)
        updates: list[ReadUpdate] = []
        members: set[str] = set()
        exact_total = 0
        for index, item in enumerate(raw_updates):
            where = join_field("updates", index)
            update = expect_object(item, where, ["member_id", "server_seq", "exact_wire_ids"])
            member_id = check_uuid7(update["member_id"], join_field(where, "member_id"))
            if member_id in members:
                raise InvalidRequest(
                    "member appears twice in updates",
                    details={"field": join_field(where, "member_id")},
                )
            members.add(member_id)
            seq = parse_seq(update["server_seq"], join_field(where, "server_seq"))
            ids_field = join_field(where, "exact_wire_ids")
            raw_ids = expect_list(update["exact_wire_ids"], ids_field, max_items=MAX_READ_EXACT_IDS)
            wire_ids = tuple(
                check_uuid4(w, join_field(ids_field, i)) for i, w in enumerate(raw_ids)
            )
            if len(set(wire_ids)) != len(wire_ids):
                raise InvalidRequest(
                    "wire id repeated for one member", details={"field": ids_field}
                )
            exact_total += len(wire_ids)
            if exact_total > MAX_READ_EXACT_IDS:
                raise InvalidRequest(
                    f"a request carries at most {MAX_READ_EXACT_IDS} exact wire ids",
                    details={"field": ids_field},
                )
            updates.append(ReadUpdate(member_id, seq, wire_ids))
        page_after = _parse_read_key(obj["page_after"])
        page_limit = expect_int(
            obj["page_limit"], "page_limit", minimum=1, maximum=MAX_READ_PAGE_LIMIT
        )
    except WireError as exc:
        raise _invalid(exc) from None
    return ReadStateRequest(tuple(updates), page_after, page_limit)


def _parse_read_key(value: Any) -> ReadKey | None:
    if value is None:
        return None
    probe = expect_object(value, "page_after", ["member_id", "kind"], ["wire_id"])
    kind = probe["kind"]
    if kind == "frontier":
        key = expect_object(value, "page_after", ["member_id", "kind"])
        return ReadKey(check_uuid7(key["member_id"], "page_after.member_id"), 0)
    if kind == "exact":
        key = expect_object(value, "page_after", ["member_id", "kind", "wire_id"])
        return ReadKey(
            check_uuid7(key["member_id"], "page_after.member_id"),
            1,
            check_uuid4(key["wire_id"], "page_after.wire_id"),
        )
    raise InvalidRequest(
        "page_after.kind must be frontier or exact", details={"field": "page_after.kind"}
    )


def parse_pairing_exchange(value: Any) -> str:
    """``{"token": …}``: the token is the only member; its value is never echoed."""
    try:
        obj = expect_object(value, "", ["token"])
        return check_opaque_secret(obj["token"], "token")
    except WireError as exc:
        raise _invalid(exc) from None
