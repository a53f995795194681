"""The served OpenAPI document stays true: routes match and live responses validate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.routing import Route

from relay.limits import MAX_PAGE_LIMIT
from relay.openapi import OPENAPI_PATH, document
from tests.relay.app_relay import Device, Relay
from tests.relay.backends import Backend
from tests.relay.helpers import batch, envelope, issue_token, message
from tests.relay.schema_check import check
from tests.support.live_relay import Database, provision, running_relay
from wire.http_v1.live import LIVE_WAIT

DOC = document()


def _validate(method: str, path: str, response: Any) -> None:
    operation = DOC["paths"][path][method.lower()]
    status = str(response.status_code)
    assert status in operation["responses"], f"{method} {path} {status} is undocumented"
    schema = operation["responses"][status]["content"]["application/json"]["schema"]
    errors = check(response.json(), schema, DOC)
    assert errors == [], errors


def test_documented_paths_are_exactly_the_served_v1_routes(relay: Relay) -> None:
    """The live wait is our extension outside v1 (specs/live.md), not in the v1 document."""
    app: Any = relay.client.app
    served = {route.path for route in app._app.routes if isinstance(route, Route)}
    assert served - {LIVE_WAIT} == set(DOC["paths"])
    assert LIVE_WAIT not in DOC["paths"]


def test_the_document_is_served_without_credentials(relay: Relay) -> None:
    response = relay.client.get(OPENAPI_PATH)
    assert response.status_code == 200
    assert response.json() == DOC


def test_schema_checker_rejects_an_undocumented_field() -> None:
    assert check({"status": "ok"}, {"$ref": "#/components/schemas/Health"}, DOC)
    bad = {"status": "ok", "protocol": {"supported_versions": [1]}, "database": "ok", "x": 1}
    assert check(bad, {"$ref": "#/components/schemas/Health"}, DOC)


def test_request_schemas_refuse_what_the_relay_always_refuses() -> None:
    """Regression (schemathesis): the document accepted non-canonical blobs, envelope
    versions past u32, empty or control-character key ids, non-b64token pairing tokens
    and page limits past MAX_PAGE_LIMIT, all of which the relay rejects with 400."""
    schemas = DOC["components"]["schemas"]
    good = envelope()
    assert check(good, schemas["Envelope"], DOC) == []
    for size in range(1, 7):
        assert check(envelope(size=size), schemas["Envelope"], DOC) == [], size
    bad_members = [
        {"blob": "QR=="},
        {"blob": "QUJ="[:3]},
        {"blob": "QUJDRA"},
        {"v": 2**32},
        {"key_id": ""},
        {"key_id": "a\nb"},
    ]
    for bad in bad_members:
        assert check({**good, **bad}, schemas["Envelope"], DOC), bad  # type: ignore[dict-item]
    assert check({"token": "agmsg_pair_A-z.9~+/=="}, schemas["PairingRequest"], DOC) == []
    assert check({"token": "not a token"}, schemas["PairingRequest"], DOC)
    params = DOC["paths"]["/v1/messages"]["get"]["parameters"]
    limit = next(p["schema"] for p in params if p["name"] == "limit")
    assert check(str(MAX_PAGE_LIMIT), limit, DOC) == []
    assert check(str(MAX_PAGE_LIMIT + 1), limit, DOC)
    update = schemas["ReadStateRequest"]["properties"]["updates"]["items"]
    assert update["properties"]["exact_wire_ids"]["uniqueItems"] is True


def test_in_process_responses_match_the_document(relay: Relay, device: Device) -> None:
    h = device.headers
    c = relay.client
    sent = batch(3)
    member = device.team.members[0].member_id
    read_request = {
        "updates": [{"member_id": member, "server_seq": "1", "exact_wire_ids": [sent[2]["id"]]}],
        "page_after": None,
        "page_limit": 1,
    }
    assert check(read_request, DOC["components"]["schemas"]["ReadStateRequest"], DOC) == []
    assert check({"messages": sent}, DOC["components"]["schemas"]["MessageBatch"], DOC) == []
    cases = [
        ("GET", "/v1/health", c.get("/v1/health")),
        ("GET", "/v1/capabilities", c.get("/v1/capabilities", headers=h)),
        ("POST", "/v1/messages", c.post("/v1/messages", json={"messages": sent}, headers=h)),
        ("GET", "/v1/messages", c.get("/v1/messages?after=0&limit=2", headers=h)),
        ("GET", "/v1/members", c.get("/v1/members", headers=h)),
        (
            "POST",
            "/v1/read-state/sync",
            c.post("/v1/read-state/sync", json=read_request, headers=h),
        ),
        ("POST", "/v1/read-state/sync", c.post("/v1/read-state/sync", json={}, headers=h)),
        (
            "POST",
            "/v1/messages",
            c.post(
                "/v1/messages",
                json={"messages": [{"id": sent[0]["id"], "envelope": envelope()}]},
                headers=h,
            ),
        ),
        (
            "POST",
            "/v1/messages",
            c.post("/v1/messages", json={"messages": [message("rot13", "k")]}, headers=h),
        ),
        (
            "GET",
            "/v1/capabilities",
            c.get("/v1/capabilities", headers={**h, "Agmsg-Protocol-Version": "2"}),
        ),
        ("GET", "/v1/members", c.get("/v1/members", headers={**h, "Authorization": "Bearer zz"})),
    ]
    token = issue_token(relay.store, device.team.team_id, relay.clock.now)
    v1 = {"Agmsg-Protocol-Version": "1"}
    cases.append(
        (
            "POST",
            "/v1/pairing/exchange",
            c.post("/v1/pairing/exchange", json={"token": token}, headers=v1),
        )
    )
    cases.append(
        (
            "POST",
            "/v1/pairing/exchange",
            c.post("/v1/pairing/exchange", json={"token": token}, headers=v1),
        )
    )
    relay.store.retain(device.team.team_id, 2)
    cases.append(("GET", "/v1/messages", c.get("/v1/messages?after=0", headers=h)))
    revoke = "/v1/credentials/{credential_id}/revoke"
    cases.append(
        ("POST", revoke, c.post(f"/v1/credentials/{device.credential_id}/revoke", headers=h))
    )
    for method, path, response in cases:
        _validate(method, path, response)


def test_live_process_responses_match_the_document(backend: Backend, tmp_path: Path) -> None:
    db: Database = backend.location if backend.is_postgres else tmp_path / "relay.db"
    with running_relay(db) as live:
        team = provision(live.db, tmp_path)
        h = live.pair(team["team_id"])
        with live.client() as c:
            _validate("GET", "/v1/health", c.get("/v1/health"))
            _validate("GET", "/v1/capabilities", c.get("/v1/capabilities", headers=h))
            _validate(
                "POST",
                "/v1/messages",
                c.post("/v1/messages", json={"messages": batch(2)}, headers=h),
            )
            _validate(
                "GET", "/v1/messages", c.get("/v1/messages", params={"after": "0"}, headers=h)
            )
            _validate("GET", "/v1/members", c.get("/v1/members", headers=h))
            served = c.get(OPENAPI_PATH)
            assert served.json() == DOC
