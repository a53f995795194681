"""POST/GET /v1/messages: atomic batches, idempotency, policy order, pages, floors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from relay.limits import MAX_SEQ
from tests.relay.app_relay import Device, Relay
from tests.relay.helpers import batch, envelope, message, uuid4

TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")


def post(relay: Relay, device: Device, messages: list[dict[str, Any]]) -> Any:
    return relay.client.post("/v1/messages", json={"messages": messages}, headers=device.headers)


def current_seq(relay: Relay, device: Device) -> int:
    caps = relay.client.get("/v1/capabilities", headers=device.headers).json()
    return int(caps["current_seq"])


def set_policy(relay: Relay, device: Device, *ciphers: str) -> None:
    relay.store.set_policy(device.team.team_id, ciphers)


def test_acks_are_complete_and_in_input_order(relay: Relay, device: Device) -> None:
    messages = batch(5)
    response = post(relay, device, messages)
    assert response.status_code == 200
    body = response.json()
    assert [a["id"] for a in body["acks"]] == [m["id"] for m in messages]
    assert [a["server_seq"] for a in body["acks"]] == ["1", "2", "3", "4", "5"]
    assert {a["disposition"] for a in body["acks"]} == {"stored"}
    assert body["policy_revision"] == "0"
    assert body["team_id"] == device.team.team_id
    assert body["server_instance_id"] == relay.store.server_instance_id


def test_identical_replay_is_duplicate_with_original_sequence(relay: Relay, device: Device) -> None:
    first = batch(3)
    post(relay, device, first)
    fresh = message()
    response = post(relay, device, [first[1], fresh, first[0]])
    acks = response.json()["acks"]
    assert [(a["server_seq"], a["disposition"]) for a in acks] == [
        ("2", "duplicate"),
        ("4", "stored"),
        ("1", "duplicate"),
    ]


def test_repeated_id_within_one_batch_shares_one_sequence(relay: Relay, device: Device) -> None:
    item = message()
    response = post(relay, device, [item, message(), item])
    acks = response.json()["acks"]
    assert acks[0]["server_seq"] == acks[2]["server_seq"] == "1"
    assert [a["disposition"] for a in acks] == ["stored", "stored", "duplicate"]
    assert current_seq(relay, device) == 2


def test_different_envelope_under_existing_id_is_409_and_rolls_back_whole_batch(
    relay: Relay, device: Device
) -> None:
    item = message()
    post(relay, device, [item])
    clash = {"id": item["id"], "envelope": envelope()}
    response = post(relay, device, [message(), clash, message()])
    assert response.status_code == 409
    body = response.json()
    assert body["error"]["code"] == "message-uuid-conflict"
    assert body["error"]["details"] == {"id": item["id"]}
    assert body["team_id"] == device.team.team_id
    assert current_seq(relay, device) == 1


def test_same_id_twice_in_a_batch_with_different_envelopes_is_409(
    relay: Relay, device: Device
) -> None:
    wire_id = uuid4()
    response = post(
        relay,
        device,
        [{"id": wire_id, "envelope": envelope()}, {"id": wire_id, "envelope": envelope()}],
    )
    assert response.status_code == 409
    assert current_seq(relay, device) == 0


def test_unknown_cipher_for_a_new_id_is_422_with_policy_details(
    relay: Relay, device: Device
) -> None:
    item = message(cipher="rot13", key_id="k1")
    response = post(relay, device, [message(), item])
    assert response.status_code == 422
    details = response.json()["error"]["details"]
    assert details["id"] == item["id"] and details["cipher"] == "rot13" and details["v"] == 1
    assert details["accepted_envelope_versions"] == [1]
    assert details["policy_revision"] == "0"
    assert sorted(details["write_allowed_ciphers"]) == ["age-v1", "none"]
    assert current_seq(relay, device) == 0


def test_unsupported_envelope_version_for_a_new_id_is_422(relay: Relay, device: Device) -> None:
    item = message()
    item["envelope"]["v"] = 2
    assert post(relay, device, [item]).status_code == 422


def test_recognized_but_disallowed_cipher_is_403(relay: Relay, device: Device) -> None:
    set_policy(relay, device, "age-v1")
    item = message()
    response = post(relay, device, [item])
    assert response.status_code == 403
    body = response.json()
    assert body["error"]["code"] == "cipher-policy-violation"
    assert body["error"]["details"]["write_allowed_ciphers"] == ["age-v1"]
    assert body["error"]["details"]["policy_revision"] == "1"
    assert "accepted_envelope_versions" not in body["error"]["details"]
    assert body["server_instance_id"] == relay.store.server_instance_id


def test_replay_of_legacy_cipher_is_duplicate_after_policy_forbids_it(
    relay: Relay, device: Device
) -> None:
    item = message()
    post(relay, device, [item])
    set_policy(relay, device, "age-v1")
    response = post(relay, device, [item])
    assert response.status_code == 200
    assert response.json()["acks"][0] == {
        "id": item["id"],
        "server_seq": "1",
        "disposition": "duplicate",
    }


def test_conflict_is_decided_before_cipher_admission(relay: Relay, device: Device) -> None:
    item = message()
    post(relay, device, [item])
    response = post(
        relay,
        device,
        [message(cipher="rot13", key_id="k"), {"id": item["id"], "envelope": envelope()}],
    )
    assert response.status_code == 409


def _force_current_seq(relay: Relay, value: int) -> None:
    relay.backend.execute("UPDATE teams SET current_seq = ?", (value,))


def test_batch_crossing_the_sequence_maximum_is_507_and_nothing_is_allocated(
    relay: Relay, device: Device, tmp_path: Path
) -> None:
    kept = message()
    post(relay, device, [kept])
    _force_current_seq(relay, MAX_SEQ - 1)
    response = post(relay, device, batch(2))
    assert response.status_code == 507
    assert response.json()["error"]["code"] == "sequence-exhausted"
    assert current_seq(relay, device) == MAX_SEQ - 1
    one = post(relay, device, batch(1))
    assert one.json()["acks"][0]["server_seq"] == str(MAX_SEQ)
    caps = relay.client.get("/v1/capabilities", headers=device.headers).json()
    assert caps["next_sequence_boundary"] is None


def test_exhausted_team_still_acks_replays_and_serves_reads(
    relay: Relay, device: Device, tmp_path: Path
) -> None:
    kept = message()
    post(relay, device, [kept])
    _force_current_seq(relay, MAX_SEQ)
    assert post(relay, device, batch(1)).status_code == 507
    replay = post(relay, device, [kept])
    assert replay.status_code == 200
    assert replay.json()["acks"][0]["server_seq"] == "1"
    page = relay.client.get("/v1/messages?after=0", headers=device.headers)
    assert [m["id"] for m in page.json()["messages"]] == [kept["id"]]


def test_page_reports_has_more_and_next_after(relay: Relay, device: Device) -> None:
    post(relay, device, batch(5))
    first = relay.client.get("/v1/messages?after=0&limit=3", headers=device.headers).json()
    assert [m["server_seq"] for m in first["messages"]] == ["1", "2", "3"]
    assert first["has_more"] is True and first["next_after"] == "3"
    second = relay.client.get("/v1/messages?after=3&limit=3", headers=device.headers).json()
    assert [m["server_seq"] for m in second["messages"]] == ["4", "5"]
    assert second["has_more"] is False and second["next_after"] == "5"
    empty = relay.client.get("/v1/messages?after=5", headers=device.headers).json()
    assert empty["messages"] == [] and empty["next_after"] == "5" and empty["has_more"] is False


def test_default_page_limit_is_one_hundred(relay: Relay, device: Device) -> None:
    post(relay, device, batch(101))
    page = relay.client.get("/v1/messages?after=0", headers=device.headers).json()
    assert len(page["messages"]) == 100 and page["has_more"] is True


def test_pulled_message_carries_the_exact_envelope_and_canonical_receipt_time(
    relay: Relay, device: Device
) -> None:
    item = message()
    post(relay, device, [item])
    relay.clock.advance(5)
    post(relay, device, [item])  # replay must not change server_received_at
    pulled = relay.client.get("/v1/messages?after=0", headers=device.headers).json()["messages"][0]
    assert pulled["envelope"] == item["envelope"]
    assert pulled["id"] == item["id"]
    assert pulled["server_received_at"] == "2026-07-20T06:30:00.000000Z"
    assert TIMESTAMP.fullmatch(pulled["server_received_at"])


@pytest.mark.parametrize("after", ["01", "-1", "1e3", "", " 1", "9223372036854775808", "1.0"])
def test_after_must_be_a_canonical_sequence(relay: Relay, device: Device, after: str) -> None:
    response = relay.client.get(f"/v1/messages?after={after}", headers=device.headers)
    assert response.status_code == 400


def test_after_is_required(relay: Relay, device: Device) -> None:
    assert relay.client.get("/v1/messages", headers=device.headers).status_code == 400


@pytest.mark.parametrize("limit", ["0", "1001", "01", "abc", "-5", ""])
def test_limit_must_be_one_to_one_thousand(relay: Relay, device: Device, limit: str) -> None:
    response = relay.client.get(f"/v1/messages?after=0&limit={limit}", headers=device.headers)
    assert response.status_code == 400


def test_cursor_below_the_floor_is_410_resync_required(relay: Relay, device: Device) -> None:
    post(relay, device, batch(5))
    relay.store.retain(device.team.team_id, 3)
    response = relay.client.get("/v1/messages?after=2", headers=device.headers)
    assert response.status_code == 410
    body = response.json()
    assert body["error"]["code"] == "resync-required"
    assert body["error"]["details"] == {"after": "2", "min_available_seq": "3"}
    assert body["min_available_seq"] == "3"
    assert body["team_id"] == device.team.team_id
    at_floor = relay.client.get("/v1/messages?after=3", headers=device.headers).json()
    assert [m["server_seq"] for m in at_floor["messages"]] == ["4", "5"]
    assert at_floor["min_available_seq"] == "3"
