"""Serving the relay with uvicorn on a socket we bind ourselves.

Binding first lets ``--port 0`` pick an ephemeral port and report the real
one (tests and benchmarks read the ``listening`` line) before any request is
accepted, and lets the ``/metrics`` default follow the address actually
bound: on by default only when that is a loopback address (specs/relay.md
"Operations"). Access logs are the relay's own records (relay/logformat.py);
uvicorn's access log is off because it would print query strings and client
addresses in a format we do not control.

Shutdown: SIGTERM or SIGINT closes the listening socket at once (new
connections are refused), lets in-flight requests finish for at most
``shutdown_timeout`` seconds, then returns, so ``relay serve`` exits 0.
uvicorn re-raises the signal it caught once it has finished; the handler
installed here receives that second delivery instead of the default action
(which would kill the process with the signal after a clean drain).

The live wait (relay/http/live.py) is on unless ``--no-live``: SIGTERM first
answers every open long poll (``woken: false``) — uvicorn's own signal
handler is extended for that, since uvicorn replaces ours while it serves —
so a drain is never held up by waits that would otherwise run their course.

``relay serve --workers N`` runs the same server in N forked processes on
one socket bound here (relay/workers.py): :func:`listen` and
:func:`build_server` are the two halves that the supervisor and each worker
call, and the server reports to its supervisor once it accepts.

TLS is uvicorn's own (``ssl_certfile``/``ssl_keyfile``); the certificate and
key are loaded before the ``listening`` line, so a bad file fails startup
with an operator error. A key protected by a passphrase is not offered: the
passphrase would have to come from argv or the environment.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import json
import signal
import socket
import ssl
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TextIO

import h11
import uvicorn

from relay.config import (
    DEFAULT_SHUTDOWN_TIMEOUT_S,
    max_connections_per_peer,
    request_read_timeout,
)
from relay.errors import OperatorError
from relay.http.app import ProtocolHeaders, create_app
from relay.http.connections import ConnectionGuard
from relay.http.live import LiveOptions
from relay.http.metrics_group import PUBLISH_INTERVAL_SECONDS, MetricsGroup
from relay.limits import KEEP_ALIVE_SECONDS
from relay.logformat import LogFormat, configure_logging
from relay.storage.base import RelayStore

__all__ = [
    "Listener",
    "ServeOptions",
    "build_server",
    "is_loopback",
    "listen",
    "listening_line",
    "metrics_enabled",
    "serve",
]


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """Everything ``relay serve`` decides about the listener, as the CLI parsed it."""

    host: str = "127.0.0.1"
    port: int = 8787
    access_log: bool = True
    log_format: LogFormat = "json"
    #: ``True``/``False`` from ``--metrics``/``--no-metrics``; ``None``: loopback only.
    metrics: bool | None = None
    shutdown_timeout: int = DEFAULT_SHUTDOWN_TIMEOUT_S
    tls_certfile: Path | None = None
    tls_keyfile: Path | None = None
    #: The live wait's bounds; ``None`` (``--no-live``) turns the extension off.
    live: LiveOptions | None = LiveOptions()  # noqa: RUF009 - frozen, never mutated
    #: Connections one peer address may hold at once (relay/http/connections.py).
    max_connections_per_peer: int = field(default_factory=max_connections_per_peer)
    #: Seconds a client has to send a whole request (headers and body).
    request_read_timeout: float = field(default_factory=request_read_timeout)


def is_loopback(address: str) -> bool:
    """Whether a bound address is loopback (127/8, ::1, or ::ffff:127.x.y.z)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


def metrics_enabled(flag: bool | None, bound_address: str) -> bool:
    """The operator's explicit choice, else on exactly when bound to loopback."""
    return is_loopback(bound_address) if flag is None else flag


#: uvicorn's default listen backlog.
_BACKLOG = 2048


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, or an :class:`OperatorError` naming the address
    and the cause in one line (``relay serve`` exits 2, never a traceback)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted sockets inherit TCP_NODELAY; without it the separate header and
        # body writes of a response wait on the peer's delayed ACK (~40 ms).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        # Listen before the ``listening`` line: a client that reads it and connects
        # at once is queued in the backlog rather than refused while uvicorn starts.
        sock.listen(_BACKLOG)
    except (OSError, OverflowError) as exc:
        sock.close()
        raise _bind_error(host, port, exc) from None
    return sock


def _bind_error(host: str, port: int, exc: OSError | OverflowError) -> OperatorError:
    """Why ``host``:``port`` cannot be listened on, and what to do instead."""
    where = f"cannot listen on {_address(host, port)}"
    if isinstance(exc, OverflowError):
        return OperatorError(f"{where}: the port must be 0-65535", "pass --port 0-65535")
    if isinstance(exc, socket.gaierror):
        return OperatorError(
            f"{where}: the host name does not resolve ({exc.strerror})",
            "pass an address of this machine as --host (127.0.0.1, ::1, or 0.0.0.0 for all)",
        )
    if exc.errno == errno.EADDRINUSE:
        return OperatorError(
            f"{where}: the address is already in use",
            "stop the process listening there, or pick another --port (0 picks a free one)",
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return OperatorError(
            f"{where}: {host} is not an address of this machine",
            "pass an address of this machine as --host (127.0.0.1, ::1, or 0.0.0.0 for all)",
        )
    if exc.errno == errno.EACCES:
        return OperatorError(
            f"{where}: permission denied",
            "ports below 1024 need privileges: pick a port from 1024 up, or grant "
            "CAP_NET_BIND_SERVICE",
        )
    cause = exc.strerror or type(exc).__name__
    return OperatorError(f"{where}: {cause}", "check --host and --port")


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _tls_files(options: ServeOptions) -> tuple[str | None, str | None]:
    if (options.tls_certfile is None) != (options.tls_keyfile is None):
        raise OperatorError(
            "--tls-certfile and --tls-keyfile go together",
            "pass both (the certificate chain and its unencrypted private key), or neither",
        )
    if options.tls_certfile is None or options.tls_keyfile is None:
        return None, None
    return str(options.tls_certfile), str(options.tls_keyfile)


def _guarded_protocol(guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with the relay's connection rules
    (relay/http/connections.py) applied at the transport: a peer over its
    connection count is closed on accept, and a connection whose request is
    not whole ``guard.read_timeout`` seconds after it connected (or after the
    first byte of its next request) is closed. uvicorn has a keep-alive
    timeout but none for a request being received; h11 is the parser
    uvicorn picks without httptools, and the one pinned here."""
    # lazy: an optional extra (uvicorn)
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        _peer: str | None = None
        _read_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            peername = transport.get_extra_info("peername")
            peer = str(peername[0]) if isinstance(peername, tuple) and peername else "unknown"
            if not guard.admit(peer):
                transport.abort()  # nothing was read; uvicorn never sees it
                return
            self._peer = peer
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
                if self._read_timer is None and self.conn.our_state in (h11.IDLE, h11.DONE):
                    self._arm()  # the first byte of a request on a kept-alive connection
            else:
                self._disarm()  # the request is whole (or the connection is closing)

        def on_response_complete(self) -> None:
            self._disarm()  # an early answer (413, 4xx before the body) ends the wait too
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._peer is None:
                return  # refused on accept: uvicorn never counted it
            self._disarm()
            guard.release(self._peer)
            self._peer = None
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._read_timer = self.loop.call_later(guard.read_timeout, self._read_timed_out)

        def _disarm(self) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
                self._read_timer = None

        def _read_timed_out(self) -> None:
            self._read_timer = None
            if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
                return
            guard.timed_out()
            self.transport.abort()

    return GuardedH11Protocol


class _RelayServer(uvicorn.Server):
    """uvicorn's server whose exit signal also releases the open live waits.

    In a worker group it also tells the supervisor once it accepts
    connections (``on_started``) and keeps the group's metrics fresh
    (``metrics_group``, published about once a second from the loop).
    """

    def __init__(
        self,
        config: uvicorn.Config,
        app: ProtocolHeaders,
        *,
        on_started: Callable[[], None] | None = None,
        metrics_group: MetricsGroup | None = None,
    ) -> None:
        super().__init__(config)
        self._relay_app = app
        self._on_started = on_started
        self._metrics_group = metrics_group
        self._publish_every = max(1, round(PUBLISH_INTERVAL_SECONDS / _TICK_SECONDS))

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._relay_app.live is not None:
            self._relay_app.live.shutdown_threadsafe()
        super().handle_exit(sig, frame)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self._on_started is not None:
            self._on_started()

    async def on_tick(self, counter: int) -> bool:
        if self._metrics_group is not None and counter % self._publish_every == 0:
            self._metrics_group.refresh()
        return await super().on_tick(counter)


#: uvicorn's main loop ticks every 0.1 s (``Server.main_loop``).
_TICK_SECONDS = 0.1


@dataclass(frozen=True, slots=True)
class Listener:
    """The bound socket and what it decides: the port and the metrics default."""

    sock: socket.socket
    port: int
    metrics: bool
    tls: bool


def listen(options: ServeOptions) -> Listener:
    """Check the TLS options, bind and listen: everything before a process serves."""
    certfile, _ = _tls_files(options)
    sock = _bind(options.host, options.port)
    bound_address, bound_port = sock.getsockname()[:2]
    return Listener(
        sock, int(bound_port), metrics_enabled(options.metrics, bound_address), certfile is not None
    )


def listening_line(
    options: ServeOptions, listener: Listener, server_instance_id: str, **extra: object
) -> str:
    """The one JSON ``listening`` line tests, benchmarks and operators read."""
    document: dict[str, object] = {
        "event": "listening",
        "host": options.host,
        "port": listener.port,
        "server_instance_id": server_instance_id,
        "tls": listener.tls,
        "metrics": listener.metrics,
        "live": options.live is not None,
        **extra,
    }
    return json.dumps(document) + "\n"


def build_server(
    store: RelayStore,
    options: ServeOptions,
    listener: Listener,
    *,
    on_started: Callable[[], None] | None = None,
    metrics_group: MetricsGroup | None = None,
) -> _RelayServer:
    """The app and the uvicorn server of one process, its TLS files loaded."""
    certfile, keyfile = _tls_files(options)
    guard = ConnectionGuard(
        max_per_peer=options.max_connections_per_peer,
        read_timeout=options.request_read_timeout,
    )
    app = create_app(
        store,
        metrics=listener.metrics,
        live=options.live,
        connections=guard,
        metrics_group=metrics_group,
    )
    config = uvicorn.Config(
        app,
        http=_guarded_protocol(guard),
        log_level="warning",
        log_config=None,  # configure_logging owns every logger's format
        access_log=False,
        server_header=False,
        date_header=True,
        timeout_graceful_shutdown=options.shutdown_timeout,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        # The relay never reads the client address or scheme, so no
        # X-Forwarded-* header may rewrite them (specs/relay.md "Operations").
        proxy_headers=False,
        ssl_certfile=certfile,
        ssl_keyfile=keyfile,
    )
    try:
        config.load()
    except (OSError, ssl.SSLError) as exc:
        raise OperatorError(
            f"cannot load the TLS certificate or key ({type(exc).__name__})",
            "check that --tls-certfile is a PEM certificate chain and --tls-keyfile its "
            "unencrypted PEM private key, both readable by the relay",
        ) from None
    group = metrics_group if listener.metrics else None
    server = _RelayServer(config, app, on_started=on_started, metrics_group=group)
    for signum in (signal.SIGTERM, signal.SIGINT):
        # uvicorn re-raises the signal after its drain; this handler takes it.
        signal.signal(signum, server.handle_exit)
    return server


def serve(store: RelayStore, options: ServeOptions, *, announce: TextIO = sys.stdout) -> None:
    """Bind, announce, serve until SIGTERM/SIGINT, drain, close the store."""
    try:
        configure_logging(options.log_format, access_log=options.access_log)
        listener = listen(options)
        try:
            server = build_server(store, options, listener)
        except OperatorError:
            listener.sock.close()
            raise
        announce.write(listening_line(options, listener, store.server_instance_id))
        announce.flush()
        server.run(sockets=[listener.sock])
    finally:
        store.close()
