"""A push answer's column checks decide exactly what the strict path decides.

``PushResponse.from_obj`` judges a batch answer's acks by whole columns when
every element passes (``_acks_by_column``) and skips the allocation walk for
an answer stored whole (``_all_fresh``); everything else goes element by
element (issue #17, "push at the relay's pace"). These tests hold the
result — the response, or the error's type, field and rule — equal to the
strict reference: every element through ``PushAck.from_obj``, then the
allocation rule walked ack by ack (v1.md "POST /v1/messages").
"""

from __future__ import annotations

import copy
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.wire.http_v1 import samples
from tests.wire.http_v1.json_values import json_values, mutate
from wire.errors import WireError
from wire.http_v1 import messages
from wire.http_v1.binding import BINDING_MEMBERS, ResponseBinding
from wire.http_v1.messages import PushAck, PushResponse
from wire.limits import MAX_BATCH
from wire.scalars import parse_seq
from wire.schema import expect_list, expect_object, join_field

W4 = "6f1c2d3e-4a5b-4c6d-8e7f-000000000004"
WIRES = [samples.WIRE_1, samples.WIRE_2, samples.WIRE_3, W4]


def reference(value: Any, field: str = "response") -> PushResponse:
    """The strict parse: one ack at a time, then the allocation walk."""
    obj = expect_object(value, field, (*BINDING_MEMBERS, "policy_revision", "acks"), closed=False)
    binding = ResponseBinding.from_members(obj, field)
    revision = parse_seq(obj["policy_revision"], join_field(field, "policy_revision"))
    at = join_field(field, "acks")
    items = expect_list(obj["acks"], at, min_items=1, max_items=MAX_BATCH)
    acks = tuple(PushAck.from_obj(item, join_field(at, index)) for index, item in enumerate(items))
    with mock.patch.object(messages, "_all_fresh", return_value=False):
        return PushResponse(binding, revision, acks)._validate_allocation(at)


def verdict(parse: Any, value: Any) -> tuple[str, Any]:
    try:
        return "response", parse(value)
    except WireError as exc:
        return type(exc).__name__, str(exc)


def fresh(first: int = 41) -> dict[str, Any]:
    return samples.push_response(
        *(samples.ack(wire, str(first + n)) for n, wire in enumerate(WIRES))
    )


def with_ack(index: int, member: str, value: Any) -> dict[str, Any]:
    doc = fresh()
    doc["acks"][index][member] = value
    return doc


CASES = [
    fresh(),
    fresh(1),
    samples.push_response(),
    # sequences: leading zero, zero, 19 and 20 digits, beyond 2^63-1,
    # non-ASCII digits, a sign, blanks, line breaks, not a string
    with_ack(1, "server_seq", "042"),
    with_ack(0, "server_seq", "0"),
    with_ack(3, "server_seq", "9223372036854775807"),
    with_ack(3, "server_seq", "9223372036854775808"),
    with_ack(3, "server_seq", "99999999999999999999"),
    with_ack(2, "server_seq", "\u0664\u0663"),
    with_ack(2, "server_seq", "+43"),
    with_ack(2, "server_seq", " 43"),
    with_ack(2, "server_seq", "43\n44"),
    with_ack(2, "server_seq", "43\n"),
    with_ack(2, "server_seq", ""),
    with_ack(2, "server_seq", 43),
    # ids and dispositions
    with_ack(1, "id", samples.WIRE_1),
    with_ack(1, "id", samples.WIRE_2.upper()),
    with_ack(1, "id", samples.WIRE_2 + "\n"),
    with_ack(1, "id", None),
    with_ack(1, "disposition", "duplicate"),
    with_ack(1, "disposition", "Stored"),
    with_ack(1, "disposition", ["stored"]),
    with_ack(1, "extra", {"open": "acks keep unknown members"}),
    # the allocation rule: a gap, descending, a shared sequence, a repeat
    samples.push_response(samples.ack(samples.WIRE_1, "41"), samples.ack(samples.WIRE_2, "43")),
    samples.push_response(samples.ack(samples.WIRE_1, "42"), samples.ack(samples.WIRE_2, "41")),
    samples.push_response(samples.ack(samples.WIRE_1, "41"), samples.ack(samples.WIRE_1, "42")),
    samples.push_response(
        samples.ack(samples.WIRE_1, "41"), samples.ack(samples.WIRE_1, "41", "duplicate")
    ),
    samples.push_response(
        samples.ack(samples.WIRE_1, "9", "duplicate"), samples.ack(samples.WIRE_2, "10")
    ),
    samples.push_response(
        samples.ack(samples.WIRE_1, "10"), samples.ack(samples.WIRE_2, "9", "duplicate")
    ),
]


@pytest.mark.parametrize("doc", CASES)
def test_column_checks_agree_with_the_strict_parse(doc: dict[str, Any]) -> None:
    assert verdict(PushResponse.from_obj, copy.deepcopy(doc)) == verdict(reference, doc)


def test_an_ack_that_is_not_a_plain_dict_is_parsed_the_same() -> None:
    class Member(dict[str, Any]):
        pass

    doc = fresh()
    doc["acks"][2] = Member(doc["acks"][2])
    assert verdict(PushResponse.from_obj, doc) == verdict(reference, copy.deepcopy(doc))


def test_a_missing_member_is_named_as_the_strict_parse_names_it() -> None:
    doc = fresh()
    del doc["acks"][3]["disposition"]
    assert verdict(PushResponse.from_obj, copy.deepcopy(doc)) == verdict(reference, doc)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_mutated_answers_get_the_strict_verdict(data: st.DataObject) -> None:
    doc = mutate(fresh(), data)
    assert verdict(PushResponse.from_obj, copy.deepcopy(doc)) == verdict(reference, doc)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 3), st.sampled_from(["server_seq", "id", "disposition"]), json_values)
def test_any_ack_member_gets_the_strict_verdict(index: int, member: str, value: Any) -> None:
    doc = with_ack(index, member, value)
    assert verdict(PushResponse.from_obj, copy.deepcopy(doc)) == verdict(reference, doc)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(WIRES),
            st.integers(1, 12).map(str) | st.text("0123456789\n +", max_size=4),
            st.sampled_from(["stored", "duplicate"]),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_any_answer_of_plausible_acks_gets_the_strict_verdict(
    acks: list[tuple[str, str, str]],
) -> None:
    doc = samples.push_response(*(samples.ack(*ack) for ack in acks))
    assert verdict(PushResponse.from_obj, copy.deepcopy(doc)) == verdict(reference, doc)
