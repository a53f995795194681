"""The read-state calls the relay's read-state, read-stream and body-cache tests make
against an in-process relay: post messages, update a cursor, sync."""

from __future__ import annotations

from typing import Any

from tests.relay.app_relay import Device, Relay
from tests.relay.helpers import batch


def post(relay: Relay, device: Device, count: int) -> list[str]:
    messages = batch(count)
    response = relay.client.post(
        "/v1/messages", json={"messages": messages}, headers=device.headers
    )
    assert response.status_code == 200
    return [m["id"] for m in messages]


def sync(
    relay: Relay,
    device: Device,
    updates: list[dict[str, Any]],
    page_after: dict[str, str] | None = None,
    page_limit: int = 1000,
) -> Any:
    return relay.client.post(
        "/v1/read-state/sync",
        json={"updates": updates, "page_after": page_after, "page_limit": page_limit},
        headers=device.headers,
    )


def update(member: str, seq: int, *wire_ids: str) -> dict[str, Any]:
    return {"member_id": member, "server_seq": str(seq), "exact_wire_ids": list(wire_ids)}
