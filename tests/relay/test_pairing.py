"""Pairing exchange and per-device credentials (v1.md "Pairing and per-device credentials")."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

from relay.secrets import hash_secret, new_credential_secret, new_uuid7, timestamp
from tests.relay.app_relay import Device, Relay, make_relay
from tests.relay.backends import Backend
from tests.relay.helpers import T0, Team, batch, issue_token, provision

V1 = {"Agmsg-Protocol-Version": "1"}


def exchange(relay: Relay, token: str) -> object:
    return relay.client.post("/v1/pairing/exchange", json={"token": token}, headers=V1)


def test_exchange_returns_credential_and_the_nested_capability_snapshot(
    relay: Relay, team: Team
) -> None:
    token = issue_token(relay.store, team.team_id)
    response = exchange(relay, token)
    assert response.status_code == 200  # type: ignore[attr-defined]
    assert response.headers["cache-control"] == "no-store"  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert body["remote_team_id"] == team.team_id == body["capabilities"]["team_id"]
    assert body["remote_team_name"] == team.team_name == body["capabilities"]["team_name"]
    assert body["server_instance_id"] == body["capabilities"]["server_instance_id"]
    assert body["credential"].startswith("agmsg_credential_")
    assert body["credential"] != token
    caps = relay.client.get(
        "/v1/capabilities",
        headers={
            **V1,
            "Agmsg-Team-ID": team.team_id,
            "Authorization": f"Bearer {body['credential']}",
        },
    ).json()
    assert caps == body["capabilities"]


def test_token_exchanges_exactly_once(relay: Relay, team: Team) -> None:
    token = issue_token(relay.store, team.team_id)
    assert exchange(relay, token).status_code == 200  # type: ignore[attr-defined]
    again = exchange(relay, token)
    assert again.status_code == 409  # type: ignore[attr-defined]
    body = again.json()  # type: ignore[attr-defined]
    assert body["error"]["code"] == "pairing-token-consumed"
    assert body["team_id"] == team.team_id
    assert len(relay.store.list_credentials(team.team_id)) == 1


def test_unknown_token_is_401_without_binding(relay: Relay, team: Team) -> None:
    response = exchange(relay, "agmsg_pair_unknown")
    assert response.status_code == 401  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert body["error"]["code"] == "invalid-pairing-token"
    assert "server_instance_id" not in body and "team_id" not in body


def test_token_expires_after_fifteen_minutes(relay: Relay, team: Team) -> None:
    token = issue_token(relay.store, team.team_id)
    relay.clock.advance(15 * 60 - 1)
    still = issue_token(relay.store, team.team_id)
    assert exchange(relay, still).status_code == 200  # type: ignore[attr-defined]
    relay.clock.advance(1)
    response = exchange(relay, token)
    assert response.status_code == 410  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert body["error"]["code"] == "pairing-token-expired"
    assert body["error"]["details"] == {"expired_at": "2026-07-20T06:45:00.000000Z"}
    assert body["team_id"] == team.team_id
    assert len(relay.store.list_credentials(team.team_id)) == 1


def test_exchange_requires_version_but_not_team_header(relay: Relay, team: Team) -> None:
    token = issue_token(relay.store, team.team_id)
    refused = relay.client.post("/v1/pairing/exchange", json={"token": token})
    assert refused.status_code == 426
    assert exchange(relay, token).status_code == 200  # type: ignore[attr-defined]


def test_exchange_body_is_strict(relay: Relay, team: Team) -> None:
    token = issue_token(relay.store, team.team_id)
    for document in ({"token": token, "device": "x"}, {}, {"token": 5}, {"token": ""}):
        response = relay.client.post("/v1/pairing/exchange", json=document, headers=V1)
        assert response.status_code == 400
    assert exchange(relay, token).status_code == 200  # type: ignore[attr-defined]


def test_secrets_are_stored_only_as_hashes(relay: Relay, team: Team) -> None:
    token = issue_token(relay.store, team.team_id)
    credential = exchange(relay, token).json()["credential"]  # type: ignore[attr-defined]
    relay.store.close()
    raw = relay.backend.dump()
    assert token.encode() not in raw
    assert credential.encode() not in raw
    digest = hash_secret(credential)
    assert digest in raw or digest.hex().encode() in raw  # bytea shows as hex on PostgreSQL


def test_sqlite_database_files_are_private(sqlite_backend: Backend) -> None:
    for _ in make_relay(sqlite_backend):
        base = Path(sqlite_backend.location)
        files = [p for p in base.parent.iterdir() if p.name.startswith(base.name)]
        assert {p.name for p in files} >= {"relay.db", "relay.db-wal"}
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)


def test_concurrent_exchanges_of_one_token_produce_exactly_one_credential(
    relay: Relay, team: Team
) -> None:
    token = issue_token(relay.store, team.team_id)
    outcomes: list[str] = []
    lock = threading.Lock()

    def attempt() -> None:
        try:
            relay.store.exchange_pairing_token(
                hash_secret(token), new_uuid7(), hash_secret(new_credential_secret()), timestamp(T0)
            )
            result = "ok"
        except Exception as exc:
            result = type(exc).__name__
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=attempt) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes) == ["PairingTokenConsumed"] * 5 + ["ok"]


def test_revoked_credential_gets_401_and_may_repeat_its_revoke(
    relay: Relay, device: Device
) -> None:
    path = f"/v1/credentials/{device.credential_id}/revoke"
    first = relay.client.post(path, headers=device.headers)
    assert first.status_code == 200
    body = first.json()
    assert body["revoked"] is True and body["credential_id"] == device.credential_id
    assert first.headers["cache-control"] == "no-store"
    for method, url in (
        ("GET", "/v1/capabilities"),
        ("GET", "/v1/members"),
        ("GET", "/v1/messages?after=0"),
    ):
        assert relay.client.request(method, url, headers=device.headers).status_code == 401
    posted = relay.client.post("/v1/messages", json={"messages": batch(1)}, headers=device.headers)
    assert posted.status_code == 401
    relay.clock.advance(60)
    again = relay.client.post(path, headers=device.headers)
    assert again.status_code == 200
    assert again.json()["revoked_at"] == body["revoked_at"]


def test_revoking_another_device_is_a_scope_violation_that_hides_existence(
    relay: Relay, device: Device
) -> None:
    other = relay.pair(device.team)
    for target in (other.credential_id, new_uuid7()):
        response = relay.client.post(f"/v1/credentials/{target}/revoke", headers=device.headers)
        assert response.status_code == 403
        body = response.json()
        assert body["error"]["code"] == "credential-scope-violation"
        assert body["team_id"] == device.team.team_id
    still = relay.client.get("/v1/capabilities", headers=other.headers)
    assert still.status_code == 200


def test_operator_revocation_locks_out_the_device(relay: Relay, device: Device) -> None:
    relay.store.revoke_credential(device.team.team_id, device.credential_id, timestamp(T0))
    assert relay.client.get("/v1/capabilities", headers=device.headers).status_code == 401


def test_credential_is_bound_to_its_team_only(relay: Relay, device: Device) -> None:
    other_team = provision(relay.store, ("bob",))
    other_device = relay.pair(other_team)
    response = relay.client.get(
        "/v1/messages?after=0",
        headers={**other_device.headers, "Agmsg-Team-ID": device.team.team_id},
    )
    assert response.status_code == 403
