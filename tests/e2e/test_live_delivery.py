"""Live delivery end to end (issue #32; specs/live.md): real relay
processes, real ``syncengine run`` and ``wait`` processes.

Each test's bound is generous — far below the safety-net interval it
proves was not what delivered the message (``run --interval 60``), far
above what the delivery takes on a loaded machine — so no verdict depends
on this machine's speed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.live_support import BOUND, delivery, running
from tests.support.live_relay import LiveRelay, running_relay
from tests.support.machines import LeanTeam, Machine, exactly_once, run_cli


def wait_for(
    machine: Machine, agent: str, timeout: float = BOUND
) -> subprocess.CompletedProcess[str]:
    return run_cli(
        machine,
        "wait",
        "--team",
        "crew",
        "--agent",
        agent,
        "--timeout",
        f"{timeout:g}",
        timeout=timeout + 30,
    )


def test_run_on_both_machines_delivers_a_send_long_before_the_interval(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = LeanTeam(live, tmp_path)
    a, b = team.machine("a"), team.machine("b")
    with running(a, "--interval", "60") as ra, running(b, "--interval", "60") as rb:
        delivery(ra, "live")
        delivery(rb, "live")
        subprocess.run(
            [sys.executable, "-m", "syncengine", "send", "crew", "alice", "bob", "-"],
            input="are you there?",
            text=True,
            check=True,
            env={**os.environ, "SYNCENGINE_STORE": str(a.store)},
            timeout=60,
        )
        started = time.monotonic()
        got = wait_for(b, "bob")
        assert got.returncode == 0, got.stderr
        assert "are you there?" in got.stdout
        assert time.monotonic() - started < BOUND
        status = json.loads(run_cli(b, "status", "--json").stdout)
        assert status["delivery"]["mode"] == "live"


def test_wait_without_run_returns_a_message_sent_on_another_machine(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = LeanTeam(live, tmp_path)
    a, b = team.machine("a"), team.machine("b")
    waiter = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "syncengine",
            "wait",
            "--team",
            "crew",
            "--agent",
            "bob",
            "--timeout",
            f"{BOUND * 2:g}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SYNCENGINE_STORE": str(b.store)},
    )
    try:
        a.send("alice", "bob", "found without run")
        a.sync()
        out, err = waiter.communicate(timeout=BOUND * 2 + 30)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode == 0, err
    assert "found without run" in out
    assert exactly_once(b) == [("alice", "bob", "found without run")]


def test_a_read_on_one_machine_shows_on_the_other_long_before_the_interval(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = LeanTeam(live, tmp_path)
    a, b = team.machine("a"), team.machine("b")
    a.send("alice", "bob", "read me")
    a.sync()
    b.sync()
    with running(a, "--interval", "60") as ra, running(b, "--interval", "60") as rb:
        delivery(ra, "live")
        delivery(rb, "live")
        from syncengine.local_store import Store

        with Store(b.store) as store:
            (message,) = store.list_unread("crew", "bob")
            store.mark_read_batch("crew", "bob", [message.id])
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline:
            with Store(a.store) as store:
                if not store.list_unread("crew", "bob"):
                    break
            time.sleep(0.1)
        with Store(a.store) as store:
            assert store.list_unread("crew", "bob") == []


def test_a_relay_without_the_extension_leaves_run_polling_and_says_why(tmp_path: Path) -> None:
    with running_relay(tmp_path / "relay.db", "--no-access-log", "--no-live") as plain:
        team = LeanTeam(plain, tmp_path)
        b = team.machine("b")
        with running(b, "--interval", "0.5") as rb:
            event = delivery(rb, "polling")
            assert event["reason"] == "the relay does not offer the live wait"
            status = json.loads(run_cli(b, "status", "--json").stdout)
            assert status["delivery"]["mode"] == "polling"


@pytest.mark.parametrize("profile", ["none", "age-v1"])
def test_live_delivery_is_exactly_once_for_a_burst_from_both_sides(
    live: LiveRelay, tmp_path: Path, profile: str
) -> None:
    team = LeanTeam(live, tmp_path)
    if profile == "none":
        a, b = team.machine("a"), team.machine("b")
    else:
        a, b = team.age_machines("a", "b")
    with running(a, "--interval", "60") as ra, running(b, "--interval", "60") as rb:
        delivery(ra, "live")
        delivery(rb, "live")
        a.send("alice", "bob", *(f"a{i}" for i in range(5)))
        b.send("bob", "alice", *(f"b{i}" for i in range(5)))
        expected = sorted(
            [("alice", "bob", f"a{i}") for i in range(5)]
            + [("bob", "alice", f"b{i}") for i in range(5)]
        )
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline:
            if exactly_once(a) == expected and exactly_once(b) == expected:
                break
            time.sleep(0.1)
    assert exactly_once(a) == expected
    assert exactly_once(b) == expected
