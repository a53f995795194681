"""Kill the engine's own state transitions at their named crash points, then
restart (specs/engine.md §2.5).

Each case runs the real command (``syncengine connect`` / ``sync`` /
``security set`` / ``security identity``) as its own process against a real
relay on 127.0.0.1 with ``SYNCENGINE_CRASH_AT=<point>``, asserts exit 77,
then checks the store the crash left and that the engine carries on:

* connect, before commit: no half-connected binding (no engine row, no
  Stage-1 binding); the orphan credential file stays, and a re-run with a
  fresh token sets it aside (never deletes it) and connects;
* connect, after commit: connected, ``status`` and ``sync`` work;
* resync, killed at the driver's commit or at the engine's marker commit:
  the rerun of the same command converges to one audit row and the cursor
  at the floor — from the audit when the driver had committed (its output
  was lost) — and the next ``sync`` pulls only what the relay still holds;
* resume with a contradicted acknowledgement to repair, killed inside its
  transaction (``engine.resume.repaired``) or at its commit: the ack and the
  halt stand together, or the reservation is published again (same wire ID
  and envelope) and the halt is gone together; a rerun and one sync converge;
* record / security / identity: the store opens with the previous durable
  state (before commit) or the new one (after commit), and the next ``sync``
  converges exactly once.

The cycle-level view of ``engine.record.*`` (both machines converge, nothing
left on the relay) is also in tests/e2e/test_engine_crash_points.py.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncengine.crash import CRASH_EXIT_CODE, ENGINE_CRASH_POINTS
from syncengine.engine.connect import default_credential_path
from tests.support.live_relay import LiveRelay, cli, relay_fixture
from tests.support.machines import LeanTeam, Machine, exactly_once, run_cli

CONNECT = ("engine.connect.credential_written", "engine.connect.before_commit")
RECONNECT = (
    "engine.reconnect.credential_written",
    "engine.reconnect.before_commit",
    "engine.reconnect.after_commit",
    # crash-tested in tests/e2e/test_reconnect.py
    "engine.disconnect.before_commit",
    "engine.disconnect.after_commit",
    # crash-tested with restore in tests/e2e/test_backup_restore.py
    "engine.adopted.before_commit",
    "engine.adopted.after_commit",
)
#: resume's repair of contradicted acknowledgements (inside its transaction).
RESUME_REPAIR = (
    "engine.resume.repaired",
    "engine.resume.before_commit",
    "engine.resume.after_commit",
)
CLIResult = subprocess.CompletedProcess[str]
EXPECTED = sorted([("alice", "bob", "a1"), ("bob", "alice", "b1")])


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRelay]:
    yield from relay_fixture(tmp_path_factory, name="engine-crash-relay")


def test_every_engine_point_is_exercised_here() -> None:
    engine_points = set(ENGINE_CRASH_POINTS)
    covered = {*CONNECT, "engine.connect.after_commit", *RECONNECT, *RESUME_REPAIR}
    covered |= {f"engine.{t}.{w}_commit"
                for t in ("record", "roster", "resync", "resume", "security", "identity",
                          "epoch", "epoch_import")
                for w in ("before", "after")}  # fmt: skip
    assert engine_points == covered


def _rows(machine: Machine, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(machine.store)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _connect_cli(team: LeanTeam, machine: Machine, point: str | None = None) -> CLIResult:
    token_file = machine.store.parent / "token"
    token_file.write_text(team.token().reveal() + "\n")
    token_file.chmod(0o600)
    return run_cli(
        machine, "connect", "--endpoint", team.endpoint, "--token", f"@{token_file}",
        "--team", "crew", "--security", "plaintext-allowed", "--json",
        env={"SYNCENGINE_CRASH_AT": point} if point else None,
    )  # fmt: skip


def _connect(team: LeanTeam, machine: Machine) -> dict[str, object]:
    result = _connect_cli(team, machine)
    assert result.returncode == 0, result.stderr
    obj: dict[str, object] = json.loads(result.stdout)
    return obj


def _crash_connect(team: LeanTeam, machine: Machine, point: str) -> None:
    result = _connect_cli(team, machine, point)
    assert result.returncode == CRASH_EXIT_CODE, result.stderr


def _status(machine: Machine) -> dict[str, object]:
    result = run_cli(machine, "status", "--json")
    assert result.returncode == 0, result.stderr
    obj: dict[str, object] = json.loads(result.stdout)
    return obj


def _converges(a: Machine, b: Machine) -> None:
    """One crash-free ``sync`` of ``a`` (a process) and ``b`` pushes and pulls everything."""
    restarted = run_cli(a, "sync")
    assert restarted.returncode == 0, restarted.stderr
    b.sync()
    assert exactly_once(a) == exactly_once(b) == EXPECTED
    assert _status(a)["state"] == "ok"


@pytest.mark.parametrize("point", CONNECT)
def test_connect_killed_before_commit_leaves_no_binding_and_reconnects(
    live: LiveRelay, tmp_path: Path, point: str
) -> None:
    team = LeanTeam(live, tmp_path)
    (tmp_path / "a").mkdir()
    a = Machine("a", tmp_path / "a" / "store.db")
    _crash_connect(team, a, point)
    cred = default_credential_path(a.store, "crew")
    assert cred.is_file()  # the orphan: written, never referenced by the store
    assert _rows(a, "SELECT count(*) FROM engine_bindings") == [(0,)]
    assert _rows(a, "SELECT count(*) FROM sync_bindings") == [(0,)]
    assert run_cli(a, "status").returncode != 0  # not connected, not half-connected

    connected = _connect(team, a)  # fresh token; the orphan must not block it
    aside = Path(str(connected["orphaned_credential_file"]))
    assert aside.parent == cred.parent and aside.is_file()
    assert stat.S_IMODE(aside.stat().st_mode) == 0o600  # kept private for revocation
    assert Path(str(connected["credential_file"])) == cred and cred.is_file()
    assert _rows(a, "SELECT count(*) FROM engine_bindings") == [(1,)]
    b = team.machine("b")
    a.send("alice", "bob", "a1")
    b.send("bob", "alice", "b1")
    b.sync()
    _converges(a, b)


def test_connect_killed_after_commit_is_connected(live: LiveRelay, tmp_path: Path) -> None:
    team = LeanTeam(live, tmp_path)
    (tmp_path / "a").mkdir()
    a = Machine("a", tmp_path / "a" / "store.db")
    _crash_connect(team, a, "engine.connect.after_commit")
    status = _status(a)
    assert status["security"]["mode"] == "plaintext-allowed"
    assert Path(str(status["credential_file"])).is_file()
    again = _connect_cli(team, a)
    assert again.returncode == 7 and "already connected" in again.stderr
    b = team.machine("b")
    a.send("alice", "bob", "a1")
    b.send("bob", "alice", "b1")
    b.sync()
    _converges(a, b)


def _pair(live: LiveRelay, tmp_path: Path, *, age: bool = False) -> tuple[Machine, Machine]:
    team = LeanTeam(live, tmp_path)
    a, b = team.age_machines("a", "b") if age else (team.machine("a"), team.machine("b"))
    a.send("alice", "bob", "a1")
    b.send("bob", "alice", "b1")
    b.sync()
    return a, b


@pytest.mark.parametrize("when", ["before", "after"])
def test_sync_killed_recording_its_outcome(live: LiveRelay, tmp_path: Path, when: str) -> None:
    a, b = _pair(live, tmp_path)
    crashed = run_cli(a, "sync", env={"SYNCENGINE_CRASH_AT": f"engine.record.{when}_commit"})
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    recorded = _rows(a, "SELECT last_success_at FROM engine_status")
    # connect wrote the row with no success; only the commit records one.
    assert (recorded[0][0] is None) == (when == "before")
    _converges(a, b)


@pytest.mark.parametrize("when", ["before", "after"])
def test_sync_killed_adopting_the_relays_roster(live: LiveRelay, tmp_path: Path, when: str) -> None:
    a, b = _pair(live, tmp_path)
    before = _rows(a, "SELECT member_id, name, roster FROM members ORDER BY name")
    crashed = run_cli(a, "sync", env={"SYNCENGINE_CRASH_AT": f"engine.roster.{when}_commit"})
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    # connect adopted the same roster, so either side of the commit holds it
    assert _rows(a, "SELECT member_id, name, roster FROM members ORDER BY name") == before
    assert _rows(a, "PRAGMA integrity_check") == [("ok",)]
    _converges(a, b)


@pytest.mark.parametrize("when", ["before", "after"])
def test_security_set_killed_at_its_append(live: LiveRelay, tmp_path: Path, when: str) -> None:
    a, b = _pair(live, tmp_path)
    # the mode is re-asserted, so the check is the durable history, not a policy change
    crashed = run_cli(a, "security", "set", "plaintext-allowed",
                      env={"SYNCENGINE_CRASH_AT": f"engine.security.{when}_commit"})  # fmt: skip
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    revisions = _rows(a, "SELECT revision FROM engine_security_history ORDER BY revision")
    assert revisions == ([(0,)] if when == "before" else [(0,), (1,)])
    history = _status(a)["security"]["history"]
    assert len(history) == len(revisions)
    _converges(a, b)


@pytest.mark.parametrize("when", ["before", "after"])
def test_identity_install_killed_at_its_commit(live: LiveRelay, tmp_path: Path, when: str) -> None:
    a, b = _pair(live, tmp_path, age=True)
    (old,) = _rows(a, "SELECT identity_path FROM engine_key_epochs")[0]
    moved = tmp_path / "a-moved.key"
    shutil.copy2(str(old), moved)
    moved.chmod(0o600)
    crashed = run_cli(a, "security", "identity", str(moved),
                      env={"SYNCENGINE_CRASH_AT": f"engine.identity.{when}_commit"})  # fmt: skip
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    (now,) = _rows(a, "SELECT identity_path FROM engine_key_epochs")[0]
    assert now == (old if when == "before" else str(moved))
    _converges(a, b)


def _epoch_2(a: Machine, tmp_path: Path) -> tuple[str, ...]:
    """``keys epoch add`` arguments for epoch-2 over a's and b's identities."""
    from tests.support.key_epochs import manifest

    recipients = manifest(tmp_path, "epoch-2", [tmp_path / "a.key", tmp_path / "b.key"])
    return ("keys", "epoch", "add", "--key-id", "epoch-2", "--recipients-file", str(recipients))


@pytest.mark.parametrize("when", ["before", "after"])
def test_rotation_killed_at_its_commit_reruns_to_one_epoch_at_the_boundary(
    live: LiveRelay, tmp_path: Path, when: str
) -> None:
    a, _b = _pair(live, tmp_path, age=True)
    a.sync()  # sequences 1 and 2 are taken: the boundary is 3
    add = _epoch_2(a, tmp_path)
    crashed = run_cli(a, *add, env={"SYNCENGINE_CRASH_AT": f"engine.epoch.{when}_commit"})
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    epochs = "SELECT revision, effective_from_seq, key_id FROM engine_key_epochs ORDER BY revision"
    assert len(_rows(a, epochs)) == (1 if when == "before" else 2)
    rerun = run_cli(a, *add)  # converges: appended now, or already there
    assert rerun.returncode == 0, rerun.stderr
    assert _rows(a, epochs) == [(0, 1, "epoch-1"), (1, 3, "epoch-2")]
    a.send("alice", "bob", "after")
    assert run_cli(a, "sync").returncode == 0
    sealed = _rows(a, "SELECT key_id, server_seq FROM sync_push WHERE server_seq >= 3")
    assert sealed == [("epoch-2", 3)]


@pytest.mark.parametrize("when", ["before", "after"])
def test_epoch_import_killed_at_its_commit_reruns_to_the_snapshots_history(
    live: LiveRelay, tmp_path: Path, when: str
) -> None:
    a, b = _pair(live, tmp_path, age=True)
    assert run_cli(a, *_epoch_2(a, tmp_path)).returncode == 0
    snapshot = tmp_path / "epochs.json"
    exported = run_cli(a, "keys", "epoch", "export", "--output", str(snapshot), "--json")
    digest = json.loads(exported.stdout)["snapshot_sha256"]
    imported = ("keys", "epoch", "import", "--file", str(snapshot), "--confirm-digest", digest)
    crashed = run_cli(
        b, *imported, env={"SYNCENGINE_CRASH_AT": f"engine.epoch_import.{when}_commit"}
    )
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    keys = "SELECT key_id, identity_path IS NOT NULL FROM engine_key_epochs ORDER BY revision"
    assert len(_rows(b, keys)) == (1 if when == "before" else 2)
    rerun = run_cli(b, *imported)
    assert rerun.returncode == 0, rerun.stderr
    assert _rows(b, keys) == [("epoch-1", 1), ("epoch-2", 1)]  # b's key carried over
    _converges(a, b)


RESYNC_POINTS = (
    "resync.commit.before_commit",
    "resync.commit.after_commit",
    "engine.resync.before_commit",
    "engine.resync.after_commit",
)


@pytest.mark.parametrize("point", RESYNC_POINTS)
def test_resync_killed_at_a_commit_converges_on_rerun(
    live: LiveRelay, tmp_path: Path, point: str
) -> None:
    team = LeanTeam(live, tmp_path)
    a, b = team.machine("a"), team.machine("b")
    b.send("bob", "alice", *(f"b{i}" for i in range(1, 6)))  # sequences 1..5
    b.sync()
    retained = cli(live.db, "retain", "--team", team.id, "--through", "4")
    assert retained.returncode == 0, retained.stderr
    assert run_cli(a, "pull").returncode == 5  # a's cursor 0 lies below the floor
    approve = ("resync", "--team", "crew", "--accept-floor", "4", "--json")

    crashed = run_cli(a, *approve, env={"SYNCENGINE_CRASH_AT": point})
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    committed = point != "resync.commit.before_commit"
    audit_sql = "SELECT expected_transport_cursor, accepted_floor FROM sync_resync_audits"
    assert _rows(a, audit_sql) == ([(0, 4)] if committed else [])
    assert _rows(a, "SELECT transport_cursor FROM sync_bindings") == [(4 if committed else 0,)]
    marker = _rows(a, "SELECT resync_after FROM engine_status")
    assert marker == ([(None,)] if point == "engine.resync.after_commit" else [(0,)])

    rerun = run_cli(a, *approve)
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["resync"]["already_applied"] is committed
    assert _rows(a, audit_sql) == [(0, 4)]
    assert _rows(a, "SELECT transport_cursor FROM sync_bindings") == [(4,)]
    status = _status(a)
    assert status["state"] == "ok" and status["resync_required"] is None
    synced = run_cli(a, "sync")
    assert synced.returncode == 0, synced.stderr
    assert exactly_once(a) == [("bob", "alice", "b5")]


@pytest.mark.parametrize("when", ["before", "after"])
def test_resume_killed_at_its_commit_leaves_the_halt_or_clears_it(
    live: LiveRelay, tmp_path: Path, when: str
) -> None:
    a, b = _pair(live, tmp_path)
    conn = sqlite3.connect(a.store)
    try:  # an earlier contradiction halted the binding
        conn.execute(
            "UPDATE engine_status SET state = 'halted', halt_code = 'corrupt-state',"
            " halt_message = 'evidence', halt_at = '2026-01-01T00:00:00.000000Z'"
        )
        conn.commit()
    finally:
        conn.close()
    assert run_cli(a, "sync").returncode == 6  # halted: no request made
    crashed = run_cli(a, "resume", env={"SYNCENGINE_CRASH_AT": f"engine.resume.{when}_commit"})
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    halt = _rows(a, "SELECT halt_code FROM engine_status")
    assert halt == ([("corrupt-state",)] if when == "before" else [(None,)])
    assert run_cli(a, "resume").returncode == 0  # rerun: clears it, or finds nothing
    _converges(a, b)


@pytest.mark.parametrize("point", RESUME_REPAIR)
def test_resume_repairing_a_contradicted_ack_killed_in_its_transaction_converges(
    live: LiveRelay, tmp_path: Path, point: str
) -> None:
    a, b = _pair(live, tmp_path)  # the relay holds b1 at 1
    assert run_cli(a, "push").returncode == 0  # a1 stored at 2
    envelope_sql = "SELECT state, wire_id, cipher, blob, server_seq FROM sync_push"
    ((_, wire, cipher, blob, seq),) = _rows(a, envelope_sql)
    assert seq == 2
    conn = sqlite3.connect(a.store)
    try:  # what a lying ``duplicate`` at sequence 1 would have left behind
        conn.execute("UPDATE sync_push SET server_seq = 1")
        conn.commit()
    finally:
        conn.close()
    assert run_cli(a, "sync").returncode == 6  # b1 at 1 contradicts it: halted
    crashed = run_cli(a, "resume", env={"SYNCENGINE_CRASH_AT": point})
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    committed = point == "engine.resume.after_commit"
    assert _rows(a, envelope_sql) == [
        ("reserved", wire, cipher, blob, None) if committed else ("acked", wire, cipher, blob, 1)
    ]
    halt = _rows(a, "SELECT halt_code FROM engine_status")
    assert halt == ([(None,)] if committed else [("corrupt-state",)])
    conflicts = _rows(a, "SELECT count(*) FROM sync_conflicts")
    assert conflicts == ([(0,)] if committed else [(2,)])
    assert run_cli(a, "resume").returncode == 0  # rerun: repairs and clears, or finds nothing
    _converges(a, b)
    assert _rows(a, envelope_sql) == [("acked", wire, cipher, blob, 2)]  # the same bytes, once
