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

import json
from pathlib import Path

from syncengine.engine.connect import connect_store
from syncengine.local_store import Store
from tests.support.live_relay import LiveRelay
from tests.support.machines import LeanTeam, Machine, exactly_once, relay_counts, run_cli
from wire.age_keys import X25519Identity


def _ok(machine: Machine, *args: str) -> dict[str, object]:
    result = run_cli(machine, *args, "--json")
    assert result.returncode == 0, result.stderr
    obj: dict[str, object] = json.loads(result.stdout.splitlines()[-1])
    return obj


def _status_of(machine: Machine, status: str) -> int:
    with Store(machine.store) as store:
        row = store.conn.execute(
            "SELECT count(*) FROM sync_quarantine WHERE status = ?", (status,)
        ).fetchone()
    return int(row[0])


def _unread(machine: Machine, agent: str) -> list[str]:
    with Store(machine.store) as store:
        return sorted(m.body for m in store.list_unread("crew", agent))


def _read(machine: Machine, agent: str, body: str) -> None:
    with Store(machine.store) as store:
        (message,) = [m for m in store.list_unread("crew", agent) if m.body == body]
        store.mark_read_batch("crew", agent, [message.id])


def _joined_by_rotation(live: LiveRelay, tmp_path: Path) -> tuple[LeanTeam, list[Machine]]:
    """a and b on epoch-1 with two older messages (b read the one to bob),
    then c added by a rotation to epoch-2 and a message after it."""
    team = LeanTeam(live, tmp_path)
    a, b = team.age_machines("a", "b")
    a.send("alice", "bob", "older to bob")
    b.send("bob", "alice", "older to alice")
    for machine in (a, b, a):
        machine.sync()
    _read(b, "bob", "older to bob")
    b.sync()  # b's read reaches the relay's read state

    c_identity = X25519Identity.generate()
    c_key = tmp_path / "c.key"
    c_key.write_text(c_identity.to_secret_string() + "\n")
    c_key.chmod(0o600)
    epoch2 = tmp_path / "epoch-2.recipients"
    older = (tmp_path / "epoch-1.recipients").read_text()
    epoch2.write_text(older + c_identity.recipient.to_string() + "\n")
    _ok(a, "keys", "epoch", "add", "--team", "crew", "--key-id", "epoch-2",
        "--recipients-file", str(epoch2))  # fmt: skip
    snapshot = tmp_path / "epochs.json"
    digest = str(
        _ok(a, "keys", "epoch", "export", "--team", "crew", "--output", str(snapshot))[
            "snapshot_sha256"
        ]
    )
    _ok(b, "keys", "epoch", "import", "--team", "crew", "--file", str(snapshot),
        "--confirm-digest", digest)  # fmt: skip
    (tmp_path / "c").mkdir()
    c = Machine("c", tmp_path / "c" / "store.db")
    connect_store(
        c.store, endpoint=team.endpoint, token=team.token(), team="crew", mode=None,
        identity_file=str(c_key), epochs_file=str(snapshot), confirm_digest=digest,
    )  # fmt: skip
    a.send("alice", "bob", "after c joined")
    for machine in (a, b, c, a, b, c):
        machine.sync()
    return team, [a, b, c]


def test_a_machine_seeded_from_a_backup_gets_the_older_history_once_with_its_read_state(
    live: LiveRelay, tmp_path: Path
) -> None:
    team, (a, b, c) = _joined_by_rotation(live, tmp_path)
    assert c.bodies() == ["after c joined"]
    assert _status_of(c, "before_join") == 2
    status = _ok(c, "status", "--team", "crew")
    assert status["state"] == "ok" and status["messages_blocked"] == []
    text = run_cli(c, "status", "--team", "crew").stdout
    assert "2 messages from before this machine joined; they cannot be opened here" in text
    assert run_cli(c, "doctor", "--team", "crew").returncode == 0

    _read(c, "bob", "after c joined")  # c's own read state, before the seed
    backup = tmp_path / "b.backup"
    _ok(b, "backup", "--output", str(backup))
    on_relay = relay_counts(live, team.id)
    identity_before = _ok(c, "status", "--team", "crew")

    seeded = _ok(c, "seed", "--input", str(backup), "--team", "crew")
    assert (seeded["seeded"], seeded["read"], seeded["unmatched"]) == (2, 1, 0)
    everything = sorted(
        [
            ("alice", "bob", "older to bob"),
            ("bob", "alice", "older to alice"),
            ("alice", "bob", "after c joined"),
        ]
    )
    assert exactly_once(c) == everything
    assert _status_of(c, "before_join") == 0
    # Read state: b's bob had read "older to bob"; c's own read stays.
    assert _unread(c, "bob") == []
    assert _unread(c, "alice") == ["older to alice"]
    # c keeps its own identity and credential.
    after = _ok(c, "status", "--team", "crew")
    assert after["credential_id"] == identity_before["credential_id"]
    assert after["security"] == identity_before["security"]

    # Nothing is published twice: syncs everywhere leave the relay as it was.
    for machine in (c, a, b, c):
        machine.sync()
    assert relay_counts(live, team.id) == on_relay
    for machine in (a, b, c):
        assert exactly_once(machine) == everything
    assert _ok(c, "status", "--team", "crew")["pending_push"] == 0


def test_seeding_again_seeds_nothing_and_changes_nothing(live: LiveRelay, tmp_path: Path) -> None:
    _, (_, b, c) = _joined_by_rotation(live, tmp_path)
    backup = tmp_path / "b.backup"
    _ok(b, "backup", "--output", str(backup))
    assert _ok(c, "seed", "--input", str(backup))["seeded"] == 2
    before = exactly_once(c)
    again = _ok(c, "seed", "--input", str(backup))
    assert (again["seeded"], again["unmatched"]) == (0, 0)
    assert exactly_once(c) == before


def test_a_backup_of_another_team_is_refused_and_nothing_changes(
    live: LiveRelay, tmp_path: Path
) -> None:
    (tmp_path / "one").mkdir()
    _, (_, _, c) = _joined_by_rotation(live, tmp_path / "one")
    (tmp_path / "two").mkdir()
    (stranger,) = LeanTeam(live, tmp_path / "two").age_machines("s")
    stranger.send("alice", "bob", "elsewhere")
    stranger.sync()
    backup = tmp_path / "s.backup"
    _ok(stranger, "backup", "--output", str(backup))
    before = exactly_once(c)
    result = run_cli(c, "seed", "--input", str(backup), "--team", "crew")
    assert result.returncode == 13
    assert "holds no history of this team's stream" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) <= 2
    assert exactly_once(c) == before and _status_of(c, "before_join") == 2
