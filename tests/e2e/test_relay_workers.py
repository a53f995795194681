"""Two machines syncing through one ``relay serve --workers 2`` address on
PostgreSQL (#35): the real engine on both sides, the real worker group in
the middle. Which worker serves a request is the kernel's choice; whatever
it chooses, every message arrives exactly once — also when a worker is
killed with SIGKILL while both machines hold live waits on the group.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from syncengine.engine.connect import connect_store
from syncengine.http.credentials import Secret
from syncengine.local_store import Store
from tests.e2e.live_support import BOUND, delivery, running
from tests.relay.backends import require_postgres
from tests.support.live_relay import issue_token, provision
from tests.support.machines import Machine
from tests.support.worker_group import Group, running_group

TEAM = "crew"


@pytest.fixture
def database() -> str:
    url: str = require_postgres().clean_relay_database()
    return url


@pytest.fixture
def group(database: str) -> Iterator[Group]:
    with running_group(database, "--workers", "2", "--log-format", "json") as running_:
        yield running_


def _machine(group: Group, team_id: str, tmp: Path, name: str) -> Machine:
    (tmp / name).mkdir()
    machine = Machine(name, tmp / name / "store.db")
    token = Secret(issue_token(group.db, team_id))
    connect_store(
        machine.store, endpoint=group.url, token=token, team=TEAM, mode="plaintext-allowed"
    )
    return machine


def _send(machine: Machine, sender: str, recipient: str, *bodies: str) -> None:
    with Store(machine.store) as store:
        for body in bodies:
            store.send(TEAM, sender, recipient, body)


def _bodies(machine: Machine) -> list[str]:
    with Store(machine.store) as store:
        return sorted(m.body for m in store.history(TEAM))


def _until(condition: Callable[[], bool], bound: float = BOUND) -> bool:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_two_machines_sync_both_ways_through_one_worker_group_address(
    group: Group, database: str, tmp_path: Path
) -> None:
    team_id = str(provision(database, tmp_path, ("alice", "bob"))["team_id"])
    a = _machine(group, team_id, tmp_path, "a")
    b = _machine(group, team_id, tmp_path, "b")
    _send(a, "alice", "bob", *(f"from a {i}" for i in range(5)))
    a.sync()
    b.sync()
    _send(b, "bob", "alice", "from b")
    b.sync()
    a.sync()
    expected = sorted([*(f"from a {i}" for i in range(5)), "from b"])
    assert _bodies(a) == _bodies(b) == expected


def test_live_machines_on_a_worker_group_get_every_message_once_across_a_killed_worker(
    group: Group, database: str, tmp_path: Path
) -> None:
    team_id = str(provision(database, tmp_path, ("alice", "bob"))["team_id"])
    a = _machine(group, team_id, tmp_path, "a")
    b = _machine(group, team_id, tmp_path, "b")
    with running(a, "--interval", "60") as ra, running(b, "--interval", "60") as rb:
        delivery(ra, "live")
        delivery(rb, "live")
        _send(a, "alice", "bob", "before the kill")
        assert _until(lambda: "before the kill" in _bodies(b))
        victim = group.pids[0]
        os.kill(victim, signal.SIGKILL)
        group.log_line(f"in place of {victim}")
        _send(a, "alice", "bob", "after the kill")
        _send(b, "bob", "alice", "reply after the kill")
        # A wait held by the killed worker is a dropped connection: the
        # machine retries after its backoff, so allow for that.
        assert _until(lambda: "after the kill" in _bodies(b), bound=BOUND * 3)
        assert _until(lambda: "reply after the kill" in _bodies(a), bound=BOUND * 3)
    expected = ["after the kill", "before the kill", "reply after the kill"]
    assert _bodies(a) == _bodies(b) == expected
