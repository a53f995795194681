"""A full disk (issue #33, deliverable 1; specs/store.md §12.2), on a real
small filesystem: a tmpfs mounted in the test's directory (root on Linux;
skipped with the reason elsewhere).

A write that finds no room is one line naming the path and the cause, exit
13, and changes nothing; read-only commands keep working; the failed
write's WAL frames are given back; once space is freed the next write
works. And a connection that wrote truncates the WAL when it closes, even
while another connection is open.
"""

from __future__ import annotations

import errno
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncengine.local_store import Store
from syncengine.store import OutgoingMessage, StoreFull
from syncengine.store.connection import WAL_FOLD_OVER_BYTES
from tests.support.full_disk import fill, mount_tmpfs, sizes

SIZE = "2m"


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "small"
    mount_tmpfs(directory, SIZE)
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def cli(store: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "syncengine", *args, "--store", str(store)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _history(store: Path) -> list[str]:
    with Store(store) as s:
        return [m.body for m in s.history("crew")]


def test_a_send_on_a_full_disk_is_one_line_and_changes_nothing(small_fs: Path) -> None:
    store = small_fs / "store.db"
    with Store(store) as s:
        s.send("crew", "alice", "bob", "before")
    filler = fill(small_fs)
    with Store(store) as s, pytest.raises(StoreFull) as caught:
        s.send_many([OutgoingMessage("crew", "alice", "bob", "x" * 2000)] * 500)
    message = str(caught.value)
    assert message.startswith(f"store {store}: the disk is full")
    assert "nothing was written" in message and "free space" in message and "\n" not in message
    # The failed write's frames were given back: no WAL holds the disk.
    assert sizes(store).get("store.db-wal", 0) == 0

    sent = cli(store, "send", "crew", "alice", "bob", "-", stdin="by the CLI")
    assert sent.returncode == 13, sent
    assert sent.stderr.count("\n") == 1 and "Traceback" not in sent.stderr
    assert f"store {store}: the disk is full" in sent.stderr

    # Read-only commands still answer, on the same full disk.
    history = cli(store, "history", "crew")
    assert history.returncode == 0 and "before" in history.stdout, history
    inbox = cli(store, "inbox", "crew", "bob")
    assert inbox.returncode == 0 and "before" in inbox.stdout, inbox
    assert _history(store) == ["before"]

    filler.unlink()
    again = cli(store, "send", "crew", "alice", "bob", "-", stdin="after")
    assert again.returncode == 0, again
    assert _history(store) == ["before", "after"]
    assert sizes(store) == {"store.db": sizes(store)["store.db"]}  # last one out: no WAL


def test_reads_work_when_the_shm_file_cannot_be_sized(small_fs: Path) -> None:
    """Opening a WAL store needs a 32 KiB -shm file; with no room for it the
    store is read through a heap-memory wal-index instead of failing."""
    store = small_fs / "store.db"
    with Store(store) as s:
        s.send("crew", "alice", "bob", "kept")
    assert not Path(f"{store}-shm").exists()  # the last close removed it
    fill(small_fs)
    assert _history(store) == ["kept"]
    with Store(store) as s:
        s.check()


def test_a_write_transaction_never_half_applies_on_a_full_disk(small_fs: Path) -> None:
    """Rows of a batch that no longer fits are all absent, not some."""
    store = small_fs / "store.db"
    with Store(store) as s:
        s.send_many([OutgoingMessage("crew", "alice", "bob", f"old {i}") for i in range(10)])
    fill(small_fs, leave=200_000)
    batch = [OutgoingMessage("crew", "alice", "bob", f"new {i} " + "y" * 1000) for i in range(400)]
    with Store(store) as s, pytest.raises(StoreFull):
        s.send_many(batch)
    assert _history(store) == [f"old {i}" for i in range(10)]


def test_a_writer_closing_beside_an_idle_connection_truncates_the_wal(tmp_path: Path) -> None:
    """SQLite deletes the WAL only when the last connection closes; a
    command that grew it while ``run`` (another connection) stays open
    folds it in and truncates it on its own close."""
    store = tmp_path / "store.db"
    with Store(store) as idle:
        idle.send("crew", "alice", "bob", "first")
        with Store(store) as writer:
            writer.send_many(
                [OutgoingMessage("crew", "alice", "bob", f"m{i} " + "z" * 500) for i in range(3000)]
            )
            assert sizes(store)["store.db-wal"] > WAL_FOLD_OVER_BYTES
        assert sizes(store)["store.db-wal"] == 0
        assert len(idle.history("crew")) == 3001


def test_an_os_level_full_disk_error_names_the_file_at_fault(tmp_path: Path) -> None:
    from syncengine.store.connection import translate_sqlite_errors

    with pytest.raises(StoreFull) as caught, translate_sqlite_errors(tmp_path / "store.db"):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out.jsonl"))
    assert str(caught.value).startswith(f"store {tmp_path / 'out.jsonl'}: the disk is full")


def test_a_broken_pipe_is_not_turned_into_a_store_error(tmp_path: Path) -> None:
    from syncengine.store.connection import translate_sqlite_errors

    with pytest.raises(BrokenPipeError), translate_sqlite_errors(tmp_path / "store.db"):
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")
