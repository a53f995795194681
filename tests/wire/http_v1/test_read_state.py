"""Read-state requests, pages and walks (read-state-synchronization.md "HTTP operation")."""

from __future__ import annotations

from typing import Any

import pytest

from tests.wire.http_v1 import samples
from tests.wire.http_v1.helpers import field_of
from wire.errors import WireError
from wire.http_v1 import (
    ExactItem,
    FrontierItem,
    ItemKind,
    PageKey,
    ReadStatePage,
    ReadStateRequest,
    ReadStateWalk,
)


def uuid4(n: int) -> str:
    return f"6f1c2d3e-4a5b-4c6d-8e7f-{n:012x}"


def uuid7(n: int) -> str:
    return f"0190a1b2-c3d4-7e5f-8a6b-{n:012x}"


# --- request -------------------------------------------------------------------


def test_spec_shaped_request_is_accepted_and_round_trips() -> None:
    doc = samples.read_request()
    request = ReadStateRequest.from_obj(doc)
    assert request.updates[0].exact_wire_ids == (samples.WIRE_1,)
    assert request.to_obj() == doc


def test_empty_updates_is_the_read_only_form() -> None:
    request = ReadStateRequest.from_obj({"updates": [], "page_after": None, "page_limit": 1})
    assert request.is_read_only


def test_request_unknown_member_is_rejected() -> None:
    doc = samples.read_request()
    doc["updates"][0]["name"] = "planner"
    assert field_of(ReadStateRequest.from_obj, doc) == "request.updates[0].name"


def test_request_requires_exact_wire_ids() -> None:
    doc = samples.read_request()
    del doc["updates"][0]["exact_wire_ids"]
    assert field_of(ReadStateRequest.from_obj, doc) == "request.updates[0].exact_wire_ids"


def test_duplicate_member_in_request_is_rejected() -> None:
    doc = samples.read_request()
    doc["updates"].append(dict(doc["updates"][0], exact_wire_ids=[]))
    assert field_of(ReadStateRequest.from_obj, doc) == "request.updates[1].member_id"


def test_duplicate_exact_id_within_a_member_is_rejected() -> None:
    doc = samples.read_request()
    doc["updates"][0]["exact_wire_ids"] = [samples.WIRE_1, samples.WIRE_1]
    assert field_of(ReadStateRequest.from_obj, doc) == "request.updates[0].exact_wire_ids"


def test_same_exact_id_for_two_members_is_allowed() -> None:
    doc = samples.read_request()
    doc["updates"].append(
        {"member_id": samples.MEMBER_B, "server_seq": "1", "exact_wire_ids": [samples.WIRE_1]}
    )
    assert len(ReadStateRequest.from_obj(doc).updates) == 2


def test_more_than_1000_exact_ids_in_total_is_rejected() -> None:
    doc = samples.read_request()
    doc["updates"] = [
        {
            "member_id": uuid7(m),
            "server_seq": "0",
            "exact_wire_ids": [uuid4(m * 1000 + i) for i in range(501)],
        }
        for m in range(2)
    ]
    assert field_of(ReadStateRequest.from_obj, doc) == "request.updates"


def test_more_than_1000_members_is_rejected() -> None:
    doc = samples.read_request()
    doc["updates"] = [
        {"member_id": uuid7(m), "server_seq": "0", "exact_wire_ids": []} for m in range(1001)
    ]
    assert field_of(ReadStateRequest.from_obj, doc) == "request.updates"


@pytest.mark.parametrize("limit", [0, 1001, "10", True, 1.5])
def test_page_limit_must_be_an_integer_1_to_1000(limit: Any) -> None:
    doc = samples.read_request()
    doc["page_limit"] = limit
    assert field_of(ReadStateRequest.from_obj, doc) == "request.page_limit"


def test_page_after_accepts_both_key_shapes() -> None:
    for key in (
        {"member_id": samples.MEMBER_A, "kind": "frontier"},
        {"member_id": samples.MEMBER_A, "kind": "exact", "wire_id": samples.WIRE_1},
    ):
        doc = samples.read_request()
        doc["page_after"] = key
        assert ReadStateRequest.from_obj(doc).to_obj()["page_after"] == key


def test_frontier_key_with_wire_id_is_rejected() -> None:
    doc = samples.read_request()
    doc["page_after"] = {
        "member_id": samples.MEMBER_A,
        "kind": "frontier",
        "wire_id": samples.WIRE_1,
    }
    assert field_of(ReadStateRequest.from_obj, doc) == "request.page_after.wire_id"


def test_exact_key_without_wire_id_is_rejected() -> None:
    doc = samples.read_request()
    doc["page_after"] = {"member_id": samples.MEMBER_A, "kind": "exact"}
    assert field_of(ReadStateRequest.from_obj, doc) == "request.page_after.wire_id"


def test_unknown_key_kind_is_rejected() -> None:
    doc = samples.read_request()
    doc["page_after"] = {"member_id": samples.MEMBER_A, "kind": "cursor"}
    assert field_of(ReadStateRequest.from_obj, doc) == "request.page_after.kind"


# --- page ----------------------------------------------------------------------


def test_spec_shaped_page_is_accepted_and_round_trips() -> None:
    doc = samples.read_page(has_more=True)
    page = ReadStatePage.from_obj(doc)
    assert page.next_page_after == PageKey(samples.MEMBER_B, ItemKind.FRONTIER)
    assert page.to_obj() == doc


def test_frontier_sorts_before_exact_of_the_same_member() -> None:
    doc = samples.read_page(
        samples.exact(samples.MEMBER_A, samples.WIRE_1), samples.frontier(samples.MEMBER_A, "42")
    )
    assert field_of(ReadStatePage.from_obj, doc) == "page.items[1]"


def test_exact_items_sort_by_wire_id() -> None:
    doc = samples.read_page(
        samples.frontier(samples.MEMBER_A, "42"),
        samples.exact(samples.MEMBER_A, samples.WIRE_2),
        samples.exact(samples.MEMBER_A, samples.WIRE_1),
    )
    assert field_of(ReadStatePage.from_obj, doc) == "page.items[2]"


def test_members_sort_by_member_id() -> None:
    doc = samples.read_page(
        samples.frontier(samples.MEMBER_B, "1"), samples.frontier(samples.MEMBER_A, "1")
    )
    assert field_of(ReadStatePage.from_obj, doc) == "page.items[1]"


def test_two_frontiers_for_one_member_in_a_page_are_rejected() -> None:
    doc = samples.read_page(
        samples.frontier(samples.MEMBER_A, "1"), samples.frontier(samples.MEMBER_A, "2")
    )
    assert field_of(ReadStatePage.from_obj, doc) == "page.items[1]"


def test_frontier_below_the_floor_is_rejected() -> None:
    doc = samples.read_page()
    doc["min_available_seq"] = "1"
    assert field_of(ReadStatePage.from_obj, doc) == "page.items[2].server_seq"


def test_frontier_beyond_current_seq_is_rejected() -> None:
    doc = samples.read_page(samples.frontier(samples.MEMBER_A, "53"))
    assert field_of(ReadStatePage.from_obj, doc) == "page.items[0].server_seq"


def test_next_page_after_null_exactly_when_no_more() -> None:
    doc = samples.read_page()
    doc["next_page_after"] = {"member_id": samples.MEMBER_B, "kind": "frontier"}
    assert field_of(ReadStatePage.from_obj, doc) == "page.next_page_after"
    doc = samples.read_page(has_more=True)
    doc["next_page_after"] = None
    assert field_of(ReadStatePage.from_obj, doc) == "page.next_page_after"


def test_next_page_after_must_be_the_last_item_key() -> None:
    doc = samples.read_page(has_more=True)
    doc["next_page_after"] = {"member_id": samples.MEMBER_A, "kind": "frontier"}
    assert field_of(ReadStatePage.from_obj, doc) == "page.next_page_after"


def test_page_with_more_cannot_be_empty() -> None:
    doc = samples.read_page()
    doc["items"] = []
    doc["has_more"] = True
    doc["next_page_after"] = {"member_id": samples.MEMBER_A, "kind": "frontier"}
    assert field_of(ReadStatePage.from_obj, doc) == "page.has_more"


def test_page_longer_than_page_limit_is_rejected() -> None:
    page = ReadStatePage.from_obj(samples.read_page())
    request = ReadStateRequest(page_limit=2)
    assert field_of(page.check_matches, request) == "page.items"


def test_page_items_must_sort_after_page_after() -> None:
    page = ReadStatePage.from_obj(samples.read_page())
    request = ReadStateRequest(page_after=PageKey(samples.MEMBER_A, ItemKind.FRONTIER))
    assert field_of(page.check_matches, request) == "page.items[0]"


def test_unknown_item_kind_is_rejected() -> None:
    doc = samples.read_page({"kind": "hole", "member_id": samples.MEMBER_A})
    assert field_of(ReadStatePage.from_obj, doc) == "page.items[0].kind"


# --- walk ----------------------------------------------------------------------


def page_of(items: list[Any], has_more: bool) -> ReadStatePage:
    base = ReadStatePage.from_obj(samples.read_page())
    cursor = items[-1].key if has_more else None
    return ReadStatePage(base.binding, base.current_seq, tuple(items), cursor, has_more).validate()


def test_walk_accepts_a_frontier_then_its_exacts_across_pages() -> None:
    walk = ReadStateWalk()
    first = page_of([FrontierItem(samples.MEMBER_A, 42)], has_more=True)
    walk.accept(ReadStateRequest(), first)
    second = page_of([ExactItem(samples.MEMBER_A, samples.WIRE_1)], has_more=False)
    walk.accept(ReadStateRequest(page_after=first.next_page_after), second)
    assert walk.complete
    assert walk.exact_per_member == {samples.MEMBER_A: 1}


def test_walk_requires_continuing_from_the_previous_cursor() -> None:
    walk = ReadStateWalk()
    first = page_of([FrontierItem(samples.MEMBER_A, 42)], has_more=True)
    walk.accept(ReadStateRequest(), first)
    second = page_of([FrontierItem(samples.MEMBER_B, 0)], has_more=False)
    assert field_of(walk.accept, ReadStateRequest(), second) == "request.page_after"


def test_walk_rejects_exact_before_its_frontier() -> None:
    walk = ReadStateWalk()
    page = page_of([ExactItem(samples.MEMBER_A, samples.WIRE_1)], has_more=False)
    assert field_of(walk.accept, ReadStateRequest(), page) == "page.items[0]"
    assert walk.frontier_members == set() and not walk.complete


def test_walk_rejects_pages_after_completion() -> None:
    walk = ReadStateWalk()
    walk.accept(ReadStateRequest(), page_of([FrontierItem(samples.MEMBER_A, 1)], has_more=False))
    assert field_of(walk.accept, ReadStateRequest(), page_of([], has_more=False)) == "page"


def test_walk_rejects_more_than_4096_exact_reads_for_one_member() -> None:
    walk = ReadStateWalk()
    request = ReadStateRequest()
    items: list[Any] = [FrontierItem(samples.MEMBER_A, 1)] + [
        ExactItem(samples.MEMBER_A, uuid4(i)) for i in range(999)
    ]
    last_error = None
    for chunk in range(5):
        page = page_of(items, has_more=True)
        try:
            walk.accept(request, page)
        except WireError as exc:
            last_error = exc
            break
        request = ReadStateRequest(page_after=page.next_page_after)
        items = [ExactItem(samples.MEMBER_A, uuid4(1000 * (chunk + 1) + i)) for i in range(1000)]
    assert last_error is not None
    assert "4096" in last_error.rule
    assert walk.exact_per_member[samples.MEMBER_A] == 3999


def test_walk_refuses_a_second_stream() -> None:
    walk = ReadStateWalk()
    first = page_of([FrontierItem(samples.MEMBER_A, 42)], has_more=True)
    walk.accept(ReadStateRequest(), first)
    doc = samples.read_page(samples.frontier(samples.MEMBER_B, "0"))
    doc["team_id"] = samples.OTHER_TEAM
    other = ReadStatePage.from_obj(doc)
    assert (
        field_of(walk.accept, ReadStateRequest(page_after=first.next_page_after), other)
        == "page.team_id"
    )


def test_walk_rejects_more_than_65536_exact_reads_for_the_team() -> None:
    stream: list[Any] = []
    for member in range(17):
        stream.append(FrontierItem(uuid7(member), 1))
        stream += [ExactItem(uuid7(member), uuid4(i)) for i in range(4096 if member < 16 else 1)]
    walk = ReadStateWalk()
    request = ReadStateRequest()
    refused = None
    for start in range(0, len(stream), 1000):
        chunk = stream[start : start + 1000]
        page = page_of(chunk, has_more=start + 1000 < len(stream))
        try:
            walk.accept(request, page)
        except WireError as exc:
            refused = exc
            break
        request = ReadStateRequest(page_after=page.next_page_after)
    assert refused is not None and "65536" in refused.rule
    assert walk.exact_total <= 65536
