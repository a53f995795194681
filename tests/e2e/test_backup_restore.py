"""Backup and restore through the real CLI and a live relay (issue #15, item 5):
a machine restored from an older backup rejoins with zero duplicates on any
peer, and what it sent after the backup comes back as its own history."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from syncengine.crash import CRASH_EXIT_CODE, RESTORE_CRASH_POINTS
from syncengine.local_store import Store
from syncengine.ops.history_counts import history_counts, recount_history
from tests.support.live_relay import LiveRelay
from tests.support.machines import LeanTeam, Machine, exactly_once, relay_counts, run_cli


def _history(machine: Machine) -> list[tuple[str, str, str]]:
    return exactly_once(machine)


def _ok(machine: Machine, *args: str) -> dict[str, object]:
    result = run_cli(machine, *args, "--json")
    assert result.returncode == 0, result.stderr
    obj: dict[str, object] = json.loads(result.stdout.splitlines()[-1])
    return obj


def test_a_store_restored_from_an_older_backup_rejoins_without_duplicates(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = LeanTeam(live, tmp_path)
    a, b = team.machine("a"), team.machine("b")
    a.send("alice", "bob", "synced before")
    a.sync()
    a.send("alice", "bob", "written before the backup, sent after")
    backup = tmp_path / "a.backup"
    _ok(a, "backup", "--output", str(backup))
    assert backup.stat().st_mode & 0o777 == 0o600
    a.sync()  # publishes the second message after the backup was taken
    a.send("alice", "bob", "written after the backup")
    a.sync()
    b.send("bob", "alice", "from b")
    b.sync()
    assert relay_counts(live, team.id) == (4, 4)

    restored = _ok(a, "restore", "--input", str(backup))
    assert Path(str(restored["kept"])).is_file()  # the replaced store is kept
    synced = run_cli(a, "sync", "--json")
    assert synced.returncode == 0, synced.stderr
    b.sync()
    assert relay_counts(live, team.id) == (4, 4)  # nothing was sent twice
    expected = sorted(
        [
            ("alice", "bob", "synced before"),
            ("alice", "bob", "written before the backup, sent after"),
            ("alice", "bob", "written after the backup"),
            ("bob", "alice", "from b"),
        ]
    )
    assert _history(a) == _history(b) == expected
    assert max(Counter(_history(a)).values()) == 1
    # New messages after the catch-up are sent normally.
    a.send("alice", "bob", "after the restore")
    a.sync()
    b.sync()
    assert ("alice", "bob", "after the restore") in _history(b)
    assert relay_counts(live, team.id) == (5, 5)
    # Adoption re-published rows; the totals status reads stay exact.
    for machine in (a, b):
        with Store(machine.store) as store:
            for (binding,) in store.conn.execute("SELECT binding_pk FROM sync_bindings"):
                kept = history_counts(store.conn, binding)
                assert kept == recount_history(store.conn, binding)


def test_a_backup_is_a_consistent_private_store_marked_as_a_backup(
    live: LiveRelay, tmp_path: Path
) -> None:
    a = LeanTeam(live, tmp_path).machine("a")
    a.send("alice", "bob", "one")
    backup = tmp_path / "snap.db"
    _ok(a, "backup", "--output", str(backup))
    with Store(backup) as copy:
        copy.check()
        assert [m.body for m in copy.history("crew")] == ["one"]
    conn = sqlite3.connect(backup)
    try:
        assert conn.execute("SELECT adopt_own FROM sync_bindings").fetchall() == [(1,)]
    finally:
        conn.close()
    with Store(a.store) as live_store:  # the live store is not marked
        assert live_store.conn.execute("SELECT adopt_own FROM sync_bindings").fetchall() == [(0,)]
    again = run_cli(a, "backup", "--output", str(backup))
    assert again.returncode != 0 and "already exists" in again.stderr


def test_restore_refuses_a_file_that_is_not_a_store_and_changes_nothing(
    live: LiveRelay, tmp_path: Path
) -> None:
    a = LeanTeam(live, tmp_path).machine("a")
    a.send("alice", "bob", "kept")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    refused = run_cli(a, "restore", "--input", str(junk))
    assert refused.returncode != 0
    assert [m for _, _, m in _history(a)] == ["kept"]
    assert not list(a.store.parent.glob("*.before-restore-*"))


@pytest.mark.parametrize("point", ["engine.adopted.before_commit", "engine.adopted.after_commit"])
def test_a_restored_sync_killed_as_adoption_ends_still_sends_nothing_twice(
    live: LiveRelay, tmp_path: Path, point: str
) -> None:
    team = LeanTeam(live, tmp_path)
    a, b = team.machine("a"), team.machine("b")
    a.send("alice", "bob", "before the backup, sent after")
    backup = tmp_path / "a.backup"
    _ok(a, "backup", "--output", str(backup))
    a.sync()
    _ok(a, "restore", "--input", str(backup))
    crashed = run_cli(a, "sync", env={"SYNCENGINE_CRASH_AT": point})
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    assert run_cli(a, "sync").returncode == 0
    b.sync()
    assert relay_counts(live, team.id) == (1, 1)
    assert _history(a) == _history(b) == [("alice", "bob", "before the backup, sent after")]


@pytest.mark.parametrize("point", RESTORE_CRASH_POINTS)
def test_restore_killed_mid_swap_leaves_a_whole_store_and_a_rerun_restores(
    live: LiveRelay, tmp_path: Path, point: str
) -> None:
    a = LeanTeam(live, tmp_path).machine("a")
    a.send("alice", "bob", "in the backup")
    backup = tmp_path / "a.backup"
    _ok(a, "backup", "--output", str(backup))
    a.send("alice", "bob", "only in the live store")  # sits in the WAL
    crashed = run_cli(a, "restore", "--input", str(backup), env={"SYNCENGINE_CRASH_AT": point})
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    with Store(a.store) as store:  # never no store, never a torn one
        store.check()
        bodies = sorted(m.body for m in store.history("crew"))
    swapped = point == "restore.swapped"
    assert bodies == (["in the backup"] if swapped else ["in the backup", "only in the live store"])
    if not swapped:
        _ok(a, "restore", "--input", str(backup))
        assert [m for _, _, m in _history(a)] == ["in the backup"]
    kept = sorted(
        p
        for p in a.store.parent.glob("*.before-restore-*")
        if not p.name.endswith(("-wal", "-shm"))
    )
    with Store(kept[0]) as old:  # the first replaced store is kept whole
        assert sorted(m.body for m in old.history("crew")) == [
            "in the backup",
            "only in the live store",
        ]


def test_a_store_lost_entirely_is_rebuilt_from_the_relay_with_zero_duplicates_anywhere(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = LeanTeam(live, tmp_path)
    a, b, c = team.machine("a"), team.machine("b"), team.machine("c")
    a.send("alice", "bob", "a1", "a2")
    b.send("bob", "carol", "b1")
    c.send("carol", "alice", "c1")
    for machine in (a, b, c, a, b):
        machine.sync()
    before = _history(b)
    a.store.unlink()  # the disk is gone; a new store pairs again
    for leftover in a.store.parent.glob("store.db-*"):
        leftover.unlink()
    (tmp_path / "a2").mkdir()
    rebuilt = Machine("a2", tmp_path / "a2" / "store.db")
    from syncengine.engine.connect import connect_store

    connect_store(
        rebuilt.store, endpoint=team.endpoint, token=team.token(), team="crew",
        mode="plaintext-allowed",
    )  # fmt: skip
    assert run_cli(rebuilt, "sync").returncode == 0
    assert _history(rebuilt) == before  # its own sent messages came back as history
    rebuilt.send("alice", "carol", "after the rebuild")
    for machine in (rebuilt, b, c):
        assert run_cli(machine, "sync").returncode == 0
    assert relay_counts(live, team.id) == (5, 5)  # nothing published twice
    expected = sorted([*before, ("alice", "carol", "after the rebuild")])
    for machine in (rebuilt, b, c):
        history = _history(machine)
        assert history == expected and max(Counter(history).values()) == 1
