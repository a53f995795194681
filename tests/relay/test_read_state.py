"""POST /v1/read-state/sync: max-merge, set-union, GC on proof, limits, keyset pages."""

from __future__ import annotations

from typing import Any

import pytest

from relay.secrets import new_uuid7
from relay.storage import steps
from tests.relay.app_relay import Device, Relay
from tests.relay.helpers import uuid4
from tests.relay.read_state_calls import post, sync, update
from wire.http_v1.errors import ErrorResponse


def items_of(response: Any, member: str) -> list[dict[str, str]]:
    assert response.status_code == 200, response.text
    return [i for i in response.json()["items"] if i["member_id"] == member]


@pytest.fixture
def member(device: Device) -> str:
    return device.team.members[0].member_id


def test_read_only_form_lists_one_frontier_per_active_member(relay: Relay, device: Device) -> None:
    post(relay, device, 2)
    body = sync(relay, device, []).json()
    members = sorted(m.member_id for m in device.team.members)
    assert body["items"] == [
        {"kind": "frontier", "member_id": m, "server_seq": "0"} for m in members
    ]
    assert body["current_seq"] == "2"
    assert body["has_more"] is False and body["next_page_after"] is None
    assert body["team_id"] == device.team.team_id


def test_frontiers_merge_with_max(relay: Relay, device: Device, member: str) -> None:
    post(relay, device, 5)
    sync(relay, device, [update(member, 4)])
    after = items_of(sync(relay, device, [update(member, 2)]), member)
    assert after == [{"kind": "frontier", "member_id": member, "server_seq": "4"}]


def test_exact_reads_union_and_are_collected_once_the_frontier_covers_them(
    relay: Relay, device: Device, member: str
) -> None:
    ids = post(relay, device, 6)
    sync(relay, device, [update(member, 0, ids[2])])
    both = items_of(sync(relay, device, [update(member, 0, ids[4])]), member)
    assert [i.get("wire_id") for i in both[1:]] == sorted([ids[2], ids[4]])
    covered = items_of(sync(relay, device, [update(member, 3)]), member)
    assert covered == [
        {"kind": "frontier", "member_id": member, "server_seq": "3"},
        {"kind": "exact", "member_id": member, "wire_id": ids[4]},
    ]


def test_exact_read_at_or_below_the_frontier_is_not_stored(
    relay: Relay, device: Device, member: str
) -> None:
    ids = post(relay, device, 3)
    result = items_of(sync(relay, device, [update(member, 2, ids[0], ids[1])]), member)
    assert result == [{"kind": "frontier", "member_id": member, "server_seq": "2"}]


def test_retry_of_the_same_update_is_idempotent(relay: Relay, device: Device, member: str) -> None:
    ids = post(relay, device, 4)
    first = sync(relay, device, [update(member, 1, ids[3])]).json()
    second = sync(relay, device, [update(member, 1, ids[3])]).json()
    assert first["items"] == second["items"]


@pytest.mark.parametrize(
    "make_update",
    [
        lambda m, ids: [update(m, 99)],  # future frontier
        lambda m, ids: [update(new_uuid7(), 0)],  # unknown member
        lambda m, ids: [update(m, 0, uuid4())],  # unresolved wire id
        lambda m, ids: [update(m, 0), update(m, 1)],  # duplicate member
        lambda m, ids: [update(m, 0, ids[0], ids[0])],  # duplicate id
        lambda m, ids: [update(m, 0, *[uuid4() for _ in range(1001)])],  # > 1000 ids
    ],
)
def test_invalid_updates_are_400_and_change_nothing(
    relay: Relay, device: Device, member: str, make_update: Any
) -> None:
    ids = post(relay, device, 2)
    sync(relay, device, [update(member, 1)])
    response = sync(relay, device, make_update(member, ids))
    assert response.status_code == 400
    assert response.json()["team_id"] == device.team.team_id
    assert items_of(sync(relay, device, []), member) == [
        {"kind": "frontier", "member_id": member, "server_seq": "1"}
    ]


def test_removed_member_is_inactive_for_read_state(relay: Relay, device: Device) -> None:
    from relay.storage.records import ProvisioningDocument

    leader, worker = device.team.members
    relay.store.apply_provisioning(
        ProvisioningDocument(device.team.team_id, device.team.team_name, (leader,)),
        "2026-07-20T06:30:00.000000Z",
    )
    assert sync(relay, device, [update(worker.member_id, 0)]).status_code == 400
    members = {i["member_id"] for i in sync(relay, device, []).json()["items"]}
    assert members == {leader.member_id}


def test_member_limit_rejects_whole_update_naming_the_causal_member(
    relay: Relay, device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(steps, "MAX_EXACT_PER_MEMBER", 3)  # both backends merge in steps
    leader, worker = (m.member_id for m in device.team.members)
    ids = post(relay, device, 10)
    assert sync(relay, device, [update(leader, 0, *ids[5:8])]).status_code == 200
    response = sync(relay, device, [update(worker, 2, ids[9]), update(leader, 1, ids[8])])
    assert response.status_code == 409
    body = response.json()
    assert body["error"]["code"] == "read-state-limit-exceeded"
    assert body["error"]["details"]["member_id"] == leader
    assert body["team_id"] == device.team.team_id
    parsed = ErrorResponse.from_obj(body, 409)  # the client's table accepts the details
    assert parsed.details["member_exact_count"] == "4"
    assert parsed.details["max_exact_per_member"] == 3
    state = sync(relay, device, []).json()["items"]
    assert {"kind": "frontier", "member_id": worker, "server_seq": "0"} in state
    assert {"kind": "frontier", "member_id": leader, "server_seq": "0"} in state
    assert sync(relay, device, [update(worker, 2, ids[9])]).status_code == 200


def test_team_limit_names_a_member_that_added_facts_not_the_largest_owner(
    relay: Relay, device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(steps, "MAX_EXACT_PER_TEAM", 4)  # both backends merge in steps
    leader, worker = (m.member_id for m in device.team.members)
    ids = post(relay, device, 10)
    assert sync(relay, device, [update(leader, 0, *ids[5:9])]).status_code == 200
    response = sync(relay, device, [update(leader, 0), update(worker, 0, ids[9])])
    assert response.status_code == 409
    assert response.json()["error"]["details"]["member_id"] == worker


def test_pages_walk_the_canonical_item_stream_without_gaps_or_repeats(
    relay: Relay, device: Device
) -> None:
    leader, worker = (m.member_id for m in device.team.members)
    ids = post(relay, device, 8)
    sync(relay, device, [update(leader, 1, *ids[3:6]), update(worker, 0, *ids[6:8])])
    whole = sync(relay, device, []).json()["items"]
    walked: list[dict[str, str]] = []
    cursor = None
    for _ in range(20):
        body = sync(relay, device, [], page_after=cursor, page_limit=2).json()
        assert len(body["items"]) <= 2
        walked.extend(body["items"])
        if not body["has_more"]:
            assert body["next_page_after"] is None
            break
        cursor = body["next_page_after"]
        last = body["items"][-1]
        assert cursor["member_id"] == last["member_id"] and cursor["kind"] == last["kind"]
    assert walked == whole
    keys = [
        (i["member_id"], 0 if i["kind"] == "frontier" else 1, i.get("wire_id", "")) for i in whole
    ]
    assert keys == sorted(keys) and len(whole) == 2 + 5


def test_page_after_key_need_not_exist(relay: Relay, device: Device) -> None:
    response = sync(
        relay,
        device,
        [],
        page_after={"member_id": "00000000-0000-7000-8000-000000000000", "kind": "frontier"},
    )
    assert len(response.json()["items"]) == 2


@pytest.mark.parametrize(
    "document",
    [
        {"updates": [], "page_after": None},
        {"updates": [], "page_after": None, "page_limit": 0},
        {"updates": [], "page_after": None, "page_limit": 1001},
        {"updates": [], "page_after": {"member_id": "x", "kind": "frontier"}, "page_limit": 1},
        {
            "updates": [],
            "page_after": {
                "member_id": "00000000-0000-7000-8000-000000000000",
                "kind": "frontier",
                "wire_id": "x",
            },
            "page_limit": 1,
        },
        {"updates": [], "page_after": None, "page_limit": 5, "extra": True},
    ],
)
def test_request_shape_is_strict(relay: Relay, device: Device, document: dict[str, Any]) -> None:
    response = relay.client.post("/v1/read-state/sync", json=document, headers=device.headers)
    assert response.status_code == 400
