"""Every relay document is accepted by the client's codec (wire.http_v1 parsers).

The relay and the engine share one schema package; these tests prove that
what the relay actually sends — success and error alike — satisfies the
strict parsers and cross-checks the client will run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from relay.limits import MAX_SEQ
from relay.secrets import new_uuid7
from tests.relay.app_relay import Device, Relay
from tests.relay.helpers import batch, envelope, issue_token, message, provision
from wire.http_v1.capabilities import Capabilities
from wire.http_v1.errors import ErrorResponse
from wire.http_v1.health import Health
from wire.http_v1.members import MembersDocument
from wire.http_v1.messages import MessageBatch, MessagePage, MessagesQuery, PushResponse
from wire.http_v1.pairing import PairingResponse, RevokeResponse
from wire.http_v1.read_state import ReadStatePage, ReadStateRequest


def test_success_documents_parse_and_match_their_requests(relay: Relay, device: Device) -> None:
    headers = device.headers
    Health.from_obj(relay.client.get("/v1/health").json(), http_status=200)
    Capabilities.from_obj(relay.client.get("/v1/capabilities", headers=headers).json())
    sent = {"messages": [*batch(3), message()]}
    sent["messages"].append(sent["messages"][0])
    response = relay.client.post("/v1/messages", json=sent, headers=headers)
    PushResponse.from_obj(response.json()).check_matches(MessageBatch.from_obj(sent))
    query = MessagesQuery(0, 2)
    page = relay.client.get("/v1/messages?after=0&limit=2", headers=headers).json()
    MessagePage.from_obj(page).check_matches(query)
    MembersDocument.from_obj(relay.client.get("/v1/members", headers=headers).json())
    member = device.team.members[0].member_id
    request = {
        "updates": [
            {"member_id": member, "server_seq": "1", "exact_wire_ids": [sent["messages"][2]["id"]]}
        ],
        "page_after": None,
        "page_limit": 1,
    }
    state = relay.client.post("/v1/read-state/sync", json=request, headers=headers).json()
    ReadStatePage.from_obj(state).check_matches(ReadStateRequest.from_obj(request))
    token = issue_token(relay.store, device.team.team_id, relay.clock.now)
    exchanged = relay.client.post(
        "/v1/pairing/exchange", json={"token": token}, headers={"Agmsg-Protocol-Version": "1"}
    ).json()
    PairingResponse.from_obj(exchanged)
    revoked = relay.client.post(f"/v1/credentials/{device.credential_id}/revoke", headers=headers)
    RevokeResponse.from_obj(revoked.json()).check_matches(device.credential_id)


def _errors(relay: Relay, device: Device) -> list[Any]:
    headers = device.headers
    client = relay.client
    kept = message()
    client.post("/v1/messages", json={"messages": [kept, *batch(4)]}, headers=headers)
    relay.store.retain(device.team.team_id, 2)
    other = provision(relay.store, ("zed",))
    responses = [
        client.get("/v1/capabilities", headers={**headers, "Agmsg-Protocol-Version": "9"}),
        client.get("/v1/capabilities", headers={**headers, "Agmsg-Team-ID": "x"}),
        client.get("/v1/capabilities", headers={**headers, "Authorization": "Bearer nope"}),
        client.get("/v1/capabilities", headers={**headers, "Agmsg-Team-ID": other.team_id}),
        client.get("/v1/capabilities", headers={**headers, "Agmsg-Team-ID": new_uuid7()}),
        client.post(
            "/v1/messages",
            json={"messages": [{"id": kept["id"], "envelope": envelope()}]},
            headers=headers,
        ),
        client.post("/v1/messages", json={"messages": [message("rot13", "k")]}, headers=headers),
        client.get("/v1/messages?after=1", headers=headers),
        client.post(
            "/v1/messages",
            content=b" " * (3 * 1024 * 1024),
            headers={**headers, "Content-Type": "application/json"},
        ),
        client.post(
            "/v1/pairing/exchange",
            json={"token": "agmsg_pair_x"},
            headers={"Agmsg-Protocol-Version": "1"},
        ),
        client.post(f"/v1/credentials/{new_uuid7()}/revoke", headers=headers),
        client.get("/v1/unknown"),
    ]
    relay.store.set_policy(device.team.team_id, ["age-v1"])
    responses.append(client.post("/v1/messages", json={"messages": batch(1)}, headers=headers))
    token = issue_token(relay.store, device.team.team_id, relay.clock.now)
    pairing = {"Agmsg-Protocol-Version": "1"}
    client.post("/v1/pairing/exchange", json={"token": token}, headers=pairing)
    responses.append(client.post("/v1/pairing/exchange", json={"token": token}, headers=pairing))
    expired = issue_token(relay.store, device.team.team_id, relay.clock.now)
    relay.clock.advance(3600)
    responses.append(client.post("/v1/pairing/exchange", json={"token": expired}, headers=pairing))
    relay.backend.execute("UPDATE teams SET current_seq = ?", (MAX_SEQ,))
    responses.append(
        client.post(
            "/v1/messages", json={"messages": [message("age-v1", "epoch-1")]}, headers=headers
        )
    )
    return responses


def test_every_error_body_satisfies_the_client_error_table(
    relay: Relay, device: Device, tmp_path: Path
) -> None:
    statuses = []
    for response in _errors(relay, device):
        parsed = ErrorResponse.from_obj(response.json(), response.status_code)
        statuses.append((response.status_code, parsed.code))
    assert statuses == [
        (426, "unsupported-protocol-version"),
        (400, "invalid-request"),
        (401, "unauthenticated"),
        (403, "forbidden"),
        (404, "team-not-found"),
        (409, "message-uuid-conflict"),
        (422, "unsupported-cipher"),
        (410, "resync-required"),
        (413, "request-too-large"),
        (401, "invalid-pairing-token"),
        (403, "credential-scope-violation"),
        (404, "not-found"),
        (403, "cipher-policy-violation"),
        (409, "pairing-token-consumed"),
        (410, "pairing-token-expired"),
        (507, "sequence-exhausted"),
    ]
