"""The store bell (syncengine/store/changes.py): another process's write
rings it, nothing else that happens in the directory does, and where the
kernel cannot watch it falls back to a poll tick. Every wait is on the
event itself, bounded generously: no verdict depends on speed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from syncengine.local_store import Store
from syncengine.store.changes import FALLBACK_TICK, StoreBell

BOUND = 30.0


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store.db"
    with Store(path) as made:
        made.send("crew", "alice", "bob", "first")
    return path


def test_a_send_by_another_process_rings_the_bell(store: Path) -> None:
    bell = StoreBell(store)
    try:
        assert bell.watching and bell.tick is None
        bell.bell.clear()
        subprocess.run(
            [sys.executable, "-c", "from syncengine.local_store import Store;"
             f"Store({str(store)!r}).send('crew', 'bob', 'alice', 'from afar')"],
            check=True,
            timeout=60,
        )  # fmt: skip
        assert bell.bell.wait(BOUND)
    finally:
        bell.close()


def test_other_files_in_the_directory_do_not_ring_it(store: Path) -> None:
    bell = StoreBell(store)
    try:
        bell.bell.clear()
        (store.parent / "unrelated.txt").write_text("noise")
        (store.parent / f"{store.name}.lock.delivery").write_text("{}")
        # Noise never rings it (a slow watch could only hide a ring, never
        # invent one); a write of the store then does.
        assert not bell.bell.wait(1.0)
        with Store(store) as other:
            other.send("crew", "bob", "alice", "real")
        assert bell.bell.wait(BOUND)
    finally:
        bell.close()


def test_without_a_kernel_watch_the_bell_is_polled(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "inotify_simple", None)
    bell = StoreBell(store)
    try:
        assert not bell.watching and bell.tick == FALLBACK_TICK
    finally:
        bell.close()
