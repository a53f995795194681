"""The in-process relay: a real store of one backend behind the app, driven through
Starlette's TestClient with a fake clock, and the devices paired with it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from starlette.testclient import TestClient

from relay.http.app import create_app
from relay.http.live import LiveOptions
from relay.storage.base import RelayStore
from tests.relay.backends import Backend
from tests.relay.helpers import FakeClock, Team, issue_token, team_headers


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
    store: RelayStore
    client: TestClient
    clock: FakeClock
    backend: Backend

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


def make_relay(
    backend: Backend,
    *,
    live: LiveOptions | None = LiveOptions(),  # noqa: B008 - frozen, the app's own default
    metrics: bool = False,
    **store_kwargs: Any,
) -> Iterator[Relay]:
    """The one in-process relay: a fresh store of ``backend`` behind the app,
    with the live extension and ``/metrics`` only when a test asks for them."""
    store = backend.new_store(**store_kwargs)
    clock = FakeClock()
    app = create_app(store, clock=clock, live=live, metrics=metrics)
    try:
        with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
            yield Relay(store, client, clock, backend)
    finally:
        store.close()
