"""No worker process outlives a crashed engine (syncengine/engine/workers.py).

A ``syncengine push --all`` or ``pull`` of at least MIN_PARALLEL_BATCH age-v1
messages seals or opens them on ``spawn``-ed worker processes. Here the real
CLI runs against a real relay on 127.0.0.1 with ``SYNCENGINE_WORKERS=2`` (so
workers are used whatever the CPU count) and ``SYNCENGINE_CRASH_AT=<point>``,
and dies with ``os._exit(77)`` after the workers did their part. Then:

* the caller's ``communicate()`` returns: nothing left behind holds the
  engine's stdout/stderr pipes;
* within a few seconds no process started by that run is alive (workers,
  the multiprocessing resource tracker, anything else);
* the same command without the crash completes the transfer exactly once.

Every child run carries a unique marker in its environment, which spawned
descendants inherit; ``/proc/<pid>/environ`` finds them even after they are
re-parented, and without mistaking processes of other tests for them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from syncengine.crash import CRASH_EXIT_CODE, CRASH_POINTS
from syncengine.engine.workers import MIN_PARALLEL_BATCH, WORKERS_ENV
from syncengine.local_store import Store
from syncengine.store import OutgoingMessage
from tests.support.live_relay import LiveRelay, relay_fixture
from tests.support.machines import LeanTeam, Machine, exactly_once, relay_counts

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/environ").exists(), reason="finds processes through /proc"
)

MESSAGES = 250
PUSH_CRASH = "prepare.sealed"
PULL_CRASH = "apply.commit.before_commit"
MARKER_ENV = "SYNCENGINE_TEST_WORKER_CRASH_RUN"
#: A worker checks every 0.25 s that its engine is alive; allow for a loaded machine.
LEFTOVER_GRACE = 5.0
#: As subprocess.run(timeout=60): a run that has not returned by then is a failure.
TIMEOUT = 60.0
EXPECTED = sorted(("alice", "bob", f"worker crash message {n}") for n in range(MESSAGES))


def test_constants_still_describe_a_parallel_batch() -> None:
    assert {PUSH_CRASH, PULL_CRASH} <= set(CRASH_POINTS)
    assert MESSAGES >= MIN_PARALLEL_BATCH


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRelay]:
    yield from relay_fixture(tmp_path_factory, name="worker-crash-relay")


# -- processes ---------------------------------------------------------------------


def _tagged(marker: str) -> dict[int, str]:
    """Live (non-zombie) processes whose environment carries ``marker``:
    pid -> command line."""
    needle = f"{MARKER_ENV}={marker}".encode()
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile, or not ours
            continue
        if stat.rsplit(")", 1)[1].split()[0] == "Z":  # exited, waiting to be reaped
            continue
        found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return found


def _leftovers(marker: str, grace: float = LEFTOVER_GRACE) -> dict[int, str]:
    """What is still alive of a run ``grace`` seconds after it ended (polled)."""
    deadline = time.monotonic() + grace
    while True:
        alive = _tagged(marker)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    #: Every descendant of the engine seen alive while it ran: pid -> command line.
    descendants: dict[int, str]
    leftovers: dict[int, str]

    def workers(self) -> list[str]:
        return [c for c in self.descendants.values() if "multiprocessing.spawn" in c]

    def json(self) -> dict[str, Any]:
        assert self.returncode == 0, self.stderr
        obj = json.loads(self.stdout)
        assert isinstance(obj, dict)
        return obj


def _syncengine(machine: Machine, *args: str, crash_at: str | None = None) -> Run:
    """``syncengine ARGS --store STORE`` with two workers, watched: as
    ``subprocess.run(capture_output=True, timeout=60)`` would run it, plus a
    record of every process it started and of those still alive afterwards."""
    marker = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k != "SYNCENGINE_CRASH_AT"}
    env.update({WORKERS_ENV: "2", MARKER_ENV: marker})
    if crash_at is not None:
        env["SYNCENGINE_CRASH_AT"] = crash_at
    seen: dict[int, str] = {}
    done = threading.Event()
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "syncengine", *args, "--store", str(machine.store)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )

    def watch() -> None:
        while not done.is_set():
            seen.update(_tagged(marker))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        try:
            stdout, stderr = process.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            # Something holds the pipes (or the engine hangs): end what this
            # run started, by pid, so that the failure is reported, not a hang.
            stray = _tagged(marker)
            for pid in stray:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.communicate(timeout=10)
            pytest.fail(
                f"syncengine {' '.join(args)} did not return in {TIMEOUT:.0f} s "
                f"(engine exit code {process.poll()}); alive then: {stray}"
            )
    finally:
        done.set()
        watcher.join()
    seconds = time.monotonic() - started
    seen.pop(process.pid, None)
    return Run(process.returncode, stdout, stderr, seconds, seen, _leftovers(marker))


def _send_backlog(machine: Machine) -> None:
    with Store(machine.store) as store:
        store.send_many(
            OutgoingMessage("crew", "alice", "bob", f"worker crash message {n}")
            for n in range(MESSAGES)
        )


def _assert_crashed_cleanly(run: Run) -> None:
    assert run.returncode == CRASH_EXIT_CODE, run.stderr
    # Not vacuous: the engine really had worker processes when it died.
    assert run.workers(), f"no worker process was started: {run.descendants}"
    assert run.leftovers == {}, f"alive {LEFTOVER_GRACE} s after the crash: {run.leftovers}"


# -- the tests ---------------------------------------------------------------------


def test_push_crashed_after_sealing_on_workers_leaves_no_process_and_recovers(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = LeanTeam(live, tmp_path)
    a, b = team.age_machines("a", "b")
    _send_backlog(a)

    crashed = _syncengine(a, "push", "--all", "--json", crash_at=PUSH_CRASH)
    _assert_crashed_cleanly(crashed)
    assert relay_counts(live, team.id) == (0, 0)  # the crash was before any POST

    pushed = _syncengine(a, "push", "--all", "--json")
    assert pushed.json()["push"]["stored"] == MESSAGES
    assert pushed.workers() and pushed.leftovers == {}
    pulled = _syncengine(b, "pull", "--json")
    assert pulled.json()["pull"]["outcomes"] == {"imported": MESSAGES}
    assert pulled.leftovers == {}
    assert relay_counts(live, team.id) == (MESSAGES, MESSAGES)
    assert exactly_once(b) == EXPECTED


def test_pull_crashed_before_applying_opened_page_leaves_no_process_and_recovers(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = LeanTeam(live, tmp_path)
    a, b = team.age_machines("a", "b")
    _send_backlog(a)
    pushed = _syncengine(a, "push", "--all", "--json")
    assert pushed.json()["push"]["stored"] == MESSAGES

    crashed = _syncengine(b, "pull", "--json", crash_at=PULL_CRASH)
    _assert_crashed_cleanly(crashed)
    assert exactly_once(b) == []  # the page's transaction never committed

    pulled = _syncengine(b, "pull", "--json")
    assert pulled.json()["pull"]["outcomes"] == {"imported": MESSAGES}
    assert pulled.workers() and pulled.leftovers == {}
    assert exactly_once(b) == EXPECTED
    again = _syncengine(b, "pull", "--json")
    assert again.json()["pull"]["received"] == 0
    assert exactly_once(b) == EXPECTED
