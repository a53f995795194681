"""A served relay bounds slow clients and connections per peer (#33).

Red team: 300 of 300 slow half-open connections stayed open. Now one peer
address holds at most ``--max-connections-per-peer`` connections (the excess
is closed on accept), and a connection that has not sent a whole request
within ``--request-read-timeout`` seconds is closed — whether it sent nothing,
half a header, or keeps dripping one. Each closing is said in the relay's log
(one line, no peer address) and counted in ``/metrics``. A live wait, whose
request is whole before it waits, is never cut by the read bound.

The relay runs as the process an operator starts; the bounds come from its
environment (``SYNCENGINE_RELAY_MAX_CONNECTIONS_PER_PEER``,
``SYNCENGINE_RELAY_REQUEST_READ_TIMEOUT``). Verdicts wait on what the
sockets see (closed or not), with generous ceilings, never on speed.
"""

from __future__ import annotations

import re
import select
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from relay.config import MAX_CONNECTIONS_PER_PEER_ENV, REQUEST_READ_TIMEOUT_ENV
from relay.http.connections import ConnectionGuard
from relay.limits import KEEP_ALIVE_SECONDS
from tests.support.live_relay import LiveRelay, provision, running_relay
from wire.http_v1.live import LIVE_WAIT

#: Ceiling on any wait for the relay to act (generous: a loaded machine).
PATIENCE = 60.0


def _port(relay: LiveRelay) -> int:
    return int(relay.base_url.rsplit(":", 1)[1])


def _connect(relay: LiveRelay) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", _port(relay)), timeout=PATIENCE)
    return sock


def _closed_by_relay(sock: socket.socket, *, within: float = PATIENCE) -> bool:
    """Whether the relay closed ``sock`` (EOF or reset) within ``within`` s."""
    readable, _, _ = select.select([sock], [], [], within)
    if not readable:
        return False
    try:
        return sock.recv(4096) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def _is_open_now(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    return not readable


def _raw_get(sock: socket.socket, path: str) -> bytes:
    """One HTTP/1.1 GET on an already open socket; the whole answer."""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: relay\r\n\r\n".encode())
    data = b""
    deadline = time.monotonic() + PATIENCE
    while b"\r\n\r\n" not in data and time.monotonic() < deadline:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    match = re.search(rb"(?i)content-length: *(\d+)", head)
    length = int(match.group(1)) if match else 0
    while len(body) < length and time.monotonic() < deadline:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def _stop_and_read_log(relay: LiveRelay) -> str:
    relay.process.terminate()
    _, err = relay.process.communicate(timeout=PATIENCE)
    return err


@pytest.fixture
def peers_capped(tmp_path: Path) -> Iterator[LiveRelay]:
    env = {MAX_CONNECTIONS_PER_PEER_ENV: "4", REQUEST_READ_TIMEOUT_ENV: "600"}
    with running_relay(tmp_path / "relay.db", env=env) as relay:
        yield relay


@pytest.fixture
def reads_bounded(tmp_path: Path) -> Iterator[LiveRelay]:
    env = {REQUEST_READ_TIMEOUT_ENV: "1"}
    with running_relay(tmp_path / "relay.db", "--live-max-wait", "3", env=env) as relay:
        yield relay


def test_one_peer_holds_at_most_its_connections_and_the_excess_is_closed_on_accept(
    peers_capped: LiveRelay,
) -> None:
    relay = peers_capped
    with ExitStack() as stack:
        held = [stack.enter_context(_connect(relay)) for _ in range(4)]
        # The relay accepts in order: once a probe answers, all four are admitted.
        assert b" 200 " in _raw_get(held[0], "/v1/health").split(b"\r\n", 1)[0] + b" "
        excess = [stack.enter_context(_connect(relay)) for _ in range(6)]
        assert all(_closed_by_relay(sock) for sock in excess)
        assert all(_is_open_now(sock) for sock in held)  # silent, yet within the bounds
        metrics = _raw_get(held[1], "/metrics").decode()
    assert 'syncengine_relay_connections_refused_total{reason="per_peer"} 6.0' in metrics
    assert "syncengine_relay_connections_open 4.0" in metrics
    log = _stop_and_read_log(relay)
    lines = [line for line in log.splitlines() if "--max-connections-per-peer" in line]
    assert lines, log
    assert "already holds 4 connections" in lines[0]
    assert "127.0.0.1" not in "".join(lines)  # the relay never logs client addresses
    assert "Traceback" not in log


def test_a_connection_that_sends_nothing_or_half_a_request_is_closed_at_the_read_bound(
    reads_bounded: LiveRelay,
) -> None:
    relay = reads_bounded
    with _connect(relay) as silent, _connect(relay) as half, _connect(relay) as drip:
        half.sendall(b"GET /v1/health HTTP/1.1\r\nHo")
        closed_drip = False
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:  # a header byte every 0.2 s, for ever
            try:
                drip.sendall(b"X-Slow: 1\r\n"[:1])
            except OSError:
                closed_drip = True
                break
            if _closed_by_relay(drip, within=0.2):
                closed_drip = True
                break
        assert closed_drip
        assert _closed_by_relay(silent)
        assert _closed_by_relay(half)
    metrics = httpx.get(relay.base_url + "/metrics", timeout=PATIENCE).text
    refused = re.search(
        r'syncengine_relay_connections_refused_total\{reason="request_read_timeout"\} (\d+)',
        metrics,
    )
    assert refused is not None and int(refused.group(1)) >= 3, metrics
    log = _stop_and_read_log(relay)
    assert any("--request-read-timeout" in line for line in log.splitlines()), log
    assert "Traceback" not in log


def test_a_live_wait_outlasting_the_read_bound_is_answered_not_cut(
    reads_bounded: LiveRelay, tmp_path: Path
) -> None:
    """The wait's request is whole at once; the relay holds it 3 s (its
    ``--live-max-wait``) with the read bound at 1 s, then answers."""
    relay = reads_bounded
    team = provision(relay.db, tmp_path)
    headers = relay.pair(team["team_id"])
    params = {"after": "0", "read_after": "0", "wait": "3"}
    with httpx.Client(base_url=relay.base_url, timeout=PATIENCE) as client:
        response = client.get(LIVE_WAIT, params=params, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["woken"] is False  # it ran its course
    metrics = httpx.get(relay.base_url + "/metrics", timeout=PATIENCE).text
    assert 'syncengine_relay_connections_refused_total{reason="request_read_timeout"} 0.0' in (
        metrics
    )


def test_a_kept_alive_connection_gets_a_fresh_read_bound_for_each_request(
    reads_bounded: LiveRelay,
) -> None:
    """Idle between requests is uvicorn's keep-alive rule, not this one; each
    request is timed from its own first byte."""
    relay = reads_bounded
    with _connect(relay) as sock:
        for _ in range(3):
            assert b" 200 " in _raw_get(sock, "/v1/health")
        assert _is_open_now(sock)


def test_an_idle_kept_alive_connection_outlasts_the_clients_own_idle_expiry(
    tmp_path: Path,
) -> None:
    """The relay keeps an idle connection longer than httpx's 5 s expiry, so
    it is the client that retires it: a relay closing at the same moment can
    drop a request already on its way (specs/relay.md "Connection bounds").
    Only a lower bound is checked — a loaded relay can close later, never
    earlier."""
    idle = 7.0
    assert KEEP_ALIVE_SECONDS > idle > 5.0
    with running_relay(tmp_path / "relay.db") as relay, _connect(relay) as sock:
        assert b" 200 " in _raw_get(sock, "/v1/health")
        assert not _closed_by_relay(sock, within=idle)
        assert b" 200 " in _raw_get(sock, "/v1/health")


def test_the_guard_counts_per_peer_and_releases_on_close() -> None:
    guard = ConnectionGuard(max_per_peer=2, read_timeout=5)
    assert guard.admit("a") and guard.admit("a") and guard.admit("b")
    assert not guard.admit("a")
    assert (guard.open, guard.held("a"), guard.refused["per_peer"]) == (3, 2, 1)
    guard.release("a")
    assert guard.admit("a")
    guard.timed_out()
    assert guard.refused["request_read_timeout"] == 1


def test_the_per_peer_option_wins_over_its_environment_variable(tmp_path: Path) -> None:
    env = {MAX_CONNECTIONS_PER_PEER_ENV: "100", REQUEST_READ_TIMEOUT_ENV: "600"}
    with (
        running_relay(tmp_path / "relay.db", "--max-connections-per-peer", "2", env=env) as relay,
        ExitStack() as stack,
    ):
        held = [stack.enter_context(_connect(relay)) for _ in range(2)]
        assert b" 200 " in _raw_get(held[0], "/v1/health")
        assert _closed_by_relay(stack.enter_context(_connect(relay)))
        assert all(_is_open_now(sock) for sock in held)


def test_the_read_timeout_option_wins_over_its_environment_variable(tmp_path: Path) -> None:
    env = {REQUEST_READ_TIMEOUT_ENV: "600"}
    with (
        running_relay(tmp_path / "relay.db", "--request-read-timeout", "1", env=env) as relay,
        _connect(relay) as silent,
    ):
        assert _closed_by_relay(silent)  # at 1 s; the variable's 600 s is past PATIENCE
