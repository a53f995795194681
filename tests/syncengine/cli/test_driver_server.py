"""The driver server behind the sourced bash file (specs/store.md §10).

What it must never change: any call's stdout, stderr and exit code. What it
must never do: answer someone without the client token, send a request to
a process without the server token, run a handed-over request twice, or
outstay its store. Real processes and sockets throughout, loopback only.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncengine.cli.driver.command import driver_file
from syncengine.cli.driver.rendezvous import SERVED_OPS, Rendezvous, read_rendezvous
from syncengine.local_store import Store
from tests.syncengine.driver.contract import stop_driver_servers

DRIVER = driver_file()


def bash(script: str, store: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh bash that sourced the driver file, server on."""
    full = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "SYNCENGINE_STORE": str(store),
        "SYNCENGINE_DRIVER_SERVER": "1",
        "SYNCENGINE_DRIVER_SERVER_IDLE": "10",
        **env,
    }
    return subprocess.run(
        ["bash", "--norc", "-c", f'source "{DRIVER}"\n{script}'],
        capture_output=True,
        text=True,
        env=full,
        timeout=60,
    )


def wait_for(predicate: object, seconds: float = 8.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (our own child, not yet reaped) counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "state" / "store.db"
    yield path
    stop_driver_servers(tmp_path)


def started(store: Path) -> Rendezvous:
    """A store with one message and a published server."""
    done = bash("storage_send crew alice bob first", store)
    assert done.returncode == 0, done.stderr
    assert wait_for(lambda: read_rendezvous(f"{store}.serve") is not None)
    found = read_rendezvous(f"{store}.serve")
    assert found is not None
    return found


def messages(store: Path) -> list[str]:
    with Store(store) as db:
        return [m.body for m in db.history("crew")]


def test_after_the_first_call_the_server_answers_without_the_command(store: Path) -> None:
    started(store)
    # No executable at all: only the server can have answered.
    done = bash(
        "storage_send crew alice bob second && storage_list_unread crew bob",
        store,
        SYNCENGINE_BIN="/nonexistent/syncengine",
    )
    assert done.returncode == 0, done.stderr
    assert [line.count('"body"') for line in done.stdout.splitlines()[1:]] == [1, 1]
    assert messages(store) == ["first", "second"]


def test_the_rendezvous_file_is_private_and_names_a_loopback_listener(store: Path) -> None:
    found = started(store)
    mode = stat.S_IMODE(os.stat(f"{store}.serve").st_mode)
    assert mode == 0o600
    assert re.fullmatch(r"[0-9a-f]{32}", found.client_token)
    assert re.fullmatch(r"[0-9a-f]{32}", found.server_token)
    assert found.client_token != found.server_token
    with socket.create_connection(("127.0.0.1", found.port), timeout=5):
        pass
    assert alive(found.pid)


#: Read-only calls, good and bad: each must print exactly what its process does.
SAME_ANSWERS = [
    "storage_list_unread crew bob",
    "storage_list_unread crew 'bad name!'",
    "storage_list_unread '' bob",
    "storage_list_unread crew",
    "storage_read_cursor_get crew bob",
    "storage_watch_tip crew:bob",
    "storage_watch_after 0 crew:bob",
    "storage_history crew",
    "storage_history crew 1",
    "storage_history",
    "storage_send crew alice",
    "storage_mark_read_batch",
    "storage_read_cursor_consume crew bob not-a-cursor",
]


@pytest.mark.parametrize("call", SAME_ANSWERS)
def test_a_served_call_prints_and_exits_exactly_as_its_process(store: Path, call: str) -> None:
    started(store)
    served = bash(call, store, SYNCENGINE_BIN="/nonexistent/syncengine")
    direct = bash(call, store, SYNCENGINE_DRIVER_SERVER="0")
    assert (served.returncode, served.stdout, served.stderr) == (
        direct.returncode,
        direct.stdout,
        direct.stderr,
    )


def test_a_large_answer_is_copied_whole(store: Path) -> None:
    started(store)
    with Store(store) as db:
        for index in range(40):
            db.send("crew", "alice", "bob", f"message {index} " + "x" * 300)
    served = bash("storage_list_unread crew bob", store, SYNCENGINE_BIN="/nonexistent/x")
    direct = bash("storage_list_unread crew bob", store, SYNCENGINE_DRIVER_SERVER="0")
    assert len(served.stdout) > 4096
    assert (served.returncode, served.stdout) == (direct.returncode, direct.stdout)


def test_bodies_with_any_text_arrive_unchanged(store: Path) -> None:
    started(store)
    body = "line\nnext\ttab \\ 'q' \"dq\" $(echo no) ✓ 𝄞\n\n"
    done = bash(
        'storage_send crew alice bob "$BODY"', store, BODY=body, SYNCENGINE_BIN="/nonexistent/x"
    )
    assert done.returncode == 0, done.stderr
    assert messages(store)[-1] == body


def test_a_client_without_the_token_gets_no_answer_and_changes_nothing(store: Path) -> None:
    found = started(store)
    with socket.create_connection(("127.0.0.1", found.port), timeout=60) as conn:
        conn.sendall(secrets.token_hex(16).encode() + b"\n")
        conn.sendall(b"5\0send\0intruder\0crew\0mallory\0bob\0")
        # The server closes without answering. Whether the request bytes were
        # still unread when it closed (a reset) or not (an orderly end of
        # stream) is the scheduler's choice on a busy machine; both are "no
        # answer", and neither carries a byte of one.
        try:
            answer = conn.recv(100)
        except ConnectionResetError:
            answer = b""
        assert answer == b""
    assert messages(store) == ["first"]
    assert alive(found.pid), "one bad client does not stop the server"


class Impostor:
    """A listener on loopback that records what it is sent. With the real
    server token it completes the handshake, then drops the connection."""

    def __init__(self, server_token: str) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.server_token = server_token
        self.received = b""
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.settimeout(5)
            self.received += conn.recv(33)
            conn.sendall(self.server_token.encode() + b"\n")
            try:
                while chunk := conn.recv(65536):
                    self.received += chunk
                    if self.received.count(b"\0") >= 5:
                        break
            except TimeoutError:
                pass


def plant(store: Path, impostor: Impostor, client: str, server: str) -> None:
    store.parent.mkdir(parents=True, exist_ok=True)
    path = Path(f"{store}.serve")
    path.write_text(Rendezvous(impostor.port, client, server, os.getpid()).line())
    path.chmod(0o600)


def test_a_listener_without_the_server_token_never_receives_the_request(store: Path) -> None:
    with Store(store) as db:
        db.send("crew", "alice", "bob", "first")
    client = secrets.token_hex(16)
    impostor = Impostor(server_token=secrets.token_hex(16))
    plant(store, impostor, client, secrets.token_hex(16))
    done = bash("storage_send crew alice bob 'secret body'", store)
    impostor.thread.join(10)
    assert done.returncode == 0, done.stderr  # run as a process instead
    assert impostor.received == client.encode() + b"\n"
    assert b"secret" not in impostor.received
    assert messages(store) == ["first", "secret body"]


def lost_after_handover(
    store: Path, script: str
) -> tuple[subprocess.CompletedProcess[str], Impostor]:
    """``script`` against a listener that completes the handshake, takes the
    request and drops the connection (a server killed mid-call)."""
    with Store(store) as db:
        db.send("crew", "alice", "bob", "first")
    client, server = secrets.token_hex(16), secrets.token_hex(16)
    impostor = Impostor(server_token=server)
    plant(store, impostor, client, server)
    done = bash(script, store)
    impostor.thread.join(10)
    return done, impostor


def test_a_request_lost_after_the_handover_is_not_run_again(store: Path) -> None:
    done, impostor = lost_after_handover(store, "storage_send crew alice bob 'once at most'")
    assert done.returncode == 13
    assert done.stdout == ""
    assert "may or may not have taken effect" in done.stderr
    assert b"once at most" in impostor.received
    assert messages(store) == ["first"], "the process path must not repeat it"


def test_a_control_call_lost_after_the_handover_ends_with_its_status_line(store: Path) -> None:
    done, _ = lost_after_handover(store, "storage_mark_read_batch crew bob")
    assert done.returncode == 13
    assert done.stdout.splitlines()[-1] == "runtime_error"


def test_a_stale_rendezvous_falls_back_and_is_replaced(store: Path) -> None:
    found = started(store)
    os.kill(found.pid, 9)  # no clean-up: the file stays, the port is closed
    assert wait_for(lambda: not alive(found.pid))
    done = bash("storage_send crew alice bob second", store)
    assert done.returncode == 0, done.stderr
    assert wait_for(lambda: (read_rendezvous(f"{store}.serve") or found).pid != found.pid)
    assert messages(store) == ["first", "second"]


def test_an_idle_server_exits_and_withdraws_its_rendezvous(store: Path) -> None:
    done = bash("storage_send crew alice bob first", store, SYNCENGINE_DRIVER_SERVER_IDLE="1")
    assert done.returncode == 0
    assert wait_for(lambda: read_rendezvous(f"{store}.serve") is not None)
    found = read_rendezvous(f"{store}.serve")
    assert found is not None
    assert wait_for(lambda: not Path(f"{store}.serve").exists() and not alive(found.pid))


def test_a_server_whose_store_is_removed_exits(store: Path) -> None:
    found = started(store)
    store.unlink()
    assert wait_for(lambda: not alive(found.pid))


@pytest.mark.parametrize(
    "env", [{"SYNCENGINE_DRIVER_SERVER": "0"}, {"SYNCENGINE_CRASH_AT": "no.such.point"}]
)
def test_no_server_starts_when_turned_off_or_under_a_crash_point(
    store: Path, env: dict[str, str]
) -> None:
    done = bash("storage_send crew alice bob one; storage_send crew alice bob two", store, **env)
    assert done.returncode == 0, done.stderr
    time.sleep(1.0)
    assert not Path(f"{store}.serve").exists()


def test_two_servers_for_one_rendezvous_leave_one_running(store: Path) -> None:
    found = started(store)
    second = subprocess.run(
        [
            sys.executable,
            "-m",
            "syncengine.cli.driver.server",
            "--store",
            str(store),
            "--rendezvous",
            f"{store}.serve",
        ],
        timeout=30,
    )
    assert second.returncode == 0
    assert read_rendezvous(f"{store}.serve") == found
    assert alive(found.pid)


def test_the_file_serves_exactly_the_servers_ops() -> None:
    text = Path(DRIVER).read_text()
    in_file = set(re.findall(r"storage__syncengine_call (?:record|control) (\w+)", text))
    assert in_file == SERVED_OPS


def test_a_host_shell_under_set_euo_pipefail_is_served_and_falls_back(store: Path) -> None:
    """The "not served" answer never stops a host running with ``set -e``:
    the first call falls back to a process, the later ones are served."""
    script = (
        "set -euo pipefail\n"
        "storage_send crew alice bob one >/dev/null\n"
        f'for _ in $(seq 100); do [ -e "{store}.serve" ] && break; sleep 0.05; done\n'
        "storage_send crew alice bob two >/dev/null\n"
        "storage_list_unread crew bob | wc -l\n"
        "echo survived"
    )
    done = bash(script, store)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "survived"]
    assert messages(store) == ["one", "two"]


def test_two_shells_calling_at_once_lose_and_repeat_nothing(store: Path) -> None:
    started(store)
    script = (
        'loop() { for i in $(seq 40); do storage_send crew "$1" bob "$1 $i" >/dev/null'
        " || echo FAIL; done; }\n"
        "loop alice & loop carol & wait\n"
    )
    done = bash(script, store, SYNCENGINE_BIN="/nonexistent/x")
    assert done.returncode == 0 and "FAIL" not in done.stdout, done.stderr
    sent = messages(store)
    assert len(sent) == 81 and len(set(sent)) == 81
    for sender in ("alice", "carol"):
        assert [b for b in sent if b.startswith(sender)] == [f"{sender} {i}" for i in range(1, 41)]


def test_a_body_of_millions_of_characters_goes_through_a_process(store: Path) -> None:
    """Over 4,000,000 characters the file does not hand the body over: with
    no executable to run, the call fails as a process would (missing_deps)."""
    started(store)
    done = bash(
        "body=$(head -c 4000001 /dev/zero | tr '\\0' x)\nstorage_send crew alice bob \"$body\"",
        store,
        SYNCENGINE_BIN="/nonexistent/x",
    )
    assert done.returncode == 10, done.stderr
    assert messages(store) == ["first"]
