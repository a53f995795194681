"""The page parser's fast path decides exactly what the strict path decides.

``MessagePage.from_obj`` parses each element through a fast path that
accepts only what ``PulledMessage.from_obj`` accepts and judges a page's
repeated scalars once (issue #17, "Pull at the relay's pace"); everything
else goes through ``from_obj``. These tests hold the result — the page, or
the error's type, field and rule — equal to the strict reference: every
element through ``PulledMessage.from_obj``, then every page rule checked
per message (``validate(elements=True)``).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.wire.http_v1.json_values import json_values, mutate
from tests.wire.http_v1.page_cases import CASES, four, with_element
from wire.errors import WireError
from wire.http_v1.binding import BINDING_MEMBERS, ResponseBinding
from wire.http_v1.messages import MessagePage, PulledMessage
from wire.limits import MAX_PAGE_LIMIT
from wire.scalars import parse_seq
from wire.schema import expect_bool, expect_list, expect_object, join_field


def reference(value: Any, field: str = "page") -> MessagePage:
    """The strict parse the fast path must agree with (one element at a time)."""
    members = (*BINDING_MEMBERS, "messages", "next_after", "has_more")
    obj = expect_object(value, field, members, closed=False)
    binding = ResponseBinding.from_members(obj, field)
    at = join_field(field, "messages")
    items = expect_list(obj["messages"], at, max_items=MAX_PAGE_LIMIT)
    messages = tuple(
        PulledMessage.from_obj(item, join_field(at, index)) for index, item in enumerate(items)
    )
    next_after = parse_seq(obj["next_after"], join_field(field, "next_after"))
    has_more = expect_bool(obj["has_more"], join_field(field, "has_more"))
    return MessagePage(binding, messages, next_after, has_more).validate(field, elements=True)


def verdict(parse: Any, value: Any) -> tuple[str, Any]:
    try:
        return "page", parse(value)
    except WireError as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("doc", CASES)
def test_fast_path_agrees_with_the_strict_parse(doc: dict[str, Any]) -> None:
    assert verdict(MessagePage.from_obj, copy.deepcopy(doc)) == verdict(reference, doc)


def test_element_without_the_fast_path_shape_is_parsed_the_same() -> None:
    doc = four()
    doc["messages"][1] = dict(doc["messages"][1])
    doc["messages"][2]["envelope"] = {"v": 1, "cipher": "none", "blob": "x"}
    assert verdict(MessagePage.from_obj, copy.deepcopy(doc)) == verdict(reference, doc)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_mutated_pages_get_the_strict_verdict(data: st.DataObject) -> None:
    doc = mutate(four(), data)
    assert verdict(MessagePage.from_obj, copy.deepcopy(doc)) == verdict(reference, doc)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 3), st.sampled_from(["server_seq", "id", "server_received_at"]), json_values)
def test_any_element_scalar_gets_the_strict_verdict(index: int, member: str, value: Any) -> None:
    doc = with_element(index, member, value)
    assert verdict(MessagePage.from_obj, copy.deepcopy(doc)) == verdict(reference, doc)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 3), st.sampled_from(["v", "cipher", "key_id", "blob"]), json_values)
def test_any_envelope_member_gets_the_strict_verdict(index: int, member: str, value: Any) -> None:
    doc = with_element(index, member, value, envelope=True)
    assert verdict(MessagePage.from_obj, copy.deepcopy(doc)) == verdict(reference, doc)
