"""Reading a secret file only when nobody else can read or swap it
(specs/engine.md §1.6).

The credential file, the age identity file and a ``--token @FILE`` all hold
secrets, so all three are read the same way: opened without following a
symlink, required to be a regular file owned by this user with no group or
other permission bits, and bounded in size. A refusal names the path and
the rule — never a byte of the file.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

__all__ = ["PrivateFileRefused", "read_private_file", "write_new_private_file"]


class PrivateFileRefused(Exception):
    """The file is missing, unsafe or unreadable; the message says which."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


def read_private_file(path: Path, what: str, max_bytes: int) -> bytes:
    """The bytes of ``path`` if it is a private regular file of this user."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise PrivateFileRefused(f"{path}: no {what}", missing=True) from None
    except OSError as exc:
        if os.path.islink(path):
            raise PrivateFileRefused(
                f"{path}: the {what} is a symlink; use the file itself"
            ) from None
        raise PrivateFileRefused(f"{path}: cannot open the {what} ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PrivateFileRefused(f"{path}: the {what} is not a regular file")
        if info.st_uid != os.geteuid():
            raise PrivateFileRefused(f"{path}: the {what} is owned by another user")
        if info.st_mode & 0o077:
            raise PrivateFileRefused(
                f"{path}: mode {stat.S_IMODE(info.st_mode):04o} lets others access the {what}; "
                f"expected 0600 (chmod 600 {path})"
            )
        if info.st_size > max_bytes:
            raise PrivateFileRefused(f"{path}: the {what} is too large")
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, 8192):
            total += len(chunk)
            if total > max_bytes:
                raise PrivateFileRefused(f"{path}: the {what} is too large")
            chunks.append(chunk)
    except OSError as exc:
        raise PrivateFileRefused(f"{path}: cannot read the {what} ({exc.strerror})") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def write_new_private_file(path: Path, data: bytes) -> None:
    """Create ``path`` with ``data``, mode 0600, atomically; refuse to overwrite.

    The bytes go to a private temporary file in the same directory, are
    flushed to disk, and are then hard-linked to the final name: the link
    fails if the name exists, so a concurrent writer or an existing key is
    never replaced, and no reader ever sees a partial file.
    """
    directory = path.parent if str(path.parent) else Path(".")
    fd, temp_name = tempfile.mkstemp(prefix=".identity-", dir=directory)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.link(temp_name, path)
    finally:
        os.unlink(temp_name)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
