"""Busy handling and reader/writer independence (specs/store.md §2)."""

from __future__ import annotations

import time
from pathlib import Path

import apsw
import pytest

from syncengine.local_store import Store
from syncengine.store import StoreBusy


def _holder(path: Path) -> apsw.Connection:
    conn = apsw.Connection(str(path))
    conn.execute("BEGIN IMMEDIATE")
    return conn


def test_a_writer_blocked_past_the_busy_timeout_gets_a_typed_busy_error(
    store: Store, tmp_path: Path
) -> None:
    holder = _holder(store.path)
    try:
        with Store(store.path, busy_timeout_ms=100) as other:
            started = time.monotonic()
            with pytest.raises(StoreBusy) as failure:
                other.send("dev", "alice", "bob", "blocked")
            assert time.monotonic() - started < 5
            assert failure.value.retryable is True
            assert "busy" in str(failure.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.history("dev") == []


def test_the_write_succeeds_once_the_lock_holder_releases(store: Store) -> None:
    holder = _holder(store.path)
    holder.execute("ROLLBACK")
    holder.close()
    with Store(store.path, busy_timeout_ms=100) as other:
        other.send("dev", "alice", "bob", "now free")
    assert [m.body for m in store.history("dev")] == ["now free"]


def test_an_open_long_reader_never_blocks_a_writer(store: Store) -> None:
    store.send("dev", "alice", "bob", "before")
    reader = apsw.Connection(str(store.path))
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM messages").fetchone()[0] == 1
    try:
        with Store(store.path, busy_timeout_ms=100) as writer:
            writer.send("dev", "alice", "bob", "during a long read")
        # the reader keeps its snapshot; the writer's commit is visible to others
        assert reader.execute("SELECT count(*) FROM messages").fetchone()[0] == 1
        assert len(store.history("dev")) == 2
    finally:
        reader.execute("COMMIT")
        reader.close()


def test_busy_on_a_store_operation_maps_to_runtime_error_status(store: Store) -> None:
    assert StoreBusy("x").status.label == "runtime_error"
    assert StoreBusy("x").status.exit_code == 13
