"""Roster and read-state elements are checked under relative field names and
the dotted path is built only on failure (specs/http-v1.md "Body encoding"):
every refusal still names the full path of the member that broke the rule,
on the parsing path and on the built-in-code (``validate``) path alike."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.wire.http_v1 import samples
from wire.errors import WireError
from wire.http_v1 import MembersDocument
from wire.http_v1.read_state import ExactItem, FrontierItem, ReadStatePage


def field_of(check: object, *args: object) -> str:
    with pytest.raises(WireError) as caught:
        check(*args)  # type: ignore[operator]
    return caught.value.field


def test_a_frontier_with_a_broken_member_id_is_named_under_its_item() -> None:
    doc = samples.read_page(samples.frontier(samples.MEMBER_A, "1"), samples.frontier("x", "1"))
    assert field_of(ReadStatePage.from_obj, doc) == "page.items[1].member_id"


def test_a_frontier_with_a_non_canonical_sequence_is_named_under_its_item() -> None:
    doc = samples.read_page(samples.frontier(samples.MEMBER_A, "01"))
    assert field_of(ReadStatePage.from_obj, doc) == "page.items[0].server_seq"


def test_an_exact_item_with_a_broken_wire_id_is_named_under_its_item() -> None:
    doc = samples.read_page(
        samples.frontier(samples.MEMBER_A, "1"), samples.exact(samples.MEMBER_A, "y")
    )
    assert field_of(ReadStatePage.from_obj, doc) == "page.items[1].wire_id"


def test_an_item_missing_its_kinds_member_is_named_under_its_item() -> None:
    doc = samples.read_page({"kind": "exact", "member_id": samples.MEMBER_A})
    assert field_of(ReadStatePage.from_obj, doc) == "page.items[0].wire_id"


def test_an_item_that_is_not_an_object_is_named_by_its_index() -> None:
    doc = samples.read_page(samples.frontier(samples.MEMBER_A, "1"))
    doc["items"].append(["frontier"])
    assert field_of(ReadStatePage.from_obj, doc) == "page.items[1]"


def test_a_page_built_in_code_is_checked_deep_under_the_same_paths() -> None:
    page = ReadStatePage.from_obj(samples.read_page())
    broken = replace(page, items=(FrontierItem(samples.MEMBER_A, 1), ExactItem("z", "w")))
    assert field_of(broken.validate) == "page.items[1].member_id"


def test_a_roster_built_in_code_is_checked_deep_under_the_same_paths() -> None:
    roster = MembersDocument.from_obj(samples.members())
    first = roster.members[0]
    registration = replace(first.registrations[1], type="")
    bad = replace(first, registrations=(first.registrations[0], registration))
    broken = replace(roster, members=(bad, *roster.members[1:]))
    assert field_of(broken.validate) == "members.members[0].registrations[1].type"
