"""``relay serve --workers N``: N relay processes behind one address (#35).

One supervisor binds the listening socket once, then forks N workers that
each open their own store (their own PostgreSQL pool and LISTEN
connection, relay/storage/pg_live.py) and serve the *inherited* socket
with uvicorn: the kernel hands each new connection to one worker.

Why our own supervisor rather than uvicorn's ``workers=N``: uvicorn spawns
fresh interpreters that re-import the app from an import string, while the
relay's app is built around an open store and a connection guard that
exist only at run time; it has no hook for "every worker accepts now" (so
no single ``listening`` line naming the pids) and no way to hand the worker
a start-up failure's exit code. Why one shared socket rather than
``SO_REUSEPORT``: with separate sockets a worker that dies takes the
connections queued in its own backlog with it, and ``--port 0`` would need
a second round of binds; a shared socket loses nothing queued when one
worker goes, and the bind errors stay those of a single process.

The group's life (specs/relay.md "Several processes, one address"):

- **start**: the database is opened once up front (unreachable: exit 3
  before anything listens), the socket is bound (exit 2 on a bind error),
  the workers are forked and each reports "ready" once uvicorn accepts, or
  the reason it could not start. Only when all N are ready is the one
  ``listening`` line printed, with ``"workers": N`` and their ``"pids"``.
  A worker that cannot start stops the whole group with its exit code.
- **stop**: SIGTERM or SIGINT to the supervisor closes its copy of the
  socket and sends SIGTERM to every worker; each drains its requests in
  flight (``--shutdown-timeout``) and closes its copy, so the address
  refuses new connections, and the supervisor exits 0 once all are gone.
  Workers sit in their own process group (a terminal's Ctrl-C reaches the
  supervisor only, which forwards one SIGTERM) and get SIGTERM should the
  supervisor itself die (``PR_SET_PDEATHSIG``).
- **a worker that dies** while serving (a crash, SIGKILL, the OOM killer)
  is reported in one log line and replaced by a new worker on the same
  socket; the others keep serving, and a request the dead one had not
  committed is retried by the client like any dropped connection (every
  write is one transaction, acked only after commit). More than
  :data:`MAX_REPLACEMENTS` deaths within :data:`REPLACEMENT_WINDOW_SECONDS`
  stop the group with exit 3, so a crash loop ends in the service
  manager's restart policy instead of spinning here.

SQLite is refused for N > 1 by the CLI (relay/cli.py): one file has one
writer at a time, so more processes would only queue on its lock.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType
from typing import TextIO

from relay.errors import OperatorError, RelayError
from relay.http.metrics_group import MetricsGroup, retire
from relay.logformat import configure_logging
from relay.server import Listener, ServeOptions, build_server, listen, listening_line
from relay.storage.base import RelayStore
from relay.storage.location import DatabaseUnreachable

__all__ = [
    "MAX_REPLACEMENTS",
    "MAX_WORKERS",
    "REPLACEMENT_WINDOW_SECONDS",
    "RestartBudget",
    "WorkerFailed",
    "serve_workers",
]

_log = logging.getLogger("relay.workers")

#: ``--workers`` upper bound: far above any core count this relay is sized for.
MAX_WORKERS = 64
#: A crash loop stops the group after this many deaths in the window.
MAX_REPLACEMENTS = 5
REPLACEMENT_WINDOW_SECONDS = 60.0
#: After the workers' own drain (``--shutdown-timeout``), how long the
#: supervisor waits before it kills what is left.
_STOP_MARGIN_SECONDS = 10.0
#: Exit codes the supervisor returns (relay/cli.py's).
_EXIT_OPERATOR = 2
_EXIT_UNAVAILABLE = 3
_PR_SET_PDEATHSIG = 1


class _StoppedWhileStarting(Exception):
    """A signal asked the group to stop before every worker was ready."""


class WorkerFailed(OperatorError):
    """The group could not start or keep running; ``exit_code`` is the CLI's."""

    def __init__(self, message: str, remediation: str, exit_code: int) -> None:
        super().__init__(message, remediation)
        self.exit_code = exit_code


@dataclass
class _Reports:
    """The pipe every worker writes its one start-up report to (one JSON line,
    shorter than PIPE_BUF, so lines of different workers never interleave)."""

    read_fd: int
    write_fd: int
    pending: bytes = b""

    def lines(self) -> list[dict[str, object]]:
        try:
            chunk = os.read(self.read_fd, 65536)
        except BlockingIOError:
            return []
        self.pending += chunk
        *complete, self.pending = self.pending.split(b"\n")
        return [json.loads(line) for line in complete if line]


def _send(fd: int, document: dict[str, object]) -> None:
    os.write(fd, json.dumps(document).encode() + b"\n")


def _die_with(parent: int) -> None:
    """SIGTERM to this worker if the supervisor dies (Linux); elsewhere a
    worker outliving its supervisor still drains on an operator's SIGTERM."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # it died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _worker(
    open_store: Callable[[], RelayStore],
    options: ServeOptions,
    listener: Listener,
    reports: int,
    inherited: tuple[int, ...],
    parent: int,
    metrics_dir: Path | None,
) -> None:
    """One worker process: its own store and app on the shared socket."""
    signal.set_wakeup_fd(-1)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_DFL)
    for fd in inherited:  # the supervisor's own ends: its signal pipe, the report reader
        with contextlib.suppress(OSError):
            os.close(fd)
    os.setpgid(0, 0)
    _die_with(parent)
    pid = os.getpid()
    try:
        store = open_store()
    except OperatorError as exc:
        code = _EXIT_UNAVAILABLE if isinstance(exc, DatabaseUnreachable) else _EXIT_OPERATOR
        _send(reports, {"pid": pid, "error": exc.message, "remedy": exc.remediation, "code": code})
        sys.exit(code)
    except RelayError as exc:
        _send(
            reports,
            {
                "pid": pid,
                "error": exc.message,
                "remedy": "check that the database is reachable and not locked",
                "code": _EXIT_UNAVAILABLE,
            },
        )
        sys.exit(_EXIT_UNAVAILABLE)
    try:
        group = MetricsGroup(metrics_dir, pid) if metrics_dir is not None else None
        server = build_server(
            store,
            options,
            listener,
            on_started=lambda: _send(reports, {"pid": pid, "ready": True}),
            metrics_group=group,
        )
        server.run(sockets=[listener.sock])
    except OperatorError as exc:  # TLS files the supervisor could not check
        _send(reports, {"pid": pid, "error": exc.message, "remedy": exc.remediation, "code": 2})
        sys.exit(_EXIT_OPERATOR)
    except Exception as exc:
        # One line with the type only (as relay/logformat.py does), never the
        # traceback multiprocessing would print; the supervisor reports the exit.
        _log.error("relay worker %d stopped on %s", pid, type(exc).__name__)
        sys.exit(1)
    finally:
        store.close()


class RestartBudget:
    """How many worker deaths the group absorbs: at most ``limit`` within
    ``window`` seconds; one more means a crash loop, and the group stops."""

    def __init__(
        self, limit: int = MAX_REPLACEMENTS, window: float = REPLACEMENT_WINDOW_SECONDS
    ) -> None:
        self.limit = limit
        self.window = window
        self._deaths: deque[float] = deque()

    def death(self, now: float) -> bool:
        """Record a death at ``now`` (monotonic seconds); ``False`` once the
        deaths within the window exceed the limit."""
        self._deaths.append(now)
        while self._deaths and now - self._deaths[0] > self.window:
            self._deaths.popleft()
        return len(self._deaths) <= self.limit

    @property
    def recent(self) -> int:
        """Deaths within the window, as of the last one recorded."""
        return len(self._deaths)


class _Group:
    """The supervisor's view of its workers."""

    def __init__(
        self,
        open_store: Callable[[], RelayStore],
        options: ServeOptions,
        listener: Listener,
        metrics_dir: Path | None,
    ) -> None:
        self._open_store = open_store
        self._options = options
        self._listener = listener
        self._metrics_dir = metrics_dir
        self._context = multiprocessing.get_context("fork")
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        self._reports = _Reports(read_fd, write_fd)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.stopping = False
        self.workers: dict[int, BaseProcess] = {}
        self._budget = RestartBudget()

    # -- signals ---------------------------------------------------------------------------

    def install_signals(self) -> None:
        """SIGTERM/SIGINT set ``stopping`` and wake the supervisor's wait."""

        def stop(_signum: int, _frame: FrameType | None) -> None:
            self.stopping = True

        signal.set_wakeup_fd(self._wake_w.fileno(), warn_on_full_buffer=False)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, stop)

    def _drain_wake(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while self._wake_r.recv(512):
                pass

    # -- starting --------------------------------------------------------------------------

    def _fork(self) -> int:
        process = self._context.Process(
            target=_worker,
            args=(
                self._open_store,
                self._options,
                self._listener,
                self._reports.write_fd,
                (self._wake_r.fileno(), self._wake_w.fileno(), self._reports.read_fd),
                os.getpid(),
                self._metrics_dir,
            ),
            name="relay-worker",
        )
        process.start()
        assert process.pid is not None
        self.workers[process.pid] = process
        return process.pid

    def start(self, count: int) -> list[int]:
        """Fork ``count`` workers and wait until each is ready; their pids.

        :raises WorkerFailed: one could not start (the caller stops the group).
        :raises _StoppedWhileStarting: a signal asked the group to stop.
        """
        starting = {self._fork() for _ in range(count)}
        ready: list[int] = []
        while starting:
            objects: list[object] = [self._reports.read_fd, self._wake_r]
            objects += [self.workers[pid].sentinel for pid in starting]
            multiprocessing.connection.wait(objects)  # type: ignore[arg-type]
            self._drain_wake()
            if self.stopping:
                raise _StoppedWhileStarting
            for report in self._reports.lines():
                pid = int(str(report["pid"]))
                if report.get("ready"):
                    starting.discard(pid)
                    ready.append(pid)
                elif "error" in report:
                    remedy = str(report.get("remedy", ""))
                    code = int(str(report["code"]))
                    raise WorkerFailed(str(report["error"]), remedy, code)
            for pid in list(starting):
                process = self.workers[pid]
                if not process.is_alive():
                    raise WorkerFailed(
                        f"relay worker {pid} exited ({_how(process)}) before it was ready",
                        "see the log lines above; check the database and the options",
                        _EXIT_UNAVAILABLE,
                    )
        return ready

    # -- running ---------------------------------------------------------------------------

    def supervise(self) -> None:
        """Until a signal: replace each worker that dies (or stop the group when
        they keep dying)."""
        while not self.stopping:
            objects: list[object] = [self._wake_r]
            objects += [process.sentinel for process in self.workers.values()]
            multiprocessing.connection.wait(objects)  # type: ignore[arg-type]
            self._drain_wake()
            if self.stopping:
                return
            for pid, process in list(self.workers.items()):
                if not process.is_alive():
                    try:
                        self._replace(pid, process)
                    except _StoppedWhileStarting:
                        return

    def _replace(self, pid: int, process: BaseProcess) -> None:
        del self.workers[pid]
        process.join()
        if self._metrics_dir is not None:
            retire(self._metrics_dir, pid)
        if not self._budget.death(time.monotonic()):
            _log.error(
                "relay worker %d exited (%s); %d workers exited within %g s, stopping the group",
                pid,
                _how(process),
                self._budget.recent,
                self._budget.window,
            )
            raise WorkerFailed(
                f"relay workers keep exiting ({self._budget.recent} within "
                f"{self._budget.window:g} s)",
                "see the log lines above; the service manager may restart the group",
                _EXIT_UNAVAILABLE,
            )
        _log.warning("relay worker %d exited (%s); starting a replacement", pid, _how(process))
        (replacement,) = self.start(1)
        _log.warning("relay worker %d serves in place of %d", replacement, pid)

    # -- stopping --------------------------------------------------------------------------

    def stop(self) -> None:
        """Close the supervisor's socket, SIGTERM every worker, wait for them all."""
        self._listener.sock.close()
        for process in self.workers.values():
            if process.pid is not None and process.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + self._options.shutdown_timeout + _STOP_MARGIN_SECONDS
        for process in self.workers.values():
            process.join(max(0.0, deadline - time.monotonic()))
        for process in self.workers.values():
            if process.is_alive():
                _log.error("relay worker %s did not stop in time; killing it", process.pid)
                process.kill()
                process.join()
        signal.set_wakeup_fd(-1)
        self._wake_r.close()
        self._wake_w.close()
        for fd in (self._reports.read_fd, self._reports.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def _how(process: BaseProcess) -> str:
    code = process.exitcode
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def serve_workers(
    open_store: Callable[[], RelayStore],
    options: ServeOptions,
    workers: int,
    *,
    announce: TextIO = sys.stdout,
) -> None:
    """Run ``workers`` relay processes on one address until SIGTERM/SIGINT.

    ``open_store`` opens a new store on the group's database; it is called
    once here (to fail early and read the server_instance_id) and once in
    every worker after the fork.

    :raises WorkerFailed: the group could not start or stopped itself.
    """
    configure_logging(options.log_format, access_log=options.access_log)
    probe = open_store()  # unreachable or not initialized: the CLI's exit 3 or 2, nothing bound
    try:
        server_instance_id = probe.server_instance_id
    finally:
        probe.close()
    listener = listen(options)
    metrics_dir = (
        Path(tempfile.mkdtemp(prefix="syncengine-relay-metrics-")) if listener.metrics else None
    )
    group = _Group(open_store, options, listener, metrics_dir)
    group.install_signals()
    try:
        try:
            pids = group.start(workers)
        except _StoppedWhileStarting:
            return  # asked to stop while starting: a clean stop, exit 0
        announce.write(
            listening_line(
                options,
                listener,
                server_instance_id,
                workers=workers,
                pids=pids,
                supervisor_pid=os.getpid(),
            )
        )
        announce.flush()
        group.supervise()
    finally:
        group.stop()
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)
