"""The live wait (GET /x-syncengine/live/v1/wait), relay side: specs/live.md.

Every verdict waits on an event (the hub's open-wait count, a response) with
a generous bound; none depends on how fast the machine is. A wait that is
meant to be *held* is opened in a thread, and the test acts only once the
hub counts it open, so "woken" really exercises the wake, not the first read.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import apsw
import httpx
import psycopg
import pytest

from relay.errors import OperatorError
from relay.http.app import ProtocolHeaders
from relay.http.live import LiveHub, LiveOptions
from relay.logformat import ACCESS_ATTRIBUTE, ACCESS_LOGGER
from relay.secrets import timestamp
from relay.storage import location
from relay.storage.pg_live import APPLICATION_NAME
from relay.storage.pg_schema import SCHEMA_VERSION as PG_SCHEMA_VERSION
from tests.relay.app_relay import Device, Relay, make_relay
from tests.relay.backends import Backend
from tests.relay.helpers import batch, provision
from tests.support.live_relay import Database, LiveRelay, running_relay
from tests.support.live_relay import provision as live_provision
from wire.http_v1.live import LIVE_HEADER, LIVE_HEADER_VALUE, LIVE_WAIT, LiveWaitAnswer

#: The bound on anything the tests wait for; never reached when all is well.
BOUND_S = 30.0
#: A short safety tick, so the revocation and lost-wake rules are seen quickly.
FAST = LiveOptions(tick_seconds=0.2, max_waits_per_credential=2, max_waits=3)


def _relay(backend: Backend, live: LiveOptions | None, metrics: bool = False) -> Iterator[Relay]:
    return make_relay(backend, live=live, metrics=metrics)


@pytest.fixture
def relay(backend: Backend) -> Iterator[Relay]:
    yield from _relay(backend, FAST, metrics=True)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=8) as executor:
        yield executor


def hub(relay: Relay) -> LiveHub:
    app: ProtocolHeaders = relay.client.app  # type: ignore[assignment]
    assert app.live is not None
    return app.live


def until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + BOUND_S
    while not condition():
        assert time.monotonic() < deadline, "condition not reached within the bound"
        time.sleep(0.01)


def wait(
    relay: Relay, device: Device, after: int = 0, read_after: int = 0, seconds: int = 25
) -> Any:
    return relay.client.get(
        LIVE_WAIT,
        params={"after": str(after), "read_after": str(read_after), "wait": str(seconds)},
        headers=device.headers,
    )


def held(pool: ThreadPoolExecutor, relay: Relay, device: Device, **query: int) -> Future[Any]:
    """Open a wait in a thread and return once the hub holds it."""
    before = hub(relay).open_waits
    future = pool.submit(wait, relay, device, **query)
    until(lambda: hub(relay).open_waits > before or future.done())
    return future


def answer(response: Any) -> LiveWaitAnswer:
    assert response.status_code == 200, response.text
    return LiveWaitAnswer.from_obj(response.json())


def post(relay: Relay, device: Device, count: int = 1) -> list[str]:
    messages = batch(count)
    response = relay.client.post(
        "/v1/messages", json={"messages": messages}, headers=device.headers
    )
    assert response.status_code == 200, response.text
    return [m["id"] for m in messages]


def read_sync(relay: Relay, device: Device, member: str, seq: int) -> None:
    response = relay.client.post(
        "/v1/read-state/sync",
        json={
            "updates": [{"member_id": member, "server_seq": str(seq), "exact_wire_ids": []}],
            "page_after": None,
            "page_limit": 1000,
        },
        headers=device.headers,
    )
    assert response.status_code == 200, response.text


# -- answering --------------------------------------------------------------------------------
def test_a_wait_answers_at_once_when_the_head_is_past_after(relay: Relay, device: Device) -> None:
    post(relay, device, 3)
    got = answer(wait(relay, device, after=1))
    assert (got.current_seq, got.woken) == (3, True)
    assert got.binding.team_id == device.team.team_id
    assert got.binding.server_instance_id == relay.store.server_instance_id


def test_a_held_wait_is_woken_by_a_post_with_the_new_head(
    relay: Relay, device: Device, pool: ThreadPoolExecutor
) -> None:
    post(relay, device, 2)
    future = held(pool, relay, device, after=2)
    assert not future.done()
    post(relay, device, 1)
    got = answer(future.result(timeout=BOUND_S))
    assert (got.current_seq, got.read_revision, got.woken) == (3, 0, True)
    assert hub(relay).wakes["head"] == 1


def test_a_post_of_duplicates_only_does_not_wake(
    relay: Relay, device: Device, pool: ThreadPoolExecutor
) -> None:
    messages = batch(1)
    for _ in range(2):
        sent = relay.client.post(
            "/v1/messages", json={"messages": messages}, headers=device.headers
        )
        assert sent.status_code == 200
    got = answer(wait(relay, device, after=1, seconds=1))
    assert (got.current_seq, got.woken) == (1, False)


def test_wait_zero_answers_at_once_not_woken(relay: Relay, device: Device) -> None:
    got = answer(wait(relay, device, seconds=0))
    assert (got.current_seq, got.read_revision, got.woken) == (0, 0, False)
    assert hub(relay).open_waits == 0


def test_a_read_state_change_wakes_with_read_revision_advanced(
    relay: Relay, device: Device, pool: ThreadPoolExecutor
) -> None:
    post(relay, device, 2)
    member = device.team.members[0].member_id
    future = held(pool, relay, device, after=2, read_after=0)
    read_sync(relay, device, member, 2)
    got = answer(future.result(timeout=BOUND_S))
    assert (got.current_seq, got.read_revision, got.woken) == (2, 1, True)
    assert hub(relay).wakes["read"] == 1


def test_a_read_sync_that_changes_nothing_keeps_read_revision(relay: Relay, device: Device) -> None:
    post(relay, device, 2)
    member = device.team.members[0].member_id
    read_sync(relay, device, member, 2)
    read_sync(relay, device, member, 1)  # max-merge: the stored frontier stays 2
    read_sync(relay, device, member, 2)
    assert answer(wait(relay, device, after=2, read_after=0, seconds=0)).read_revision == 1


def test_a_wait_times_out_not_woken_when_nothing_happens(relay: Relay, device: Device) -> None:
    got = answer(wait(relay, device, after=0, seconds=1))
    assert (got.current_seq, got.woken) == (0, False)
    assert hub(relay).wakes["timeout"] == 1 and hub(relay).open_waits == 0


def test_the_relay_bound_caps_a_longer_wait(backend: Backend, pool: ThreadPoolExecutor) -> None:
    for relay in _relay(backend, LiveOptions(max_wait_seconds=1)):
        device = relay.pair(provision(relay.store))
        future = pool.submit(wait, relay, device, seconds=55)
        got = answer(future.result(timeout=BOUND_S))  # 55 s would overrun the bound
        assert got.woken is False


# -- refusals ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "query",
    [
        "after=0&read_after=0",
        "after=0&wait=1",
        "read_after=0&wait=1",
        "after=0&read_after=0&wait=1&extra=1",
        "after=01&read_after=0&wait=1",
        "after=-1&read_after=0&wait=1",
        "after=0&read_after=0&wait=56",
        "after=0&read_after=0&wait=1.5",
        "after=0&read_after=0&wait=01",
        "after=0&read_after=x&wait=1",
        "after=0&after=1&read_after=0&wait=1",
    ],
)
def test_a_malformed_query_is_400_invalid_request(relay: Relay, device: Device, query: str) -> None:
    response = relay.client.get(f"{LIVE_WAIT}?{query}", headers=device.headers)
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error"]["code"] == "invalid-request"
    assert body["team_id"] == device.team.team_id


def test_a_missing_or_unknown_credential_is_401_without_binding(
    relay: Relay, device: Device
) -> None:
    params = {"after": "0", "read_after": "0", "wait": "0"}
    no_bearer = {k: v for k, v in device.headers.items() if k != "Authorization"}
    wrong = {**device.headers, "Authorization": "Bearer " + "A" * 43}
    for headers in (no_bearer, wrong):
        response = relay.client.get(LIVE_WAIT, params=params, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthenticated"
        assert "team_id" not in response.json()


def test_a_wait_without_the_protocol_header_is_426(relay: Relay, device: Device) -> None:
    headers = {k: v for k, v in device.headers.items() if k != "Agmsg-Protocol-Version"}
    response = relay.client.get(
        LIVE_WAIT, params={"after": "0", "read_after": "0", "wait": "0"}, headers=headers
    )
    assert response.status_code == 426


def test_a_credential_revoked_mid_wait_is_cut_off_with_401(
    relay: Relay, device: Device, pool: ThreadPoolExecutor
) -> None:
    future = held(pool, relay, device, seconds=25)
    relay.store.revoke_credential(
        device.team.team_id, device.credential_id, timestamp(relay.clock.now)
    )
    response = future.result(timeout=BOUND_S)  # answered by a tick, long before 25 s
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
    assert hub(relay).open_waits == 0


def test_waits_past_the_per_credential_cap_are_429_with_retry_after(
    relay: Relay, device: Device, pool: ThreadPoolExecutor
) -> None:
    held_waits = [held(pool, relay, device) for _ in range(FAST.max_waits_per_credential)]
    refused = wait(relay, device, seconds=25)
    assert refused.status_code == 429
    body = refused.json()
    assert body["error"]["code"] == "live-wait-limit"
    assert body["error"]["details"] == {"scope": "credential", "limit": 2}
    assert body["team_id"] == device.team.team_id
    assert int(refused.headers["Retry-After"]) > 0
    other = relay.pair(device.team)  # another device still gets its wait
    held_waits.append(held(pool, relay, other))
    assert hub(relay).open_waits == 3
    post(relay, device)
    for future in held_waits:
        assert answer(future.result(timeout=BOUND_S)).woken
    assert answer(wait(relay, device, after=1, seconds=0)).current_seq == 1


def test_waits_past_the_process_cap_are_429(
    relay: Relay, device: Device, pool: ThreadPoolExecutor
) -> None:
    devices = [device, relay.pair(device.team), relay.pair(device.team)]
    futures = [held(pool, relay, d) for d in devices]
    fourth = relay.pair(device.team)
    refused = wait(relay, fourth)
    assert refused.status_code == 429
    assert refused.json()["error"]["details"] == {"scope": "relay", "limit": 3}
    assert hub(relay).refused == 1
    post(relay, device)
    for future in futures:
        assert answer(future.result(timeout=BOUND_S)).woken


def test_a_wait_at_zero_is_never_refused_by_the_caps(
    relay: Relay, device: Device, pool: ThreadPoolExecutor
) -> None:
    futures = [held(pool, relay, device) for _ in range(FAST.max_waits_per_credential)]
    assert answer(wait(relay, device, seconds=0)).woken is False
    post(relay, device)
    for future in futures:
        future.result(timeout=BOUND_S)


# -- discovery, and v1 untouched --------------------------------------------------------------
def test_capabilities_carry_the_live_header(relay: Relay, device: Device) -> None:
    response = relay.client.get("/v1/capabilities", headers=device.headers)
    assert response.status_code == 200
    assert response.headers[LIVE_HEADER] == LIVE_HEADER_VALUE


def test_only_capabilities_carry_the_live_header(relay: Relay, device: Device) -> None:
    for path in ("/v1/members", "/v1/messages?after=0", "/v1/health"):
        assert LIVE_HEADER not in relay.client.get(path, headers=device.headers).headers


def test_without_live_there_is_no_header_and_the_route_is_unknown(backend: Backend) -> None:
    for relay in _relay(backend, None):
        device = relay.pair(provision(relay.store))
        capabilities = relay.client.get("/v1/capabilities", headers=device.headers)
        assert capabilities.status_code == 200
        assert LIVE_HEADER not in capabilities.headers
        response = wait(relay, device, seconds=0)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not-found"


def test_v1_documents_are_identical_with_and_without_live(backend: Backend) -> None:
    """Same database, same team: the live extension changes no byte of a v1 document."""
    documents: list[dict[str, bytes]] = []
    team = None
    for live in (LiveOptions(), None):
        for relay in _relay(backend, live):
            if team is None:
                team = provision(relay.store)
                post(relay, relay.pair(team), 2)
            device = relay.pair(team)
            documents.append(
                {
                    path: relay.client.get(path, headers=device.headers).content
                    for path in ("/v1/capabilities", "/v1/members", "/v1/messages?after=0")
                }
            )
    with_live, without = documents
    assert with_live == without
    assert b'"current_seq":"2"' in with_live["/v1/capabilities"]


# -- operations -------------------------------------------------------------------------------
def test_metrics_count_open_waits_and_answers_by_reason(
    relay: Relay, device: Device, pool: ThreadPoolExecutor
) -> None:
    future = held(pool, relay, device)
    text = relay.client.get("/metrics").text
    assert "syncengine_relay_live_waits_open 1.0" in text
    post(relay, device)
    answer(future.result(timeout=BOUND_S))
    answer(wait(relay, device, after=1, seconds=0))
    text = relay.client.get("/metrics").text
    assert "syncengine_relay_live_waits_open 0.0" in text
    assert 'syncengine_relay_live_wait_answers_total{reason="head"} 1.0' in text
    assert 'syncengine_relay_live_wait_answers_total{reason="timeout"} 1.0' in text
    assert f'route="{LIVE_WAIT}"' in text


def test_a_wait_is_logged_under_its_route_template_without_its_query(
    relay: Relay, device: Device, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger=ACCESS_LOGGER)
    answer(wait(relay, device, after=0, read_after=0, seconds=0))
    records = [getattr(r, ACCESS_ATTRIBUTE, None) for r in caplog.records]
    routes = [r.route for r in records if r is not None]
    assert LIVE_WAIT in routes
    assert "read_after" not in caplog.text and device.credential not in caplog.text


def test_one_post_wakes_every_wait_of_its_team_with_one_head_read(backend: Backend) -> None:
    """Many waits of one team on one process: one POST answers them all."""
    for relay in _relay(backend, LiveOptions(max_waits_per_credential=50)):
        device = relay.pair(provision(relay.store))
        with ThreadPoolExecutor(max_workers=20) as pool:
            futures = [held(pool, relay, device) for _ in range(20)]
            post(relay, device)
            assert all(answer(f.result(timeout=BOUND_S)).woken for f in futures)
        assert hub(relay).refreshes <= 2  # one read of the head per burst, not per waiter


# -- schema: read_revision arrives by migration -----------------------------------------------
def _downgrade_to_version_1(backend: Backend) -> None:
    """What a relay of the previous release left: no read_revision, schema version 1."""
    backend.execute("ALTER TABLE teams DROP COLUMN read_revision")
    backend.execute("UPDATE relay_meta SET value = '1' WHERE key = 'schema_version'")


def test_an_existing_database_migrates_to_read_revision_and_keeps_its_data(
    backend: Backend,
) -> None:
    team = None
    for relay in _relay(backend, FAST):
        team = provision(relay.store)
        post(relay, relay.pair(team), 3)
    assert team is not None
    _downgrade_to_version_1(backend)
    # PostgreSQL's schema has a version 3 of its own (issue #35, pg_schema.py).
    newest = PG_SCHEMA_VERSION if backend.is_postgres else 2
    with pytest.raises(OperatorError, match=f"needs {newest}") as refused:
        backend.open()
    assert "syncengine relay migrate" in refused.value.remediation
    assert location.migrate(backend.location) == (1, newest)
    assert location.migrate(backend.location) == (newest, newest)
    for relay in _relay(backend, FAST):
        device = relay.pair(team)
        got = answer(wait(relay, device, after=3, seconds=0))
        assert (got.current_seq, got.read_revision) == (3, 0)
        read_sync(relay, device, team.members[0].member_id, 3)
        assert answer(wait(relay, device, after=3, seconds=0)).read_revision == 1


def test_a_migrated_sqlite_file_has_the_schema_of_a_new_one(tmp_path: Path) -> None:
    fresh, old = tmp_path / "fresh.db", tmp_path / "old.db"
    location.initialize(str(fresh))
    location.initialize(str(old))
    _downgrade_to_version_1(Backend("sqlite", str(old)))
    location.migrate(str(old))

    def schema(path: Path) -> list[Any]:
        conn = apsw.Connection(str(path))
        try:
            return list(conn.execute("PRAGMA table_info(teams)"))
        finally:
            conn.close()

    assert schema(old) == schema(fresh)


# -- real relay processes ---------------------------------------------------------------------
#: Longer than BOUND_S: a wake these tests see came from a notification, not the tick.
NO_TICK = ("--no-access-log", "--metrics", "--live-tick-seconds", "600")


def _metric(relay: LiveRelay, name: str) -> float | None:
    for line in httpx.get(relay.base_url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def _live_wait(relay: LiveRelay, headers: dict[str, str], after: int, seconds: int) -> Any:
    with httpx.Client(base_url=relay.base_url, timeout=BOUND_S + seconds) as client:
        return client.get(
            LIVE_WAIT,
            params={"after": str(after), "read_after": "0", "wait": str(seconds)},
            headers=headers,
        )


def _held_on(pool: ThreadPoolExecutor, relay: LiveRelay, headers: dict[str, str]) -> Future[Any]:
    future = pool.submit(_live_wait, relay, headers, 0, 55)
    until(lambda: _metric(relay, "syncengine_relay_live_waits_open") == 1.0 or future.done())
    return future


def _post_live(relay: LiveRelay, headers: dict[str, str]) -> None:
    with relay.client() as client:
        response = client.post("/v1/messages", json={"messages": batch(1)}, headers=headers)
    assert response.status_code == 200, response.text


def test_a_wait_on_one_process_is_woken_by_a_post_on_another(
    postgres_backend: Backend, tmp_path: Path, pool: ThreadPoolExecutor
) -> None:
    url = postgres_backend.location
    with running_relay(url, *NO_TICK) as a, running_relay(url, *NO_TICK) as b:
        team = live_provision(url, tmp_path)
        future = _held_on(pool, a, a.pair(team["team_id"]))
        _post_live(b, b.pair(team["team_id"]))
        got = answer(future.result(timeout=BOUND_S))
        assert (got.current_seq, got.woken) == (1, True)


def test_a_wait_survives_its_listener_connection_being_killed(
    postgres_backend: Backend, tmp_path: Path, pool: ThreadPoolExecutor
) -> None:
    """The listener re-listens and re-reads every waited team: the wake is late, not lost."""
    url = postgres_backend.location
    with running_relay(url, *NO_TICK) as a, running_relay(url, *NO_TICK) as b:
        team = live_provision(url, tmp_path)
        future = _held_on(pool, a, a.pair(team["team_id"]))
        with psycopg.connect(url, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (f"{APPLICATION_NAME}/{a.process.pid}",),
            ).fetchall()
        assert killed == [(True,)]
        _post_live(b, b.pair(team["team_id"]))  # most likely while A is not listening
        got = answer(future.result(timeout=BOUND_S))
        assert (got.current_seq, got.woken) == (1, True)
        until(lambda: (_metric(a, "syncengine_relay_live_listener_reconnects_total") or 0) >= 1)


def test_sigterm_answers_open_waits_at_once_and_exits_0(
    backend: Backend, tmp_path: Path, pool: ThreadPoolExecutor
) -> None:
    """A drain is not held up by long polls: the wait answers 200, not a cut connection."""
    db: Database = backend.location if backend.is_postgres else tmp_path / "relay.db"
    with running_relay(db, *NO_TICK, "--shutdown-timeout", "30") as live:
        team = live_provision(live.db, tmp_path)
        future = _held_on(pool, live, live.pair(team["team_id"]))
        live.process.send_signal(signal.SIGTERM)
        got = answer(future.result(timeout=BOUND_S))
        assert (got.current_seq, got.woken) == (0, False)
        assert live.process.wait(timeout=BOUND_S) == 0
