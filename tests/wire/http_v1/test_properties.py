"""Builder → parser round trips and a parser fuzz (every parser: a value or a WireError)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.wire.http_v1 import samples, strategies
from tests.wire.http_v1.json_values import json_values, mutate
from wire.errors import WireError
from wire.http_v1 import (
    ERROR_CODES,
    Capabilities,
    ErrorResponse,
    Health,
    MembersDocument,
    MessageBatch,
    MessagePage,
    MessagesQuery,
    OutgoingMessage,
    PairingRequest,
    PairingResponse,
    PushResponse,
    ReadStatePage,
    ReadStateRequest,
    RevokeResponse,
    decode_response_body,
    encode_body,
)

FEW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def through_bytes(obj: dict[str, Any]) -> Any:
    return decode_response_body(encode_body(obj))


@FEW
@given(strategies.capabilities())
def test_capabilities_round_trip(caps: Capabilities) -> None:
    assert Capabilities.from_obj(through_bytes(caps.to_obj())) == caps


@FEW
@given(
    strategies.capabilities(),
    strategies.uuid7s,
    st.from_regex(r"[A-Za-z0-9_]{1,40}", fullmatch=True),
)
def test_pairing_response_round_trip(caps: Capabilities, credential_id: str, secret: str) -> None:
    pairing = PairingResponse(
        caps.binding.server_instance_id,
        caps.binding.team_id,
        caps.binding.team_name,
        credential_id,
        secret,
        capabilities=caps,
    )
    assert PairingResponse.from_obj(through_bytes(pairing.to_obj())) == pairing


@FEW
@given(strategies.bindings(), strategies.uuid7s, strategies.timestamps)
def test_revoke_response_round_trip(binding: Any, credential_id: str, when: str) -> None:
    revoke = RevokeResponse(binding, credential_id, when)
    assert RevokeResponse.from_obj(through_bytes(revoke.to_obj())) == revoke


@FEW
@given(strategies.push_exchanges(), strategies.bindings(), strategies.seqs, strategies.envelopes)
def test_push_acks_round_trip_and_match_their_batch(
    exchange: Any, binding: Any, revision: int, envelope: Any
) -> None:
    ids, acks = exchange
    batch = MessageBatch(tuple(OutgoingMessage(wire_id, envelope) for wire_id in ids))
    assert MessageBatch.from_obj(through_bytes(batch.to_obj())) == batch
    response = PushResponse(binding, revision, tuple(acks))
    parsed = PushResponse.from_obj(through_bytes(response.to_obj()))
    assert parsed == response
    parsed.check_matches(batch)


@FEW
@given(strategies.message_pages())
def test_message_page_round_trip_and_matches_query(case: Any) -> None:
    query, page = case
    parsed = MessagePage.from_obj(through_bytes(page.to_obj()))
    assert parsed == page
    parsed.check_matches(MessagesQuery.from_params(query.to_params()))


@FEW
@given(strategies.rosters())
def test_roster_round_trip(roster: MembersDocument) -> None:
    assert MembersDocument.from_obj(through_bytes(roster.to_obj())) == roster


@FEW
@given(strategies.read_requests())
def test_read_request_round_trip(request: ReadStateRequest) -> None:
    assert ReadStateRequest.from_obj(through_bytes(request.to_obj())) == request


@FEW
@given(strategies.read_pages())
def test_read_page_round_trip(page: ReadStatePage) -> None:
    assert ReadStatePage.from_obj(through_bytes(page.to_obj())) == page


# --- fuzz ------------------------------------------------------------------------


PARSERS: dict[str, tuple[Callable[[Any], object], Callable[[], Any]]] = {
    "capabilities": (Capabilities.from_obj, samples.capabilities),
    "health": (Health.from_obj, samples.health),
    "batch": (MessageBatch.from_obj, samples.batch),
    "push": (PushResponse.from_obj, samples.push_response),
    "page": (MessagePage.from_obj, samples.page),
    "members": (MembersDocument.from_obj, samples.members),
    "read_request": (ReadStateRequest.from_obj, samples.read_request),
    "read_page": (ReadStatePage.from_obj, lambda: samples.read_page(has_more=True)),
    "pairing_request": (PairingRequest.from_obj, lambda: {"token": "agmsg_pair_x"}),
    "pairing": (PairingResponse.from_obj, samples.pairing),
    "revoke": (RevokeResponse.from_obj, samples.revoke),
    "error": (
        lambda value: ErrorResponse.from_obj(value, 410),
        lambda: samples.error("resync-required", {"after": "1", "min_available_seq": "2"}),
    ),
}


def only_values_or_wire_errors(parse: Callable[[Any], object], value: Any) -> None:
    """The parser refuses with a WireError, or returns a value that builds again."""
    try:
        result = parse(value)
    except WireError:
        return
    rebuild = getattr(result, "to_obj", None) or getattr(result, "to_params", None)
    assert rebuild is not None
    rebuild()


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(PARSERS)), json_values)
def test_random_json_yields_a_value_or_a_wire_error(name: str, value: Any) -> None:
    only_values_or_wire_errors(PARSERS[name][0], value)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(PARSERS)), st.data())
def test_mutated_valid_documents_yield_a_value_or_a_wire_error(
    name: str, data: st.DataObject
) -> None:
    parse, example = PARSERS[name]
    only_values_or_wire_errors(parse, mutate(copy.deepcopy(example()), data))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["after", "limit", "x"]) | st.text(max_size=4), st.text(max_size=22)
        )
    )
)
def test_random_query_parameters_yield_a_query_or_a_wire_error(
    pairs: list[tuple[str, str]],
) -> None:
    only_values_or_wire_errors(MessagesQuery.from_params, pairs)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(ERROR_CODES)), st.integers(100, 700), json_values)
def test_random_error_details_yield_a_response_or_a_wire_error(
    code: str, status: int, details: Any
) -> None:
    doc = samples.error(code)
    doc["error"]["details"] = details
    only_values_or_wire_errors(lambda value: ErrorResponse.from_obj(value, status), doc)
