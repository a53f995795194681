"""Four doors into the storage contract, behind one test-facing interface.

:class:`PythonDriver` calls :class:`syncengine.local_store.Store` directly;
:class:`CommandDriver` runs ``syncengine driver <op>``; :class:`BashDriver`
sources the installed driver file (``syncengine driver path``) in bash and
calls the ``storage_*`` functions, each in its own process;
:class:`ServedBashDriver` does the same with the driver server on, so all but
a store's first call are answered by it. All raise :class:`ContractFailure`
carrying the status name on failure, so the same test case runs through
each. The command and bash doors also assert the stdout framing of every
call (driver-interface §1.4, §2.1): control ops end with a status line
matching the exit code; record ops never print a status word; export and
import print nothing on stdout at all.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, ClassVar

from syncengine.cli.driver.command import driver_file
from syncengine.cli.driver.rendezvous import read_rendezvous, serving
from syncengine.local_store import Store
from syncengine.store import StoreError

REPO = Path(__file__).resolve().parents[3]
DRIVER_FILE = Path(driver_file())
SYNCENGINE_BIN = REPO / ".venv" / "bin" / "syncengine"

STATUS_BY_CODE = {0: "ok", 10: "missing_deps", 12: "corrupt_state", 13: "runtime_error"}
STATUS_WORDS = set(STATUS_BY_CODE.values())


class ContractFailure(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def _records(messages: list[Any]) -> list[dict[str, object]]:
    return [m.to_record() for m in messages]


class PythonDriver:
    name = "python"

    def __init__(self, path: Path) -> None:
        self.path = path

    def _call(self, method: str, *args: Any) -> Any:
        store = Store(self.path)
        try:
            return getattr(store, method)(*args)
        except StoreError as exc:
            raise ContractFailure(exc.status.label, str(exc)) from exc
        finally:
            store.close()

    def init(self) -> None:
        self._call("init")

    def store_exists(self) -> bool:
        return bool(self._call("exists"))

    def check(self) -> None:
        store = Store(self.path)
        try:
            if store.exists():
                store.check()
        except StoreError as exc:
            raise ContractFailure(exc.status.label, str(exc)) from exc
        finally:
            store.close()

    def send(self, team: str, sender: str, recipient: str, body: str) -> str:
        return str(self._call("send", team, sender, recipient, body).id)

    def list_unread(
        self, team: str, agent: str, limit: int | None = None
    ) -> list[dict[str, object]]:
        return _records(self._call("list_unread", team, agent, limit))

    def mark_read_batch(self, team: str, agent: str, *ids: str) -> None:
        self._call("mark_read_batch", team, agent, list(ids))

    def read_cursor_get(self, team: str, agent: str) -> str:
        return str(self._call("read_cursor_get", team, agent))

    def read_cursor_consume(self, team: str, agent: str, cursor: str, *ids: str) -> None:
        self._call("read_cursor_consume", team, agent, cursor, list(ids))

    def watch_tip(self, *pairs: str) -> str:
        return str(self._call("watch_tip", list(pairs)))

    def watch_after(self, cursor: str, *pairs: str) -> tuple[list[dict[str, object]], str]:
        result = self._call("watch_after", cursor, list(pairs))
        return _records(list(result.messages)), result.cursor

    def history(
        self, team: str, agent: str | None = None, limit: int | None = None
    ) -> list[dict[str, object]]:
        return _records(self._call("history", team, agent, limit))

    def export(self, file: Path, team: str | None = None) -> None:
        self._call("export", file)

    def import_(self, file: Path, team: str | None = None) -> None:
        self._call("import_file", file)

    def compact(self) -> None:
        self._call("compact")


class BashDriver:
    name = "bash"
    #: Added to the environment of every call (the test session turns the
    #: driver server off; the served door turns it back on).
    extra_env: ClassVar[dict[str, str]] = {}

    def __init__(self, path: Path, bin_path: Path | str = SYNCENGINE_BIN) -> None:
        self.path = path
        self.bin_path = str(bin_path)

    def raw(
        self, function: str, *args: str, last_from_stdin: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """Run one driver function in a fresh bash. With ``last_from_stdin``
        the final argument is read from stdin inside bash, so even a 1 MB
        body reaches the function without an ``execve`` of our own."""
        env = dict(os.environ, SYNCENGINE_STORE=str(self.path), SYNCENGINE_BIN=self.bin_path)
        env.update(self.extra_env)
        if last_from_stdin is None:
            script = f'source "{DRIVER_FILE}"; {function} "$@"'
        else:
            script = f'IFS= read -r -d "" last; source "{DRIVER_FILE}"; {function} "$@" "$last"'
        return subprocess.run(
            ["bash", "-c", script, "bash", *args],
            capture_output=True,
            env=env,
            timeout=60,
            input=last_from_stdin,
        )

    def _control(self, function: str, *args: str) -> None:
        done = self.raw(function, *args)
        lines = done.stdout.decode().splitlines()
        assert lines, f"{function} printed no status line"
        status = lines[-1]
        assert status in STATUS_WORDS, f"{function} last line {status!r} is not a status"
        assert STATUS_BY_CODE[done.returncode] == status, (function, done.returncode, status)
        if status != "ok":
            assert done.stderr, f"{function} failed without a message on stderr"
            raise ContractFailure(status, done.stderr.decode())

    def _quiet(self, function: str, *args: str) -> None:
        """``storage_export``/``storage_import``: nothing on stdout, success
        or not, as the bundled drivers (a host may capture their stdout)."""
        done = self.raw(function, *args)
        assert done.stdout == b"", f"{function} printed {done.stdout!r}"
        if done.returncode != 0:
            assert done.stderr, f"{function} failed without a message on stderr"
            raise ContractFailure(STATUS_BY_CODE[done.returncode], done.stderr.decode())

    def _record(self, function: str, *args: str, last: bytes | None = None) -> list[str]:
        done = self.raw(function, *args, last_from_stdin=last)
        lines = done.stdout.decode("utf-8").splitlines()
        assert not STATUS_WORDS & set(lines), f"{function} printed a status word: {lines}"
        if done.returncode != 0:
            assert done.stdout == b"", f"{function} printed data on failure"
            assert done.stderr, f"{function} failed without a message on stderr"
            raise ContractFailure(STATUS_BY_CODE[done.returncode], done.stderr.decode())
        return lines

    def init(self) -> None:
        self._control("storage_init")

    def store_exists(self) -> bool:
        done = self.raw("storage_store_exists")
        assert done.stdout == b""
        return done.returncode == 0

    def check(self) -> None:
        self._control("storage_check")

    def send(self, team: str, sender: str, recipient: str, body: str) -> str:
        lines = self._record("storage_send", team, sender, recipient, last=body.encode())
        assert len(lines) == 1
        return lines[0]

    def list_unread(
        self, team: str, agent: str, limit: int | None = None
    ) -> list[dict[str, object]]:
        extra = [] if limit is None else ["--limit", str(limit)]
        return [json.loads(x) for x in self._record("storage_list_unread", team, agent, *extra)]

    def mark_read_batch(self, team: str, agent: str, *ids: str) -> None:
        self._control("storage_mark_read_batch", team, agent, *ids)

    def read_cursor_get(self, team: str, agent: str) -> str:
        lines = self._record("storage_read_cursor_get", team, agent)
        assert len(lines) == 1
        return lines[0]

    def read_cursor_consume(self, team: str, agent: str, cursor: str, *ids: str) -> None:
        self._control("storage_read_cursor_consume", team, agent, cursor, *ids)

    def watch_tip(self, *pairs: str) -> str:
        lines = self._record("storage_watch_tip", *pairs)
        assert len(lines) == 1
        return lines[0]

    def watch_after(self, cursor: str, *pairs: str) -> tuple[list[dict[str, object]], str]:
        records = [json.loads(x) for x in self._record("storage_watch_after", cursor, *pairs)]
        assert records and records[-1]["type"] == "cursor", "trailing cursor record missing"
        assert set(records[-1]) == {"type", "cursor"}
        return records[:-1], str(records[-1]["cursor"])

    def history(
        self, team: str, agent: str | None = None, limit: int | None = None
    ) -> list[dict[str, object]]:
        args = [team] + ([agent] if agent is not None else [])
        if limit is not None:
            args += ["--limit", str(limit)]
        return [json.loads(x) for x in self._record("storage_history", *args)]

    def export(self, file: Path, team: str | None = None) -> None:
        self._quiet("storage_export", *([team] if team else []), str(file))

    def import_(self, file: Path, team: str | None = None) -> None:
        self._quiet("storage_import", *([team] if team else []), str(file))

    def compact(self) -> None:
        self._control("storage_compact")


class ServedBashDriver(BashDriver):
    """The bash door with the driver server on: the first call on a store
    runs as a process and starts the server, every later one is answered by
    it (syncengine/cli/driver/server.py); :func:`stop_driver_servers` ends it."""

    name = "served"
    extra_env: ClassVar[dict[str, str]] = {
        "SYNCENGINE_DRIVER_SERVER": "1",
        "SYNCENGINE_DRIVER_SERVER_IDLE": "3",
    }

    def server_pid(self) -> int | None:
        rendezvous = read_rendezvous(f"{self.path}.serve")
        return None if rendezvous is None else rendezvous.pid


def stop_driver_servers(root: Path, wait: float = 3.0) -> None:
    """End every driver server of the stores under ``root``: each holds its
    ``.serve.lock`` (:func:`serving`); one still starting is given ``wait``
    seconds to publish its pid. (A server spawned after this looks leaves on
    its own when idle: the served door sets a short idle time.)"""
    for lock in root.rglob("*.serve.lock"):
        rendezvous = str(lock).removesuffix(".lock")
        deadline = time.monotonic() + wait
        while serving(rendezvous) and time.monotonic() < deadline:
            found = read_rendezvous(rendezvous)
            if found is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(found.pid, signal.SIGTERM)
            time.sleep(0.05)


class CommandDriver(BashDriver):
    """``syncengine driver <op>`` run directly: the same framing checks as
    the bash door, without bash in between."""

    name = "command"

    def raw(
        self, function: str, *args: str, last_from_stdin: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        op = function.removeprefix("storage_")
        env = dict(os.environ, SYNCENGINE_STORE=str(self.path))
        return subprocess.run(
            [self.bin_path, "driver", op, *args],
            capture_output=True,
            env=env,
            timeout=60,
            input=last_from_stdin if last_from_stdin is not None else b"",
        )


def make_driver(kind: str, path: Path) -> PythonDriver | BashDriver:
    """The door named ``kind`` onto the store at ``path``."""
    if kind == "python":
        return PythonDriver(path)
    if kind == "command":
        return CommandDriver(path)
    if kind == "served":
        return ServedBashDriver(path)
    return BashDriver(path)
