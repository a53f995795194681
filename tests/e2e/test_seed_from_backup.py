"""Seeding a machine that joined later from a teammate's backup, end to end
(issue #33, item 3; specs/engine.md §7.2):
three machines, a real relay and the real CLI.

a and b share epoch-1; a rotates to epoch-2 to add c, which joins with its
own identity and credential and holds the older messages as
``before_join`` — ``status`` ok, ``doctor`` ok. Seeded from b's backup, c
gets the older history exactly once, with its read state, while nothing is
sent to the relay and c's own read state stays.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.live_relay import LiveRelay
from tests.support.machines import LeanTeam, exactly_once, relay_counts, run_cli
from tests.support.seeding import (
    cli_ok,
    joined_by_rotation,
    mark_one_read,
    quarantine_count,
    unread_bodies,
)


def test_a_machine_seeded_from_a_backup_gets_the_older_history_once_with_its_read_state(
    live: LiveRelay, tmp_path: Path
) -> None:
    team, (a, b, c) = joined_by_rotation(live, tmp_path)
    assert c.bodies() == ["after c joined"]
    assert quarantine_count(c, "before_join") == 2
    status = cli_ok(c, "status", "--team", "crew")
    assert status["state"] == "ok" and status["messages_blocked"] == []
    text = run_cli(c, "status", "--team", "crew").stdout
    assert "2 messages from before this machine joined; they cannot be opened here" in text
    assert run_cli(c, "doctor", "--team", "crew").returncode == 0

    mark_one_read(c, "bob", "after c joined")  # c's own read state, before the seed
    backup = tmp_path / "b.backup"
    cli_ok(b, "backup", "--output", str(backup))
    on_relay = relay_counts(live, team.id)
    identity_before = cli_ok(c, "status", "--team", "crew")

    seeded = cli_ok(c, "seed", "--input", str(backup), "--team", "crew")
    assert (seeded["seeded"], seeded["read"], seeded["unmatched"]) == (2, 1, 0)
    everything = sorted(
        [
            ("alice", "bob", "older to bob"),
            ("bob", "alice", "older to alice"),
            ("alice", "bob", "after c joined"),
        ]
    )
    assert exactly_once(c) == everything
    assert quarantine_count(c, "before_join") == 0
    # Read state: b's bob had read "older to bob"; c's own read stays.
    assert unread_bodies(c, "bob") == []
    assert unread_bodies(c, "alice") == ["older to alice"]
    # c keeps its own identity and credential.
    after = cli_ok(c, "status", "--team", "crew")
    assert after["credential_id"] == identity_before["credential_id"]
    assert after["security"] == identity_before["security"]

    # Nothing is published twice: syncs everywhere leave the relay as it was.
    for machine in (c, a, b, c):
        machine.sync()
    assert relay_counts(live, team.id) == on_relay
    for machine in (a, b, c):
        assert exactly_once(machine) == everything
    assert cli_ok(c, "status", "--team", "crew")["pending_push"] == 0


def test_seeding_again_seeds_nothing_and_changes_nothing(live: LiveRelay, tmp_path: Path) -> None:
    _, (_, b, c) = joined_by_rotation(live, tmp_path)
    backup = tmp_path / "b.backup"
    cli_ok(b, "backup", "--output", str(backup))
    assert cli_ok(c, "seed", "--input", str(backup))["seeded"] == 2
    before = exactly_once(c)
    again = cli_ok(c, "seed", "--input", str(backup))
    assert (again["seeded"], again["unmatched"]) == (0, 0)
    assert exactly_once(c) == before


def test_a_backup_of_another_team_is_refused_and_nothing_changes(
    live: LiveRelay, tmp_path: Path
) -> None:
    (tmp_path / "one").mkdir()
    _, (_, _, c) = joined_by_rotation(live, tmp_path / "one")
    (tmp_path / "two").mkdir()
    (stranger,) = LeanTeam(live, tmp_path / "two").age_machines("s")
    stranger.send("alice", "bob", "elsewhere")
    stranger.sync()
    backup = tmp_path / "s.backup"
    cli_ok(stranger, "backup", "--output", str(backup))
    before = exactly_once(c)
    result = run_cli(c, "seed", "--input", str(backup), "--team", "crew")
    assert result.returncode == 13
    assert "holds no history of this team's stream" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) <= 2
    assert exactly_once(c) == before and quarantine_count(c, "before_join") == 2
