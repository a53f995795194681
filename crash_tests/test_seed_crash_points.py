"""Kill ``syncengine seed`` at its commit, then run it again
(syncengine/ops/seed.py; specs/engine.md §7.2).

The seed is one transaction of the seeded store (``seed.commit``). A
machine that joined by a rotation holds two older messages as
``before_join``; the real command runs as its own process with
``SYNCENGINE_CRASH_AT=<point>`` against a teammate's backup, exits 77, and:

* ``before_commit`` — nothing was written: no message, both rows still
  ``before_join``, no read mark;
* ``after_commit`` — the seed is whole: both messages once, rows imported;
* either way a rerun converges to the crash-free result — every message of
  the team exactly once, nothing held, the read carried — and the relay
  holds what it held before (nothing was sent).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from syncengine.crash import CRASH_EXIT_CODE, SEED_CRASH_POINTS
from syncengine.local_store import Store
from tests.support.live_relay import LiveRelay, relay_fixture
from tests.support.machines import Machine, exactly_once, relay_counts, run_cli
from tests.support.seeding import cli_ok, joined_by_rotation, quarantine_count, unread_bodies

EVERYTHING = sorted(
    [
        ("alice", "bob", "older to bob"),
        ("bob", "alice", "older to alice"),
        ("alice", "bob", "after c joined"),
    ]
)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRelay]:
    yield from relay_fixture(tmp_path_factory, name="seed-crash-relay")


def _reads(machine: Machine) -> int:
    with Store(machine.store) as store:
        return int(store.conn.execute("SELECT count(*) FROM message_reads").fetchone()[0])


def test_the_cases_cover_every_seed_crash_point() -> None:
    assert set(SEED_CRASH_POINTS) == {f"seed.commit.{w}_commit" for w in ("before", "after")}


@pytest.mark.parametrize("point", SEED_CRASH_POINTS)
def test_a_seed_killed_at_its_commit_is_all_or_nothing_and_a_rerun_converges(
    live: LiveRelay, tmp_path: Path, point: str
) -> None:
    team, (_, b, c) = joined_by_rotation(live, tmp_path)
    backup = tmp_path / "b.backup"
    cli_ok(b, "backup", "--output", str(backup))
    on_relay = relay_counts(live, team.id)
    reads = _reads(c)

    crashed = run_cli(
        c, "seed", "--input", str(backup), "--team", "crew",
        env={"SYNCENGINE_CRASH_AT": point},
    )  # fmt: skip
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    if point.endswith("before_commit"):
        assert c.bodies() == ["after c joined"]
        assert quarantine_count(c, "before_join") == 2 and _reads(c) == reads
    else:
        assert exactly_once(c) == EVERYTHING
        assert quarantine_count(c, "before_join") == 0

    again = cli_ok(c, "seed", "--input", str(backup), "--team", "crew")
    assert again["seeded"] == (2 if point.endswith("before_commit") else 0)
    assert exactly_once(c) == EVERYTHING
    assert quarantine_count(c, "before_join") == 0
    assert unread_bodies(c, "bob") == ["after c joined"]  # the backup's read, carried once
    c.sync()
    assert relay_counts(live, team.id) == on_relay
