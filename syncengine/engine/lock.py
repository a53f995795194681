"""One engine per binding: an exclusive, non-blocking ``flock`` on a lock file.

Two engines on one binding would race the same reservations and cursors;
the Stage-1 operations stay correct (compare-and-set revisions), but the
second engine can only fail or duplicate work, and upstream #730 shows a
forgotten second engine is hard to notice. The lock file sits beside the
store and is named for the binding (``server_instance_id`` and
``remote_team_id``); the kernel releases the lock when the process dies,
so a crash never leaves a stale lock behind. The file holds the owner's
PID for the operator's benefit only; it is never trusted.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from syncengine.engine.errors import EngineLocked

__all__ = ["EngineLock", "lock_path_for"]


def lock_path_for(store_path: Path, server_instance_id: str, remote_team_id: str) -> Path:
    return store_path.parent / f"{store_path.name}.{server_instance_id}.{remote_team_id}.lock"


class EngineLock:
    """Held from :meth:`acquire` until :meth:`release` (or process exit)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> EngineLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            shown = f" (pid {holder})" if holder else ""
            raise EngineLocked(f"another engine is running on this binding{shown}") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> EngineLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_pid(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return text if text.isdigit() else ""
