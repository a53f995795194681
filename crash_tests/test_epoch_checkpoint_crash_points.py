"""Kill every transition that writes the epoch checkpoint at its commit, then
restart (syncengine/engine/epoch_checkpoint.py; specs/age-v1.md "Epoch
authority"; specs/engine.md §2.5).

Each case runs the real command as its own process against a real relay on
127.0.0.1 with ``SYNCENGINE_CRASH_AT=<point>``, asserts exit 77, then checks
that the retained checkpoint and the key epochs moved together (both or
neither) and that a rerun converges to the one checkpoint an uninterrupted
run gives:

* ``engine.checkpoint.*`` — ``keys epoch export`` after a security change
  retains the successor snapshot in its own transaction;
* ``engine.epoch.*`` — ``keys epoch add`` retains the rotation's snapshot in
  the transaction that appends the epoch;
* ``engine.epoch_import.*`` — ``keys epoch import`` retains the imported
  snapshot in the transaction that appends its epochs;
* ``engine.connect.*`` — ``connect --key-id`` retains the new chain's root
  in the connect transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncengine.crash import CHECKPOINT_CRASH_POINTS, CRASH_EXIT_CODE
from tests.support.key_epochs import manifest
from tests.support.live_relay import LiveRelay, relay_fixture
from tests.support.machines import LeanTeam, Machine, age_epoch, run_cli

WHEN = ("before", "after")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRelay]:
    yield from relay_fixture(tmp_path_factory, name="checkpoint-crash-relay")


def state(machine: Machine) -> tuple[tuple[int, str | None] | None, int]:
    """(the checkpoint's revision and digest, or None; the number of epochs)."""
    conn = sqlite3.connect(machine.store)
    try:
        row = conn.execute(
            "SELECT epoch_revision, snapshot_sha256 FROM engine_epoch_checkpoints"
        ).fetchone()
        epochs = conn.execute("SELECT count(*) FROM engine_key_epochs").fetchone()[0]
    finally:
        conn.close()
    return (None if row is None else (int(row[0]), row[1])), int(epochs)


def export(machine: Machine, output: Path, point: str | None = None) -> str:
    result = run_cli(
        machine, "keys", "epoch", "export", "--output", str(output), "--team", "crew", "--json",
        env={"SYNCENGINE_CRASH_AT": point} if point else None,
    )  # fmt: skip
    if point is not None:
        assert result.returncode == CRASH_EXIT_CODE, result.stderr
        return ""
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)["snapshot_sha256"])


def add_epoch_2(machine: Machine, tmp: Path, point: str | None = None) -> int:
    recipients = manifest(tmp, "epoch-2", [tmp / "a.key", tmp / "b.key"])
    return run_cli(
        machine, "keys", "epoch", "add", "--key-id", "epoch-2", "--recipients-file",
        str(recipients), "--team", "crew",
        env={"SYNCENGINE_CRASH_AT": point} if point else None,
    ).returncode  # fmt: skip


def test_the_checkpoint_points_are_the_ones_named_here() -> None:
    assert set(CHECKPOINT_CRASH_POINTS) == {f"engine.checkpoint.{w}_commit" for w in WHEN}


@pytest.mark.parametrize("when", WHEN)
def test_an_export_killed_at_its_checkpoint_commit_reruns_to_one_next_revision(
    live: LiveRelay, tmp_path: Path, when: str
) -> None:
    (a,) = LeanTeam(live, tmp_path).age_machines("a")
    root = export(a, tmp_path / "root.json")
    assert run_cli(a, "security", "set", "e2ee-required", "--team", "crew").returncode == 0
    export(a, tmp_path / "crashed.json", f"engine.checkpoint.{when}_commit")
    retained, _ = state(a)
    assert retained is not None
    assert retained[0] == (0 if when == "before" else 1)
    assert not (tmp_path / "crashed.json").exists()  # nothing written outside the store
    digest = export(a, tmp_path / "next.json")
    assert state(a)[0] == (1, digest)
    obj = json.loads((tmp_path / "next.json").read_text())
    assert (obj["epoch_revision"], obj["previous_snapshot_sha256"]) == ("1", root)
    assert export(a, tmp_path / "again.json") == digest  # no third revision


@pytest.mark.parametrize("when", WHEN)
def test_a_rotation_killed_at_its_commit_moves_epochs_and_checkpoint_together(
    live: LiveRelay, tmp_path: Path, when: str
) -> None:
    (a, _b) = LeanTeam(live, tmp_path).age_machines("a", "b")
    root = export(a, tmp_path / "root.json")
    assert add_epoch_2(a, tmp_path, f"engine.epoch.{when}_commit") == CRASH_EXIT_CODE
    retained, epochs = state(a)
    if when == "before":
        assert (retained, epochs) == ((0, root), 1)
    else:
        assert retained is not None and (retained[0], epochs) == (1, 2)
    assert add_epoch_2(a, tmp_path) == 0  # converges: appended now, or already there
    digest = export(a, tmp_path / "after.json")
    assert state(a) == ((1, digest), 2)


@pytest.mark.parametrize("when", WHEN)
def test_an_import_killed_at_its_commit_moves_epochs_and_checkpoint_together(
    live: LiveRelay, tmp_path: Path, when: str
) -> None:
    a, b = LeanTeam(live, tmp_path).age_machines("a", "b")
    root = export(a, tmp_path / "root.json")
    assert add_epoch_2(a, tmp_path) == 0
    snapshot = tmp_path / "epochs.json"
    digest = export(a, snapshot)
    imported = (
        "keys", "epoch", "import", "--file", str(snapshot), "--confirm-digest", digest,
        "--team", "crew",
    )  # fmt: skip
    crashed = run_cli(
        b, *imported, env={"SYNCENGINE_CRASH_AT": f"engine.epoch_import.{when}_commit"}
    )
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    assert state(b) == (((0, root), 1) if when == "before" else ((1, digest), 2))
    rerun = run_cli(b, *imported)
    assert rerun.returncode == 0, rerun.stderr
    assert state(b) == ((1, digest), 2)


@pytest.mark.parametrize("when", WHEN)
def test_a_connect_killed_at_its_commit_retains_the_root_with_the_connection_or_neither(
    live: LiveRelay, tmp_path: Path, when: str
) -> None:
    team = LeanTeam(live, tmp_path)
    recipients, keys = age_epoch(tmp_path, "a")
    (tmp_path / "a").mkdir()
    a = Machine("a", tmp_path / "a" / "store.db")
    token = tmp_path / "a" / "token"
    token.write_text(team.token().reveal() + "\n")
    token.chmod(0o600)
    connect = (
        "connect", "--endpoint", team.endpoint, "--token", f"@{token}", "--team", "crew",
        "--security", "e2ee-required", "--key-id", "epoch-1", "--recipients-file",
        str(recipients), "--identity", str(keys["a"]),
    )  # fmt: skip
    crashed = run_cli(a, *connect, env={"SYNCENGINE_CRASH_AT": f"engine.connect.{when}_commit"})
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    if when == "before":
        assert state(a) == (None, 0)
        token.write_text(team.token().reveal() + "\n")
        assert run_cli(a, *connect).returncode == 0
    retained, epochs = state(a)
    assert retained is not None and retained[0] == 0 and epochs == 1
    assert export(a, tmp_path / "root.json") == retained[1]  # the root is what it exports
