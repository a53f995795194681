"""Where a store's driver server is found, and how it is started
(specs/store.md §10): the rendezvous file's shape, the ops the bash file
hands over, the switches in the environment, and :func:`spawn`, called by a
driver process that no server answered. Kept apart from the server itself
(``syncengine.cli.driver.server``), which imports the driver's ``run_op``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_IDLE_SECONDS",
    "DISABLE_ENV",
    "IDLE_ENV",
    "RENDEZVOUS_ENV",
    "SERVED_OPS",
    "Rendezvous",
    "idle_seconds",
    "read_rendezvous",
    "serving",
    "spawn",
]

#: Set by the bash file on a call no server answered: where a server for
#: this store would put its rendezvous file.
RENDEZVOUS_ENV = "SYNCENGINE_DRIVER_RENDEZVOUS"
#: ``0`` turns the driver server off (the file then never asks for one).
DISABLE_ENV = "SYNCENGINE_DRIVER_SERVER"
#: Seconds without a call after which the server exits (default below).
IDLE_ENV = "SYNCENGINE_DRIVER_SERVER_IDLE"
DEFAULT_IDLE_SECONDS = 30.0

#: The ops the bash file sends to the server: the per-message calls of a
#: host's loop. Everything else (sync operations, export, import, compact,
#: init, check) keeps its own process: rare, and some read files relative to
#: the caller's working directory.
SERVED_OPS = frozenset(
    {
        "send",
        "list_unread",
        "mark_read_batch",
        "read_cursor_get",
        "read_cursor_consume",
        "watch_tip",
        "watch_after",
        "history",
    }
)


@dataclass(frozen=True, slots=True)
class Rendezvous:
    """What the rendezvous file holds: one line ``port ctoken stoken pid``."""

    port: int
    client_token: str
    server_token: str
    pid: int

    def line(self) -> str:
        return f"{self.port} {self.client_token} {self.server_token} {self.pid}\n"


def read_rendezvous(path: str | os.PathLike[str]) -> Rendezvous | None:
    """The rendezvous at ``path``, or ``None`` when absent or not well formed."""
    try:
        text = Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        return None
    parts = text.split()
    if len(parts) != 4 or not (parts[0].isdigit() and parts[3].isdigit()):
        return None
    return Rendezvous(int(parts[0]), parts[1], parts[2], int(parts[3]))


def idle_seconds(environ: dict[str, str] | os._Environ[str] | None = None) -> float:
    """``SYNCENGINE_DRIVER_SERVER_IDLE`` when it is a positive number, else the default."""
    env = os.environ if environ is None else environ
    try:
        value = float(env.get(IDLE_ENV, ""))
    except ValueError:
        return DEFAULT_IDLE_SECONDS
    return value if 0 < value < 86_400 else DEFAULT_IDLE_SECONDS


def spawn(store: str | os.PathLike[str], rendezvous: str) -> None:
    """Start a detached server for ``store`` unless one already answers at
    ``rendezvous`` or the environment forbids it (best effort: a failure to
    start leaves every call on its own process, which is always correct)."""
    if os.environ.get(DISABLE_ENV) == "0" or os.environ.get("SYNCENGINE_CRASH_AT"):
        return
    if not os.path.isabs(rendezvous) or not os.path.exists(store):
        return
    if serving(rendezvous):
        return
    env = {k: v for k, v in os.environ.items() if k != RENDEZVOUS_ENV}
    command = [
        sys.executable,
        "-m",
        "syncengine.cli.driver.server",
        "--store",
        os.path.abspath(store),
        "--rendezvous",
        rendezvous,
        "--idle",
        repr(idle_seconds()),
    ]
    with contextlib.suppress(OSError):
        subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
            cwd="/",
            env=env,
        )


def serving(rendezvous: str) -> bool:
    """Whether a server holds this rendezvous's lock (the kernel drops it
    with the process, however the process ended; a pid could be a zombie or
    reused)."""
    try:
        fd = os.open(rendezvous + ".lock", os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # releases the probe's lock, if it got one
    return False
