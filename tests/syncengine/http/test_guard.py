"""The whole-attempt deadline and the stop check below httpx, on real sockets.

Issue #14: a relay that paces its *status line and headers* one byte at a
time passed every per-read timeout (the body reader's deadline never ran,
because no body had begun), and ``run`` could not stop meanwhile.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable

import httpx
import pytest

from syncengine.http.errors import TransportFailure
from syncengine.http.guard import READ_SLICE, AttemptGuard, guard_client
from tests.syncengine.http.guard_support import HOLD_S, client_for, drip_headers, raw_server
from tests.wire.http_v1 import samples


def silent(stop: threading.Event) -> Callable[[socket.socket], None]:
    """Read the request and say nothing for :data:`HOLD_S` (then hang up)."""

    def serve(conn: socket.socket) -> None:
        conn.recv(65536)
        stop.wait(HOLD_S)

    return serve


def test_headers_dripped_a_byte_at_a_time_are_cut_at_the_attempts_deadline() -> None:
    stop = threading.Event()
    with raw_server(drip_headers(stop)) as url, client_for(url, request_deadline=1.0) as client:
        started = time.monotonic()
        with pytest.raises(TransportFailure, match="whole-attempt deadline"):
            client.capabilities()
        elapsed = time.monotonic() - started
        stop.set()
    # Never before the deadline; and cut by it, not by the server: the drip
    # goes on for HOLD_S, and every per-read timeout is reset by each byte.
    # The upper bound leaves a busy machine (load 10+ on 2 cores) its seconds.
    assert 1.0 <= elapsed < HOLD_S / 3


def test_a_stop_unwinds_a_request_waiting_for_headers_within_a_slice() -> None:
    class Stopped(Exception):
        pass

    stop = threading.Event()
    asked_at: list[float] = []

    def interrupt() -> None:
        if asked_at and time.monotonic() >= asked_at[0]:
            raise Stopped

    with (
        raw_server(silent(stop)) as url,
        client_for(url, interrupt=interrupt) as client,
    ):
        asked_at.append(time.monotonic() + 0.5)
        with pytest.raises(Stopped):
            client.capabilities()  # the read timeout alone would wait 30 s
        late = time.monotonic() - asked_at[0]
        stop.set()
    # Unwound by the stop, not by an answer (the server says nothing for
    # HOLD_S) nor by the 30 s read timeout: on an idle machine within a
    # slice or two; the bound leaves a busy one its seconds.
    assert late < 50 * READ_SLICE  # 10 s


def test_a_slow_but_steady_answer_within_the_deadline_is_read_whole() -> None:
    """Each byte arrives after many empty slices; none is lost on the way."""
    body = json.dumps(samples.capabilities("7")).encode()

    def serve(conn: socket.socket) -> None:
        conn.recv(65536)
        head = (
            b"HTTP/1.1 200 OK\r\nAgmsg-Protocol-Version: 1\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        whole = head + body
        third = len(whole) // 3
        for piece in (whole[:third], whole[third : 2 * third], whole[2 * third :]):
            conn.sendall(piece)
            time.sleep(READ_SLICE * 2.5)

    with raw_server(serve) as url, client_for(url, request_deadline=30.0) as client:
        caps = client.capabilities()
    assert caps.current_seq == 7


def test_the_guard_sits_below_the_default_transport_and_every_proxy_mount() -> None:
    guard = AttemptGuard()
    plain = httpx.Client()
    proxied = httpx.Client(mounts={"http://": httpx.HTTPTransport(proxy="http://127.0.0.1:9")})
    try:
        assert guard_client(plain, guard) == 1
        assert guard_client(proxied, guard) == 2
        assert guard_client(plain, guard) == 1  # installing twice does not stack
    finally:
        plain.close()
        proxied.close()


def test_an_in_memory_transport_is_left_alone() -> None:
    client = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(204)))
    try:
        assert guard_client(client, AttemptGuard()) == 0
    finally:
        client.close()
