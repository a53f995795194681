"""Online backups and their restore (issue #15, item 5).

``backup`` copies a live store page by page with SQLite's backup API (a
consistent snapshot even while other processes write) into a private
temporary file next to the output, marks every binding in the *copy* as
adopting (syncengine/ops/adopt.py: a backup is older than what the relay
may hold from this machine, whoever restores it and however — even with a
plain ``cp``), fsyncs it and renames it into place. The live store is only
read.

``restore`` checks that the file is a syncengine store this program can
open, refuses while an engine holds any of the current store's bindings,
and swaps the files: the current store (with its ``-wal``/``-shm``) is kept
beside it as ``<store>.before-restore-<time>``, never deleted; the backup
is copied in under a temporary name and renamed over the store path.
Every other process using the store must be stopped first.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syncengine.crash import crash_point
from syncengine.store.connection import open_connection
from syncengine.store.errors import InvalidInput

if TYPE_CHECKING:
    import apsw

__all__ = ["backup_store", "restore_store"]


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def backup_store(conn: apsw.Connection, output: Path) -> Path:
    """Snapshot the open store ``conn`` into ``output`` (which must not exist)."""
    output = output.absolute()
    if output.exists() or output.is_symlink():
        raise InvalidInput("--output", f"{output} already exists; choose a new file")
    if not output.parent.is_dir():
        raise InvalidInput("--output", f"{output.parent} is not a directory")
    partial = output.with_name(f".{output.name}.partial-{os.getpid()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    try:
        target = open_connection(partial, create=True, busy_timeout_ms=5000)
        try:
            with target.backup("main", conn, "main") as copy:
                while not copy.done:
                    copy.step(1024)
            target.execute("UPDATE sync_bindings SET adopt_own = 1")
            target.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
        finally:
            target.close()
        for suffix in ("-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                Path(f"{partial}{suffix}").unlink()
        _fsync(partial)
        os.replace(partial, output)
        _fsync(output.parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
        raise
    return output


def restore_store(backup: Path, store_path: Path, check: Any) -> Path | None:
    """Put ``backup`` in place of ``store_path``; returns where the replaced
    store was kept (``None`` when there was none). ``check(path)`` must raise
    unless ``path`` is a usable store (the caller's full open check).

    A crash at any point leaves a whole store at ``store_path`` — the old
    one or the restored one, never neither (crash points ``restore.staged``,
    ``restore.old_kept``, ``restore.swapped``): the old store's WAL is
    checkpointed into its main file first, the main file is *hard-linked*
    to the kept name (it stays at the path), its emptied ``-wal``/``-shm``
    go, and one rename puts the checked copy over the path. A store that
    cannot be opened to checkpoint (the damaged store a restore is for) has
    its ``-wal``/``-shm`` kept beside the kept copy before the swap.
    """
    backup = backup.absolute()
    store_path = store_path.absolute()
    if not backup.is_file():
        raise InvalidInput("--input", f"{backup} is not a file")
    if backup == store_path:
        raise InvalidInput("--input", "the backup is the store itself")
    staged = store_path.with_name(f".{store_path.name}.restoring-{os.getpid()}")
    shutil.copyfile(backup, staged)
    os.chmod(staged, 0o600)
    try:
        check(staged)
        _fsync(staged)
        crash_point("restore.staged")
        kept = None
        if store_path.exists():
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            kept = store_path.with_name(f"{store_path.name}.before-restore-{stamp}")
            serial = 1
            while kept.exists():  # a rerun within the same second keeps both
                serial += 1
                kept = store_path.with_name(f"{store_path.name}.before-restore-{stamp}-{serial}")
            _checkpoint(store_path)
            os.link(store_path, kept)
            for suffix in ("-wal", "-shm"):
                side = Path(f"{store_path}{suffix}")
                if side.exists():
                    os.replace(side, Path(f"{kept}{suffix}"))
            _fsync(store_path.parent)
            crash_point("restore.old_kept")
        os.replace(staged, store_path)
        crash_point("restore.swapped")
        _fsync(store_path.parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            staged.unlink()
        raise
    return kept


def _checkpoint(store_path: Path) -> None:
    """Fold the store's WAL into its main file (best effort: a damaged store
    keeps its WAL, moved beside the kept copy)."""
    try:
        conn = open_connection(store_path, create=False, busy_timeout_ms=5000)
    except Exception:
        return
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except Exception:
        pass
    finally:
        conn.close()
