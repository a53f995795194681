"""Header rules of v1.md "Scope and conventions" and the error-binding rules."""

from __future__ import annotations

import pytest

from relay.secrets import new_uuid7
from tests.relay.app_relay import Device, Relay
from tests.relay.helpers import provision


def _assert_protocol_headers(response: object) -> None:
    headers = response.headers  # type: ignore[attr-defined]
    assert headers["agmsg-protocol-version"] == "1"
    assert headers["cache-control"] == "no-store"


def test_every_response_carries_protocol_version_and_no_store(relay: Relay, device: Device) -> None:
    for response in (
        relay.client.get("/v1/health"),
        relay.client.get("/v1/capabilities", headers=device.headers),
        relay.client.get("/v1/capabilities"),
        relay.client.get("/v1/nowhere"),
        relay.client.delete("/v1/members", headers=device.headers),
    ):
        _assert_protocol_headers(response)


def test_health_needs_no_request_headers(relay: Relay) -> None:
    response = relay.client.get("/v1/health")
    assert response.status_code == 200
    body = response.json()
    assert body == {
        "status": "ok",
        "server_instance_id": relay.store.server_instance_id,
        "protocol": {"supported_versions": [1]},
        "database": "ok",
    }


def test_missing_version_header_is_426_without_binding(relay: Relay, device: Device) -> None:
    headers = {k: v for k, v in device.headers.items() if k != "Agmsg-Protocol-Version"}
    response = relay.client.get("/v1/capabilities", headers=headers)
    assert response.status_code == 426
    body = response.json()
    assert body["error"]["code"] == "unsupported-protocol-version"
    assert body["error"]["details"]["supported_versions"] == [1]
    assert "server_instance_id" not in body and "team_id" not in body


def test_unsupported_version_reports_requested_version(relay: Relay, device: Device) -> None:
    response = relay.client.get(
        "/v1/capabilities", headers={**device.headers, "Agmsg-Protocol-Version": "2"}
    )
    assert response.status_code == 426
    assert response.json()["error"]["details"]["requested_version"] == 2


@pytest.mark.parametrize("value", ["01", "1.0", " v1", "one", ""])
def test_malformed_version_is_426_with_null_requested_version(
    relay: Relay, device: Device, value: str
) -> None:
    response = relay.client.get(
        "/v1/capabilities", headers={**device.headers, "Agmsg-Protocol-Version": value}
    )
    assert response.status_code == 426
    assert response.json()["error"]["details"]["requested_version"] is None


@pytest.mark.parametrize(
    "team_header",
    [
        None,
        "not-a-uuid",
        "018F3F7E-0000-7000-8000-000000000001",
        "550e8400-e29b-41d4-a716-446655440000",
    ],
)
def test_team_header_must_be_canonical_uuid7(
    relay: Relay, device: Device, team_header: str | None
) -> None:
    headers = {k: v for k, v in device.headers.items() if k != "Agmsg-Team-ID"}
    if team_header is not None:
        headers["Agmsg-Team-ID"] = team_header
    response = relay.client.get("/v1/capabilities", headers=headers)
    assert response.status_code == 400
    body = response.json()
    assert body["error"]["code"] == "invalid-request"
    assert "server_instance_id" not in body


@pytest.mark.parametrize(
    "authorization", [None, "Basic abc", "Bearer", "Bearer a b", "bearer nope"]
)
def test_absent_or_invalid_bearer_is_401_without_binding(
    relay: Relay, device: Device, authorization: str | None
) -> None:
    headers = {k: v for k, v in device.headers.items() if k != "Authorization"}
    if authorization is not None:
        headers["Authorization"] = authorization
    response = relay.client.get("/v1/capabilities", headers=headers)
    assert response.status_code == 401
    body = response.json()
    assert body["error"]["code"] == "unauthenticated"
    assert "server_instance_id" not in body and "team_id" not in body


def test_unprovisioned_team_is_404_naming_server_and_requested_team(
    relay: Relay, device: Device
) -> None:
    missing = new_uuid7()
    response = relay.client.get(
        "/v1/capabilities", headers={**device.headers, "Agmsg-Team-ID": missing}
    )
    assert response.status_code == 404
    body = response.json()
    assert body["error"]["code"] == "team-not-found"
    assert body["server_instance_id"] == relay.store.server_instance_id
    assert body["team_id"] == missing


def test_credential_never_reads_another_team(relay: Relay, device: Device) -> None:
    other = provision(relay.store, ("alice",))
    for method, path in (
        ("GET", "/v1/capabilities"),
        ("GET", "/v1/members"),
        ("GET", "/v1/messages?after=0"),
    ):
        response = relay.client.request(
            method, path, headers={**device.headers, "Agmsg-Team-ID": other.team_id}
        )
        assert response.status_code == 403, path
        body = response.json()
        assert body["error"]["code"] == "forbidden"
        assert body["team_id"] == other.team_id
        assert body["server_instance_id"] == relay.store.server_instance_id


def test_trailing_slash_is_not_redirected(relay: Relay, device: Device) -> None:
    response = relay.client.get("/v1/capabilities/", headers=device.headers)
    assert response.status_code == 404
    assert "location" not in response.headers
    assert response.json()["error"]["code"] == "not-found"


def test_wrong_method_is_405_in_the_error_envelope(relay: Relay, device: Device) -> None:
    response = relay.client.put("/v1/messages", headers=device.headers)
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method-not-allowed"
    assert "GET" in response.headers["allow"]


def test_method_outside_the_routed_set_is_405_in_the_error_envelope_with_allow(
    relay: Relay,
) -> None:
    response = relay.client.request("BREW", "/v1/health")
    assert response.status_code == 405
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["code"] == "method-not-allowed"
    assert response.headers["allow"] == "GET"
    _assert_protocol_headers(response)


def test_unknown_query_parameter_is_400(relay: Relay, device: Device) -> None:
    response = relay.client.get("/v1/messages?after=0&cursor=1", headers=device.headers)
    assert response.status_code == 400
    body = response.json()
    assert body["error"]["details"]["field"] == "cursor"
    assert body["team_id"] == device.team.team_id


def test_body_on_a_get_is_400(relay: Relay, device: Device) -> None:
    response = relay.client.request("GET", "/v1/members", headers=device.headers, content=b"{}")
    assert response.status_code == 400


def test_client_version_header_is_never_a_reason_to_reject(relay: Relay, device: Device) -> None:
    for value in (b"", b"x" * 500, b"unknown", b"\xc3\xa9"):
        response = relay.client.get(
            "/v1/capabilities", headers={**device.headers, "Agmsg-Client-Version": value}
        )
        assert response.status_code == 200
