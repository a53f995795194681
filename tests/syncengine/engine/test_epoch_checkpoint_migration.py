"""Migration 15 on a store built before the authority chain
(syncengine/store/migrations.py ``_v15_epoch_checkpoints``; specs/age-v1.md
"Stores and files from before the chain").

A store whose connection holds key epochs but no checkpoint gets a *legacy*
checkpoint — revision 0, no digest — anchored by the epochs it holds: the
first chained snapshot it takes must extend them; what it issues first is a
root of those epochs; from then on the chain rules apply.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from syncengine.engine import state as st
from syncengine.engine.epoch_checkpoint import load_checkpoint
from syncengine.engine.epoch_ops import import_epochs, issue_snapshot
from syncengine.engine.epochs import EpochHistory, EpochSnapshot, KeyEpoch
from syncengine.engine.errors import ConfigurationError
from syncengine.engine.security import SecurityHistory, SecurityMode
from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from syncengine.store import migrations as mig
from syncengine.store.connection import write_transaction
from wire.age_keys import X25519Identity

R1, R2 = (X25519Identity.generate().recipient.to_string() for _ in range(2))
INSTANCE = "01900000-0000-7000-8000-000000000001"
TEAM = "01900000-0000-7000-8000-000000000002"
KEY = BindingKey("crew", INSTANCE, TEAM)
NOW = "2026-12-07T12:00:00.000000Z"
E2EE = SecurityHistory.initial(SecurityMode.E2EE_REQUIRED)


def history(count: int) -> EpochHistory:
    return EpochHistory(
        tuple(KeyEpoch(i, 1 + 10 * i, f"epoch-{i + 1}", (R1, R2)) for i in range(count))
    )


def old_store(tmp_path: Path, epochs: EpochHistory) -> tuple[Path, int]:
    """A store as a version-14 program left it: a connection with ``epochs``
    and no checkpoint table (later tables removed with it, to be rebuilt)."""
    path = tmp_path / "s.db"
    with Store(path) as store:
        store.init()
        with write_transaction(store.conn, store.path) as conn:
            binding = st.insert_connection(
                conn, KEY, endpoint="http://127.0.0.1:9", remote_team_name="crew",
                credential_id="c", credential_path=str(tmp_path / "c.json"), epochs=epochs,
                security=E2EE, now=NOW,
            )  # fmt: skip
    raw = sqlite3.connect(path)
    try:
        raw.executescript(
            "DROP TABLE engine_epoch_checkpoints; DROP TABLE reserved_names;"
            " PRAGMA user_version = 14;"
        )
    finally:
        raw.close()
    return path, binding.pk


def test_a_store_holding_key_epochs_migrates_to_a_legacy_checkpoint(tmp_path: Path) -> None:
    path, pk = old_store(tmp_path, history(2))
    with Store(path) as store:
        assert mig.schema_version(store.conn) == mig.LATEST_VERSION
        checkpoint = load_checkpoint(store.conn, pk)
    assert checkpoint is not None and checkpoint.legacy
    assert (checkpoint.epoch_revision, checkpoint.writer_generation) == (0, 0)


def test_a_plaintext_connection_gets_no_checkpoint(tmp_path: Path) -> None:
    path, pk = old_store(tmp_path, EpochHistory(()))
    with Store(path) as store:
        assert load_checkpoint(store.conn, pk) is None


def test_a_migrated_store_first_issues_a_root_of_the_epochs_it_holds(tmp_path: Path) -> None:
    path, pk = old_store(tmp_path, history(2))
    with Store(path) as store, write_transaction(store.conn, store.path) as conn:
        snapshot = issue_snapshot(conn, pk, INSTANCE, TEAM, NOW)
        checkpoint = load_checkpoint(conn, pk)
    assert (snapshot.epoch_revision, snapshot.previous_sha256) == (0, None)
    assert [e.key_id for e in snapshot.epochs] == ["epoch-1", "epoch-2"]
    assert checkpoint is not None and checkpoint.snapshot_sha256 == snapshot.digest()


def test_a_migrated_store_takes_a_chained_snapshot_that_extends_its_epochs(
    tmp_path: Path,
) -> None:
    path, pk = old_store(tmp_path, history(2))
    later = EpochSnapshot(INSTANCE, TEAM, history(3).epochs, E2EE.entries, 4, "a" * 64)
    with Store(path) as store, write_transaction(store.conn, store.path) as conn:
        _, added = import_epochs(conn, pk, later, {}, NOW)
        checkpoint = load_checkpoint(conn, pk)
    assert [e.key_id for e in added] == ["epoch-3"]
    assert checkpoint is not None
    assert (checkpoint.epoch_revision, checkpoint.snapshot_sha256) == (4, later.digest())


def test_a_migrated_store_refuses_a_snapshot_with_fewer_epochs(tmp_path: Path) -> None:
    path, pk = old_store(tmp_path, history(2))
    older = EpochSnapshot(INSTANCE, TEAM, history(1).epochs, E2EE.entries, 3, "b" * 64)
    with Store(path) as store:
        with (
            pytest.raises(ConfigurationError, match="older snapshot is never imported"),
            write_transaction(store.conn, store.path) as conn,
        ):
            import_epochs(conn, pk, older, {}, NOW)
        checkpoint = load_checkpoint(store.conn, pk)
    assert checkpoint is not None and checkpoint.legacy


def test_the_table_refuses_to_move_a_checkpoint_backwards(tmp_path: Path) -> None:
    path, pk = old_store(tmp_path, history(2))
    later = EpochSnapshot(INSTANCE, TEAM, history(2).epochs, E2EE.entries, 2, "c" * 64)
    with Store(path) as store:
        with write_transaction(store.conn, store.path) as conn:
            import_epochs(conn, pk, later, {}, NOW)
        with pytest.raises(Exception, match="only moves forward"):
            store.conn.execute(
                "UPDATE engine_epoch_checkpoints SET epoch_revision = 1 WHERE binding_pk = ?",
                (pk,),
            )
