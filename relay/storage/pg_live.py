"""Cross-process wakes for the live wait on PostgreSQL: LISTEN/NOTIFY.

Several ``relay serve`` processes share one database; a waiter held by one
must wake when another commits. Every transaction that moves a team's head
or read state runs ``SELECT pg_notify(CHANNEL, team_id)`` (relay/storage/
postgres.py), which PostgreSQL delivers exactly when — and only if — that
transaction commits, to every session listening on the channel. The payload
is the team ID alone: no sequence, member or message, so a listener learns
which team to re-read and nothing it could not read itself.

Each process keeps one dedicated autocommit connection (``application_name``
:data:`APPLICATION_NAME` ``/`` its pid, outside the pool, so a busy pool never delays a
wake and a wake never takes a request's connection) in a daemon thread that
blocks in ``notifies``. When the connection is lost — the server restarted,
a proxy dropped it, an operator terminated the backend — the thread
reconnects with bounded exponential backoff and, once listening again,
reports ``None``: "wakes may have been lost, re-read every waited team".
A notification can therefore be late, never lost for good; and the HTTP
layer's own safety tick re-reads each waiter's team at least every few
seconds, which bounds the delay even while the database is unreachable.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Any

import psycopg

from relay.storage.base import WakeCallback

__all__ = ["APPLICATION_NAME", "CHANNEL", "PgLiveFeed"]

#: The NOTIFY channel; its payload is one team_id.
CHANNEL = "syncengine_relay_live"
#: How an operator (or a test) finds the listener in ``pg_stat_activity``.
APPLICATION_NAME = "syncengine-relay-live"
_log = logging.getLogger("relay.live")

#: How long one ``notifies`` call blocks before the thread checks for close.
_POLL_S = 1.0
#: Reconnect backoff: first delay, doubling, capped.
_BACKOFF_FIRST_S = 0.1
_BACKOFF_MAX_S = 5.0
_CONNECT_TIMEOUT_S = 5


class PgLiveFeed:
    """One LISTEN connection per relay process, re-established after a loss."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection[Any] | None = None
        #: Times the listener had to reconnect (``/metrics``).
        self.reconnects = 0

    def start(self, wake: WakeCallback) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._listen_forever, args=(wake,), name="relay-live-listen", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=_POLL_S * 3)

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(
            self._url,
            autocommit=True,
            connect_timeout=_CONNECT_TIMEOUT_S,
            application_name=f"{APPLICATION_NAME}/{os.getpid()}",
        )
        conn.execute(f"LISTEN {CHANNEL}")
        return conn

    def _listen_forever(self, wake: WakeCallback) -> None:
        delay = _BACKOFF_FIRST_S
        first = True
        while not self._stop.is_set():
            try:
                conn = self._connect()
            except psycopg.Error as exc:
                _log.warning("live listener cannot connect (%s); retrying", type(exc).__name__)
                self._stop.wait(delay)
                delay = min(delay * 2, _BACKOFF_MAX_S)
                continue
            self._conn = conn
            delay = _BACKOFF_FIRST_S
            if not first:
                self.reconnects += 1
                _log.warning("live listener reconnected; re-reading every waited team")
                wake(None)  # whatever was notified while we were away
            first = False
            try:
                while not self._stop.is_set():
                    for note in conn.notifies(timeout=_POLL_S):
                        if note.channel == CHANNEL and note.payload:
                            wake(note.payload)
            except psycopg.Error as exc:
                if not self._stop.is_set():
                    _log.warning("live listener lost its connection (%s)", type(exc).__name__)
            finally:
                self._conn = None
                with contextlib.suppress(psycopg.Error):  # already broken
                    conn.close()
