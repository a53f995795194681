"""In-process relay fixtures: a real SQLite store behind Starlette's TestClient."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from relay.http.app import create_app
from relay.storage.sqlite import SqliteRelayStore
from tests.relay.helpers import FakeClock, Team, issue_token, new_store, provision, team_headers


@dataclass
class Device:
    team: Team
    credential: str
    credential_id: str

    @property
    def headers(self) -> dict[str, str]:
        return team_headers(self.team.team_id, self.credential)


@dataclass
class Relay:
    store: SqliteRelayStore
    client: TestClient
    clock: FakeClock

    def pair(self, team: Team) -> Device:
        token = issue_token(self.store, team.team_id, self.clock.now)
        response = self.client.post(
            "/v1/pairing/exchange",
            json={"token": token},
            headers={"Agmsg-Protocol-Version": "1"},
        )
        assert response.status_code == 200, response.text
        body = response.json()
        return Device(team, body["credential"], body["credential_id"])


def make_relay(tmp_path: Path, **store_kwargs: object) -> Iterator[Relay]:
    store = new_store(tmp_path, **store_kwargs)
    clock = FakeClock()
    app = create_app(store, clock=clock)
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
        yield Relay(store, client, clock)
    store.close()


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[Relay]:
    yield from make_relay(tmp_path)


@pytest.fixture
def team(relay: Relay) -> Team:
    return provision(relay.store)


@pytest.fixture
def device(relay: Relay, team: Team) -> Device:
    return relay.pair(team)
