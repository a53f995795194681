"""Migration 14 killed before its commit (syncengine/store/migrations.py;
specs/engine.md §6.5): ``sync_quarantine`` is rebuilt with the wider
status CHECK in one transaction. Killed at ``store.migrate.quarantine_outcomes``
(the new table filled, the old one dropped, nothing committed), the store
stays at version 13 with every quarantine row as it was, and the next open
migrates it to exactly what a crash-free upgrade holds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from syncengine.crash import CRASH_EXIT_CODE, OUTCOME_CRASH_POINTS
from syncengine.local_store import Store
from syncengine.ops.sync_records import SyncPullCursor
from syncengine.store import migrations as mig
from syncengine.store.connection import open_connection
from tests.syncengine.ops.helpers import foreign_envelope, new_key, pull_record

REPO = Path(__file__).resolve().parents[1]
OPEN = """
import sys
from syncengine.local_store import Store
with Store(sys.argv[1]) as store:
    store.team("dev")
"""


def _pre_14_store(path: Path) -> None:
    """A store as version 13 left it: quarantine rows imported and held
    (the tables of migrations 15 and 16 not there yet)."""
    key = new_key()
    with Store(path) as store:
        store.init()
        store.create_team("dev", ["alice", "bob"])
        pulled = []
        for seq, status in enumerate(("importable", "pending_key", "malformed"), start=1):
            wire, env = foreign_envelope(key, f"m{seq}", "alice", "bob")
            pulled.append(pull_record(seq, wire, env, status))
        store.sync_apply_pull(key, pulled, SyncPullCursor(3))
        store.conn.execute(
            "DROP TABLE engine_epoch_checkpoints; DROP TABLE reserved_names;"
            " PRAGMA user_version = 13;"
        )


def _state(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = open_connection(path, create=False, busy_timeout_ms=5000)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall()[0][0] == "ok"
        return {
            "version": [(mig.schema_version(conn),)],
            "rows": [
                tuple(r)
                for r in conn.execute(
                    "SELECT rowid, wire_id, server_seq, status, local_position"
                    " FROM sync_quarantine ORDER BY rowid"
                )
            ],
            "indexes": sorted(
                (r[0],)
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'index'"
                    " AND tbl_name = 'sync_quarantine'"
                )
            ),
        }
    finally:
        conn.close()


def test_the_case_covers_the_migration_point() -> None:
    assert OUTCOME_CRASH_POINTS == ("store.migrate.quarantine_outcomes",)


def test_migration_14_killed_before_its_commit_stays_at_13_and_converges(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _pre_14_store(path)
    before = _state(path)
    assert before["version"] == [(13,)]
    child = subprocess.run(
        [sys.executable, "-c", OPEN, str(path)],
        cwd=REPO,
        env={**os.environ, "SYNCENGINE_CRASH_AT": "store.migrate.quarantine_outcomes"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert child.returncode == CRASH_EXIT_CODE, child.stderr
    assert _state(path) == before  # rolled back whole: version, rows, indexes
    with Store(path) as store:
        store.team("dev")  # the next open migrates
    recovered = _state(path)
    reference = tmp_path / "reference.db"
    _pre_14_store(reference)
    with Store(reference) as store:
        store.team("dev")
    assert recovered["version"] == [(mig.LATEST_VERSION,)]
    assert recovered["rows"] == before["rows"]
    assert recovered["indexes"] == _state(reference)["indexes"]
    with Store(path) as store:  # the wider CHECK is in place
        store.conn.execute("UPDATE sync_quarantine SET status = 'before_join' WHERE server_seq = 2")
