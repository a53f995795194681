"""Key epochs end to end (issue #15, item 3): rotate to add and to remove a
machine, through the real ``syncengine keys epoch`` commands and a live relay.

Everyone reads everything written after a boundary; a machine added by a
rotation reads nothing before it; a machine removed by one reads nothing
after it; a machine that has not yet imported a rotation holds the new
epoch's messages as ``pending_key`` and opens them after the import and a
``reprocess`` — never a duplicate anywhere.
"""

from __future__ import annotations

from pathlib import Path

from syncengine.engine.connect import connect_store
from syncengine.local_store import Store
from tests.support.key_epochs import cli_json, export, import_into, manifest, recipient_of
from tests.support.live_relay import LiveRelay
from tests.support.machines import LeanTeam, Machine, exactly_once, run_cli
from wire.age_keys import X25519Identity


def new_key(tmp: Path, name: str) -> tuple[Path, str]:
    identity = X25519Identity.generate()
    path = tmp / f"{name}.key"
    path.write_text(identity.to_secret_string() + "\n")
    path.chmod(0o600)
    return path, identity.recipient.to_string()


def held_unopened(machine: Machine) -> int:
    """Rows held because this machine has no key for them: ``pending_key``,
    or ``before_join`` where the store tells the two apart (issue #33)."""
    with Store(machine.store) as store:
        row = store.conn.execute(
            "SELECT count(*) FROM sync_quarantine WHERE status IN ('pending_key', 'before_join')"
        ).fetchone()
    return int(row[0])


def sync_all(*machines: Machine) -> None:
    for _ in range(2):
        for machine in machines:
            machine.sync()


def pending_key(machine: Machine) -> int:
    with Store(machine.store) as store:
        row = store.conn.execute(
            "SELECT count(*) FROM sync_quarantine WHERE status = 'pending_key'"
        ).fetchone()
    return int(row[0])


def test_rotation_adds_a_machine_that_reads_only_after_the_boundary_and_removes_one(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = LeanTeam(live, tmp_path)
    a, b, c = team.age_machines("a", "b", "c")
    a.send("alice", "bob", "before rotation")
    sync_all(a, b, c)
    assert c.bodies() == ["before rotation"]

    # Add d: a rotates to epoch-2 = {a, b, c, d}; a keeps its own identity.
    d_key, _ = new_key(tmp_path, "d-epoch2")
    keys = {n: tmp_path / f"{n}.key" for n in ("a", "b", "c")}
    epoch2 = manifest(tmp_path, "epoch-2", [keys["a"], keys["b"], keys["c"], d_key])
    added = cli_json(
        a, "keys", "epoch", "add", "--key-id", "epoch-2", "--recipients-file", str(epoch2)
    )
    epoch = added["epoch"]
    assert isinstance(epoch, dict) and epoch["identity_file"] == str(keys["a"])
    snapshot = tmp_path / "epochs-2.json"
    digest = export(a, snapshot)
    assert digest == added["snapshot_sha256"]

    a.send("alice", "bob", "after rotation from a")
    a.sync()
    b.sync()  # b has not imported epoch-2 yet: the message waits, it is not refused
    assert "after rotation from a" not in b.bodies()
    assert pending_key(b) == 1
    import_into(b, snapshot, digest)
    import_into(c, snapshot, digest)
    assert run_cli(b, "reprocess", "--team", "crew").returncode == 0
    assert "after rotation from a" in b.bodies() and pending_key(b) == 0

    d = Machine("d", tmp_path / "d" / "store.db")
    (tmp_path / "d").mkdir()
    connect_store(
        d.store, endpoint=team.endpoint, token=team.token(), team="crew", mode=None,
        identity_file=str(d_key), epochs_file=str(snapshot), confirm_digest=digest,
    )  # fmt: skip
    b.send("bob", "alice", "after rotation from b")
    sync_all(a, b, c, d)
    after = ["after rotation from a", "after rotation from b"]
    for machine in (a, b, c):
        assert machine.bodies() == sorted(["before rotation", *after])
    assert d.bodies() == sorted(after)  # nothing sealed before its epoch
    assert held_unopened(d) == 1  # "before rotation", for an epoch d holds no key of

    # Remove c: b rotates to epoch-3 = {a, b, d}; a and d import it, c does not.
    epoch3 = manifest(tmp_path, "epoch-3", [keys["a"], keys["b"], d_key])
    cli_json(b, "keys", "epoch", "add", "--key-id", "epoch-3", "--recipients-file", str(epoch3))
    snapshot3 = tmp_path / "epochs-3.json"
    digest3 = export(b, snapshot3)
    import_into(a, snapshot3, digest3)
    import_into(d, snapshot3, digest3)
    d.send("alice", "bob", "after removing c")
    sync_all(a, b, c, d)
    for machine in (a, b, d):
        assert "after removing c" in machine.bodies()
    assert "after removing c" not in c.bodies()
    # Even with the snapshot, c holds no identity of epoch-3.
    import_into(c, snapshot3, digest3)
    assert run_cli(c, "reprocess", "--team", "crew").returncode == 0
    assert "after removing c" not in c.bodies()
    for machine in (a, b, c, d):
        bodies = exactly_once(machine)
        assert len(bodies) == len(set(bodies))

    listing = cli_json(a, "keys", "epoch", "list")
    rows = listing["epochs"]
    assert isinstance(rows, list)
    assert [(r["key_id"], r["revision"]) for r in rows] == [
        ("epoch-1", "0"),
        ("epoch-2", "1"),
        ("epoch-3", "2"),
    ]
    assert int(rows[1]["effective_from_seq"]) == 2  # the boundary after "before rotation"


def epoch_rows(machine: Machine) -> list[tuple[int, str]]:
    with Store(machine.store) as store:
        rows = store.conn.execute(
            "SELECT revision, key_id FROM engine_key_epochs ORDER BY revision"
        ).fetchall()
    return [(int(r[0]), str(r[1])) for r in rows]  # type: ignore[arg-type]


def refused(machine: Machine, *args: str) -> str:
    before = epoch_rows(machine)
    result = run_cli(machine, *args, "--team", "crew")
    assert result.returncode != 0
    assert epoch_rows(machine) == before  # nothing changed
    return result.stderr


def test_an_identity_that_is_no_recipient_of_the_new_epoch_is_refused(
    live: LiveRelay, tmp_path: Path
) -> None:
    (a,) = LeanTeam(live, tmp_path).age_machines("a")
    stranger, _ = new_key(tmp_path, "stranger")
    epoch2 = manifest(tmp_path, "epoch-2", [tmp_path / "a.key"])
    error = refused(
        a, "keys", "epoch", "add", "--key-id", "epoch-2", "--recipients-file", str(epoch2),
        "--identity", str(stranger),
    )  # fmt: skip
    assert "is not a recipient of epoch 'epoch-2'" in error


def test_a_recipients_file_with_a_duplicate_line_is_refused(
    live: LiveRelay, tmp_path: Path
) -> None:
    (a,) = LeanTeam(live, tmp_path).age_machines("a")
    line = recipient_of(tmp_path / "a.key")
    bad = tmp_path / "dup.recipients"
    bad.write_text(f"{line}\n{line}\n")
    error = refused(a, "keys", "epoch", "add", "--key-id", "epoch-2", "--recipients-file", str(bad))
    assert str(bad) in error


def test_a_malformed_recipients_file_is_refused(live: LiveRelay, tmp_path: Path) -> None:
    (a,) = LeanTeam(live, tmp_path).age_machines("a")
    bad = tmp_path / "bad.recipients"
    bad.write_text("age1notarecipient\n")
    error = refused(a, "keys", "epoch", "add", "--key-id", "epoch-2", "--recipients-file", str(bad))
    assert str(bad) in error


def test_a_key_id_already_used_by_the_team_is_refused(live: LiveRelay, tmp_path: Path) -> None:
    (a,) = LeanTeam(live, tmp_path).age_machines("a")
    other, _ = new_key(tmp_path, "other")
    same = manifest(tmp_path, "again", [tmp_path / "a.key", other])
    error = refused(
        a, "keys", "epoch", "add", "--key-id", "epoch-1", "--recipients-file", str(same)
    )
    assert "already names an epoch" in error


def test_adding_the_current_epoch_again_is_a_no_op(live: LiveRelay, tmp_path: Path) -> None:
    (a,) = LeanTeam(live, tmp_path).age_machines("a")
    same = manifest(tmp_path, "same", [tmp_path / "a.key"])
    add = ("keys", "epoch", "add", "--key-id", "epoch-1", "--recipients-file", str(same))
    assert cli_json(a, *add)["epoch"] == cli_json(a, "keys", "epoch", "list")["epochs"][0]
    assert epoch_rows(a) == [(0, "epoch-1")]


def test_rotation_waits_for_published_envelopes_of_the_old_epoch(
    live: LiveRelay, tmp_path: Path
) -> None:
    (a,) = LeanTeam(live, tmp_path).age_machines("a")
    a.send("alice", "bob", "sealed, not yet posted")
    with a.engine() as engine:  # publish the reservation without posting it
        from syncengine.ops.sync_records import SyncPrepare

        epoch = engine.connection.epochs.current
        assert epoch is not None
        engine.store.sync_prepare_push(
            engine.connection.key,
            SyncPrepare(1, "age-v1", epoch.key_id, epoch.recipients, 1 << 20, True),
            100,
        )
    epoch2 = manifest(tmp_path, "epoch-2", [tmp_path / "a.key"])
    args = ("keys", "epoch", "add", "--key-id", "epoch-2", "--recipients-file", str(epoch2))
    assert "published but not yet acknowledged" in refused(a, *args)
    a.sync()  # the drain
    assert run_cli(a, *args, "--team", "crew").returncode == 0
    assert epoch_rows(a) == [(0, "epoch-1"), (1, "epoch-2")]


def test_a_snapshot_whose_digest_was_not_confirmed_is_refused(
    live: LiveRelay, tmp_path: Path
) -> None:
    a, b = LeanTeam(live, tmp_path).age_machines("a", "b")
    epoch2 = manifest(tmp_path, "epoch-2", [tmp_path / "a.key", tmp_path / "b.key"])
    cli_json(a, "keys", "epoch", "add", "--key-id", "epoch-2", "--recipients-file", str(epoch2))
    snapshot = tmp_path / "s.json"
    digest = export(a, snapshot)
    wrong = ("0" if digest[0] != "0" else "1") + digest[1:]
    error = refused(
        b, "keys", "epoch", "import", "--file", str(snapshot), "--confirm-digest", wrong
    )
    assert "not the confirmed one" in error


def test_a_snapshot_of_another_team_is_refused(live: LiveRelay, tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    (a,) = LeanTeam(live, tmp_path / "one").age_machines("a")
    (b,) = LeanTeam(live, tmp_path / "two").age_machines("b")
    snapshot = tmp_path / "s.json"
    digest = export(a, snapshot)
    error = refused(
        b, "keys", "epoch", "import", "--file", str(snapshot), "--confirm-digest", digest
    )
    assert "not to team 'crew'" in error


def test_an_older_snapshot_is_refused_after_a_newer_import(live: LiveRelay, tmp_path: Path) -> None:
    a, b = LeanTeam(live, tmp_path).age_machines("a", "b")
    old = tmp_path / "old.json"
    old_digest = export(a, old)
    epoch2 = manifest(tmp_path, "epoch-2", [tmp_path / "a.key", tmp_path / "b.key"])
    cli_json(a, "keys", "epoch", "add", "--key-id", "epoch-2", "--recipients-file", str(epoch2))
    new = tmp_path / "new.json"
    import_into(b, new, export(a, new))
    error = refused(
        b, "keys", "epoch", "import", "--file", str(old), "--confirm-digest", old_digest
    )
    assert "older snapshot is never imported" in error
