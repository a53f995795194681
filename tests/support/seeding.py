"""A machine seeded from a backup, as the seed end-to-end tests and the seed crash tests
both check it."""

from __future__ import annotations

import json
from pathlib import Path

from syncengine.engine.connect import connect_store
from syncengine.local_store import Store
from tests.support.live_relay import LiveRelay
from tests.support.machines import LeanTeam, Machine, run_cli
from wire.age_keys import X25519Identity


def cli_ok(machine: Machine, *args: str) -> dict[str, object]:
    result = run_cli(machine, *args, "--json")
    assert result.returncode == 0, result.stderr
    obj: dict[str, object] = json.loads(result.stdout.splitlines()[-1])
    return obj


def quarantine_count(machine: Machine, status: str) -> int:
    with Store(machine.store) as store:
        row = store.conn.execute(
            "SELECT count(*) FROM sync_quarantine WHERE status = ?", (status,)
        ).fetchone()
    return int(row[0])


def unread_bodies(machine: Machine, agent: str) -> list[str]:
    with Store(machine.store) as store:
        return sorted(m.body for m in store.list_unread("crew", agent))


def mark_one_read(machine: Machine, agent: str, body: str) -> None:
    with Store(machine.store) as store:
        (message,) = [m for m in store.list_unread("crew", agent) if m.body == body]
        store.mark_read_batch("crew", agent, [message.id])


def joined_by_rotation(live: LiveRelay, tmp_path: Path) -> tuple[LeanTeam, list[Machine]]:
    """a and b on epoch-1 with two older messages (b read the one to bob),
    then c added by a rotation to epoch-2 and a message after it."""
    team = LeanTeam(live, tmp_path)
    a, b = team.age_machines("a", "b")
    a.send("alice", "bob", "older to bob")
    b.send("bob", "alice", "older to alice")
    for machine in (a, b, a):
        machine.sync()
    mark_one_read(b, "bob", "older to bob")
    b.sync()  # b's read reaches the relay's read state

    c_identity = X25519Identity.generate()
    c_key = tmp_path / "c.key"
    c_key.write_text(c_identity.to_secret_string() + "\n")
    c_key.chmod(0o600)
    epoch2 = tmp_path / "epoch-2.recipients"
    older = (tmp_path / "epoch-1.recipients").read_text()
    epoch2.write_text(older + c_identity.recipient.to_string() + "\n")
    cli_ok(a, "keys", "epoch", "add", "--team", "crew", "--key-id", "epoch-2",
        "--recipients-file", str(epoch2))  # fmt: skip
    snapshot = tmp_path / "epochs.json"
    digest = str(
        cli_ok(a, "keys", "epoch", "export", "--team", "crew", "--output", str(snapshot))[
            "snapshot_sha256"
        ]
    )
    cli_ok(b, "keys", "epoch", "import", "--team", "crew", "--file", str(snapshot),
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
