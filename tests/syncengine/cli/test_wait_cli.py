"""``syncengine wait``: it returns the oldest unread message (at once, or as
soon as another process commits one), times out with exit 3 and silent
stdout, marks exactly what it printed only when asked, refuses bad input
with the usual exit codes, holds no lock and burns no CPU while idle."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from syncengine.cli import COMMANDS
from syncengine.cli.wait import wait_for_unread
from syncengine.local_store import Store
from tests.support.cli import syncengine

# Generous: a loaded 2-core CI machine may take seconds to start Python.
PROCESS_BOUND = 60.0


def run(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    return syncengine(*args, store=store, timeout=PROCESS_BOUND)


def start_wait(*args: str, store: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "syncengine", "wait", "--team", "crew", "--agent", "bob", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SYNCENGINE_STORE": str(store)},
    )


def wait_until_polling(proc: subprocess.Popen[str], store: Path) -> None:
    """Block until ``proc`` has the store open (it opens it just before its
    first query), then a little longer, so it is past start-up and waiting."""
    deadline = time.monotonic() + PROCESS_BOUND
    fds = Path(f"/proc/{proc.pid}/fd")
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            targets = {os.readlink(fd) for fd in fds.iterdir()}
        except OSError:
            targets = set()
        if str(store) in targets:
            time.sleep(0.5)
            return
        time.sleep(0.05)
    raise AssertionError("wait never opened the store")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store with team ``crew`` = {alice, bob} and no messages."""
    path = tmp_path / "store.db"
    with Store(path) as opened:
        opened.init()
        opened.create_team("crew", ["alice", "bob"])
    return path


def send(store: Path, body: str, sender: str = "alice", recipient: str = "bob") -> str:
    with Store(store) as opened:
        return opened.send("crew", sender, recipient, body).id


def unread(store: Path, agent: str = "bob") -> list[str]:
    with Store(store) as opened:
        return [m.body for m in opened.list_unread("crew", agent)]


def test_wait_is_registered_in_its_own_module() -> None:
    assert COMMANDS["wait"] == "syncengine.cli.wait"


def test_an_existing_unread_message_is_printed_at_once_like_inbox(store: Path) -> None:
    send(store, "first")
    send(store, "second")
    result = run("wait", "--team", "crew", "--agent", "bob", store=store)
    assert result.returncode == 0, result.stderr
    line = run("inbox", "crew", "bob", "--limit", "1", store=store).stdout
    assert result.stdout == line
    assert result.stdout.endswith("  alice -> bob: first\n")


def test_json_output_is_one_message_sent_record_like_inbox_json(store: Path) -> None:
    message_id = send(store, "hello")
    result = run("wait", "--team", "crew", "--agent", "bob", "--json", store=store)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1
    record = json.loads(result.stdout)
    assert list(record) == ["type", "id", "team", "from", "to", "body", "at"]
    assert record["type"] == "message_sent" and record["id"] == message_id
    assert (record["team"], record["from"], record["to"], record["body"]) == (
        "crew",
        "alice",
        "bob",
        "hello",
    )
    inbox = run("inbox", "crew", "bob", "--json", store=store).stdout
    assert json.loads(inbox) == record


def test_a_message_sent_by_another_process_while_waiting_is_returned(store: Path) -> None:
    """Also proves the waiter holds no write lock: ``send`` (another
    process, a 5 s busy timeout) commits while it waits."""
    proc = start_wait("--json", "--timeout", str(PROCESS_BOUND), store=store)
    try:
        wait_until_polling(proc, store)
        sent = run("send", "crew", "alice", "bob", "arrived", "--json", store=store)
        assert sent.returncode == 0, sent.stderr
        out, err = proc.communicate(timeout=PROCESS_BOUND)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert json.loads(out) == json.loads(sent.stdout)


def test_a_commit_after_the_first_empty_query_is_found_through_the_change_counter(
    store: Path,
) -> None:
    """In-process and deterministic: the first query finds nothing, then a
    second connection commits during the waiter's sleep."""
    naps: list[float] = []

    def nap(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 3:
            send(store, "late")

    with Store(store) as waiter:
        found = wait_for_unread(waiter, "crew", "bob", 0, sleep=nap)
    assert found is not None and found.body == "late"
    assert len(naps) == 3


def test_a_commit_for_another_agent_does_not_end_the_wait(store: Path) -> None:
    clock = [0.0]

    def nap(seconds: float) -> None:
        clock[0] += seconds
        send(store, "for alice", sender="bob", recipient="alice")

    with Store(store) as waiter:
        found = wait_for_unread(waiter, "crew", "bob", 1.0, sleep=nap, clock=lambda: clock[0])
    assert found is None
    assert clock[0] >= 1.0


def test_timeout_exits_3_with_nothing_on_stdout(store: Path) -> None:
    started = time.monotonic()
    result = run("wait", "--team", "crew", "--agent", "bob", "--timeout", "1", store=store)
    elapsed = time.monotonic() - started
    assert result.returncode == 3
    assert result.stdout == ""
    assert result.stderr.count("\n") <= 1 and "Traceback" not in result.stderr
    assert elapsed >= 1.0


def test_without_mark_read_nothing_is_marked_read(store: Path) -> None:
    send(store, "first")
    send(store, "second")
    assert run("wait", "--team", "crew", "--agent", "bob", store=store).returncode == 0
    assert unread(store) == ["first", "second"]


def test_mark_read_marks_exactly_the_printed_message(store: Path) -> None:
    send(store, "first")
    send(store, "second")
    result = run("wait", "--team", "crew", "--agent", "bob", "--mark-read", store=store)
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(": first\n")
    assert unread(store) == ["second"]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "1e9", "86401", "abc", ""])
def test_a_timeout_that_is_not_a_finite_number_within_a_day_is_a_usage_error(
    store: Path, value: str
) -> None:
    result = run("wait", "--team", "crew", "--agent", "bob", f"--timeout={value}", store=store)
    assert result.returncode == 2
    assert "timeout must be" in result.stderr
    assert result.stdout == ""


def test_an_unknown_team_is_the_stores_error_with_exit_13(store: Path) -> None:
    result = run("wait", "--team", "nope", "--agent", "bob", "--timeout", "5", store=store)
    assert result.returncode == 13
    assert "no team named 'nope'" in result.stderr


def test_an_agent_missing_from_the_roster_is_the_stores_error_with_exit_13(store: Path) -> None:
    result = run("wait", "--team", "crew", "--agent", "zed", "--timeout", "5", store=store)
    assert result.returncode == 13
    assert "has no member 'zed'" in result.stderr


def test_an_invalid_agent_name_is_refused_with_exit_13(store: Path) -> None:
    result = run("wait", "--team", "crew", "--agent", "a b", "--timeout", "5", store=store)
    assert result.returncode == 13
    assert result.stderr.startswith("syncengine wait: agent:")


def test_a_team_seen_only_on_messages_can_be_waited_for(tmp_path: Path) -> None:
    """Hosts never register names with their storage driver (driver-interface §2)."""
    path = tmp_path / "store.db"
    with Store(path) as opened:
        opened.send("host-team", "a1", "a2", "interned")
    result = run("wait", "--team", "host-team", "--agent", "a2", store=path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(": interned\n")


def test_a_missing_store_is_an_error_and_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    result = run("wait", "--team", "crew", "--agent", "bob", "--timeout", "5", store=path)
    assert result.returncode == 13
    assert "no store at" in result.stderr
    assert not path.exists()


def test_an_idle_wait_costs_little_cpu(store: Path) -> None:
    """A 3 s wait stays far below a busy loop's 3 s. Start-up is measured on
    the same machine, at the same moment, by a wait that gives up at once,
    and taken away: on a busy machine (load 10+) the interpreter's start
    alone costs more CPU than on an idle one, and is not what is judged."""

    def cpu_of(timeout: str) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = run("wait", "--team", "crew", "--agent", "bob", "--timeout", timeout, store=store)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert result.returncode == 3
        return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    start_up = min(cpu_of("0.001"), cpu_of("0.001"))  # (0 would wait for ever)
    waited = cpu_of("3")
    assert waited - start_up < 0.5, (waited, start_up)


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"]
)
def test_a_stop_signal_ends_the_wait_quietly(store: Path, signum: int, code: int) -> None:
    proc = start_wait(store=store)
    try:
        wait_until_polling(proc, store)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=PROCESS_BOUND)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code
    assert out == "" and err == ""


def test_invoking_wait_imports_only_its_own_command_module(store: Path) -> None:
    send(store, "hello")
    code = (
        "import sys\n"
        "from syncengine.cli import main\n"
        f"argv = ['wait', '--team', 'crew', '--agent', 'bob', '--store', {str(store)!r}]\n"
        "assert main(argv) == 0\n"
        "print(sorted(m for m in sys.modules if m.startswith('syncengine.cli.')))\n"
        "print('httpx' in sys.modules, 'syncengine.engine' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=True,
    )
    lines = result.stdout.strip().splitlines()
    assert lines[-2] == "['syncengine.cli.logsetup', 'syncengine.cli.wait']"
    assert lines[-1] == "False False"
