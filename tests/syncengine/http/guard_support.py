"""Hostile servers and the clients the guard tests point at them: raw sockets that drip
headers or never answer."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from syncengine.http import ClientConfig, RelayBinding, RelayClient, RetryPolicy
from tests.syncengine.http.helpers import credential
from tests.wire.http_v1 import samples


@contextmanager
def raw_server(serve: Callable[[socket.socket], None]) -> Iterator[str]:
    """A loopback TCP server that runs ``serve`` on each accepted connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    done = threading.Event()

    def loop() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn, suppress(OSError):
                serve(conn)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        thread.join(5)
        listener.close()


#: How long the hostile servers below keep it up (then hang up): far past
#: every bound the tests assert, so a client without the rule fails the test
#: on the bound instead of hanging it, however slowly a busy machine runs it.
HOLD_S = 60.0


def drip_headers(stop: threading.Event) -> Callable[[socket.socket], None]:
    """Answer with a status line, then one header byte every 50 ms (for
    :data:`HOLD_S`, or until the test stops it)."""

    def serve(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        until = time.monotonic() + HOLD_S
        while not stop.is_set() and time.monotonic() < until:
            conn.sendall(b"X")
            time.sleep(0.05)

    return serve


def client_for(url: str, **kwargs: object) -> RelayClient:
    interrupt = kwargs.pop("interrupt", None)
    return RelayClient(
        url,
        binding=RelayBinding(samples.SERVER, samples.TEAM),
        credential=credential(),
        config=ClientConfig(retry=RetryPolicy(max_attempts=1), **kwargs),  # type: ignore[arg-type]
        interrupt=interrupt,  # type: ignore[arg-type]
    )
