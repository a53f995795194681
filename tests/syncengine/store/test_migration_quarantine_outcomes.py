"""Migration 14 (issues #33, #34): ``sync_quarantine`` admits the two new held
states, keeps every row as it was, and the held-states index serves the
queries that name it (reprocess's keyset, status's counts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

from syncengine.ops.reprocess import KEYSET_SQL
from syncengine.store import migrations as mig

OLD_STATUSES = (
    "imported",
    "reconciled",
    "corrupt_state",
    "unsupported_cipher",
    "pending_key",
    "authentication_failed",
    "malformed",
    "policy_violation",
)
AT = "2026-07-20T06:30:00.000000Z"


def _row(seq: int, status: str) -> tuple[Any, ...]:
    return (1, f"w{seq}", seq, AT, 1, "age-v1", "epoch-1", f"blob{seq}", status, 0, 0, "why")


_INSERT = (
    "INSERT INTO sync_quarantine (binding_pk, wire_id, server_seq, server_received_at,"
    " envelope_v, cipher, key_id, blob, status, policy_revision, local_security_revision,"
    " reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _store_at_13(path: Path) -> apsw.Connection:
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA foreign_keys=ON")
    mig.migrate(conn, path, 13)
    conn.execute(
        "INSERT INTO teams (team_pk, team_id, name, created_at) VALUES (1, 't', 'crew', ?)", (AT,)
    )
    conn.execute(
        "INSERT INTO sync_bindings (binding_pk, team_pk, server_instance_id, remote_team_id,"
        " protocol_version, driver_generation, state, revision, created_at)"
        " VALUES (1, 1, 's', 'r', 1, 'g', 'active', 1, ?)",
        (AT,),
    )
    for seq, status in enumerate(OLD_STATUSES, start=1):
        conn.execute(_INSERT, _row(seq, status))
    return conn


def _rows(conn: apsw.Connection) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT rowid, * FROM sync_quarantine ORDER BY rowid").fetchall()


def test_migration_14_keeps_every_quarantine_row_with_its_rowid(tmp_path: Path) -> None:
    conn = _store_at_13(tmp_path / "s.db")
    before = _rows(conn)
    mig.migrate(conn, tmp_path / "s.db", 14)
    assert _rows(conn) == before


@pytest.mark.parametrize("status", ["manifest_mismatch", "before_join"])
def test_migration_14_admits_the_new_held_states(tmp_path: Path, status: str) -> None:
    conn = _store_at_13(tmp_path / "s.db")
    with pytest.raises(apsw.ConstraintError):
        conn.execute(_INSERT, _row(100, status))  # refused before the migration
    mig.migrate(conn, tmp_path / "s.db", 14)
    conn.execute(_INSERT, _row(100, status))
    assert conn.execute("SELECT status FROM sync_quarantine WHERE server_seq = 100").fetchone() == (
        status,
    )


def test_migration_14_still_refuses_a_status_outside_the_vocabulary(tmp_path: Path) -> None:
    conn = _store_at_13(tmp_path / "s.db")
    mig.migrate(conn, tmp_path / "s.db", 14)
    with pytest.raises(apsw.ConstraintError):
        conn.execute(_INSERT, _row(100, "lost"))


def test_the_reprocess_keyset_offers_every_held_state_through_the_held_index(
    tmp_path: Path,
) -> None:
    conn = _store_at_13(tmp_path / "s.db")
    mig.migrate(conn, tmp_path / "s.db", 14)
    conn.execute(_INSERT, _row(100, "manifest_mismatch"))
    conn.execute(_INSERT, _row(101, "before_join"))
    rows = conn.execute(KEYSET_SQL, (1, 0, "", 100)).fetchall()
    assert [r[7] for r in rows] == [
        "unsupported_cipher",
        "pending_key",
        "authentication_failed",
        "malformed",
        "policy_violation",
        "manifest_mismatch",
        "before_join",
    ]
    plan = " ".join(str(r) for r in conn.execute("EXPLAIN QUERY PLAN " + KEYSET_SQL, (1, 0, "", 9)))
    assert "sync_quarantine_blocking" in plan


def test_migration_14_recreates_every_index_of_the_quarantine(tmp_path: Path) -> None:
    conn = _store_at_13(tmp_path / "s.db")
    query = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'sync_quarantine'"
    before = {r[0] for r in conn.execute(query)}
    mig.migrate(conn, tmp_path / "s.db", 14)
    assert {r[0] for r in conn.execute(query)} == before
