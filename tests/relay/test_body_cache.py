"""The relay's remembered roster and read-state bodies (relay/http/body_cache.py):
an equal storage record is answered with the same bytes, any change at once."""

from __future__ import annotations

from relay.http.body_cache import BodyCache
from relay.secrets import timestamp
from relay.storage.records import Member, ProvisioningDocument
from tests.relay.app_relay import Device, Relay
from tests.relay.helpers import T0
from tests.relay.read_state_calls import post, sync, update


def test_an_equal_record_is_answered_with_the_remembered_body() -> None:
    cache = BodyCache()
    rendered: list[tuple[int, ...]] = []

    def render(record: tuple[int, ...]) -> bytes:
        rendered.append(record)
        return repr(record).encode()

    first = cache.body("members", "team", (1, 2), render)
    assert cache.body("members", "team", (1, 2), render) is first
    assert rendered == [(1, 2)]


def test_a_changed_record_is_rendered_afresh() -> None:
    cache = BodyCache()
    cache.body("members", "team", (1, 2), lambda r: b"old")
    assert cache.body("members", "team", (1, 3), lambda r: b"new") == b"new"


def test_each_route_and_team_has_its_own_entry() -> None:
    cache = BodyCache()
    cache.body("members", "a", (1,), lambda r: b"a")
    assert cache.body("members", "b", (1,), lambda r: b"b") == b"b"
    assert cache.body("read-state", "a", (1,), lambda r: b"c") == b"c"


def test_the_least_recently_used_entry_is_dropped_beyond_capacity() -> None:
    cache = BodyCache(capacity=2)
    cache.body("members", "a", 1, lambda r: b"a")
    cache.body("members", "b", 1, lambda r: b"b")
    cache.body("members", "a", 1, lambda r: b"unused")  # a is now the most recent
    cache.body("members", "c", 1, lambda r: b"c")
    assert len(cache) == 2
    assert cache.body("members", "a", 1, lambda r: b"again") == b"a"
    assert cache.body("members", "b", 1, lambda r: b"b2") == b"b2"  # b was dropped


def test_a_roster_change_is_served_on_the_next_request(relay: Relay, device: Device) -> None:
    before = relay.client.get("/v1/members", headers=device.headers)
    assert relay.client.get("/v1/members", headers=device.headers).content == before.content
    leader, worker = device.team.members
    renamed = (leader, Member(worker.member_id, "worker-2"))
    relay.store.apply_provisioning(
        ProvisioningDocument(device.team.team_id, device.team.team_name, renamed), timestamp(T0)
    )
    body = relay.client.get("/v1/members", headers=device.headers).json()
    assert {m["name"] for m in body["members"]} == {"leader", "worker-2"}
    assert body["members_revision"] != before.json()["members_revision"]


def test_a_merged_frontier_is_served_on_the_next_read_state_request(
    relay: Relay, device: Device
) -> None:
    member = device.team.members[0].member_id
    post(relay, device, 3)
    first = sync(relay, device, []).content
    assert sync(relay, device, []).content == first
    assert sync(relay, device, [update(member, 2)]).status_code == 200
    items = sync(relay, device, []).json()["items"]
    assert {"kind": "frontier", "member_id": member, "server_seq": "2"} in items
