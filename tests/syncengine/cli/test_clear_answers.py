"""Issue #33 at the CLI, against a real relay on 127.0.0.1: broken pipes end
quietly with 141, ``run`` stops cleanly on SIGTERM at any moment of its
start-up, restore's first sync reports what it adopted, and ``status``
never shows a resolved failure with its old remedy."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.live_relay import LiveRelay, relay_fixture
from tests.support.machines import LeanTeam, Machine, run_cli


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRelay]:
    yield from relay_fixture(tmp_path_factory, name="clear-answers-relay")


def _into_a_closed_pipe(machine: Machine, *args: str) -> tuple[int, str]:
    """``syncengine ARGS | head -1`` with the reader already gone (its end of
    the pipe closed before the command starts, so the very first write
    fails, whatever the timing): the exit code and stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "syncengine", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env={**os.environ, "SYNCENGINE_STORE": str(machine.store)},
            check=False,
        )
    finally:
        os.close(write_end)
    return done.returncode, done.stderr


@pytest.mark.parametrize("command", [("status",), ("doctor",), ("history", "crew")])
def test_a_reader_that_goes_away_ends_the_command_quietly_with_141(
    live: LiveRelay, tmp_path: Path, command: tuple[str, ...]
) -> None:
    a = LeanTeam(live, tmp_path).machine("a")
    a.send("alice", "bob", "hello bob")
    code, stderr = _into_a_closed_pipe(a, *command)
    assert code == 141, stderr
    assert stderr == ""


def test_run_stops_cleanly_on_sigterm_at_every_moment_of_its_start(
    live: LiveRelay, tmp_path: Path
) -> None:
    """SIGTERM at increasing delays after the process starts. The child starts
    with SIGTERM and SIGINT blocked (a supervisor's usual hand-over), so a
    signal sent while the interpreter itself is still starting waits for
    syncengine's first line of code; the verdict is the exit code and the
    absence of a traceback for every delay, never a timing."""
    a = LeanTeam(live, tmp_path).machine("a")

    def blocked() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})

    for step in range(16):
        delay = step * 0.03
        process = subprocess.Popen(
            [sys.executable, "-m", "syncengine", "run", "--interval", "30"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "SYNCENGINE_STORE": str(a.store)},
            preexec_fn=blocked,
        )
        time.sleep(delay)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, (delay, process.returncode, err.decode())
        assert b"Traceback" not in err, (delay, err.decode())


def test_restores_first_sync_reports_the_messages_it_adopted(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = LeanTeam(live, tmp_path)
    a = team.machine("a")
    a.send("alice", "bob", "one", "two", "three")  # written before the backup …
    backup = tmp_path / "a.backup"
    assert run_cli(a, "backup", "--output", str(backup)).returncode == 0
    a.sync()  # … and published after it
    assert run_cli(a, "restore", "--input", str(backup)).returncode == 0
    synced = run_cli(a, "sync", "--json")
    assert synced.returncode == 0, synced.stderr
    pull = json.loads(synced.stdout.splitlines()[-1])["pull"]
    assert pull["received"] == 3, pull  # adopted, not sent again
    assert sum(pull["outcomes"].values()) == 3, pull
    text = run_cli(a, "sync")
    assert "pulled 0 message(s)" in text.stdout  # the next sync has nothing new


def test_status_shows_a_failure_a_later_success_resolved_without_its_remedy(
    live: LiveRelay, tmp_path: Path
) -> None:
    a = LeanTeam(live, tmp_path).machine("a")
    a.sync()
    conn = sqlite3.connect(a.store)
    try:
        # What a halted sync records, then the operator's resume (state ok).
        conn.execute(
            "UPDATE engine_status SET state = 'ok', last_failure_at = '2099-01-01T00:00:00Z',"
            " failures_since_success = 1, last_error_code = 'relay-contradiction',"
            " last_error_message = 'the relay contradicted this machine',"
            " last_error_remediation = 'OLD REMEDY: run syncengine resume'"
        )
        conn.commit()
    finally:
        conn.close()
    shown = run_cli(a, "status")
    assert shown.returncode == 0, shown.stderr
    assert "OLD REMEDY" not in shown.stdout
    assert "relay-contradiction (resolved" in shown.stdout
    as_json = json.loads(run_cli(a, "status", "--json").stdout)
    assert as_json["last_failure"]["resolved"] is True
    # A failure that still stands keeps its remedy.
    conn = sqlite3.connect(a.store)
    try:
        conn.execute("UPDATE engine_status SET state = 'halted'")
        conn.commit()
    finally:
        conn.close()
    still = run_cli(a, "status")
    assert "OLD REMEDY" in still.stdout
    assert json.loads(run_cli(a, "status", "--json").stdout)["last_failure"]["resolved"] is False


def test_keys_epoch_help_lists_the_code_a_refused_digest_returns() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "syncengine", "keys", "epoch", "import", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "7 not connected, or a snapshot, digest" in done.stdout
