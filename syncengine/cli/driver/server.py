"""The driver server: one resident process answering the sourced bash
driver file's frequent calls for one store (specs/store.md §10).

Why: a host sources ``drivers/storage/syncengine.sh`` and calls one
function per storage operation, so without this every ``storage_send``
starts a Python interpreter and imports the store (≈ 35 ms over a bare
``python -c pass``), several times what the bundled sqlite3-CLI driver
pays. The file talks to this process instead, over a loopback TCP
connection bash opens itself (``/dev/tcp``), so a call costs one fork and
a round trip. Nothing about an operation changes: each request runs
:func:`syncengine.cli.driver.command.run_op` — the very function behind
``syncengine driver <op>`` — with the caller's arguments and stdin, and the
caller gets its stdout, stderr and exit code byte for byte. Every
operation is still one store transaction, so killing the server is killing
a driver process.

Lifecycle. The first call that finds no server runs as a process, as
before, and that process starts the server (:func:`spawn`) when the file
asks for one (``SYNCENGINE_DRIVER_RENDEZVOUS``). The server holds a lock
beside the rendezvous file (one server per rendezvous), writes the
rendezvous file (0600: port and two random tokens) once it listens, and
exits after ``idle`` seconds without a call, when the store file or the
rendezvous file is gone or replaced, or on SIGTERM/SIGINT — removing its
rendezvous file when it is still its own. ``SYNCENGINE_DRIVER_SERVER=0``
turns the whole mechanism off; a crash-test run (``SYNCENGINE_CRASH_AT``)
never uses it.

Trust. Only loopback, and mutual: the client sends the client token, the
server answers with the server token only when that matched, and the
client sends its request only after the server token matched the file.
Another local user can neither use the server (no client token) nor pose
as it on a port it freed (no server token): a request — a message body —
never reaches a process that cannot read the 0600 rendezvous file.

Framing after the handshake: the client sends NUL-terminated fields — the
count of fields that follow, the op, the op's stdin, then its arguments
(bash strings hold no NUL). The server answers ``rc NUL stderr NUL size
NUL stdout``, then a final NUL when ``size`` is at most
:data:`SMALL_OUTPUT` (bash reads that with ``read -d ''``; a larger output
is copied to EOF by ``cat``, far faster than bash's byte-wise read).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import hmac
import io
import os
import secrets
import signal
import socket
import sys
import time

from syncengine.cli.driver.command import run_op
from syncengine.cli.driver.rendezvous import (
    DEFAULT_IDLE_SECONDS,
    SERVED_OPS,
    Rendezvous,
    read_rendezvous,
)

__all__ = ["serve"]

#: Outputs up to this size end with a NUL (see the module docstring).
SMALL_OUTPUT = 4096
#: A request larger than this is refused (the file sends bodies over ~4 MB
#: through a process instead; a 1 MiB body is the store's own limit).
MAX_REQUEST_BYTES = 64 * 1024 * 1024
#: Seconds a connection may take to send its token or its request.
CLIENT_TIMEOUT = 10.0
_TOKEN_BYTES = 16


class _Stop(Exception):
    """SIGTERM or SIGINT: leave the accept loop and clean up."""


def _on_signal(signum: int, frame: object) -> None:
    raise _Stop()


def serve(store: str, rendezvous: str, idle: float) -> int:
    """Answer calls for ``store`` until idle, orphaned or signalled (exit 0).

    Returns at once, without listening, when another server holds the
    rendezvous lock: two first calls racing start at most one server.
    """
    lock_fd = os.open(rendezvous + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(lock_fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EACCES):
            return 0
        raise
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    mine: Rendezvous | None = None
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        listener.settimeout(1.0)
        mine = Rendezvous(
            listener.getsockname()[1],
            secrets.token_hex(_TOKEN_BYTES),
            secrets.token_hex(_TOKEN_BYTES),
            os.getpid(),
        )
        identity = _publish(rendezvous, mine)
        store_identity = _identity(store)
        last = time.monotonic()
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                if (
                    time.monotonic() - last > idle
                    or _identity(rendezvous) != identity
                    or _identity(store) != store_identity
                ):
                    break
                continue
            with conn:
                _answer(conn, mine, store)
            last = time.monotonic()
    except _Stop:
        pass
    finally:
        _withdraw(rendezvous, mine)
        listener.close()
        os.close(lock_fd)
    return 0


def _identity(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _publish(path: str, rendezvous: Rendezvous) -> tuple[int, int] | None:
    """Write the rendezvous file whole (0600, then renamed into place)."""
    temporary = f"{path}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, rendezvous.line().encode("ascii"))
    finally:
        os.close(fd)
    os.replace(temporary, path)
    return _identity(path)


def _withdraw(path: str, rendezvous: Rendezvous | None) -> None:
    """Remove the rendezvous file if it is still this server's."""
    if rendezvous is not None and read_rendezvous(path) == rendezvous:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _answer(conn: socket.socket, mine: Rendezvous, store: str) -> None:
    """One call: handshake, request, the op, the answer. Any fault of the
    client (wrong token, short or oversized request, a vanished peer) ends
    only this connection."""
    conn.settimeout(CLIENT_TIMEOUT)
    reader = _Reader(conn)
    try:
        token = reader.until(b"\n", 2 * _TOKEN_BYTES + 1)
        if token is None or not hmac.compare_digest(token, mine.client_token.encode("ascii")):
            return
        conn.sendall(mine.server_token.encode("ascii") + b"\n")
        fields = _request(reader)
        if fields is None:
            return
        op, stdin, args = os.fsdecode(fields[0]), fields[1], fields[2:]
        if op not in SERVED_OPS:
            _reply(conn, 2, f"syncengine driver server: {op!r} is not served\n".encode(), b"")
            return
        _reply(conn, *_run(store, op, stdin, args))
    except OSError:
        return


def _request(reader: _Reader) -> list[bytes] | None:
    count = reader.until(b"\0", 12)
    if count is None or not count.isdigit() or not 2 <= int(count) <= 100_000:
        return None
    fields: list[bytes] = []
    for _ in range(int(count)):
        field = reader.until(b"\0", MAX_REQUEST_BYTES)
        if field is None:
            return None
        fields.append(field)
    return fields


def _run(store: str, op: str, stdin: bytes, args: list[bytes]) -> tuple[int, bytes, bytes]:
    out, err = io.BytesIO(), io.BytesIO()
    try:
        code = run_op(
            op,
            [os.fsdecode(arg) for arg in args],
            store_path=store,
            stdin=io.BytesIO(stdin),
            stdout=out,
            stderr=err,
        )
    except Exception as exc:  # run_op has its own boundary; this is the server's
        return (
            13,
            f"syncengine driver server: internal error ({type(exc).__name__})\n".encode(),
            b"",
        )
    return code, err.getvalue(), out.getvalue()


def _reply(conn: socket.socket, code: int, err: bytes, out: bytes) -> None:
    head = b"%d\0%s\0%d\0" % (code, err.replace(b"\0", b""), len(out))
    tail = b"\0" if len(out) <= SMALL_OUTPUT else b""
    conn.sendall(head + out + tail)


class _Reader:
    """Buffered reads of delimited fields from one connection."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self._buffer = bytearray()
        self._total = 0

    def until(self, delimiter: bytes, limit: int) -> bytes | None:
        """The bytes before the next ``delimiter`` (consumed), or ``None`` on
        end of stream, a field over ``limit`` or a request over the maximum."""
        start = 0
        while True:
            found = self._buffer.find(delimiter, start)
            if found >= 0:
                field = bytes(self._buffer[:found])
                del self._buffer[: found + 1]
                return field
            if len(self._buffer) > limit:
                return None
            start = len(self._buffer)
            chunk = self._conn.recv(65536)
            self._total += len(chunk)
            if not chunk or self._total > MAX_REQUEST_BYTES + 1024:
                return None
            self._buffer += chunk


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m syncengine.cli.driver.server")
    parser.add_argument("--store", required=True)
    parser.add_argument("--rendezvous", required=True)
    parser.add_argument("--idle", type=float, default=DEFAULT_IDLE_SECONDS)
    args = parser.parse_args(argv)
    return serve(args.store, args.rendezvous, args.idle)


if __name__ == "__main__":
    sys.exit(main())
