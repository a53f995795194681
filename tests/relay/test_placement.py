"""Teams placed across two real PostgreSQL databases (relay/storage/placement.py, issue #35).

Two throw-away databases on the suite's PostgreSQL server stand for two
primaries. The rules: each team's every row lives in the database its
placement names and nowhere else; the deployment keeps one
``server_instance_id`` whichever database serves a team; the pairing
exchange, which names no team, finds its token in either database; databases
of two deployments are refused as one placement; a team is never provisioned
a second time in another database; and operator listings see every database.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from starlette.testclient import TestClient

from relay.errors import OperatorError, ProvisioningRejected
from relay.http.app import create_app
from relay.secrets import new_uuid7, timestamp
from relay.storage import location
from relay.storage.base import RelayStore
from relay.storage.pg_schema import RELAY_SCHEMA
from relay.storage.records import Member, ProvisioningDocument
from tests.relay.backends import require_postgres
from tests.relay.helpers import (
    T0,
    FakeClock,
    Team,
    batch,
    issue_token,
    provision,
    team_headers,
)


@dataclass
class TwoDatabases:
    """A placement file over databases ``a`` (the default) and ``b``."""

    path: Path
    urls: dict[str, str]

    @property
    def location(self) -> str:
        return f"placement:{self.path}"

    def place(self, teams: dict[str, str], default: str = "a") -> None:
        self.path.write_text(
            json.dumps({"databases": self.urls, "default": default, "teams": teams}),
            encoding="utf-8",
        )
        self.path.chmod(0o600)

    def count(self, name: str, sql: str, *params: Any) -> int:
        with psycopg.connect(self.urls[name]) as conn:
            conn.execute(f"SET search_path TO {RELAY_SCHEMA}")
            row = conn.execute(sql, params).fetchone()
        assert row is not None
        return int(row[0])

    def rows_of(self, name: str, table: str, team_id: str) -> int:
        return self.count(
            name,
            f"SELECT count(*) FROM {table} JOIN teams USING (team_pk) WHERE team_id = %s",
            team_id,
        )


@pytest.fixture
def two(tmp_path: Path) -> Iterator[TwoDatabases]:
    server = require_postgres()
    urls = {"a": server.create_database(), "b": server.create_database()}
    try:
        yield TwoDatabases(tmp_path / "placement.json", urls)
    finally:
        for url in urls.values():
            server.drop_database(url)


@dataclass
class Placed:
    store: RelayStore
    client: TestClient
    team_a: Team
    team_b: Team


@pytest.fixture
def placed(two: TwoDatabases) -> Iterator[Placed]:
    """Team A in the default database ``a``, team B placed in ``b``; a relay over both."""
    b_id = new_uuid7()
    two.place({b_id: "b"})
    location.initialize(two.location)
    store = location.open_store(two.location)
    team_a = provision(store)
    team_b = provision_with_id(store, b_id)
    try:
        with TestClient(
            create_app(store, clock=FakeClock()), base_url="http://127.0.0.1"
        ) as client:
            yield Placed(store, client, team_a, team_b)
    finally:
        store.close()


def provision_with_id(store: RelayStore, team_id: str) -> Team:
    team = Team(team_id, "team-b", [Member(new_uuid7(), n) for n in ("leader", "worker-1")])
    store.apply_provisioning(
        ProvisioningDocument(team.team_id, team.team_name, tuple(team.members)), timestamp(T0)
    )
    return team


def _pair(placed: Placed, team: Team) -> dict[str, str]:
    token = issue_token(placed.store, team.team_id)
    response = placed.client.post(
        "/v1/pairing/exchange", json={"token": token}, headers={"Agmsg-Protocol-Version": "1"}
    )
    assert response.status_code == 200, response.text
    return team_headers(team.team_id, response.json()["credential"])


# -- where rows live ---------------------------------------------------------------------------
def test_each_teams_rows_live_only_in_the_database_its_placement_names(
    placed: Placed, two: TwoDatabases
) -> None:
    for team, count in ((placed.team_a, 3), (placed.team_b, 5)):
        headers = _pair(placed, team)
        posted = placed.client.post(
            "/v1/messages", json={"messages": batch(count)}, headers=headers
        )
        assert posted.status_code == 200, posted.text

    for table, a_rows, b_rows in (("messages", 3, 5), ("wire_ids", 3, 5), ("credentials", 1, 1)):
        assert two.rows_of("a", table, placed.team_a.team_id) == a_rows
        assert two.rows_of("b", table, placed.team_b.team_id) == b_rows
        assert two.rows_of("a", table, placed.team_b.team_id) == 0
        assert two.rows_of("b", table, placed.team_a.team_id) == 0
    assert two.count("a", "SELECT count(*) FROM teams") == 1
    assert two.count("b", "SELECT count(*) FROM teams") == 1


def test_a_team_in_the_second_database_syncs_its_stream_through_the_one_relay(
    placed: Placed,
) -> None:
    headers = _pair(placed, placed.team_b)
    sent = batch(4)
    acks = placed.client.post("/v1/messages", json={"messages": sent}, headers=headers).json()
    page = placed.client.get("/v1/messages", params={"after": "0"}, headers=headers).json()

    assert [int(a["server_seq"]) for a in acks["acks"]] == [1, 2, 3, 4]
    assert [m["id"] for m in page["messages"]] == [m["id"] for m in sent]


# -- one deployment identity -------------------------------------------------------------------
def test_every_database_of_a_placement_carries_the_one_server_instance_id(
    placed: Placed, two: TwoDatabases
) -> None:
    ids = {
        name: two.count(
            name, "SELECT 1 FROM relay_meta WHERE value = %s", placed.store.server_instance_id
        )
        for name in ("a", "b")
    }
    health = placed.client.get("/v1/health").json()

    assert ids == {"a": 1, "b": 1}
    assert health["server_instance_id"] == placed.store.server_instance_id


def test_databases_of_two_deployments_are_refused_as_one_placement(two: TwoDatabases) -> None:
    first = location.initialize(two.urls["a"])
    second = location.initialize(two.urls["b"])
    two.place({})

    with pytest.raises(OperatorError, match="different relay deployments"):
        location.open_store(two.location)
    assert first != second


# -- the requests that name no team, or every team ------------------------------------------------
def test_a_pairing_token_is_exchanged_in_whichever_database_holds_it(placed: Placed) -> None:
    for team in (placed.team_a, placed.team_b):
        headers = _pair(placed, team)
        assert placed.client.get("/v1/members", headers=headers).status_code == 200
    unknown = placed.client.post(
        "/v1/pairing/exchange",
        json={"token": issue_token(placed.store, placed.team_b.team_id)[:-4] + "AAAA"},
        headers={"Agmsg-Protocol-Version": "1"},
    )
    assert unknown.status_code == 401
    assert unknown.json()["error"]["code"] == "invalid-pairing-token"


def test_operator_listings_and_counts_cover_every_database(placed: Placed) -> None:
    for team in (placed.team_a, placed.team_b):
        headers = _pair(placed, team)
        placed.client.post("/v1/messages", json={"messages": batch(2)}, headers=headers)

    status = placed.store.status()
    counts = placed.store.counts()
    credentials = placed.store.list_credentials(None)

    assert {t.team_id for t in status.teams} == {placed.team_a.team_id, placed.team_b.team_id}
    assert (counts.teams, counts.messages_stored) == (2, 4)
    assert {c.team_id for c in credentials} == {placed.team_a.team_id, placed.team_b.team_id}


# -- a team's database never changes -------------------------------------------------------------
def test_a_team_held_by_another_database_is_not_provisioned_again_where_it_is_now_placed(
    placed: Placed, two: TwoDatabases
) -> None:
    placed.store.close()
    two.place({placed.team_a.team_id: "b", placed.team_b.team_id: "b"})
    moved = location.open_store(two.location)
    try:
        with pytest.raises(ProvisioningRejected, match="is held by database 'a'"):
            provision_with_id(moved, placed.team_a.team_id)
    finally:
        moved.close()
    assert two.count("b", "SELECT count(*) FROM teams") == 1


# -- the placement file --------------------------------------------------------------------------
def test_a_placement_file_with_a_password_others_can_read_is_refused(two: TwoDatabases) -> None:
    two.path.write_text(
        json.dumps({"databases": {"a": "postgresql://relay:s3cret@127.0.0.1:1/x"}, "default": "a"}),
        encoding="utf-8",
    )
    os.chmod(two.path, 0o644)

    with pytest.raises(OperatorError, match="password and others can read it") as caught:
        location.open_store(two.location)
    assert "s3cret" not in str(caught.value) and "chmod 600" in caught.value.remediation


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{", "not JSON"),
        ('{"databases": {}, "default": "a"}', "at least one database"),
        ('{"databases": {"a": "/var/relay.db"}, "default": "a"}', "not a postgresql:// URL"),
        ('{"databases": {"a": "postgresql://h/x"}, "default": "z"}', "default must be"),
        (
            '{"databases": {"a": "postgresql://h/x"}, "default": "a", "teams": {"t": "q"}}',
            "unknown database 'q'",
        ),
    ],
)
def test_a_malformed_placement_file_is_one_line_naming_the_problem(
    tmp_path: Path, content: str, problem: str
) -> None:
    path = tmp_path / "placement.json"
    path.write_text(content, encoding="utf-8")

    with pytest.raises(OperatorError, match=problem) as caught:
        location.open_store(f"placement:{path}")
    assert "\n" not in caught.value.message


# -- the real CLI and server -----------------------------------------------------------------------
def test_the_relay_cli_inits_and_serves_a_placement_through_one_port(
    two: TwoDatabases, tmp_path: Path
) -> None:
    from tests.support import live_relay as live

    placed_id = new_uuid7()
    two.place({placed_id: "b"})
    initialized = live.cli(two.location, "init", "--json")
    assert initialized.returncode == 0, initialized.stderr
    team_a = live.provision(two.location, tmp_path)["team_id"]
    document = {
        "team_id": placed_id,
        "team_name": "team-b",
        "members": [{"member_id": new_uuid7(), "name": "leader"}],
    }
    (tmp_path / "b.json").write_text(json.dumps(document), encoding="utf-8")
    applied = live.cli(two.location, "team", "apply", str(tmp_path / "b.json"), "--json")
    assert applied.returncode == 0, applied.stderr

    with live.running_relay(two.location, "--no-access-log") as relay, relay.client() as client:
        for team_id, count in ((team_a, 2), (placed_id, 3)):
            headers = relay.pair(team_id)
            posted = client.post("/v1/messages", json={"messages": batch(count)}, headers=headers)
            assert posted.status_code == 200, posted.text
            page = client.get("/v1/messages", params={"after": "0"}, headers=headers).json()
            assert len(page["messages"]) == count
    assert two.rows_of("a", "messages", team_a) == 2
    assert two.rows_of("b", "messages", placed_id) == 3


def test_each_worker_of_a_group_serves_the_team_in_the_second_database(
    two: TwoDatabases, tmp_path: Path
) -> None:
    from tests.support import live_relay as live
    from tests.support.worker_group import running_group

    placed_id = new_uuid7()
    two.place({placed_id: "b"})
    assert live.cli(two.location, "init").returncode == 0
    document = {
        "team_id": placed_id,
        "team_name": "team-b",
        "members": [{"member_id": new_uuid7(), "name": "leader"}],
    }
    (tmp_path / "b.json").write_text(json.dumps(document), encoding="utf-8")
    assert live.cli(two.location, "team", "apply", str(tmp_path / "b.json")).returncode == 0

    with running_group(two.location, "--workers", "2", "--no-access-log") as group:
        headers = group.pair(placed_id)
        for pid in group.pids:
            with group.only(pid):
                posted = httpx.post(
                    group.url + "/v1/messages",
                    json={"messages": batch(2)},
                    headers=headers,
                    timeout=60,
                )
                assert posted.status_code == 200, posted.text
    assert two.rows_of("b", "messages", placed_id) == 4
    assert two.count("a", "SELECT count(*) FROM messages") == 0
