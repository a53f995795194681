"""Live delivery across relay processes on one PostgreSQL database
(issue #32): machine A on one process, machine B on another, each running
``syncengine run --interval 60``; a commit on A's process wakes B's wait
on the other — also after B's relay process lost its LISTEN connection in
the middle of a wait, after B's relay restarted, and through a proxy that
drops a wait's answer — and every message arrives exactly once.

Bounds are generous (far below the 60 s interval that polling would need,
far above a live delivery on a loaded host).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from relay.storage.pg_live import APPLICATION_NAME
from syncengine.engine.connect import connect_store
from syncengine.http.credentials import Secret
from syncengine.local_store import Store
from tests.e2e.live_support import BOUND, delivery, running
from tests.e2e.proxy import Fault, fault_proxy
from tests.relay.backends import require_postgres
from tests.support.live_relay import LiveRelay, issue_token, provision, running_relay
from tests.support.machines import Machine

LIVE = "GET /x-syncengine/live/v1/wait"
TEAM = "live-team"


@pytest.fixture
def database() -> str:
    url: str = require_postgres().clean_relay_database()
    return url


def _machine(relay: LiveRelay, endpoint: str, team_id: str, tmp: Path, name: str) -> Machine:
    (tmp / name).mkdir()
    machine = Machine(name, tmp / name / "store.db")
    token = Secret(issue_token(relay.db, team_id))
    connect_store(
        machine.store, endpoint=endpoint, token=token, team=TEAM, mode="plaintext-allowed"
    )
    return machine


def _bodies(machine: Machine) -> list[str]:
    with Store(machine.store) as store:
        return sorted(m.body for m in store.history(TEAM))


def _send(machine: Machine, *bodies: str) -> None:
    with Store(machine.store) as store:
        for body in bodies:
            store.send(TEAM, "leader", "worker-1", body)


def _until(condition: Callable[[], bool], bound: float = BOUND) -> bool:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.fixture
def pair(database: str, tmp_path: Path) -> Iterator[tuple[LiveRelay, LiveRelay, str]]:
    with (
        running_relay(database, "--no-access-log") as one,
        running_relay(database, "--no-access-log") as two,
    ):
        team = provision(database, tmp_path, ("leader", "worker-1"))
        yield one, two, str(team["team_id"])


@contextmanager
def both_live(
    pair: tuple[LiveRelay, LiveRelay, str], tmp: Path
) -> Iterator[tuple[Machine, Machine]]:
    """Machine A on the first relay process, B on the second, each with
    ``run --interval 60`` reporting live delivery."""
    one, two, team_id = pair
    a = _machine(one, one.base_url, team_id, tmp, "a")
    b = _machine(two, two.base_url, team_id, tmp, "b")
    with running(a, "--interval", "60") as ra, running(b, "--interval", "60") as rb:
        delivery(ra, "live")
        delivery(rb, "live")
        yield a, b


def test_a_send_on_one_relay_process_wakes_the_machine_on_the_other(
    pair: tuple[LiveRelay, LiveRelay, str], tmp_path: Path
) -> None:
    with both_live(pair, tmp_path) as (a, b):
        for round_ in range(3):
            _send(a, f"round {round_}")
            assert _until(lambda r=round_: f"round {r}" in _bodies(b)), round_  # type: ignore[misc]
    assert _bodies(b) == _bodies(a) == [f"round {i}" for i in range(3)]


def test_a_killed_listen_connection_mid_wait_still_ends_with_the_message_delivered_once(
    pair: tuple[LiveRelay, LiveRelay, str], tmp_path: Path, database: str
) -> None:
    two = pair[1]
    with both_live(pair, tmp_path) as (a, b):
        with psycopg.connect(database, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s",
                (f"{APPLICATION_NAME}/{two.process.pid}",),
            ).fetchall()
        assert killed == [(True,)]
        _send(a, "sent while B's relay was not listening")
        assert _until(lambda: "sent while B's relay was not listening" in _bodies(b))
    assert _bodies(b) == ["sent while B's relay was not listening"]


def test_a_restarted_relay_and_a_dropped_wait_end_with_every_message_once(
    database: str, tmp_path: Path
) -> None:
    with running_relay(database, "--no-access-log") as one:
        team_id = str(provision(database, tmp_path, ("leader", "worker-1"))["team_id"])
        two_cm = running_relay(database, "--no-access-log")
        two = two_cm.__enter__()
        try:
            port = int(two.base_url.rsplit(":", 1)[1])
            with fault_proxy(port, Fault(LIVE, "drop_response", nth=2)) as proxy:
                a = _machine(one, one.base_url, team_id, tmp_path, "a")
                b = _machine(two, proxy.url, team_id, tmp_path, "b")
                with running(a, "--interval", "60") as ra, running(b, "--interval", "60") as rb:
                    delivery(ra, "live")
                    delivery(rb, "live")
                    _send(a, "before restart")
                    assert _until(lambda: "before restart" in _bodies(b))
                    # B's relay process restarts (a new process on a new port).
                    two_cm.__exit__(None, None, None)
                    two_cm = running_relay(database, "--no-access-log")
                    two = two_cm.__enter__()
                    proxy.upstream_port = int(two.base_url.rsplit(":", 1)[1])
                    _send(a, "after restart")
                    assert _until(lambda: "after restart" in _bodies(b), bound=BOUND * 3)
        finally:
            two_cm.__exit__(None, None, None)
    assert _bodies(b) == ["after restart", "before restart"]
    assert _bodies(a) == _bodies(b)
