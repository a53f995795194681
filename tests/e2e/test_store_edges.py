"""Issue #33 against a live relay: a connected store on a full disk, and a
store or credentials folder others can touch (specs/store.md §12).

The full-disk case runs on a real small filesystem (a tmpfs mounted in the
test's directory; skipped with the reason where mounting is not allowed):
a ``sync`` that runs out of room stops with one line naming the path and
exit 13, keeps what it committed, ``status``/``history``/``doctor`` still
answer, and after space is freed the next ``sync`` finishes the job with
every message exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncengine.engine import Engine
from syncengine.engine.connect import connect_store
from syncengine.local_store import Store
from syncengine.store import OutgoingMessage
from tests.support.full_disk import fill, mount_tmpfs, sizes
from tests.support.live_relay import LiveRelay
from tests.support.machines import LeanTeam, Machine, exactly_once, run_cli

MESSAGES = 1500


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "small"
    mount_tmpfs(directory, "8m")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def _on(team: LeanTeam, directory: Path) -> Machine:
    machine = Machine("small", directory / "store.db")
    connect_store(
        machine.store, endpoint=team.endpoint, token=team.token(), team="crew",
        mode="plaintext-allowed",
    )  # fmt: skip
    return machine


def test_a_sync_out_of_room_stops_in_one_line_and_the_next_one_finishes(
    live: LiveRelay, tmp_path: Path, small_fs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team = LeanTeam(live, tmp_path)
    sender = team.machine("big")
    with Store(sender.store) as store:
        body = "w" * 600
        store.send_many(
            [OutgoingMessage("crew", "alice", "bob", f"m{i:05d} {body}") for i in range(MESSAGES)]
        )
    pushed = run_cli(sender, "sync")
    assert pushed.returncode == 0 and f"pushed {MESSAGES}" in pushed.stdout, pushed
    small = _on(team, small_fs)
    filler = fill(small_fs, leave=1_400_000)
    before = sizes(small.store)

    failed = run_cli(small, "sync")
    assert failed.returncode == 13, failed
    assert f"store {small.store}: the disk is full" in failed.stderr
    assert "Traceback" not in failed.stderr and "unexpected" not in failed.stderr
    during = sizes(small.store)
    kept = len(exactly_once(small))
    assert kept < MESSAGES  # it ran out of room part-way

    # Read-only commands answer on the full disk.
    status = run_cli(small, "status", "--json")
    assert status.returncode == 0, status
    assert json.loads(status.stdout)["warnings"] == []
    history = run_cli(small, "history", "crew", "--limit", "1")
    assert history.returncode == 0, history
    doctor = run_cli(small, "doctor", "--json")
    assert "Traceback" not in doctor.stderr and doctor.stdout, doctor
    assert len(exactly_once(small)) == kept  # nothing half-written, nothing lost

    filler.unlink()
    again = run_cli(small, "sync")
    assert again.returncode == 0, again
    bodies = [body for _, _, body in exactly_once(small)]
    assert len(bodies) == MESSAGES and len(set(bodies)) == MESSAGES
    after = sizes(small.store)
    assert after.get("store.db-wal", 0) == 0  # the last one out left no grown WAL
    with capsys.disabled():
        print(
            f"\nfull-disk sizes: before {before}, after the failed sync {during}, "
            f"after the next sync {after}; {kept} of {MESSAGES} kept by the failed sync"
        )


def test_a_store_others_can_read_is_a_status_warning_and_a_doctor_failure(
    live: LiveRelay, tmp_path: Path
) -> None:
    a = LeanTeam(live, tmp_path).machine("a")
    a.store.chmod(0o644)
    status = run_cli(a, "status", "--json")
    assert status.returncode == 0, status
    warning = json.loads(status.stdout)["warnings"][0]  # then its -wal/-shm, made alike
    assert str(a.store) in warning and "0644" in warning and f"chmod 600 {a.store}" in warning
    text = run_cli(a, "status").stdout
    assert f"WARNING         {warning}" in text.splitlines()
    doctor = run_cli(a, "doctor", "--json")
    checks = {c["check"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert doctor.returncode == 1
    assert (
        checks["store-modes"]["verdict"] == "fail"
        and "chmod 600" in checks["store-modes"]["remedy"]
    )


@pytest.mark.parametrize("mode", [0o666, 0o664])
def test_every_command_refuses_a_store_others_can_write(
    live: LiveRelay, tmp_path: Path, mode: int
) -> None:
    a = LeanTeam(live, tmp_path).machine("a")
    a.store.chmod(mode)
    for args in (("status",), ("sync",), ("history", "crew")):
        result = run_cli(a, *args)
        assert result.returncode == 13, (args, result)
        assert f"mode {mode:04o}: other users can write it" in result.stderr
        assert f"chmod 600 {a.store}" in result.stderr and "Traceback" not in result.stderr
    sent = run_cli(a, "send", "crew", "alice", "bob", "-")
    assert sent.returncode == 13 and "other users can write it" in sent.stderr
    doctor = run_cli(a, "doctor", "--json")
    checks = json.loads(doctor.stdout)["checks"]
    assert doctor.returncode == 1 and [c["check"] for c in checks] == ["store-access"]
    assert checks[0]["remedy"] == f"chmod 600 {a.store}"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the store to another user needs root")
def test_a_store_owned_by_another_user_is_refused_by_sync_and_doctor(
    live: LiveRelay, tmp_path: Path
) -> None:
    a = LeanTeam(live, tmp_path).machine("a")
    os.chown(a.store, 65534, 65534)
    result = run_cli(a, "sync")
    assert result.returncode == 13 and "uid 65534" in result.stderr, result
    doctor = run_cli(a, "doctor", "--json")
    assert [c["check"] for c in json.loads(doctor.stdout)["checks"]] == ["store-access"]


@pytest.mark.parametrize("mode", [0o777, 0o755, 0o750])
def test_a_credentials_folder_that_is_not_0700_is_refused_with_chmod_700(
    live: LiveRelay, tmp_path: Path, mode: int
) -> None:
    a = LeanTeam(live, tmp_path).machine("a")
    with Engine(a.store) as engine:
        folder = Path(engine.connection.credential_path).parent
    folder.chmod(mode)
    result = run_cli(a, "sync")
    assert result.returncode == 7, result
    assert f"{folder}: the credentials folder is mode {mode:04o}" in result.stderr
    assert f"chmod 700 {folder}" in result.stderr
    folder.chmod(0o700)
    assert run_cli(a, "sync").returncode == 0
