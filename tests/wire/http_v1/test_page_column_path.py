"""A page's elements judged by whole columns give what the element parse gives.

``_pulled_by_column`` accepts a page's ``messages`` only when every element
passes every rule of ``PulledMessage.from_obj`` (issue #17). Whatever the
elements hold, its answer is either ``None`` (the page goes element by
element) or exactly the elements ``from_obj`` parses; an ordinary page is
taken whole, so the column path is really used.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.wire.http_v1 import samples
from tests.wire.http_v1.json_values import json_values, mutate
from tests.wire.http_v1.page_cases import CASES, W3, W4, four, with_element
from wire.errors import WireError
from wire.http_v1.messages import PulledMessage, _pulled_by_column
from wire.limits import MAX_BLOB_BYTES


def elements(items: Any) -> tuple[str, Any]:
    """The strict verdict: every element through ``from_obj``."""
    try:
        return "elements", tuple(
            PulledMessage.from_obj(item, f"messages[{index}]") for index, item in enumerate(items)
        )
    except WireError as exc:
        return type(exc).__name__, str(exc)


def assert_never_beyond_strict(items: Any, max_blob_bytes: int = MAX_BLOB_BYTES) -> None:
    whole = _pulled_by_column(copy.deepcopy(items), max_blob_bytes)
    if whole is not None:
        assert ("elements", whole) == elements(items)


def test_an_ordinary_page_is_taken_whole() -> None:
    items = four()["messages"]
    assert ("elements", _pulled_by_column(copy.deepcopy(items), MAX_BLOB_BYTES)) == elements(items)


@pytest.mark.parametrize("doc", CASES)
def test_each_element_case_is_decided_as_the_element_parse(doc: dict[str, Any]) -> None:
    assert_never_beyond_strict(doc["messages"])


@pytest.mark.parametrize(
    "seq",
    ["41\n42", "\n41", "41\n", "041", "9223372036854775807", "9223372036854775808", "1" * 20],
)
def test_a_sequence_column_cannot_be_fooled_by_line_breaks_or_bounds(seq: str) -> None:
    items = [samples.pulled(seq, samples.WIRE_1), samples.pulled("43", W3)]
    assert_never_beyond_strict(items)
    if elements(items)[0] != "elements":
        assert _pulled_by_column(items, MAX_BLOB_BYTES) is None


def test_an_id_column_cannot_be_fooled_by_line_breaks() -> None:
    items = [samples.pulled("41", f"{samples.WIRE_1}\n{W4}"), samples.pulled("42", W3)]
    assert _pulled_by_column(items, MAX_BLOB_BYTES) is None


def test_a_blob_over_the_teams_limit_leaves_the_page_to_the_element_parse() -> None:
    items = four()["messages"]
    size = len(PulledMessage.from_obj(items[0], "m").envelope.blob_bytes())
    assert _pulled_by_column(copy.deepcopy(items), size) is not None
    assert _pulled_by_column(copy.deepcopy(items), size - 1) is None


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_mutated_pages_are_never_accepted_beyond_the_element_parse(data: st.DataObject) -> None:
    doc = mutate(four(), data)
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        assert_never_beyond_strict(doc["messages"])


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 3),
    st.sampled_from(["server_seq", "id", "server_received_at", "v", "cipher", "key_id", "blob"]),
    json_values,
)
def test_any_member_value_is_never_accepted_beyond_the_element_parse(
    index: int, member: str, value: Any
) -> None:
    envelope = member in ("v", "cipher", "key_id", "blob")
    assert_never_beyond_strict(with_element(index, member, value, envelope=envelope)["messages"])
