"""Contract tests against a real relay process (uvicorn, 127.0.0.1, ephemeral port)."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from tests.relay.backends import Backend
from tests.relay.helpers import batch
from tests.support.live_relay import Database, LiveRelay, cli, provision, running_relay


@pytest.fixture
def live(backend: Backend, tmp_path: Path) -> Iterator[LiveRelay]:
    """A relay process on either backend (a URL is already initialized)."""
    db: Database = backend.location if backend.is_postgres else tmp_path / "relay.db"
    with running_relay(db, "--busy-timeout-ms", "200") as relay:
        yield relay


@pytest.fixture
def sqlite_live(tmp_path: Path) -> Iterator[LiveRelay]:
    """For faults of the SQLite file itself (tests/relay/test_postgres.py has PostgreSQL's)."""
    with running_relay(tmp_path / "relay.db", "--busy-timeout-ms", "200") as relay:
        yield relay


def test_live_relay_serves_every_endpoint_end_to_end(live: LiveRelay, tmp_path: Path) -> None:
    team = provision(live.db, tmp_path)
    headers = live.pair(team["team_id"])
    with live.client() as client:
        health = client.get("/v1/health")
        assert health.status_code == 200
        assert health.json()["server_instance_id"] == live.server_instance_id
        caps = client.get("/v1/capabilities", headers=headers)
        assert caps.status_code == 200 and caps.headers["cache-control"] == "no-store"
        messages = batch(20)
        posted = client.post("/v1/messages", json={"messages": messages}, headers=headers)
        assert [a["server_seq"] for a in posted.json()["acks"]] == [str(i) for i in range(1, 21)]
        page = client.get("/v1/messages", params={"after": "0", "limit": "1000"}, headers=headers)
        assert [m["id"] for m in page.json()["messages"]] == [m["id"] for m in messages]
        roster = client.get("/v1/members", headers=headers).json()
        member = roster["members"][0]["member_id"]
        state = client.post(
            "/v1/read-state/sync",
            json={
                "updates": [
                    {"member_id": member, "server_seq": "5", "exact_wire_ids": [messages[9]["id"]]}
                ],
                "page_after": None,
                "page_limit": 10,
            },
            headers=headers,
        )
        assert state.status_code == 200
        assert {"kind": "exact", "member_id": member, "wire_id": messages[9]["id"]} in state.json()[
            "items"
        ]
        credential_id = json.loads(cli(live.db, "credential", "list", "--json").stdout)[
            "credentials"
        ][0]["credential_id"]
        revoked = client.post(f"/v1/credentials/{credential_id}/revoke", headers=headers)
        assert revoked.status_code == 200
        assert client.get("/v1/capabilities", headers=headers).status_code == 401
        for response in (health, caps, posted, page, state, revoked):
            assert response.headers["agmsg-protocol-version"] == "1"


def test_live_errors_keep_the_envelope_and_version_header(live: LiveRelay, tmp_path: Path) -> None:
    team = provision(live.db, tmp_path)
    headers = live.pair(team["team_id"])
    with live.client() as client:
        cases = [
            (
                client.get("/v1/capabilities", headers={**headers, "Agmsg-Protocol-Version": "7"}),
                426,
            ),
            (client.get("/v1/capabilities", headers={**headers, "Agmsg-Team-ID": "nope"}), 400),
            (client.get("/v1/capabilities", headers={**headers, "Authorization": "Bearer x"}), 401),
            (
                client.post(
                    "/v1/messages",
                    content=b"{" * 10,
                    headers={**headers, "Content-Type": "application/json"},
                ),
                400,
            ),
            (
                client.post(
                    "/v1/messages",
                    content=b" " * (2 * 1024 * 1024 + 1),
                    headers={**headers, "Content-Type": "application/json"},
                ),
                413,
            ),
            (client.get("/v1/nothing/"), 404),
        ]
        for response, status in cases:
            assert response.status_code == status
            assert response.headers["agmsg-protocol-version"] == "1"
            assert response.json()["error"]["code"]
            assert "location" not in response.headers


def test_live_concurrent_writers_get_gap_free_unique_sequences_in_commit_order(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = provision(live.db, tmp_path)
    writers = [live.pair(team["team_id"]) for _ in range(4)]
    acked: dict[int, list[tuple[str, int]]] = {}
    errors: list[str] = []

    def write(index: int) -> None:
        out: list[tuple[str, int]] = []
        with live.client() as client:
            for _ in range(15):
                messages = batch(5)
                response = client.post(
                    "/v1/messages", json={"messages": messages}, headers=writers[index]
                )
                if response.status_code != 200:
                    errors.append(response.text)
                    return
                out.extend((a["id"], int(a["server_seq"])) for a in response.json()["acks"])
        acked[index] = out

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    all_seqs = sorted(seq for acks in acked.values() for _, seq in acks)
    assert all_seqs == list(range(1, 4 * 15 * 5 + 1))
    for acks in acked.values():
        seqs = [seq for _, seq in acks]
        assert seqs == sorted(seqs)  # each writer's later commit got later sequences
    with live.client() as client:
        page = client.get(
            "/v1/messages", params={"after": "0", "limit": "1000"}, headers=writers[0]
        ).json()
    by_seq = {seq: wire_id for acks in acked.values() for wire_id, seq in acks}
    assert [(int(m["server_seq"]), m["id"]) for m in page["messages"]] == sorted(by_seq.items())


def test_live_health_is_503_without_server_id_when_the_database_is_gone(
    sqlite_live: LiveRelay,
) -> None:
    live = sqlite_live
    assert isinstance(live.db, Path)
    moved = live.db.with_name("moved.db")
    shutil.move(live.db, moved)
    try:
        with live.client() as client:
            response = client.get("/v1/health")
        assert response.status_code == 503
        assert response.headers["agmsg-protocol-version"] == "1"
        assert response.json() == {
            "status": "unavailable",
            "protocol": {"supported_versions": [1]},
            "database": "unavailable",
        }
    finally:
        shutil.move(moved, live.db)
    with live.client() as client:
        assert client.get("/v1/health").status_code == 200


def test_live_write_is_503_with_binding_while_the_database_is_locked(
    sqlite_live: LiveRelay, tmp_path: Path
) -> None:
    live = sqlite_live
    team = provision(live.db, tmp_path)
    headers = live.pair(team["team_id"])
    messages = batch(2)
    blocker = apsw.Connection(str(live.db))
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with live.client() as client:
            response = client.post("/v1/messages", json={"messages": messages}, headers=headers)
        assert response.status_code == 503
        body: dict[str, Any] = response.json()
        assert body["error"]["code"] == "unavailable"
        assert body["team_id"] == team["team_id"]
        assert body["server_instance_id"] == live.server_instance_id
        assert response.headers["retry-after"] == "1"
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    with live.client() as client:
        retried = client.post("/v1/messages", json={"messages": messages}, headers=headers)
    assert [a["server_seq"] for a in retried.json()["acks"]] == ["1", "2"]


def test_live_access_log_holds_no_secret_envelope_or_query(tmp_path: Path) -> None:
    db = tmp_path / "relay.db"
    with running_relay(db) as live:
        team = provision(db, tmp_path)
        headers = live.pair(team["team_id"])
        messages = batch(3)
        with live.client() as client:
            client.post("/v1/messages", json={"messages": messages}, headers=headers)
            client.get("/v1/messages", params={"after": "0", "limit": "7"}, headers=headers)
    assert live.process.stderr is not None
    log = live.process.stderr.read()
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert any(
        entry.get("route") == "/v1/messages" and entry.get("status") == 200 for entry in lines
    )
    credential = headers["Authorization"].removeprefix("Bearer ")
    assert credential not in log
    for item in messages:
        assert item["envelope"]["blob"] not in log
    assert "limit=7" not in log


def test_serve_refuses_an_invalid_retention_setting_before_listening(tmp_path: Path) -> None:
    db = tmp_path / "relay.db"
    assert cli(db, "init").returncode == 0
    result = cli(
        db, "serve", "--port", "0", env={"SYNCENGINE_RELAY_RETENTION_MAX_LIVE_MESSAGES": "0"}
    )
    assert result.returncode == 2
    assert "listening" not in result.stdout
    assert "retention" in result.stderr
