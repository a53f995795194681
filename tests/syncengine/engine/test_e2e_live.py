"""End to end: real relay process on 127.0.0.1, stores driven by the CLI and
the Engine API. Each test provisions its own team on one shared relay so the
whole module pays for one relay start-up."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syncengine.engine import Engine
from syncengine.local_store import Store
from tests.support.live_relay import (
    LiveRelay,
    relay_fixture,
)
from tests.support.machines import Machine, Team, age_epoch


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRelay]:
    yield from relay_fixture(tmp_path_factory)


def test_plaintext_messages_converge_exactly_once_both_ways_and_resync_is_idempotent(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = Team(live, tmp_path)
    a, b = team.machine("a"), team.machine("b")
    a.send("alice", "bob", "a1", "a2", "a3")
    b.send("bob", "alice", "b1", "b2")
    first = [a.sync(), b.sync(), a.sync()]
    assert first[0].push.stored == 3 and first[1].push.stored == 2
    expected = ["a1", "a2", "a3", "b1", "b2"]
    assert a.bodies() == expected and b.bodies() == expected
    again = [a.sync(), b.sync()]
    assert all(r.push.candidates == 0 and r.pull.received == 0 for r in again)
    assert a.bodies() == expected and b.bodies() == expected
    inbox = b.cli("inbox", "crew", "bob", "--json", "--mark-read")
    assert [json.loads(line)["body"] for line in inbox.stdout.splitlines()] == ["a1", "a2", "a3"]
    assert b.cli("inbox", "crew", "bob").stdout == ""


def test_age_v1_messages_converge_with_each_machine_its_own_identity(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = Team(live, tmp_path)
    recipients, keys = age_epoch(tmp_path, "a", "b")
    epoch = ("--key-id", "epoch-1", "--recipients-file", str(recipients))
    a = team.machine("a", *epoch, "--identity", str(keys["a"]), mode="e2ee-required")
    b = team.machine("b", *epoch, "--identity", str(keys["b"]), mode="e2ee-required")
    a.send("alice", "bob", "sealed from a")
    b.send("bob", "alice", "sealed from b")
    reports = [a.sync(), b.sync(), a.sync()]
    assert reports[0].push.cipher == "age-v1" and reports[1].push.cipher == "age-v1"
    assert reports[1].pull.outcomes == {"imported": 1, "reconciled": 1}
    assert a.bodies() == b.bodies() == ["sealed from a", "sealed from b"]
    status = json.loads(a.cli("status", "--json").stdout)
    assert status["quarantine"] == {"imported": 1, "reconciled": 1}
    assert status["security"]["age_v1"]["key_id"] == "epoch-1"


def test_unopenable_envelope_is_pending_key_then_imports_after_reprocess(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = Team(live, tmp_path)
    recipients, keys = age_epoch(tmp_path, "a", "b")
    epoch = ("--key-id", "epoch-1", "--recipients-file", str(recipients))
    a = team.machine("a", *epoch, "--identity", str(keys["a"]))
    b = team.machine("b", *epoch)  # no identity installed
    c = team.machine("c")  # a plaintext writer
    a.send("alice", "bob", "needs a key")
    a.sync()
    c.send("carol", "bob", "plain later")
    c.sync()
    pulled = b.sync().pull
    assert pulled.outcomes == {"imported": 1, "pending_key": 1}
    assert b.bodies() == ["plain later"]
    assert b.cli("security", "identity", str(keys["b"])).returncode == 0
    result = b.cli("reprocess", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reprocess"]["outcomes"] == {"imported": 1}
    assert b.bodies() == ["needs a key", "plain later"]
    assert b.sync().pull.received == 0  # nothing arrives twice


def test_policy_changes_make_later_plaintext_a_violation_and_stop_plaintext_writes(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = Team(live, tmp_path)
    a, b = team.machine("a"), team.machine("b")
    a.send("alice", "bob", "before")
    a.sync()
    changed = b.cli("security", "set", "e2ee-required", "--json")
    assert changed.returncode == 0, changed.stderr
    assert json.loads(changed.stdout)["effective_from_seq"] == "2"
    a.send("alice", "bob", "after")
    a.sync()
    pulled = b.sync()
    assert pulled.pull.outcomes == {"imported": 1, "policy_violation": 1}
    assert not pulled.push.allow_new  # e2ee-required without an epoch writes nothing
    assert b.bodies() == ["before"]

    team.relay("policy", "set", "--team", team.id, "--allow", "age-v1")
    a.send("alice", "bob", "refused by policy")
    report = a.sync()
    assert not report.push.allow_new and report.push.candidates == 0
    assert "age-v1" in (report.push.blocked_reason or "")
    status = json.loads(a.cli("status", "--json").stdout)
    assert status["pending_push"] == 1 and status["state"] == "ok"


def test_resync_required_is_durable_and_visible_in_status(live: LiveRelay, tmp_path: Path) -> None:
    team = Team(live, tmp_path)
    a, b = team.machine("a"), team.machine("b")
    a.send("alice", "bob", "m1", "m2", "m3", "m4")
    a.sync()
    team.relay("retain", "--team", team.id, "--through", "3")
    for _ in range(2):  # the state survives a new process, and repeats
        pulled = b.cli("pull", "--json")
        assert pulled.returncode == 5, pulled.stderr
        assert json.loads(pulled.stdout)["error"]["code"] == "resync-required"
    status = b.cli("status", "--json")
    obj = json.loads(status.stdout)
    assert obj["state"] == "resync-required"
    assert obj["resync_required"]["after"] == "0"
    assert obj["resync_required"]["min_available_seq"] == "3"
    assert obj["cursors"]["transport"] == "0"
    assert "RESYNC REQUIRED" in b.cli("status").stdout


def test_run_loop_stops_on_sigterm_and_refuses_a_second_engine(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = Team(live, tmp_path)
    a, b = team.machine("a"), team.machine("b")
    a.send("alice", "bob", "while running")
    a.sync()
    process = subprocess.Popen(
        [sys.executable, "-m", "syncengine", "run", "--json", "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SYNCENGINE_STORE": str(b.store)},
    )
    try:
        assert process.stdout is not None
        # ``delivery`` events (live or polling, specs/live.md §9) may come between.
        events: list[dict[str, Any]] = []
        while len(events) < 2:
            event = json.loads(process.stdout.readline())
            if event["event"] != "delivery":
                events.append(event)
        assert events[0]["event"] == "started" and events[0]["team"] == "crew"
        assert events[1]["event"] == "cycle" and events[1]["ok"] and "at" in events[1]
        assert events[1]["pull"]["received"] == 1
        second = b.cli("sync")
        assert second.returncode == 8 and "another engine" in second.stderr
        assert json.loads(b.cli("status", "--json").stdout)["engine_running"] is True
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        assert time.monotonic() - started < 10
        stopped = json.loads(process.stdout.read().splitlines()[-1])
        assert stopped["event"] == "stopped" and stopped["at"].endswith("Z")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert b.cli("sync").returncode == 0  # the lock went with the process


@pytest.mark.parametrize("delay", [0.1, 0.2, 0.4])
def test_sigterm_while_run_is_still_starting_ends_it_cleanly(
    live: LiveRelay, tmp_path: Path, delay: float
) -> None:
    """#14: a SIGTERM in run's first half second killed it by signal."""
    team = Team(live, tmp_path)
    a = team.machine("a")
    process = subprocess.Popen(
        [sys.executable, "-m", "syncengine", "run", "--json", "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SYNCENGINE_STORE": str(a.store)},
    )
    try:
        time.sleep(delay)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0, process.stderr.read() if process.stderr else ""
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_an_operator_resync_recovers_a_machine_behind_retention_and_a_late_joiner(
    live: LiveRelay, tmp_path: Path
) -> None:
    """Three machines through the real CLI (retention-gap-resynchronization.md):
    B falls behind retention, gets 410, runs the command status names, and
    afterwards every message still on the relay arrives exactly once, its own
    unpushed message is pushed, and its quarantine and read state stay; then
    C, which joins only now, catches up after its own approval."""
    team = Team(live, tmp_path)
    a, b = team.machine("a"), team.machine("b")
    # B refuses plaintext for sequence 1 only, so A's first message lands in
    # B's quarantine (policy_violation) and stays there.
    assert b.cli("security", "set", "e2ee-required").returncode == 0
    a.send("alice", "bob", "q1")
    assert a.cli("push").returncode == 0
    assert b.cli("pull").returncode == 0
    assert b.cli("security", "set", "plaintext-allowed").returncode == 0
    b.send("bob", "alice", "b-local")
    with Store(b.store) as store:
        mine = store.history("crew", "bob")[0]
        store.mark_read_batch("crew", "alice", [mine.id])
    a.send("alice", "bob", *(f"m{i}" for i in range(2, 8)))  # sequences 2..7
    assert a.cli("sync").returncode == 0  # A's own cursor passes the coming floor
    team.relay("retain", "--team", team.id, "--through", "5")

    pulled = b.cli("pull", "--json")
    assert pulled.returncode == 5, pulled.stderr
    status = json.loads(b.cli("status", "--json").stdout)
    gap = status["resync_required"]
    assert (gap["after"], gap["min_available_seq"], gap["unavailable"]) == ("1", "5", 4)
    command = gap["command"].split()
    assert command[:2] == ["syncengine", "resync"] and command[-1] == "5"
    assert gap["command"] in b.cli("status").stdout

    resynced = b.cli(*command[1:], "--json")
    assert resynced.returncode == 0, resynced.stderr
    result = json.loads(resynced.stdout)["resync"]
    assert (result["gap_start"], result["gap_end"], result["transport_cursor"]) == ("2", "5", "5")
    again = b.cli(*command[1:], "--json")  # idempotent: the recorded result
    assert again.returncode == 0 and json.loads(again.stdout)["resync"]["already_applied"]

    synced = b.cli("sync", "--json")
    assert synced.returncode == 0, synced.stderr
    assert b.bodies() == ["b-local", "m6", "m7"]  # each exactly once; q1 stays quarantined
    after = json.loads(b.cli("status", "--json").stdout)
    # Healthy, but a blocked message is not "ok" (issue #15): it is named.
    assert after["state"] == "blocked" and after["resync_required"] is None
    assert [b["status"] for b in after["messages_blocked"]] == ["policy_violation"]
    assert after["quarantine"]["policy_violation"] == 1 and after["pending_push"] == 0
    assert [g["accepted_floor"] for g in after["accepted_gaps"]] == ["5"]
    with Store(b.store) as store:
        assert store.list_unread("crew", "alice") == []  # the read mark survived
    assert a.sync().pull.received == 1
    assert a.bodies().count("b-local") == 1

    c = team.machine("c")
    joined = c.cli("pull", "--json")
    assert joined.returncode == 5, joined.stderr
    late = json.loads(c.cli("status", "--json").stdout)["resync_required"]["command"]
    assert c.cli(*late.split()[1:]).returncode == 0
    assert c.cli("pull").returncode == 0
    assert c.bodies() == ["b-local", "m6", "m7"]


def _inbox(machine: Machine) -> list[dict[str, str]]:
    shown = machine.cli("inbox", "crew", "bob", "--json")
    assert shown.returncode == 0, shown.stderr
    return [json.loads(line) for line in shown.stdout.splitlines()]


def _read(machine: Machine, *bodies: str) -> None:
    ids = [m["id"] for m in _inbox(machine) if m["body"] in bodies]
    assert len(ids) == len(bodies)
    marked = machine.cli("driver", "mark_read_batch", "crew", "bob", *ids)
    assert marked.returncode == 0, marked.stdout + marked.stderr


def _sync(*machines: Machine) -> None:
    for machine in machines:
        result = machine.cli("sync", "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["pull"]["read_state"]["skipped"] is None


def test_an_agents_reads_follow_it_across_machines_through_the_relay(
    live: LiveRelay, tmp_path: Path
) -> None:
    """read-state-synchronization.md end to end through the real CLI: bob reads
    three of five on A (one out of order) and sees only the other two on B;
    a read on B flows back to A; a machine that joins later starts with bob's
    read state; a retention floor above bob's frontier counts everything
    below it as read everywhere."""
    team = Team(live, tmp_path)
    a, b = team.machine("a"), team.machine("b")
    a.send("alice", "bob", *(f"m{i}" for i in range(1, 6)))
    _sync(a, b)
    _read(a, "m1", "m2", "m4")  # m4 out of order: an exact read above the frontier
    _sync(a, b)
    assert [m["body"] for m in _inbox(b)] == ["m3", "m5"]

    _read(b, "m3")
    _sync(b, a)
    assert [m["body"] for m in _inbox(a)] == ["m5"]

    c = team.machine("c")
    _sync(c)
    assert [m["body"] for m in _inbox(c)] == ["m5"]
    status = json.loads(c.cli("status", "--json").stdout)
    bob = next(m for m in status["read_state"]["members"] if m["name"] == "bob")
    assert bob["remote_frontier"] == "4" and bob["blocked"] is None

    a.send("alice", "bob", "m6", "m7", "m8")
    _sync(a, b, c)
    team.relay("retain", "--team", team.id, "--through", "7")
    _sync(a, b, c)
    for machine in (a, b, c):
        assert [m["body"] for m in _inbox(machine)] == ["m8"], machine.name


def test_run_logs_a_start_line_and_one_timestamped_line_per_cycle_that_did_work(
    live: LiveRelay, tmp_path: Path
) -> None:
    """#18: ``run`` printed no start line and no timestamps."""
    team = Team(live, tmp_path)
    a, b = team.machine("a"), team.machine("b")
    a.send("alice", "bob", "one", "two")
    a.sync()
    process = subprocess.Popen(
        [sys.executable, "-m", "syncengine", "run", "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SYNCENGINE_STORE": str(b.store)},
    )
    try:
        assert process.stdout is not None
        start, work = process.stdout.readline(), process.stdout.readline()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        # How the run learns of news (live or polling) is logged as it changes.
        rest = [x for x in process.stdout.read().splitlines() if " delivery: " not in x]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ "
    assert re.match(stamp + r"syncengine run: team crew at http://127\.0\.0\.1:\d+", start)
    assert re.match(stamp + r"cycle 1: .*pulled 2 message", work)
    assert re.match(stamp + "syncengine run: stopped", rest[-1])
    assert len(rest) == 1  # idle cycles print nothing


def test_debug_logs_of_a_sync_never_carry_the_credential_or_a_body(
    live: LiveRelay, tmp_path: Path
) -> None:
    """#18: logging at every level, and still no secret on any line."""
    team = Team(live, tmp_path)
    a, b = team.machine("a"), team.machine("b")
    a.send("alice", "bob", "a body that stays private")
    from syncengine.http.credentials import load_credential

    with Engine(a.store) as engine:
        secret = load_credential(Path(engine.connection.credential_path)).secret.reveal()
    for machine in (a, b):
        for fmt in ("text", "json"):
            result = machine.cli("-vv", "--log-format", fmt, "sync")
            assert result.returncode == 0, result.stderr
            assert "syncengine.http" in result.stderr or "syncengine.engine" in result.stderr
            assert secret not in result.stderr + result.stdout
            assert "a body that stays private" not in result.stderr
