"""Three machines, one real relay: every message converges exactly once.

tests/syncengine/engine/test_e2e_live.py already proves two machines
converge in a fixed order (one exchange each way). This adds a third store
and a seeded random interleaving of sends and syncs — a machine syncing in
the middle of another's backlog, syncing with nothing to do, receiving its
own echoes late — for both cipher profiles, then checks that every store
holds every message once, the relay sequence counts each message once, and
a further cycle moves nothing. Then the bulk path: ``push --all`` drains a
backlog larger than one push, and ``pull`` applies it page by page.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from syncengine.local_store import Store
from syncengine.store import OutgoingMessage
from tests.support.live_relay import LiveRelay
from tests.support.machines import MEMBERS, LeanTeam, exactly_once, relay_counts, run_cli


@pytest.mark.parametrize("profile", ["none", "age-v1"])
def test_three_machines_converge_exactly_once_under_random_interleaving(
    live: LiveRelay, tmp_path: Path, profile: str
) -> None:
    team = LeanTeam(live, tmp_path)
    if profile == "none":
        machines = [team.machine(name) for name in ("a", "b", "c")]
    else:
        machines = team.age_machines("a", "b", "c")
    rng = random.Random(7)
    expected: list[tuple[str, str, str]] = []
    ciphers: set[str | None] = set()
    for step in range(14):
        machine = rng.choice(machines)
        if rng.random() < 0.6:
            sender, recipient = rng.sample(MEMBERS, 2)
            bodies = [f"{machine.name}-{step}-{i}" for i in range(rng.randint(1, 3))]
            machine.send(sender, recipient, *bodies)
            expected += [(sender, recipient, body) for body in bodies]
        else:
            report = machine.sync()
            if report.push.candidates:
                ciphers.add(report.push.cipher)
    for machine in machines + machines[:2]:  # a, b, c, a, b: everyone sees everything
        report = machine.sync()
        if report.push.candidates:
            ciphers.add(report.push.cipher)
    assert ciphers == {profile}
    expected.sort()
    for machine in machines:
        assert exactly_once(machine) == expected, machine.name
        with machine.engine() as engine:
            status = engine.status()
        assert status.sync.conflicts == 0 and status.pending_push == 0
        assert set(status.sync.quarantine) <= {"imported", "reconciled"}
    assert relay_counts(live, team.id) == (len(expected), len(expected))
    for machine in machines:
        idle = machine.sync()
        assert idle.push.candidates == 0 and idle.pull.received == 0


def test_push_all_drains_a_backlog_beyond_one_push_and_pull_streams_it_page_by_page(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = LeanTeam(live, tmp_path)
    a, b = team.machine("a"), team.machine("b")
    total = 1000 + 5  # one full catch-up push, and then some
    with Store(a.store) as store:
        store.send_many(OutgoingMessage("crew", "alice", "bob", f"bulk {i}") for i in range(total))
    pushed = run_cli(a, "push", "--all", "--json")
    assert pushed.returncode == 0, pushed.stderr
    report = json.loads(pushed.stdout)["push"]
    assert (report["candidates"], report["stored"], report["duplicate"]) == (total, total, 0)
    assert report["push_cursor"] == str(total)
    assert relay_counts(live, team.id) == (total, total)
    pulled = run_cli(b, "pull", "--json", "--limit", "400")
    assert pulled.returncode == 0, pulled.stderr
    pull = json.loads(pulled.stdout)["pull"]
    assert pull["pages"] == 3 and pull["received"] == total
    assert pull["outcomes"] == {"imported": total}
    assert len(exactly_once(b)) == len(set(exactly_once(b))) == total
