"""Write-policy history (v1.md "GET /v1/capabilities")."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.errors import ProvisioningRejected
from relay.limits import MAX_POLICY_HISTORY
from tests.relay.app_relay import Device, Relay
from tests.relay.helpers import batch


def caps(relay: Relay, device: Device) -> dict[str, object]:
    return relay.client.get("/v1/capabilities", headers=device.headers).json()  # type: ignore[no-any-return]


def post(relay: Relay, device: Device, count: int) -> None:
    response = relay.client.post(
        "/v1/messages", json={"messages": batch(count)}, headers=device.headers
    )
    assert response.status_code == 200


def test_new_team_policy_is_revision_zero_from_sequence_one(relay: Relay, device: Device) -> None:
    body = caps(relay, device)
    assert body["policy_revision"] == "0" and body["effective_from_seq"] == "1"
    assert body["current_seq"] == "0" and body["next_sequence_boundary"] == "1"
    assert body["max_blob_bytes"] == "1048576"
    assert body["policy_history"] == [
        {
            "policy_revision": "0",
            "effective_from_seq": "1",
            "accepted_envelope_versions": [1],
            "write_allowed_ciphers": ["age-v1", "none"],
        }
    ]


def test_policy_change_takes_effect_at_the_next_sequence(relay: Relay, device: Device) -> None:
    post(relay, device, 3)
    relay.store.set_policy(device.team.team_id, ["age-v1"])
    body = caps(relay, device)
    history = body["policy_history"]
    assert [(e["policy_revision"], e["effective_from_seq"]) for e in history] == [  # type: ignore[attr-defined]
        ("0", "1"),
        ("1", "4"),
    ]
    assert body["write_allowed_ciphers"] == ["age-v1"]
    assert history[-1]["write_allowed_ciphers"] == body["write_allowed_ciphers"]


def test_same_boundary_revisions_collapse_to_the_greatest(relay: Relay, device: Device) -> None:
    post(relay, device, 2)
    relay.store.set_policy(device.team.team_id, ["age-v1"])
    relay.store.set_policy(device.team.team_id, ["none"])
    history = caps(relay, device)["policy_history"]
    assert [
        (e["policy_revision"], e["effective_from_seq"], e["write_allowed_ciphers"])
        for e in history  # type: ignore[attr-defined]
    ] == [
        ("0", "1", ["age-v1", "none"]),
        ("2", "3", ["none"]),
    ]


def test_policy_refusing_every_cipher_blocks_new_writes(relay: Relay, device: Device) -> None:
    relay.store.set_policy(device.team.team_id, [])
    response = relay.client.post(
        "/v1/messages", json={"messages": batch(1)}, headers=device.headers
    )
    assert response.status_code == 403


def test_policy_cannot_name_a_cipher_the_relay_cannot_store(relay: Relay, device: Device) -> None:
    with pytest.raises(ProvisioningRejected):
        relay.store.set_policy(device.team.team_id, ["rot13"])
    assert caps(relay, device)["policy_revision"] == "0"


def test_policy_history_is_bounded_to_4096_distinct_boundaries(
    relay: Relay, device: Device, tmp_path: Path
) -> None:
    relay.backend.executemany(
        "INSERT INTO policy_history(team_pk, effective_from_seq, policy_revision, "
        "accepted_envelope_versions, write_allowed_ciphers) "
        "VALUES ((SELECT team_pk FROM teams WHERE team_id = ?), ?, ?, '[1]', '[\"none\"]')",
        [(device.team.team_id, b, b - 1) for b in range(2, MAX_POLICY_HISTORY + 1)],
    )
    relay.backend.execute(
        "UPDATE teams SET current_seq = ?, policy_revision = ?",
        (MAX_POLICY_HISTORY - 1, MAX_POLICY_HISTORY - 1),
    )
    # Same boundary as the last entry: collapses, still allowed.
    relay.store.set_policy(device.team.team_id, ["age-v1", "none"])
    assert len(caps(relay, device)["policy_history"]) == MAX_POLICY_HISTORY  # type: ignore[arg-type]
    post(relay, device, 1)
    with pytest.raises(ProvisioningRejected, match="4096"):
        relay.store.set_policy(device.team.team_id, ["none"])
    body = caps(relay, device)
    assert len(body["policy_history"]) == MAX_POLICY_HISTORY  # type: ignore[arg-type]
    assert body["write_allowed_ciphers"] == ["age-v1", "none"]
