"""Kill the two transitions that write reserved names at every named point and
prove the reservation is never separated from what makes it (specs/store.md
§4.1; syncengine/store/reserved_names.py):

* ``team rename-member`` — ``team.rename_member.before_commit``,
  ``team.rename_member.reserved`` (the member row already renamed, its old
  name not yet reserved) and ``team.rename_member.after_commit``. Before the
  commit nothing changed, and the natural retry (the same rename) finishes
  it; after it, the rename and the reservation are both there, the retry is
  refused (the old name is gone) and the freed-looking name stays refused
  to another member.
* migration 16 — ``store.migrate.reserved_names``, after the recovered
  reservations are written and before the migration's commit: the store
  stays at version 15 without the table, and the next open migrates it to
  exactly what a crash-free upgrade holds.

Each crash is a child process that dies with ``os._exit`` at the armed point
(syncengine/crash.py), without writing to stdout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from syncengine.crash import CRASH_EXIT_CODE, NAME_CRASH_POINTS
from syncengine.local_store import Store
from syncengine.ops.sync_records import SyncPullCursor
from syncengine.store import migrations as mig
from syncengine.store.connection import open_connection
from syncengine.store.errors import UnknownAgent
from syncengine.store.reserved_names import ReservedName
from tests.syncengine.ops.helpers import (
    FakeRelay,
    foreign_envelope,
    new_key,
    prepare_none,
    pull_record,
)

REPO = Path(__file__).resolve().parents[1]

RENAME = """
import sys
from syncengine.local_store import Store
with Store(sys.argv[1]) as store:
    store.rename_member("dev", "bob", "robert")
"""

OPEN = """
import sys
from syncengine.local_store import Store
with Store(sys.argv[1]) as store:
    store.team("dev")
"""

RENAME_POINTS = (
    "team.rename_member.before_commit",
    "team.rename_member.reserved",
    "team.rename_member.after_commit",
)


def _crash(script: str, path: Path, point: str) -> None:
    child = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        cwd=REPO,
        env={**os.environ, "SYNCENGINE_CRASH_AT": point},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert child.returncode == CRASH_EXIT_CODE, child.stderr
    assert child.stdout == ""


def _rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The rows renames and reservations touch, with the schema version."""
    conn = open_connection(path, create=False, busy_timeout_ms=5000)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall()[0][0] == "ok"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        found: dict[str, list[tuple[Any, ...]]] = {
            "version": [(mig.schema_version(conn),)],
            "members": [
                tuple(r)
                for r in conn.execute("SELECT member_pk, name FROM members ORDER BY member_pk")
            ],
        }
        if "reserved_names" in tables:
            found["reserved_names"] = [
                tuple(r)
                for r in conn.execute(
                    "SELECT team_pk, name, member_pk, source FROM reserved_names ORDER BY name"
                )
            ]
        return found
    finally:
        conn.close()


def test_every_name_point_is_exercised_here() -> None:
    assert set(NAME_CRASH_POINTS) == {"team.rename_member.reserved", "store.migrate.reserved_names"}
    assert set(NAME_CRASH_POINTS) - set(RENAME_POINTS) == {"store.migrate.reserved_names"}


def _team(path: Path) -> None:
    with Store(path) as store:
        store.init()
        store.create_team("dev", ["alice", "bob", "carol"])
        store.send("dev", "alice", "bob", "before the rename")


@pytest.mark.parametrize("point", RENAME_POINTS)
def test_a_rename_killed_at_any_point_keeps_name_and_reservation_together(
    tmp_path: Path, point: str
) -> None:
    path = tmp_path / "s.db"
    _team(path)
    before = _rows(path)
    _crash(RENAME, path, point)
    after = _rows(path)
    committed = point.endswith("after_commit")
    if not committed:
        assert after == before  # neither the new name nor a reservation
        with Store(path) as store:
            store.rename_member("dev", "bob", "robert")  # the retry finishes it
    with Store(path) as store:
        if committed:
            with pytest.raises(UnknownAgent):
                store.rename_member("dev", "bob", "robert")
        assert [m.body for m in store.list_unread("dev", "robert")] == ["before the rename"]
        with pytest.raises(ReservedName):
            store.rename_member("dev", "carol", "bob")
    reference = tmp_path / "reference.db"
    _team(reference)
    with Store(reference) as store:
        store.rename_member("dev", "bob", "robert")
    assert _rows(path) == _rows(reference)


def _pre_16_store(path: Path) -> None:
    """A store as version 15 left it: a plaintext push to bob and an import
    from carol, then both renamed with no reservation written."""
    key = new_key()
    with Store(path) as store:
        store.init()
        store.create_team("dev", ["alice", "bob", "carol"])
        store.send("dev", "alice", "bob", "m1")
        candidates = list(store.sync_prepare_push(key, prepare_none(), 10).candidates)
        store.sync_reconcile_push(key, FakeRelay().push(candidates))
        wire, env = foreign_envelope(key, "from afar", "carol", "alice")
        store.sync_apply_pull(key, [pull_record(2, wire, env)], SyncPullCursor(2))
        store.conn.execute(
            "UPDATE members SET name = 'robert' WHERE name = 'bob';"
            "UPDATE members SET name = 'caroline' WHERE name = 'carol';"
            "DROP TABLE reserved_names; PRAGMA user_version = 15;"
        )


def test_migration_16_killed_before_its_commit_stays_at_15_and_converges(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    _pre_16_store(path)
    before = _rows(path)
    assert before["version"] == [(15,)] and "reserved_names" not in before
    _crash(OPEN, path, "store.migrate.reserved_names")
    assert _rows(path) == before
    with Store(path) as store:
        store.team("dev")  # the next open migrates
    recovered = _rows(path)
    reference = tmp_path / "reference.db"
    _pre_16_store(reference)
    with Store(reference) as store:
        store.team("dev")
    assert recovered == _rows(reference)
    assert recovered["version"] == [(mig.LATEST_VERSION,)]
    assert [(name, source) for _, name, _, source in recovered["reserved_names"]] == [
        ("bob", "recovered"),
        ("carol", "recovered"),
    ]
