"""GET /metrics (specs/relay.md "Operations"): Prometheus text, route templates, no identifiers.

Every test here runs on both backends except the pool and outage ones, which
are about what one backend can report. The exposition is read back with
``prometheus_client``'s own parser, so a malformed line fails the test.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from relay.http.app import create_app
from relay.server import is_loopback, metrics_enabled
from relay.storage.base import RelayStore
from tests.relay.app_relay import make_relay
from tests.relay.backends import Backend
from tests.relay.helpers import FakeClock, Team, batch, issue_token, provision, team_headers
from tests.support.live_relay import database_for, running_relay

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@dataclass
class MetricsRelay:
    store: RelayStore
    client: TestClient
    backend: Backend

    def pair(self, team: Team) -> tuple[dict[str, str], str, str]:
        """Headers, credential secret and credential ID of one new device."""
        token = issue_token(self.store, team.team_id)
        body = self.client.post(
            "/v1/pairing/exchange", json={"token": token}, headers={"Agmsg-Protocol-Version": "1"}
        ).json()
        return (
            team_headers(team.team_id, body["credential"]),
            body["credential"],
            body["credential_id"],
        )

    def scrape(self) -> Samples:
        response = self.client.get("/metrics")
        assert response.status_code == 200, response.text
        return parse(response.text)


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


@pytest.fixture
def metrics_relay(backend: Backend) -> Iterator[MetricsRelay]:
    for relay in make_relay(backend, metrics=True):
        yield MetricsRelay(relay.store, relay.client, backend)


def test_requests_are_counted_by_route_template_method_and_status(
    metrics_relay: MetricsRelay,
) -> None:
    relay = metrics_relay
    headers, _, credential_id = relay.pair(provision(relay.store))
    relay.client.post("/v1/messages", json={"messages": batch(2)}, headers=headers)
    relay.client.get("/v1/messages", params={"after": "0"}, headers=headers)
    relay.client.get("/v1/messages", params={"after": "0"}, headers={})
    relay.client.post(f"/v1/credentials/{credential_id}/revoke", headers=headers)
    samples = relay.scrape()
    total = "syncengine_relay_http_requests_total"
    assert value(samples, total, route="/v1/messages", method="POST", status="200") == 1
    assert value(samples, total, route="/v1/messages", method="GET", status="200") == 1
    assert value(samples, total, route="/v1/messages", method="GET", status="426") == 1
    assert value(samples, total, route="/v1/pairing/exchange", method="POST", status="200") == 1
    revoke = "/v1/credentials/{credential_id}/revoke"
    assert value(samples, total, route=revoke, method="POST", status="200") == 1


def test_request_latency_is_a_histogram_per_route_template(metrics_relay: MetricsRelay) -> None:
    relay = metrics_relay
    for _ in range(3):
        relay.client.get("/v1/health")
    samples = relay.scrape()
    name = "syncengine_relay_http_request_duration_seconds"
    labels = {"route": "/v1/health", "method": "GET"}
    assert value(samples, f"{name}_count", **labels) == 3
    assert value(samples, f"{name}_bucket", le="+Inf", **labels) == 3
    total = value(samples, f"{name}_sum", **labels)
    assert total is not None and 0 < total < 30


def test_unknown_paths_are_counted_as_unmatched_never_by_their_raw_path(
    metrics_relay: MetricsRelay,
) -> None:
    relay = metrics_relay
    relay.client.get("/v1/teams/0190f5a4-0000-7000-8000-000000000001/secret-ish")
    relay.client.request("BREW", "/v1/health")
    response = relay.client.get("/metrics")
    samples = parse(response.text)
    total = "syncengine_relay_http_requests_total"
    assert value(samples, total, route="unmatched", method="GET", status="404") == 1
    # A method outside the set matches its route (the guard answers it), but
    # is counted as "other", never by its name.
    assert value(samples, total, route="/v1/health", method="other", status="405") == 1
    assert "0190f5a4" not in response.text and "secret-ish" not in response.text
    assert "BREW" not in response.text


def test_messages_stored_teams_and_sequenced_come_from_the_team_rows(
    metrics_relay: MetricsRelay,
) -> None:
    relay = metrics_relay
    first, second = provision(relay.store), provision(relay.store)
    provision(relay.store)
    headers_a, _, _ = relay.pair(first)
    headers_b, _, _ = relay.pair(second)
    relay.client.post("/v1/messages", json={"messages": batch(5)}, headers=headers_a)
    relay.client.post("/v1/messages", json={"messages": batch(2)}, headers=headers_b)
    relay.store.retain(first.team_id, 3)
    samples = relay.scrape()
    assert value(samples, "syncengine_relay_teams") == 3
    assert value(samples, "syncengine_relay_messages_stored") == 2 + 2
    assert value(samples, "syncengine_relay_messages_sequenced_total") == 5 + 2
    assert value(samples, "syncengine_relay_database_up") == 1


def test_store_counts_equal_counting_every_live_message_row(backend: Backend) -> None:
    """The aggregate over team rows is exact: it matches status()'s count(*) per team."""
    store = backend.new_store()
    try:
        app = create_app(store, clock=FakeClock())
        with TestClient(app, base_url="http://127.0.0.1") as client:
            teams = [provision(store) for _ in range(3)]
            for index, team in enumerate(teams):
                token = issue_token(store, team.team_id)
                credential = client.post(
                    "/v1/pairing/exchange",
                    json={"token": token},
                    headers={"Agmsg-Protocol-Version": "1"},
                ).json()["credential"]
                headers = team_headers(team.team_id, credential)
                for _ in range(index + 1):
                    client.post("/v1/messages", json={"messages": batch(4)}, headers=headers)
            store.retain(teams[1].team_id, 5)
            store.retain(teams[2].team_id, 12)
        counts = store.counts()
        status = store.status()
    finally:
        store.close()
    assert counts.teams == len(status.teams) == 3
    assert counts.messages_stored == sum(t.live_messages for t in status.teams) == 4 + 3 + 0
    assert counts.messages_sequenced == sum(t.current_seq for t in status.teams) == 24


def test_metrics_need_no_credential_and_serve_prometheus_text(
    metrics_relay: MetricsRelay,
) -> None:
    response = metrics_relay.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert "# TYPE syncengine_relay_http_requests_total counter" in response.text


def test_metrics_expose_no_team_member_credential_or_token(metrics_relay: MetricsRelay) -> None:
    relay = metrics_relay
    team = provision(relay.store)
    token = issue_token(relay.store, team.team_id)
    exchange = relay.client.post(
        "/v1/pairing/exchange", json={"token": token}, headers={"Agmsg-Protocol-Version": "1"}
    ).json()
    headers = team_headers(team.team_id, exchange["credential"])
    messages = batch(3)
    relay.client.post("/v1/messages", json={"messages": messages}, headers=headers)
    relay.client.get("/v1/messages", params={"after": "0", "limit": "2"}, headers=headers)
    relay.client.get("/v1/members", headers=headers)
    relay.client.post(f"/v1/credentials/{exchange['credential_id']}/revoke", headers=headers)
    text = relay.client.get("/metrics").text
    secrets = [team.team_id, token, exchange["credential"], exchange["credential_id"]]
    secrets += [m.member_id for m in team.members] + [m.name for m in team.members]
    secrets += [m["id"] for m in messages] + [m["envelope"]["blob"] for m in messages]
    leaked = [s for s in secrets if s in text]
    assert leaked == []
    assert "limit=" not in text and "Bearer" not in text


def test_metrics_path_is_404_with_the_error_body_when_disabled(backend: Backend) -> None:
    store = backend.new_store()
    try:
        with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
            response = client.get("/metrics")
    finally:
        store.close()
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not-found"
    assert response.headers["agmsg-protocol-version"] == "1"


def test_postgres_pool_state_reports_size_available_and_waiting(
    postgres_backend: Backend,
) -> None:
    store = postgres_backend.new_store()
    try:
        with TestClient(create_app(store, metrics=True), base_url="http://127.0.0.1") as client:
            samples = parse(client.get("/metrics").text)
        pool = store.pool_state()
    finally:
        store.close()
    assert pool.max_size == 10 and pool.waiting == 0
    assert value(samples, "syncengine_relay_db_pool_max_connections") == 10
    assert value(samples, "syncengine_relay_db_pool_waiting_requests") == 0
    size = value(samples, "syncengine_relay_db_pool_connections")
    available = value(samples, "syncengine_relay_db_pool_available_connections")
    assert size is not None and available is not None and 1 <= size <= 10
    assert 0 <= available <= size


def test_sqlite_pool_state_reports_only_open_connections(sqlite_backend: Backend) -> None:
    store = sqlite_backend.new_store()
    try:
        with TestClient(create_app(store, metrics=True), base_url="http://127.0.0.1") as client:
            samples = parse(client.get("/metrics").text)
    finally:
        store.close()
    connections = value(samples, "syncengine_relay_db_pool_connections")
    assert connections is not None and connections >= 1
    names = {name for name, _ in samples}
    assert not names & {
        "syncengine_relay_db_pool_max_connections",
        "syncengine_relay_db_pool_available_connections",
        "syncengine_relay_db_pool_waiting_requests",
    }


def test_scrape_says_the_database_is_down_and_still_answers_200(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    store = sqlite_backend.new_store()
    database = Path(sqlite_backend.location)
    moved = tmp_path / "moved.db"
    try:
        with TestClient(create_app(store, metrics=True), base_url="http://127.0.0.1") as client:
            shutil.move(database, moved)
            store.close()  # drop open connections: the next read must open the file
            try:
                down = parse(client.get("/metrics").text)
            finally:
                shutil.move(moved, database)
            up = parse(client.get("/metrics").text)
    finally:
        store.close()
    assert value(down, "syncengine_relay_database_up") == 0
    assert value(down, "syncengine_relay_teams") is None
    assert value(up, "syncengine_relay_database_up") == 1
    assert value(up, "syncengine_relay_teams") == 0


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.0.2.7", False),
        ("2001:db8::1", False),
        ("not-an-address", False),
    ],
)
def test_metrics_default_on_exactly_for_a_loopback_bind(address: str, loopback: bool) -> None:
    assert is_loopback(address) is loopback
    assert metrics_enabled(None, address) is loopback


def test_explicit_metrics_flag_wins_over_the_bound_address() -> None:
    assert metrics_enabled(True, "0.0.0.0") is True
    assert metrics_enabled(False, "127.0.0.1") is False


def test_live_relay_on_loopback_serves_metrics_by_default(backend: Backend, tmp_path: Path) -> None:
    with running_relay(database_for(backend, tmp_path)) as live, live.client() as client:
        client.get("/v1/health")
        response = client.get("/metrics")
    assert response.status_code == 200
    samples = parse(response.text)
    total = "syncengine_relay_http_requests_total"
    assert value(samples, total, route="/v1/health", method="GET", status="200") is not None


def test_live_relay_with_no_metrics_answers_404_in_the_error_envelope(
    backend: Backend, tmp_path: Path
) -> None:
    with (
        running_relay(database_for(backend, tmp_path), "--no-metrics") as live,
        live.client() as client,
    ):
        response = client.get("/metrics")
    assert response.status_code == 404
    body: dict[str, Any] = response.json()
    assert body["error"]["code"] == "not-found"


# -- a worker group's one answer (relay/http/metrics_group.py) -------------------------------


def _worker_registry(requests: int, open_waits: float) -> list[Any]:
    from prometheus_client import CollectorRegistry, Counter, Gauge

    registry = CollectorRegistry()
    counter = Counter("t_requests", "requests", ("route",), registry=registry)
    counter.labels("/v1/health").inc(requests)
    Gauge("t_waits_open", "open now", registry=registry).set(open_waits)
    return list(registry.collect())


def _merged_samples(merged: list[Any]) -> dict[str, float]:
    return {
        sample.name + str(sorted(sample.labels.items())): sample.value
        for family in merged
        for sample in family.samples
    }


def test_a_group_scrape_adds_up_every_workers_counters_and_open_gauges(tmp_path: Path) -> None:
    from relay.http.metrics_group import MetricsGroup, merge_families

    MetricsGroup(tmp_path, pid=101).publish(_worker_registry(requests=4, open_waits=2))
    MetricsGroup(tmp_path, pid=102).publish(_worker_registry(requests=5, open_waits=1))
    answering = MetricsGroup(tmp_path, pid=103)
    merged = _merged_samples(
        merge_families(_worker_registry(requests=3, open_waits=0), answering.siblings())
    )
    assert merged["t_requests_total[('route', '/v1/health')]"] == 12.0
    assert merged["t_waits_open[]"] == 3.0


def test_a_retired_workers_counters_stay_in_the_totals_and_its_gauges_leave(
    tmp_path: Path,
) -> None:
    from relay.http.metrics_group import MetricsGroup, merge_families, retire

    MetricsGroup(tmp_path, pid=101).publish(_worker_registry(requests=4, open_waits=2))
    retire(tmp_path, 101)
    merged = _merged_samples(
        merge_families(
            _worker_registry(requests=3, open_waits=1), MetricsGroup(tmp_path).siblings()
        )
    )
    assert merged["t_requests_total[('route', '/v1/health')]"] == 7.0
    assert merged["t_waits_open[]"] == 1.0


def test_a_group_scrape_keeps_the_earliest_created_time(tmp_path: Path) -> None:
    from relay.http.metrics_group import MetricsGroup, merge_families

    older = _worker_registry(requests=1, open_waits=0)
    MetricsGroup(tmp_path, pid=101).publish(older)
    newer = _worker_registry(requests=1, open_waits=0)
    merged = _merged_samples(merge_families(newer, MetricsGroup(tmp_path, pid=102).siblings()))
    created = [s.value for f in older for s in f.samples if s.name.endswith("_created")]
    assert merged["t_requests_created[('route', '/v1/health')]"] == created[0]
