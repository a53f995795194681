"""The engine killed at every crash point of a cycle, then restarted.

crash_tests/test_sync_crash_points.py kills the Stage-1 *operations* (the
driver) at each point and checks the store's invariants. Here the whole
product runs: ``syncengine sync`` (or ``reprocess``) as a process against a
real relay, with ``SYNCENGINE_CRASH_AT=<point>`` so it dies with
``os._exit(77)`` at that storage-transaction boundary — before or after the
relay saw its batch, before or after a pulled page was applied. The same
command is then run again without the variable, and both machines must
converge with every message exactly once and no copy on the relay.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from syncengine.crash import (
    CRASH_EXIT_CODE,
    ENGINE_CRASH_POINTS,
    STAGE1_CRASH_POINTS,
    STAGE2_CRASH_POINTS,
)
from tests.support.live_relay import LiveRelay
from tests.support.machines import LeanTeam, exactly_once, relay_counts, run_cli

#: The engine command that passes each crash point (None: no cycle reaches it,
#: so it must never fire during one — no engine command retires a binding, and
#: connect / ``security set`` / ``security identity`` are killed and restarted
#: in crash_tests/test_engine_state_crash_points.py, ``connect --replace`` in
#: tests/e2e/test_reconnect.py).
REACHED_BY: dict[str, str | None] = {
    "prepare.begin.before_commit": "sync",
    "prepare.begin.after_commit": "sync",
    "prepare.sealed": "sync",
    "prepare.publish.before_commit": "sync",
    "prepare.publish.after_commit": "sync",
    "reconcile.commit.before_commit": "sync",
    "reconcile.commit.after_commit": "sync",
    "apply.commit.before_commit": "sync",
    "apply.commit.after_commit": "sync",
    "reprocess.snapshot.after_read": "reprocess",
    "resync.commit.before_commit": None,
    "resync.commit.after_commit": None,
    "binding.bind.before_commit": "sync",
    "binding.bind.after_commit": "sync",
    "binding.retire.before_commit": None,
    "binding.retire.after_commit": None,
    "read.prepare.before_commit": "sync",
    "read.prepare.after_commit": "sync",
    "read.apply.before_commit": "sync",
    "read.apply.after_commit": "sync",
    "read.block.before_commit": None,
    "read.block.after_commit": None,
    "read.unblock.before_commit": None,
    "read.unblock.after_commit": None,
    "engine.connect.credential_written": None,
    "engine.connect.before_commit": None,
    "engine.connect.after_commit": None,
    "engine.reconnect.credential_written": None,
    "engine.reconnect.before_commit": None,
    "engine.reconnect.after_commit": None,
    "engine.disconnect.before_commit": None,
    "engine.disconnect.after_commit": None,
    "engine.adopted.before_commit": None,
    "engine.adopted.after_commit": None,
    "engine.record.before_commit": "sync",
    "engine.record.after_commit": "sync",
    "engine.roster.before_commit": "sync",
    "engine.roster.after_commit": "sync",
    "engine.resync.before_commit": None,
    "engine.resync.after_commit": None,
    "engine.resume.repaired": None,
    "engine.resume.before_commit": None,
    "engine.resume.after_commit": None,
    "engine.security.before_commit": None,
    "engine.security.after_commit": None,
    "engine.identity.before_commit": None,
    "engine.identity.after_commit": None,
    # crash-tested in crash_tests/test_engine_state_crash_points.py
    "engine.epoch.before_commit": None,
    "engine.epoch.after_commit": None,
    "engine.epoch_import.before_commit": None,
    "engine.epoch_import.after_commit": None,
}


#: The storage contract's own points (send, mark read, import, …) belong to
#: no sync cycle; crash_tests/test_store_crash_points.py proves them.
CYCLE_POINTS = STAGE1_CRASH_POINTS + STAGE2_CRASH_POINTS + ENGINE_CRASH_POINTS


def test_every_crash_point_has_an_engine_command_or_is_declared_unreachable() -> None:
    assert tuple(REACHED_BY) == CYCLE_POINTS


@pytest.mark.parametrize("point", CYCLE_POINTS)
def test_engine_killed_at_crash_point_then_restarted_converges_exactly_once(
    live: LiveRelay, tmp_path: Path, point: str
) -> None:
    team = LeanTeam(live, tmp_path)
    a, b = team.age_machines("a", "b")
    a.send("alice", "bob", "a1", "a2")
    b.send("bob", "alice", "b1")
    b.sync()  # so a's cycle has a page to pull as well as a batch to push
    command = REACHED_BY[point]
    crashed = run_cli(a, command or "sync", env={"SYNCENGINE_CRASH_AT": point})
    assert crashed.returncode == (CRASH_EXIT_CODE if command else 0), crashed.stderr
    if command == "reprocess":
        assert run_cli(a, "reprocess").returncode == 0
    restarted = run_cli(a, "sync")
    assert restarted.returncode == 0, restarted.stderr
    b.sync()
    expected = sorted([("alice", "bob", "a1"), ("alice", "bob", "a2"), ("bob", "alice", "b1")])
    assert exactly_once(a) == exactly_once(b) == expected
    assert relay_counts(live, team.id) == (3, 3)
    for machine in (a, b):
        with machine.engine() as engine:
            status = engine.status()
        assert status.engine.state == "ok"
        assert status.sync.conflicts == 0 and status.pending_push == 0
        assert set(status.sync.quarantine) <= {"imported", "reconciled"}
