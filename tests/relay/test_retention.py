"""Retention: tombstones keep idempotency, floors move with read state, opacity holds."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from relay.config import default_db_path, parse_retention
from relay.errors import OperatorError, ProvisioningRejected
from relay.storage.sqlite import SqliteRelayStore
from tests.relay.app_relay import Device, Relay, make_relay
from tests.relay.backends import Backend
from tests.relay.forbidden_columns import FORBIDDEN_COLUMNS
from tests.relay.helpers import batch, envelope, provision


def post(relay: Relay, device: Device, messages: list[dict[str, Any]]) -> Any:
    return relay.client.post("/v1/messages", json={"messages": messages}, headers=device.headers)


def sync(relay: Relay, device: Device, updates: list[dict[str, Any]]) -> Any:
    return relay.client.post(
        "/v1/read-state/sync",
        json={"updates": updates, "page_after": None, "page_limit": 1000},
        headers=device.headers,
    )


def test_retain_deletes_the_prefix_raises_the_floor_and_logs_counts(
    relay: Relay, device: Device, caplog: pytest.LogCaptureFixture
) -> None:
    post(relay, device, batch(10))
    with caplog.at_level(logging.INFO, logger="relay.retention"):
        result = relay.store.retain(device.team.team_id, 4)
    assert (result.old_floor, result.new_floor, result.rows_removed) == (0, 4, 4)
    record = json.loads(caplog.records[-1].getMessage())
    assert record == {
        "event": "retention",
        "mode": "manual",
        "team_id": device.team.team_id,
        "old_floor": "0",
        "new_floor": "4",
        "rows_removed": 4,
    }
    caps = relay.client.get("/v1/capabilities", headers=device.headers).json()
    assert caps["min_available_seq"] == "4" and caps["current_seq"] == "10"


def test_retention_never_lowers_the_floor(relay: Relay, device: Device) -> None:
    post(relay, device, batch(6))
    relay.store.retain(device.team.team_id, 5)
    result = relay.store.retain(device.team.team_id, 2)
    assert (result.new_floor, result.rows_removed) == (5, 0)


def test_retain_beyond_current_seq_is_refused(relay: Relay, device: Device) -> None:
    post(relay, device, batch(2))
    with pytest.raises(ProvisioningRejected):
        relay.store.retain(device.team.team_id, 3)


def test_replay_of_a_retained_id_returns_its_original_sequence(
    relay: Relay, device: Device
) -> None:
    first = batch(3)
    post(relay, device, first)
    relay.store.retain(device.team.team_id, 3)
    response = post(relay, device, [first[1]])
    assert response.json()["acks"] == [
        {"id": first[1]["id"], "server_seq": "2", "disposition": "duplicate"}
    ]
    caps = relay.client.get("/v1/capabilities", headers=device.headers).json()
    assert caps["current_seq"] == "3"


def test_conflicting_replay_of_a_retained_id_is_still_409(relay: Relay, device: Device) -> None:
    first = batch(2)
    post(relay, device, first)
    relay.store.retain(device.team.team_id, 2)
    response = post(relay, device, [{"id": first[0]["id"], "envelope": envelope()}])
    assert response.status_code == 409


def test_retention_max_merges_read_frontiers_and_drops_covered_exact_reads(
    relay: Relay, device: Device
) -> None:
    messages = batch(6)
    post(relay, device, messages)
    member = device.team.members[0].member_id
    sync(
        relay,
        device,
        [
            {
                "member_id": member,
                "server_seq": "1",
                "exact_wire_ids": [messages[3]["id"], messages[5]["id"]],
            }
        ],
    )
    relay.store.retain(device.team.team_id, 4)
    items = sync(relay, device, []).json()["items"]
    mine = [i for i in items if i["member_id"] == member]
    assert mine == [
        {"kind": "frontier", "member_id": member, "server_seq": "4"},
        {"kind": "exact", "member_id": member, "wire_id": messages[5]["id"]},
    ]
    other = [i for i in items if i["member_id"] != member]
    assert other == [{"kind": "frontier", "member_id": other[0]["member_id"], "server_seq": "4"}]


@pytest.fixture
def retaining_relay(backend: Backend) -> Iterator[Relay]:
    yield from make_relay(backend, retention_max_live_messages=5)


def test_automatic_retention_keeps_at_most_the_configured_live_messages(
    retaining_relay: Relay, caplog: pytest.LogCaptureFixture
) -> None:
    relay = retaining_relay
    device = relay.pair(provision(relay.store))
    post(relay, device, batch(3))
    with caplog.at_level(logging.INFO, logger="relay.retention"):
        response = post(relay, device, batch(4))
    body = response.json()
    assert body["min_available_seq"] == "2"
    assert [a["server_seq"] for a in body["acks"]] == ["4", "5", "6", "7"]
    page = relay.client.get("/v1/messages?after=2", headers=device.headers).json()
    assert [m["server_seq"] for m in page["messages"]] == ["3", "4", "5", "6", "7"]
    assert json.loads(caplog.records[-1].getMessage())["mode"] == "automatic"


@pytest.mark.parametrize("value", ["0", "-1", "01", "abc", "1.5", "9223372036854775808", " 5"])
def test_invalid_retention_setting_is_refused(value: str) -> None:
    with pytest.raises(OperatorError):
        parse_retention(value)


def test_retention_setting_accepts_canonical_positive_values() -> None:
    assert parse_retention(None) is None and parse_retention("") is None
    assert parse_retention("100000") == 100000


def test_default_database_path_follows_env_then_xdg() -> None:
    assert default_db_path({"SYNCENGINE_RELAY_DB": "/x/r.db"}) == Path("/x/r.db")
    assert default_db_path({"XDG_DATA_HOME": "/d"}) == Path("/d/syncengine/relay.db")


def test_no_column_or_index_can_hold_sender_recipient_body_or_client_time(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    SqliteRelayStore.initialize(path)
    conn = apsw.Connection(str(path))
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    columns = {
        (table, row[1]) for table in tables for row in conn.execute(f"PRAGMA table_info({table})")
    }
    indexed = {
        row[2]
        for table in tables
        for (index_name,) in [(r[1],) for r in conn.execute(f"PRAGMA index_list({table})")]
        for row in conn.execute(f"PRAGMA index_info({index_name})")
    }
    conn.close()
    names = {name for _, name in columns} | indexed
    assert not names & FORBIDDEN_COLUMNS
    assert ("messages", "blob") in columns  # the opaque envelope is the only payload
