"""Our driver under the host's own sync engine (issue #31): the records and
argv the agmsg host sends, through the sourced bash file, against a real
relay — a team cloned onto a fresh machine, read state carried between two
host machines both ways, and every record stream checked the way the host
checks it (tests/syncengine/driver/host_engine.py).

No Node: the host's side is written in Python from its source's rules.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncengine.ids import new_uuid7
from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from syncengine.ops.sync_records import SyncPullCursor
from tests.support.live_relay import LiveRelay, provision, relay_fixture
from tests.syncengine.driver.contract import DRIVER_FILE
from tests.syncengine.driver.host_engine import (
    HostFatal,
    HostMachine,
    Relay,
    cycle,
    pull,
    read_state,
    reprocess_walk,
    update_batches,
)
from tests.syncengine.ops.helpers import foreign_envelope, pull_record

MEMBERS = ("alice", "bob")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRelay]:
    yield from relay_fixture(tmp_path_factory, name="host-relay")


class HostTeam:
    """A team on the live relay and the host machines that join it."""

    def __init__(self, live: LiveRelay, tmp: Path) -> None:
        self.live, self.tmp = live, tmp
        self.document = provision(live.db, tmp, MEMBERS)
        self.relays: list[Relay] = []

    def machine(self, name: str) -> tuple[HostMachine, Relay]:
        """A fresh machine: no store file, nothing registered."""
        machine = HostMachine(
            DRIVER_FILE,
            self.tmp / name / "store.db",
            "crew",
            self.live.server_instance_id,
            self.document["team_id"],
        )
        relay = Relay(self.live.base_url, self.live.pair(self.document["team_id"]))
        self.relays.append(relay)
        return machine, relay

    def close(self) -> None:
        for relay in self.relays:
            relay.close()


@pytest.fixture
def team(live: LiveRelay, tmp_path: Path) -> Iterator[HostTeam]:
    made = HostTeam(live, tmp_path)
    yield made
    made.close()


def _send(machine: HostMachine, sender: str, recipient: str, body: str) -> str:
    return machine.storage("storage_send", "crew", sender, recipient, body).strip()


def _unread(machine: HostMachine, agent: str) -> list[dict[str, object]]:
    out = machine.storage("storage_list_unread", "crew", agent)
    return [json.loads(line) for line in out.splitlines()]


def _bodies(machine: HostMachine) -> list[str]:
    out = machine.storage("storage_history", "crew")
    return sorted(json.loads(line)["body"] for line in out.splitlines())


def test_a_fresh_machine_clones_the_team_then_sends_lists_unread_and_marks_read(
    team: HostTeam,
) -> None:
    a, relay_a = team.machine("a")
    for i in range(3):
        _send(a, "alice", "bob", f"question {i}")
    cycle(a, relay_a)

    b, relay_b = team.machine("b")
    # The host's `remote.sh pull` refuses a machine that already holds the team.
    assert b.call("storage_store_exists", "crew").returncode != 0
    assert b.storage("storage_history", "crew", "--limit", "1") == ""
    assert not b.store.exists()
    # Its first sync verbs on a store that does not exist yet.
    assert reprocess_walk(b, current_seq=3) == []
    assert pull(b, relay_b, after=0) == 3
    assert b.calls == ["reprocess", "apply"]

    unread = _unread(b, "bob")
    assert [m["body"] for m in unread] == ["question 0", "question 1", "question 2"]
    mark = b.storage("storage_mark_read_batch", "crew", "bob", str(unread[0]["id"]))
    assert mark.splitlines()[-1] == "ok"
    _send(b, "bob", "alice", "answer")
    cycle(b, relay_b)
    cycle(a, relay_a)
    assert _bodies(a) == _bodies(b) == ["answer", "question 0", "question 1", "question 2"]
    assert [m["body"] for m in _unread(a, "alice")] == ["answer"]


def test_a_read_on_one_host_machine_shows_as_read_on_the_other_both_ways(
    team: HostTeam,
) -> None:
    a, relay_a = team.machine("a")
    b, relay_b = team.machine("b")
    _send(a, "alice", "bob", "to bob")
    _send(b, "bob", "alice", "to alice")
    for machine, relay in ((a, relay_a), (b, relay_b), (a, relay_a)):
        cycle(machine, relay)
    assert [m["body"] for m in _unread(a, "bob")] == ["to bob"]
    assert [m["body"] for m in _unread(b, "alice")] == ["to alice"]

    # bob reads on B; alice reads on A.
    b.storage("storage_mark_read_batch", "crew", "bob", str(_unread(b, "bob")[0]["id"]))
    a.storage("storage_mark_read_batch", "crew", "alice", str(_unread(a, "alice")[0]["id"]))
    for machine, relay in ((b, relay_b), (a, relay_a), (b, relay_b)):
        cycle(machine, relay)
    assert _unread(a, "bob") == []
    assert _unread(b, "alice") == []
    assert _unread(a, "alice") == _unread(b, "bob") == []


def test_read_prepare_answers_every_member_of_the_host_context_moved_or_not(
    team: HostTeam,
) -> None:
    """One frontier per member, even on a machine that holds no message and
    no read row for anyone; a second phase with nothing new answers them all
    again (the host treats an omission as fatal)."""
    a, relay_a = team.machine("a")
    seen = read_state(a, relay_a)
    ids = sorted(m["member_id"] for m in team.document["members"])
    assert sorted(u["member_id"] for u in seen["updates"]) == ids
    again = read_state(a, relay_a)
    assert sorted(u["member_id"] for u in again["updates"]) == ids
    assert a.calls == ["read-prepare", "read-apply", "read-prepare", "read-apply"]


def test_the_hosts_check_refuses_an_answer_that_omits_a_member() -> None:
    """The check itself can fail: the rule our driver now meets."""
    members = [{"member_id": new_uuid7(), "name": n} for n in MEMBERS]
    only_one = [
        {"type": "sync_read_frontier", "member_id": members[0]["member_id"], "server_seq": "0"}
    ]
    with pytest.raises(HostFatal, match="omitted a member read frontier"):
        update_batches(members, only_one)


def test_a_reprocess_walk_over_several_pages_passes_the_hosts_page_checks(tmp_path: Path) -> None:
    """Five blocked envelopes walked two at a time: three pages, each with
    the exact keys, order and ``next_after`` the host checks."""
    store_path = tmp_path / "store.db"
    key = BindingKey("crew", new_uuid7(), new_uuid7(), 1)
    records = []
    for seq in range(1, 6):
        wire, envelope = foreign_envelope(key, f"m{seq}", "alice", "bob")
        records.append(pull_record(seq, wire, envelope, "pending_key", reason="no identity"))
    with Store(store_path) as store:
        store.sync_apply_pull(key, records, SyncPullCursor(5))
    machine = HostMachine(
        DRIVER_FILE, store_path, "crew", key.server_instance_id, key.remote_team_id
    )
    walked = reprocess_walk(machine, current_seq=5, limit=2)
    assert [c["server_seq"] for c in walked] == ["1", "2", "3", "4", "5"]
    assert machine.calls == ["reprocess"] * 3
