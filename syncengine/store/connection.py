"""Opening the SQLite file and running transactions on it (specs/store.md §2).

Every connection is put in WAL mode (readers never block the writer, and a
long reader holds only a snapshot), ``synchronous=FULL`` (a commit is on disk
before it is reported, which the sync layer's "local durability first" rule
needs), and foreign keys on. Writers take the lock up front with
``BEGIN IMMEDIATE`` so a transaction never fails half-way on a lock upgrade;
waiting is bounded by the busy timeout and surfaces as :class:`StoreBusy`.

SQLite errors are translated here, at one boundary: busy/locked to
:class:`StoreBusy`, damaged files to :class:`CorruptStore`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from syncengine.crash import crash_point
from syncengine.store.errors import (
    CorruptStore,
    MissingDependency,
    StoreBusy,
    StoreError,
    StoreNotInitialized,
)

__all__ = [
    "DEFAULT_BUSY_TIMEOUT_MS",
    "WAL_AUTOCHECKPOINT_PAGES",
    "open_connection",
    "read_transaction",
    "translate_sqlite_errors",
    "write_transaction",
]

#: How long a writer waits for another writer before reporting busy.
DEFAULT_BUSY_TIMEOUT_MS = 5000
#: WAL pages between automatic checkpoints (SQLite's default is 1,000). A
#: sync page of 1,000 messages dirties about one leaf of each random wire-ID
#: index per message, so with the default every commit or two copied the
#: same leaves back into the database again; at 8,000 pages (32 MiB of WAL
#: at most) a leaf is copied once per several pages. Durability is
#: unchanged: every commit is still fsynced to the WAL (synchronous=FULL).
WAL_AUTOCHECKPOINT_PAGES = 8000


def _apsw() -> Any:
    try:
        import apsw
    except ImportError as exc:  # pragma: no cover - exercised via the bash driver
        raise MissingDependency(
            "the APSW SQLite binding is not installed; run 'pip install apsw'"
        ) from exc
    return apsw


@contextlib.contextmanager
def translate_sqlite_errors(path: Path) -> Iterator[None]:
    """Map SQLite failures to the store hierarchy (never echoing row data)."""
    apsw = _apsw()
    try:
        yield
    except StoreError:
        raise
    except (apsw.BusyError, apsw.LockedError) as exc:
        raise StoreBusy(
            f"store {path} is busy: another process holds the write lock; retry shortly"
        ) from exc
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        raise CorruptStore(
            f"store {path} is damaged ({type(exc).__name__}); restore a backup "
            "('syncengine restore --input FILE': the relay's copies are adopted, nothing "
            "is sent twice) or move it aside and reconnect"
        ) from exc


def _create_private(path: Path) -> None:
    """Create the store file owner-only (0600) before SQLite opens it: it
    holds decrypted bodies, and SQLite gives its -wal and -shm files the
    database file's mode."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError:
        return  # let SQLite report why the path cannot be opened
    os.close(fd)


def open_connection(path: Path, *, create: bool, busy_timeout_ms: int) -> Any:
    """Open (optionally creating) the database file and apply the pragmas."""
    apsw = _apsw()
    if create:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _create_private(path)
        flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    else:
        if not path.is_file():
            raise StoreNotInitialized(f"no store at {path}; run 'syncengine driver init'")
        flags = apsw.SQLITE_OPEN_READWRITE
    with translate_sqlite_errors(path):
        try:
            conn = apsw.Connection(str(path), flags=flags)
        except apsw.CantOpenError as exc:
            raise StoreNotInitialized(f"cannot open store at {path}: {exc}") from exc
        conn.setbusytimeout(busy_timeout_ms)
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchall()[0][0]
        if str(mode).lower() != "wal":
            raise StoreBusy(f"store {path}: could not switch to WAL mode (got {mode})")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
    return conn


@contextlib.contextmanager
def write_transaction(conn: Any, path: Path, name: str | None = None) -> Iterator[Any]:
    """One atomic writer transaction: ``BEGIN IMMEDIATE`` … ``COMMIT``.

    Any exception rolls everything back, so a state transition is either
    wholly durable or absent (the crash-safety rule of specs/store.md §3).
    A ``name`` gives the transaction the crash points
    ``<name>.before_commit`` and ``<name>.after_commit`` (syncengine/crash.py).
    """
    with translate_sqlite_errors(path):
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            if name is not None:
                crash_point(f"{name}.before_commit")
            conn.execute("COMMIT")
        except BaseException:
            if not conn.getautocommit():
                conn.execute("ROLLBACK")
            raise
    if name is not None:
        crash_point(f"{name}.after_commit")


@contextlib.contextmanager
def read_transaction(conn: Any, path: Path) -> Iterator[Any]:
    """A consistent snapshot for multi-statement reads (deferred ``BEGIN``)."""
    with translate_sqlite_errors(path):
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            if not conn.getautocommit():
                conn.execute("COMMIT")
