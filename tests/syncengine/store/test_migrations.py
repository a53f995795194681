"""Forward-only, transactional schema migrations (specs/store.md §2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

from syncengine.local_store import Store
from syncengine.ops.history_counts import history_counts, recount_history
from syncengine.ops.sync_records import SyncPullCursor
from syncengine.store import StoreTooNew
from syncengine.store import migrations as mig
from syncengine.store.connection import WAL_AUTOCHECKPOINT_PAGES, open_connection
from tests.syncengine.ops.helpers import (
    FakeRelay,
    foreign_envelope,
    new_key,
    prepare_none,
    pull_record,
)


def _raw(path: Path) -> Any:
    return open_connection(path, create=True, busy_timeout_ms=1000)


def _tables(conn: Any) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


@pytest.mark.parametrize("start", range(mig.LATEST_VERSION))
def test_every_earlier_version_migrates_to_the_latest(tmp_path: Path, start: int) -> None:
    path = tmp_path / "s.db"
    conn = _raw(path)
    mig.migrate(conn, path, target=start)
    assert mig.schema_version(conn) == start
    conn.close()
    with Store(path) as store:
        if start == 0:
            store.init()
        store.create_team("dev", ["alice", "bob"])
        store.send("dev", "alice", "bob", "after migration")
        assert [m.body for m in store.list_unread("dev", "bob")] == ["after migration"]
    conn = _raw(path)
    assert mig.schema_version(conn) == mig.LATEST_VERSION
    assert {"store_meta", "teams", "members", "messages", "message_reads"} <= _tables(conn)


def test_a_failing_migration_leaves_the_previous_version_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    conn = _raw(path)
    mig.migrate(conn, path, target=1)

    def half_then_fail(c: Any) -> None:
        c.execute("CREATE TABLE half_done (x INTEGER)")
        raise RuntimeError("injected crash mid-migration")

    monkeypatch.setattr(mig, "MIGRATIONS", (mig.MIGRATIONS[0], half_then_fail))
    with pytest.raises(RuntimeError):
        mig.migrate(conn, path)
    assert mig.schema_version(conn) == 1
    assert "half_done" not in _tables(conn)


def test_a_store_from_a_newer_program_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Store(path) as store:
        store.init()
    conn = _raw(path)
    conn.execute(f"PRAGMA user_version = {mig.LATEST_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreTooNew, match="upgrade"), Store(path) as store:
        store.list_teams()
    conn = _raw(path)
    assert mig.schema_version(conn) == mig.LATEST_VERSION + 1


def test_driver_generation_is_minted_once_and_renewed_by_a_rebuild(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Store(path) as store:
        store.init()
        first = store.driver_generation()
    with Store(path) as store:
        store.init()
        assert store.driver_generation() == first
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    with Store(path) as store:
        store.init()
        assert store.driver_generation() != first


def test_connections_use_wal_full_sync_and_foreign_keys(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        store.init()
        conn = store.conn
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WAL_AUTOCHECKPOINT_PAGES
        with pytest.raises(apsw.ConstraintError):
            conn.execute(
                "INSERT INTO members (team_pk, member_id, name, created_at)"
                " VALUES (999, 'x', 'y', 'z')"
            )


def test_migration_5_keeps_every_read_and_registers_every_existing_name(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    conn = _raw(path)
    mig.migrate(conn, path, target=4)
    conn.execute(
        "INSERT INTO teams (team_pk, team_id, name, created_at) VALUES (1, 't', 'dev', 'x');"
        "INSERT INTO members (member_pk, team_pk, member_id, name, created_at)"
        " VALUES (1, 1, 'm1', 'alice', 'x'), (2, 1, 'm2', 'bob', 'x');"
        "INSERT INTO messages (seq, id, team_pk, sender_pk, recipient_pk, body, at, origin)"
        " VALUES (1, 'a', 1, 1, 2, 'read one', '2026-05-30T19:00:00Z', 'local'),"
        " (2, 'b', 1, 1, 2, 'unread one', '2026-05-30T19:00:01Z', 'local');"
        "INSERT INTO message_reads (id, msg_seq, reader_pk, at, log_position)"
        " VALUES ('r1', 1, 2, '2026-05-30T19:05:00Z', 2);"
    )
    conn.close()
    with Store(path) as store:
        assert [m.id for m in store.list_unread("dev", "bob")] == ["b"]
        assert [m.name for m in store.team("dev").members] == ["alice", "bob"]
        out = tmp_path / "e.jsonl"
        store.export(out)
    assert '"msg_id":"a"' in out.read_text().splitlines()[-1]


def test_a_new_store_file_is_private_to_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "s.db"
    with Store(path) as store:
        store.send("dev", "alice", "bob", "a private body")
    assert path.parent.stat().st_mode & 0o777 == 0o700  # a new directory is private too
    for suffix in ("", "-wal", "-shm"):
        target = Path(str(path) + suffix)
        if target.exists():
            assert target.stat().st_mode & 0o777 == 0o600, suffix


def test_a_store_missing_a_table_is_damaged_for_reads_and_check(tmp_path: Path) -> None:
    from syncengine.store import CorruptStore

    path = tmp_path / "s.db"
    with Store(path) as store:
        store.send("dev", "alice", "bob", "x")
    conn = _raw(path)
    conn.execute("DROP TABLE read_frontiers")
    conn.close()
    for read in (lambda s: s.watch_tip(["dev:bob"]), lambda s: s.check()):
        with pytest.raises(CorruptStore, match="read_frontiers"), Store(path) as store:
            read(store)  # type: ignore[no-untyped-call]


def test_migration_7_marks_only_the_roster_of_connected_teams_as_relay_bound(
    tmp_path: Path,
) -> None:
    """A connected team's roster came from the relay's members document; a
    local-only team's roster and interned sender names did not."""
    path = tmp_path / "s.db"
    conn = _raw(path)
    mig.migrate(conn, path, target=6)
    conn.execute(
        "INSERT INTO teams (team_pk, team_id, name, created_at) VALUES"
        " (1, 't1', 'crew', 'x'), (2, 't2', 'solo', 'x');"
        "INSERT INTO members (member_pk, team_pk, member_id, name, created_at, roster) VALUES"
        " (1, 1, 'm1', 'alice', 'x', 1), (2, 1, 'm2', 'zed', 'x', 0),"
        " (3, 2, 'm3', 'bob', 'x', 1);"
        "INSERT INTO sync_bindings (binding_pk, team_pk, server_instance_id, remote_team_id,"
        " protocol_version, driver_generation, state, revision, created_at)"
        " VALUES (1, 1, 's', 'r', 1, 'g', 'active', 1, 'x');"
        "INSERT INTO engine_bindings (binding_pk, team_pk, endpoint, remote_team_name,"
        " credential_id, credential_path, connected_at)"
        " VALUES (1, 1, 'http://127.0.0.1:1', 'crew', 'c', '/nowhere', 'x');"
    )
    mig.migrate(conn, path, target=7)
    rows = conn.execute("SELECT name, relay_bound FROM members ORDER BY member_pk").fetchall()
    assert [tuple(r) for r in rows] == [("alice", 1), ("zed", 0), ("bob", 0)]


def test_migration_9_indexes_only_sealed_envelopes_by_their_head(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    conn = _raw(path)
    mig.migrate(conn, path)
    indexes = {
        name: sql
        for name, sql in conn.execute(
            "SELECT name, sql FROM sqlite_master"
            " WHERE type = 'index' AND name LIKE '%envelope_head'"
        )
    }
    assert set(indexes) == {"sync_quarantine_by_envelope_head", "sync_push_by_envelope_head"}
    assert all("cipher <> 'none'" in sql for sql in indexes.values())


def test_migration_13_counts_the_history_a_store_already_holds(tmp_path: Path) -> None:
    """``sync_history_counts`` starts equal to the reservations, quarantine
    rows and reconciled echoes a store holds when it is upgraded."""
    path = tmp_path / "s.db"
    key = new_key()
    with Store(path) as store:
        store.init()
        store.create_team("dev", ["alice", "bob"])
        for i in range(5):
            store.send("dev", "alice", "bob", f"m{i}")
        candidates = list(store.sync_prepare_push(key, prepare_none(), 10).candidates)
        store.sync_reconcile_push(key, FakeRelay().push(candidates[:3]))
        wire, env = foreign_envelope(key, "from afar", "bob", "alice")
        store.sync_apply_pull(key, [pull_record(4, wire, env)], SyncPullCursor(4))
        binding = store.sync_binding(key)
        assert binding is not None
        # As a version-12 program left it: the rows, and no counts.
        store.conn.execute(
            "DROP TABLE sync_history_counts; DROP TABLE engine_epoch_checkpoints;"
            " DROP TABLE reserved_names;"
            " PRAGMA user_version = 12;"
        )
    with Store(path) as store:
        assert mig.schema_version(store.conn) == mig.LATEST_VERSION
        assert history_counts(store.conn, binding.pk) == (5, 1, 0)
        assert recount_history(store.conn, binding.pk) == (5, 1, 0)
