"""The read-state page merge (relay/storage/read_stream.py): three ordered reads
interleaved into the canonical (member_id, kind, wire_id) stream, on both backends."""

from __future__ import annotations

from typing import Any

import pytest

from relay.storage.read_stream import exact_floor, merge_page
from relay.storage.records import ReadKey
from tests.relay.app_relay import Device, Relay
from tests.relay.helpers import provision
from tests.relay.read_state_calls import post, sync, update


def _keys(items: list[dict[str, str]]) -> list[tuple[str, int, str]]:
    return [
        (i["member_id"], 0 if i["kind"] == "frontier" else 1, i.get("wire_id", "")) for i in items
    ]


@pytest.fixture
def crowded(relay: Relay) -> tuple[Device, list[dict[str, str]]]:
    """Five members: the 1st, 2nd and 4th with exact reads, the others none."""
    team = provision(relay.store, tuple(f"agent{i}" for i in range(5)))
    device = relay.pair(team)
    members = sorted(m.member_id for m in team.members)
    ids = post(relay, device, 12)
    updates = [
        update(members[0], 1, *ids[3:6]),
        update(members[1], 0, ids[7]),
        update(members[3], 2, *ids[8:12]),
    ]
    assert sync(relay, device, updates).status_code == 200
    whole = sync(relay, device, []).json()["items"]
    assert len(whole) == 5 + 3 + 1 + 4
    return device, whole


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5, 13, 14])
def test_every_page_limit_walks_the_same_canonical_stream(
    relay: Relay, crowded: tuple[Device, list[dict[str, str]]], limit: int
) -> None:
    device, whole = crowded
    walked: list[dict[str, str]] = []
    cursor: Any = None
    for _ in range(20):
        body = sync(relay, device, [], page_after=cursor, page_limit=limit).json()
        assert 0 < len(body["items"]) <= limit
        walked.extend(body["items"])
        if not body["has_more"]:
            break
        cursor = body["next_page_after"]
    assert walked == whole
    assert _keys(whole) == sorted(set(_keys(whole)))


def test_a_page_ending_on_an_exact_key_resumes_with_that_members_next_exact(
    relay: Relay, crowded: tuple[Device, list[dict[str, str]]]
) -> None:
    device, whole = crowded
    at = next(i for i, item in enumerate(whole) if item["kind"] == "exact")
    key = {k: whole[at][k] for k in ("member_id", "kind", "wire_id")}
    body = sync(relay, device, [], page_after=key, page_limit=3).json()
    assert body["items"] == whole[at + 1 : at + 4]


def test_exact_rows_of_a_member_not_listed_are_never_emitted() -> None:
    items, more = merge_page(["m2"], {}, [("m1", "w1"), ("m2", "w2"), ("m3", "w3")], 0, None, 10)
    assert [i.key for i in items] == [ReadKey("m2", 0), ReadKey("m2", 1, "w2")]
    assert more is False


def test_a_member_without_a_stored_frontier_has_the_floor() -> None:
    items, _ = merge_page(["m1", "m2"], {"m1": 3, "m2": 9}, [], 5, None, 10)
    assert [(i.key.member_id, i.server_seq) for i in items] == [("m1", 5), ("m2", 9)]


def test_has_more_is_set_only_when_an_item_follows_the_full_page() -> None:
    exacts = [("m1", "w1"), ("m1", "w2")]
    assert merge_page(["m1"], {}, exacts, 0, None, 3)[1] is False
    items, more = merge_page(["m1"], {}, exacts, 0, None, 2)
    assert more is True and items[-1].key == ReadKey("m1", 1, "w1")


def test_after_a_frontier_key_the_page_starts_with_that_members_exact_reads() -> None:
    after = ReadKey("m1", 0)
    assert exact_floor(after) == ("m1", "")
    items, _ = merge_page(["m1", "m2"], {}, [("m1", "w1")], 0, after, 10)
    assert [i.key for i in items] == [ReadKey("m1", 1, "w1"), ReadKey("m2", 0)]
