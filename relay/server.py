"""Serving the relay with uvicorn on a socket we bind ourselves.

Binding first lets ``--port 0`` pick an ephemeral port and report the real
one (tests and benchmarks read the ``listening`` line) before any request is
accepted. Access logs are the relay's own structured lines; uvicorn's access
log is off because it would print query strings and client addresses in a
format we do not control.
"""

from __future__ import annotations

import json
import logging
import socket
import sys
from typing import TextIO

import uvicorn

from relay.http.app import create_app
from relay.storage.base import RelayStore


def configure_logging(stream: TextIO = sys.stderr, level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    for name in ("relay.access", "relay.retention", "relay.storage", "relay.errors"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False


def serve(
    store: RelayStore,
    host: str,
    port: int,
    *,
    announce: TextIO = sys.stdout,
    access_log: bool = True,
) -> None:
    configure_logging(level=logging.INFO if access_log else logging.WARNING)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit TCP_NODELAY; without it the separate header and
    # body writes of a response wait on the peer's delayed ACK (~40 ms).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    bound_port = sock.getsockname()[1]
    app = create_app(store)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        server_header=False,
        date_header=True,
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    announce.write(
        json.dumps(
            {
                "event": "listening",
                "host": host,
                "port": bound_port,
                "server_instance_id": store.server_instance_id,
            }
        )
        + "\n"
    )
    announce.flush()
    try:
        server.run(sockets=[sock])
    finally:
        store.close()
