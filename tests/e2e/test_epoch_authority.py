"""Epoch authority end to end (issue #34; specs/age-v1.md "Epoch authority",
specs/engine.md §3.1): against a live relay, a machine never
starts a fresh security or key-epoch history over a team's existing one by
accident, snapshots travel as a hash chain every machine checks against the
checkpoint it retains, and ``disconnect`` does not reset that checkpoint.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from relay.storage.sqlite import SqliteRelayStore
from syncengine.engine.connect import FreshHistoryRefused, connect_store
from syncengine.engine.epoch_checkpoint import CheckpointRefused
from syncengine.local_store import Store
from tests.support.key_epochs import cli_json, export, import_into, manifest
from tests.support.live_relay import LiveRelay
from tests.support.machines import LeanTeam, Machine, age_epoch, run_cli


def age_team(
    live: LiveRelay, tmp: Path, *later: str
) -> tuple[LeanTeam, Machine, Path, dict[str, Path]]:
    """A team whose machine ``a`` connected on epoch-1 (whose manifest also
    lists the ``later`` machines' keys) and published one message."""
    team = LeanTeam(live, tmp)
    recipients, keys = age_epoch(tmp, "a", *later)
    a = team.machine(
        "a", "e2ee-required", key_id="epoch-1", recipients_file=str(recipients),
        identity_file=str(keys["a"]),
    )  # fmt: skip
    a.send("alice", "bob", "history")
    a.sync()
    return team, a, recipients, keys


def fresh_machine(tmp: Path, name: str) -> Machine:
    (tmp / name).mkdir()
    return Machine(name, tmp / name / "store.db")


def connections(machine: Machine) -> int:
    with Store(machine.store) as store:
        return int(store.conn.execute("SELECT count(*) FROM engine_bindings").fetchone()[0])


def checkpoint(machine: Machine) -> tuple[int, str | None, int]:
    conn = sqlite3.connect(machine.store)
    try:
        row = conn.execute(
            "SELECT epoch_revision, snapshot_sha256, writer_generation"
            " FROM engine_epoch_checkpoints"
        ).fetchone()
    finally:
        conn.close()
    return (int(row[0]), row[1], int(row[2]))


def require_e2ee(live: LiveRelay, team: LeanTeam) -> None:
    relay = SqliteRelayStore(live.db)
    try:
        relay.set_policy(team.id, ("age-v1",))
    finally:
        relay.close()


def test_connect_refuses_a_fresh_key_epoch_history_over_a_stream_with_messages(
    live: LiveRelay, tmp_path: Path
) -> None:
    team, _, recipients, keys = age_team(live, tmp_path, "b")
    b = fresh_machine(tmp_path, "b")
    with pytest.raises(FreshHistoryRefused) as caught:
        connect_store(
            b.store, endpoint=team.endpoint, token=team.token(), team="crew",
            mode="e2ee-required", key_id="epoch-1", recipients_file=str(recipients),
            identity_file=str(keys["b"]),
        )  # fmt: skip
    message = str(caught.value)
    assert "already holds 1 sequence(s)" in message and "revision 0 from sequence 1" in message
    assert "the relay credential was revoked" in message
    assert "--epochs-file" in caught.value.remediation
    assert connections(b) == 0  # nothing half-connected


def test_connect_refuses_a_fresh_plaintext_history_on_a_team_that_once_required_e2ee(
    live: LiveRelay, tmp_path: Path
) -> None:
    team, a, _, _ = age_team(live, tmp_path)
    require_e2ee(live, team)
    a.send("alice", "bob", "under e2ee-only policy")
    a.sync()
    relay = SqliteRelayStore(live.db)
    try:
        relay.set_policy(team.id, ("age-v1", "none"))  # plaintext allowed again, later
    finally:
        relay.close()
    b = fresh_machine(tmp_path, "b")
    with pytest.raises(FreshHistoryRefused, match="once required, end-to-end encryption"):
        connect_store(
            b.store, endpoint=team.endpoint, token=team.token(), team="crew",
            mode="plaintext-allowed",
        )  # fmt: skip
    assert connections(b) == 0


def test_a_team_that_only_ever_allowed_plaintext_joins_as_before(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = LeanTeam(live, tmp_path)
    a = team.machine("a")
    a.send("alice", "bob", "plain history")
    a.sync()
    b = team.machine("b")  # plaintext-allowed, no epoch, over a stream with messages
    b.sync()
    assert b.bodies() == ["plain history"]


def test_start_new_key_history_connects_over_history_and_says_so(
    live: LiveRelay, tmp_path: Path
) -> None:
    team, _, recipients, keys = age_team(live, tmp_path, "b")
    b = fresh_machine(tmp_path, "b")
    connected = connect_store(
        b.store, endpoint=team.endpoint, token=team.token(), team="crew",
        mode="e2ee-required", key_id="epoch-1", recipients_file=str(recipients),
        identity_file=str(keys["b"]), start_new_key_history=True,
    )  # fmt: skip
    assert connected.started_new_key_history and connected.to_obj()["started_new_key_history"]
    assert checkpoint(b)[0] == 0  # a new chain's root


def test_the_cli_refusal_is_one_line_with_exit_7_and_the_override_is_named(
    live: LiveRelay, tmp_path: Path
) -> None:
    team, _, recipients, keys = age_team(live, tmp_path, "b")
    b = fresh_machine(tmp_path, "b")
    token = b.store.parent / "token"
    token.write_text(team.token().reveal() + "\n")
    token.chmod(0o600)
    base = (
        "connect", "--endpoint", team.endpoint, "--token", f"@{token}", "--team", "crew",
        "--security", "e2ee-required", "--key-id", "epoch-1", "--recipients-file",
        str(recipients), "--identity", str(keys["b"]),
    )  # fmt: skip
    refused = run_cli(b, *base)
    assert refused.returncode == 7, refused.stderr
    assert "Traceback" not in refused.stderr
    assert "--start-new-key-history" in refused.stderr
    token.write_text(team.token().reveal() + "\n")
    started = run_cli(b, *base, "--start-new-key-history", "--json")
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["started_new_key_history"] is True
    assert "STARTING A NEW KEY HISTORY" in started.stderr


def test_joining_with_the_confirmed_snapshot_over_history_retains_its_checkpoint(
    live: LiveRelay, tmp_path: Path
) -> None:
    team, a, _, keys = age_team(live, tmp_path, "b")
    snapshot = tmp_path / "s.json"
    digest = export(a, snapshot)
    b = fresh_machine(tmp_path, "b")
    connect_store(
        b.store, endpoint=team.endpoint, token=team.token(), team="crew", mode=None,
        identity_file=str(keys["b"]), epochs_file=str(snapshot), confirm_digest=digest,
    )  # fmt: skip
    assert checkpoint(b) == checkpoint(a) == (0, digest, 0)
    b.sync()
    assert b.bodies() == ["history"]


def test_a_gap_is_refused_and_the_chain_of_files_is_imported_in_order(
    live: LiveRelay, tmp_path: Path
) -> None:
    a, b = LeanTeam(live, tmp_path).age_machines("a", "b")
    files, digests = [], []
    for n in (2, 3):
        epoch = manifest(tmp_path, f"epoch-{n}", [tmp_path / "a.key", tmp_path / "b.key"])
        add = ("keys", "epoch", "add", "--key-id", f"epoch-{n}", "--recipients-file", str(epoch))
        cli_json(a, *add)
        a.send("alice", "bob", f"under epoch-{n}")  # each rotation gets its own boundary
        a.sync()
        files.append(tmp_path / f"s{n}.json")
        digests.append(export(a, files[-1]))
    gap = run_cli(
        b, "keys", "epoch", "import", "--file", str(files[1]), "--confirm-digest", digests[1],
        "--team", "crew",
    )  # fmt: skip
    assert gap.returncode == 7 and "gap: expected revision 1" in gap.stderr
    assert checkpoint(b)[0] == 0
    chained = cli_json(
        b, "keys", "epoch", "import", "--file", str(files[0]), "--file", str(files[1]),
        "--confirm-digest", digests[1],
    )  # fmt: skip
    assert [row["key_id"] for row in chained["added"]] == ["epoch-2", "epoch-3"]  # type: ignore[attr-defined]
    assert checkpoint(b) == checkpoint(a) == (2, digests[1], 2)
    listed = cli_json(b, "keys", "epoch", "list")["checkpoint"]
    assert listed == {
        "epoch_revision": "2",
        "snapshot_sha256": digests[1],
        "writer_generation": "2",
    }


def test_a_chain_whose_links_do_not_match_is_refused_naming_the_file(
    live: LiveRelay, tmp_path: Path
) -> None:
    a, b = LeanTeam(live, tmp_path).age_machines("a", "b")
    root = tmp_path / "root.json"
    export(a, root)
    epoch = manifest(tmp_path, "epoch-2", [tmp_path / "a.key", tmp_path / "b.key"])
    cli_json(a, "keys", "epoch", "add", "--key-id", "epoch-2", "--recipients-file", str(epoch))
    second = tmp_path / "second.json"
    digest = export(a, second)
    result = run_cli(
        b, "keys", "epoch", "import", "--file", str(second), "--file", str(second),
        "--confirm-digest", digest, "--team", "crew",
    )  # fmt: skip
    assert result.returncode == 7 and f"{second} (revision 1" in result.stderr
    assert checkpoint(b)[0] == 0


def test_a_security_change_is_exported_as_the_next_revision_of_the_chain(
    live: LiveRelay, tmp_path: Path
) -> None:
    a, b = LeanTeam(live, tmp_path).age_machines("a", "b")
    first = export(a, tmp_path / "first.json")
    assert export(a, tmp_path / "again.json") == first  # nothing new: the same snapshot
    assert run_cli(a, "security", "set", "e2ee-required", "--team", "crew").returncode == 0
    second_file = tmp_path / "second.json"
    second = export(a, second_file)
    obj = json.loads(second_file.read_text())
    assert (obj["epoch_revision"], obj["previous_snapshot_sha256"]) == ("1", first)
    import_into(b, second_file, second)
    assert checkpoint(b) == (1, second, 0)


def test_disconnect_keeps_the_checkpoint_and_a_later_connect_cannot_roll_it_back(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = LeanTeam(live, tmp_path)
    a, b = team.age_machines("a", "b")
    old = tmp_path / "old.json"
    old_digest = export(a, old)
    epoch = manifest(tmp_path, "epoch-2", [tmp_path / "a.key", tmp_path / "b.key"])
    cli_json(a, "keys", "epoch", "add", "--key-id", "epoch-2", "--recipients-file", str(epoch))
    new = tmp_path / "new.json"
    import_into(b, new, export(a, new))
    assert run_cli(b, "disconnect", "--team", "crew").returncode == 0
    kept = checkpoint(b)
    assert kept[0] == 1
    with pytest.raises(CheckpointRefused, match="rollback"):
        connect_store(
            b.store, endpoint=team.endpoint, token=team.token(), team="crew", mode=None,
            identity_file=str(tmp_path / "b.key"), epochs_file=str(old),
            confirm_digest=old_digest,
        )  # fmt: skip
    assert checkpoint(b) == kept and connections(b) == 0


def test_the_readme_passage_adds_a_machine_to_a_team_with_history(
    live: LiveRelay, tmp_path: Path
) -> None:
    """README "Adding a machine, removing one", command by command."""
    team = LeanTeam(live, tmp_path)
    a, b = team.age_machines("a", "b")
    a.send("alice", "bob", "before C")
    b.sync()
    a.sync()
    c = fresh_machine(tmp_path, "c")
    epoch2 = tmp_path / "epoch-2.recipients"
    epoch2.write_text((tmp_path / "epoch-1.recipients").read_text())
    generated = run_cli(c, "keys", "generate", "--output", str(c.store.parent / "identity.key"))
    assert generated.returncode == 0, generated.stderr
    with epoch2.open("a") as handle:
        handle.write(generated.stdout)
    cli_json(a, "keys", "epoch", "add", "--key-id", "epoch-2", "--recipients-file", str(epoch2))
    snapshot = tmp_path / "epochs.json"
    digest = export(a, snapshot)
    import_into(b, snapshot, digest)
    token = c.store.parent / "token"
    token.write_text(team.token().reveal() + "\n")
    token.chmod(0o600)
    joined = run_cli(
        c, "connect", "--endpoint", team.endpoint, "--token", f"@{token}", "--team", "crew",
        "--identity", str(c.store.parent / "identity.key"), "--epochs-file", str(snapshot),
        "--confirm-digest", digest,
    )  # fmt: skip
    assert joined.returncode == 0, joined.stderr
    a.send("alice", "bob", "after C joined")
    for machine in (a, b, c, a, b, c):
        assert run_cli(machine, "sync").returncode == 0
    assert a.bodies() == b.bodies() == ["after C joined", "before C"]
    assert c.bodies() == ["after C joined"]  # nothing sealed before its epoch


def test_a_snapshot_file_exported_before_the_chain_is_refused_with_the_remedy(
    live: LiveRelay, tmp_path: Path
) -> None:
    import hashlib

    from wire.jcs import canonicalize

    a, b = LeanTeam(live, tmp_path).age_machines("a", "b")
    current = tmp_path / "current.json"
    export(a, current)
    obj = json.loads(current.read_text())
    for field in ("epoch_revision", "writer_generation", "writer_roster"):
        del obj[field]
    del obj["previous_snapshot_sha256"]
    obj["version"] = 1  # what `keys epoch export` wrote before issue #34
    old = tmp_path / "old.json"
    old.write_bytes(canonicalize(obj) + b"\n")
    digest = hashlib.sha256(canonicalize(obj)).hexdigest()
    before = checkpoint(b)
    result = run_cli(
        b, "keys", "epoch", "import", "--file", str(old), "--confirm-digest", digest,
        "--team", "crew",
    )  # fmt: skip
    assert result.returncode == 7 and "Traceback" not in result.stderr
    assert "version 1" in result.stderr and "Export the snapshot again" in result.stderr
    assert checkpoint(b) == before
