"""Graceful shutdown of ``syncengine relay serve`` (specs/relay.md "Operations").

SIGTERM closes the listener at once, lets a request already in flight finish
and be answered, then the process exits 0; ``--shutdown-timeout`` bounds how
long a request that never finishes can hold the exit back. The in-flight
request is a POST whose body the test holds back, so "in flight" is a fact
the test controls rather than a race it hopes to win.
"""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path

import httpx

from tests.relay.backends import Backend
from tests.relay.helpers import batch
from tests.support.live_relay import LiveRelay, database_for, provision, running_relay

_DEADLINE_S = 10.0


def _port(live: LiveRelay) -> int:
    return int(live.base_url.rsplit(":", 1)[1])


def _start_slow_post(live: LiveRelay, headers: dict[str, str], body: bytes) -> socket.socket:
    """Send a POST's headers and half its body; the relay is now waiting inside it."""
    conn = socket.create_connection(("127.0.0.1", _port(live)), timeout=_DEADLINE_S)
    lines = [
        "POST /v1/messages HTTP/1.1",
        f"Host: 127.0.0.1:{_port(live)}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body[: len(body) // 2])
    return conn


def _until_the_relay_holds_it(live: LiveRelay) -> None:
    """Wait until the relay has taken the held POST's connection, as its own
    ``/metrics`` counts it (2 open: that one and the scrape asking). A fixed
    pause raced the relay's accept on a busy machine: a connection still in
    the kernel's backlog at SIGTERM is reset, never "in flight"."""
    deadline = time.monotonic() + _DEADLINE_S * 3
    while time.monotonic() < deadline:
        text = httpx.get(live.base_url + "/metrics", timeout=_DEADLINE_S).text
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == "syncengine_relay_connections_open" and float(value) >= 2:
                return
        time.sleep(0.05)
    raise AssertionError("the relay never took the held request's connection")


def _read_response(conn: socket.socket) -> tuple[int, bytes]:
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), payload


def _wait_until_refused(port: int) -> bool:
    deadline = time.monotonic() + _DEADLINE_S
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except ConnectionRefusedError:
            return True
        time.sleep(0.05)
    return False


def test_sigterm_finishes_the_request_in_flight_refuses_new_ones_and_exits_0(
    backend: Backend, tmp_path: Path
) -> None:
    with running_relay(database_for(backend, tmp_path), "--no-access-log") as live:
        team = provision(live.db, tmp_path)
        headers = live.pair(team["team_id"])
        body = json.dumps({"messages": batch(50)}).encode()
        conn = _start_slow_post(live, headers, body)
        try:
            _until_the_relay_holds_it(live)  # it has the headers and waits for the rest
            live.process.send_signal(signal.SIGTERM)
            assert _wait_until_refused(_port(live)), "the listener stayed open after SIGTERM"
            assert live.process.poll() is None  # still draining the request in flight
            conn.sendall(body[len(body) // 2 :])
            status, payload = _read_response(conn)
        finally:
            conn.close()
        assert status == 200, payload
        acks = json.loads(payload)["acks"]
        assert [a["server_seq"] for a in acks] == [str(n) for n in range(1, 51)]
        assert live.process.wait(timeout=_DEADLINE_S) == 0


def test_sigterm_on_an_idle_relay_exits_0_at_once(backend: Backend, tmp_path: Path) -> None:
    """At once means without waiting the shutdown timeout: 60 s here, so a
    busy machine's slow exit (seconds) cannot be mistaken for it."""
    db = database_for(backend, tmp_path)
    with running_relay(db, "--no-access-log", "--shutdown-timeout", "60") as live:
        started = time.monotonic()
        live.process.send_signal(signal.SIGTERM)
        assert live.process.wait(timeout=50) == 0
        assert time.monotonic() - started < 30


def test_shutdown_timeout_bounds_a_request_that_never_finishes(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    """Backend-independent in effect; one backend suffices to time the bound."""
    db = database_for(sqlite_backend, tmp_path)
    with running_relay(db, "--no-access-log", "--shutdown-timeout", "1") as live:
        team = provision(live.db, tmp_path)
        headers = live.pair(team["team_id"])
        conn = _start_slow_post(live, headers, json.dumps({"messages": batch(5)}).encode())
        try:
            _until_the_relay_holds_it(live)
            started = time.monotonic()
            live.process.send_signal(signal.SIGTERM)
            assert live.process.wait(timeout=25) == 0
            elapsed = time.monotonic() - started
        finally:
            conn.close()
    # At least the 1 s it was given; and an exit at all proves the bound: the
    # held request never finishes, and the relay's own 30 s request-read rule
    # (the only other way out) comes later than the 25 s waited above.
    assert 0.9 < elapsed < 25


def test_shutdown_timeout_must_be_a_positive_whole_number(tmp_path: Path) -> None:
    from tests.support.live_relay import cli

    db = tmp_path / "relay.db"
    assert cli(db, "init").returncode == 0
    result = cli(db, "serve", "--port", "0", "--shutdown-timeout", "0")
    assert result.returncode == 2
    assert "listening" not in result.stdout
    assert "--shutdown-timeout" in result.stderr
