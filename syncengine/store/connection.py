"""Opening the SQLite file and running transactions on it (specs/store.md §2).

Every connection is put in WAL mode (readers never block the writer, and a
long reader holds only a snapshot), ``synchronous=FULL`` (a commit is on disk
before it is reported, which the sync layer's "local durability first" rule
needs), and foreign keys on. Writers take the lock up front with
``BEGIN IMMEDIATE`` so a transaction never fails half-way on a lock upgrade;
waiting is bounded by the busy timeout and surfaces as :class:`StoreBusy`.

SQLite errors are translated here, at one boundary: busy/locked to
:class:`StoreBusy`, damaged files to :class:`CorruptStore`, a full filesystem
to :class:`StoreFull` and other operating-system failures to
:class:`StoreIOError` — each one line naming the path, the cause and the fix
(specs/store.md §12).

Files others can touch (§12.1): before SQLite opens it, the store, its
-wal/-shm files and its directory are checked the way ssh checks a key.
Another user owning the file (or the symlink to it), or anyone else able to
write the file or to rename entries in its directory (group/other write
without the sticky bit) is refused with :class:`StoreUnsafe`; a store others
can only *read* is opened, and :func:`store_exposure` names it for ``status``
and ``doctor``.

A full disk (§12.2): a reader whose -shm cannot be sized because the
filesystem has no room falls back to a heap-memory wal-index under an
exclusive lock, so read-only commands keep working; a write that fails for
room gives its WAL frames back at once (``wal_checkpoint(TRUNCATE)``,
never waiting); a connection that wrote folds the WAL in and truncates it on
:func:`close_connection`, so no command leaves a grown WAL behind when it is
the last one out.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import pwd
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from syncengine.crash import crash_point
from syncengine.store.errors import (
    CorruptStore,
    MissingDependency,
    StoreBusy,
    StoreError,
    StoreFull,
    StoreIOError,
    StoreNotInitialized,
    StoreUnsafe,
)

if TYPE_CHECKING:
    import apsw

__all__ = [
    "DEFAULT_BUSY_TIMEOUT_MS",
    "WAL_AUTOCHECKPOINT_PAGES",
    "WAL_FOLD_OVER_BYTES",
    "WAL_SIZE_LIMIT_BYTES",
    "Row",
    "all_rows",
    "close_connection",
    "fold_wal",
    "one_row",
    "open_connection",
    "read_transaction",
    "refuse_unsafe_store",
    "store_exposure",
    "translate_sqlite_errors",
    "write_transaction",
]

_log = logging.getLogger("syncengine.store")

#: A row as this package's modules read it. SQLite gives each value the type
#: its column's schema implies, which APSW cannot see: its stubs type a field
#: as the union of every SQLite type. The modules that wrote the schema read
#: the fields as what they are, so a row is typed as a tuple of ``Any``.
Row = tuple[Any, ...]

#: How long a writer waits for another writer before reporting busy.
DEFAULT_BUSY_TIMEOUT_MS = 5000
#: WAL pages between automatic checkpoints (SQLite's default is 1,000). A
#: sync page of 1,000 messages dirties about one leaf of each random wire-ID
#: index per message, so with the default every commit or two copied the
#: same leaves back into the database again; at 8,000 pages (32 MiB of WAL
#: at most) a leaf is copied once per several pages. Durability is
#: unchanged: every commit is still fsynced to the WAL (synchronous=FULL).
WAL_AUTOCHECKPOINT_PAGES = 8000
#: ``journal_size_limit``: once a checkpoint has restarted the WAL, the next
#: commit truncates the file to this size, so a long-lived connection (``run``)
#: does not keep a WAL grown by one large sync for the rest of its life.
WAL_SIZE_LIMIT_BYTES = 4 * 1024 * 1024
#: A writer folds the WAL in on close only when it is larger than this. The
#: last connection out needs no help (SQLite's close checkpoints and deletes
#: the WAL); beside another open connection (``run``) a fold costs a
#: checkpoint and its fsyncs (~14 ms a command measured), so a small WAL is
#: left to the automatic checkpoint and ``journal_size_limit``.
WAL_FOLD_OVER_BYTES = 1024 * 1024
#: Below this much free space an I/O error of SQLite's is reported as a full
#: filesystem: a -shm file needs 32 KiB, a page 4 KiB.
_NO_ROOM_BYTES = 64 * 1024
#: OSError numbers meaning "no room": the filesystem or the user's quota.
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
#: OSError numbers reported as a store I/O error (anything else propagates:
#: a broken pipe on stdout is not the store's business).
_IO_ERRNOS = frozenset({errno.EIO, errno.EROFS, errno.EACCES, errno.EPERM})


def one_row(cursor: apsw.Cursor) -> Row:
    """The row of a query that always yields one: an aggregate, a PRAGMA,
    ``RETURNING``, or a key the caller has just read or written. APSW types
    ``fetchone`` as optional since it cannot know that; this only says so to
    the type checker (at run time it is ``cursor.fetchone()``)."""
    return cast(Row, cursor.fetchone())


def all_rows(cursor: apsw.Cursor) -> list[Row]:
    """Every row of ``cursor`` (``fetchall``), typed as :data:`Row`."""
    return cursor.fetchall()


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
    """Map SQLite and file-system failures to the store hierarchy (never
    echoing row data)."""
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
    except apsw.FullError as exc:
        raise store_full(path, "SQLITE_FULL") from exc
    except (apsw.IOError, apsw.ReadOnlyError, apsw.CantOpenError) as exc:
        if isinstance(exc, apsw.IOError) and _no_room(path):
            raise store_full(path, f"SQLITE_IOERR: {exc}") from exc
        raise _io_error(path, f"{type(exc).__name__}: {exc}") from exc
    except OSError as exc:
        where = Path(exc.filename) if isinstance(exc.filename, str) else path
        if exc.errno in _FULL_ERRNOS:
            raise store_full(where, exc.strerror or errno.errorcode[exc.errno]) from exc
        if exc.errno in _IO_ERRNOS:
            raise _io_error(where, exc.strerror or str(exc)) from exc
        raise


def _free_bytes(path: Path) -> int | None:
    """Bytes this user may still write on the filesystem holding ``path``."""
    directory = path.parent if str(path.parent) else Path(".")
    try:
        info = os.statvfs(directory)
    except OSError:
        return None
    blocks = info.f_bfree if os.geteuid() == 0 else info.f_bavail
    return blocks * info.f_frsize


def _no_room(path: Path) -> bool:
    free = _free_bytes(path)
    return free is not None and free < _NO_ROOM_BYTES


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _human(size: int) -> str:
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KiB" if size >= 1024 else f"{size} bytes"
    return f"{size / (1024 * 1024):.1f} MiB"


def store_full(path: Path, cause: str) -> StoreFull:
    """The one-line answer to a full filesystem under ``path``."""
    free = _free_bytes(path)
    room = "" if free is None else f", {_human(free)} free"
    wal = _size(Path(f"{path}-wal"))
    held = f"; its write-ahead log holds {_human(wal)}" if wal else ""
    where = path.parent if str(path.parent) else Path(".")
    return StoreFull(
        path,
        f"store {path}: the disk is full ({cause}{room}){held}; nothing was written",
        f"free space on the filesystem holding {where}, then run the command again "
        "(what committed before stays committed)",
    )


def _io_error(path: Path, cause: str) -> StoreIOError:
    return StoreIOError(
        path,
        f"store {path}: the system refused a read or write ({cause}); nothing was written",
        "check the disk and that the filesystem is mounted read-write "
        f"(dmesg; ls -l {path}), then run the command again",
    )


# -- files others can touch (specs/store.md §12.1) ------------------------------------


def _owner(uid: int) -> str:
    name = _owner_name(uid)
    return f"uid {uid}" if name == str(uid) else f"{name} (uid {uid})"


def _mode_text(info: os.stat_result) -> str:
    return f"{stat.S_IMODE(info.st_mode):04o}"


def _unsafe(path: Path, problem: str, remedy: str) -> StoreUnsafe:
    return StoreUnsafe(
        path, f"store {path}: {problem}; refused (it holds decrypted messages)", remedy
    )


def _check_file(path: Path, what: str, me: int) -> None:
    """Refuse ``path`` (the store or its -wal/-shm) if another user owns it,
    its symlink, or can write it."""
    try:
        link = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(link.st_mode):
        if link.st_uid not in (me, 0):
            raise _unsafe(
                path,
                f"{what} is a symlink owned by {_owner(link.st_uid)}",
                f"use your own file: rm {path}",
            )
        if what != "the store":
            raise _unsafe(path, f"{what} is a symlink", f"rm {path}")
        try:
            info = os.stat(path)
        except FileNotFoundError:
            return  # a dangling link: SQLite reports the missing file
        target = f"{what} is a symlink to {os.path.realpath(path)}, which"
    else:
        info = link
        target = what
    if info.st_uid != me:
        raise _unsafe(
            path,
            f"{target} is owned by {_owner(info.st_uid)}, not by you ({_owner(me)})",
            f"use a store of your own (--store PATH), or as its owner: chown {_owner_name(me)} "
            f"{os.path.realpath(path)}",
        )
    if not stat.S_ISREG(info.st_mode):
        raise _unsafe(path, f"{target} is not a regular file", "use --store PATH for a file")
    if info.st_mode & 0o022:
        raise _unsafe(
            path,
            f"{target} is mode {_mode_text(info)}: other users can write it",
            f"chmod 600 {os.path.realpath(path)}",
        )


def _owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def refuse_unsafe_store(path: Path) -> None:
    """Raise :class:`StoreUnsafe` unless only this user can change the store.

    Group/other *write* on the file, its -wal/-shm or (without the sticky
    bit) its directory, and another user's ownership of the file or of a
    symlink to it, are refused. Group/other *read* is not: see
    :func:`store_exposure`.
    """
    me = os.geteuid()
    _check_file(path, "the store", me)
    for suffix in ("-wal", "-shm"):
        _check_file(Path(f"{path}{suffix}"), f"its {suffix[1:]} file", me)
    directory = Path(os.path.realpath(path)).parent
    try:
        info = os.stat(directory)
    except OSError:
        return
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        raise _unsafe(
            path,
            f"its directory {directory} is mode {_mode_text(info)}: other users can "
            "replace the store",
            f"chmod go-w {directory} (or move the store to a private directory)",
        )


def store_exposure(path: Path) -> list[str]:
    """What others can read or list of an opened store: a warning each
    (``status``) and a ``doctor`` failure, never a refusal."""
    warnings = []
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            info = os.stat(file)
        except OSError:
            continue
        if info.st_mode & 0o044:
            warnings.append(
                f"{file} is mode {_mode_text(info)}: other users can read the decrypted "
                f"messages; chmod 600 {file}"
            )
    return warnings


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


def open_connection(path: Path, *, create: bool, busy_timeout_ms: int) -> apsw.Connection:
    """Open (optionally creating) the database file and apply the pragmas.

    The file is checked first (:func:`refuse_unsafe_store`). When SQLite
    cannot size the shared-memory (-shm) file because the filesystem is
    full, the connection is opened again with ``locking_mode=EXCLUSIVE``,
    whose wal-index lives in heap memory: reads work on a full disk, and a
    write fails with :class:`StoreFull` when it needs room. That connection
    holds its lock until it is closed (specs/store.md §12.2).
    """
    apsw = _apsw()
    with translate_sqlite_errors(path):
        if create:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            _create_private(path)
            flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
        else:
            if not path.is_file():
                raise StoreNotInitialized(f"no store at {path}; run 'syncengine driver init'")
            flags = apsw.SQLITE_OPEN_READWRITE
    refuse_unsafe_store(path)
    with translate_sqlite_errors(path):
        try:
            return _configured(apsw, path, flags, busy_timeout_ms, shared_memory=True)
        except (apsw.IOError, apsw.FullError):
            if not _no_room(path):
                raise
        _log.info("store %s: no room for its -shm file; reading with an exclusive lock", path)
        return _configured(apsw, path, flags, busy_timeout_ms, shared_memory=False)


def _configured(
    module: Any, path: Path, flags: int, busy_timeout_ms: int, *, shared_memory: bool
) -> apsw.Connection:
    try:
        conn: apsw.Connection = module.Connection(str(path), flags=flags)
    except module.CantOpenError as exc:
        raise StoreNotInitialized(f"cannot open store at {path}: {exc}") from exc
    try:
        conn.setbusytimeout(busy_timeout_ms)
        if not shared_memory:
            conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchall()[0][0]
        if str(mode).lower() != "wal":
            raise StoreBusy(f"store {path}: could not switch to WAL mode (got {mode})")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT_BYTES}")
    except BaseException:
        with contextlib.suppress(module.Error):
            conn.close()
        raise
    return conn


def fold_wal(conn: apsw.Connection) -> bool:
    """``PRAGMA wal_checkpoint(TRUNCATE)`` without waiting for anyone: copy
    the WAL into the database and truncate it to zero bytes. True when the
    WAL is empty afterwards; never raises (another reader, a full disk or
    an I/O error only leave the WAL as it was, for a later checkpoint)."""
    apsw = _apsw()
    try:
        previous = one_row(conn.execute("PRAGMA busy_timeout"))[0]
        conn.setbusytimeout(0)
        try:
            busy, log, _ = one_row(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
        finally:
            conn.setbusytimeout(int(previous))
    except apsw.Error:
        return False
    return bool(busy == 0 and log in (0, -1))


def close_connection(conn: apsw.Connection, path: Path) -> None:
    """Close ``conn``; if it wrote and the WAL is over
    :data:`WAL_FOLD_OVER_BYTES`, fold the WAL in first (:func:`fold_wal`).

    When this is the last connection, SQLite's own close checkpoints and
    deletes the WAL anyway; when another connection is open but idle
    (``run``), the fold still truncates a WAL this command grew. A
    read-only connection skips it. A fold that fails for room is logged
    with the WAL's size: the next command folds it in once there is space.
    """
    apsw = _apsw()
    wal_path = Path(f"{path}-wal")
    try:
        if (
            conn.total_changes()
            and _size(wal_path) > WAL_FOLD_OVER_BYTES
            and not fold_wal(conn)
            and _no_room(path)
        ):
            wal = _size(wal_path)
            if wal:
                _log.warning(
                    "store %s: its write-ahead log (%s) stays until there is room to fold it "
                    "in: the disk is full; free space, and the next command folds it in",
                    path,
                    _human(wal),
                )
    finally:
        with contextlib.suppress(apsw.Error):
            conn.close()


@contextlib.contextmanager
def write_transaction(
    conn: apsw.Connection, path: Path, name: str | None = None
) -> Iterator[apsw.Connection]:
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
        except BaseException as exc:
            if not conn.getautocommit():
                conn.execute("ROLLBACK")
            if isinstance(exc, _apsw().FullError | _apsw().IOError | OSError):
                # A failed write's frames stay in the WAL file; give their
                # room back now if nothing committed needs copying out.
                fold_wal(conn)
            raise
    if name is not None:
        crash_point(f"{name}.after_commit")


@contextlib.contextmanager
def read_transaction(conn: apsw.Connection, path: Path) -> Iterator[apsw.Connection]:
    """A consistent snapshot for multi-statement reads (deferred ``BEGIN``)."""
    with translate_sqlite_errors(path):
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            if not conn.getautocommit():
                conn.execute("COMMIT")
