"""What one relay process allows a connection, before any request is routed (#33).

A peer that opens connections and never finishes a request (a slow-loris:
headers a byte at a time, or nothing at all) holds a socket, a file
descriptor and a protocol object each; without bounds 300 of 300 such
connections stay open. Two rules close that:

- **per peer**: one peer address holds at most ``max_per_peer`` connections
  at once (``relay serve --max-connections-per-peer``, default
  :data:`~relay.limits.MAX_CONNECTIONS_PER_PEER`); the excess is closed on
  accept, before a byte is read;
- **request read time**: a client has ``read_timeout`` seconds (default
  :data:`~relay.limits.REQUEST_READ_TIMEOUT_SECONDS`) from connecting — or
  from the first byte of its next request on a kept-alive connection — to
  send the whole request, headers and body; otherwise the connection is
  closed. A request already received is never cut by this rule, so a live
  wait held open ~25 s after its request arrived is untouched (its own caps
  live in relay/http/live.py).

This module keeps the bookkeeping and the counters (no I/O, no uvicorn); the
transport hooks that apply it are in relay/server.py. Each decision is
logged once, in one line, without the peer's address (the relay never logs
client addresses) or anything it sent; ``/metrics`` counts them
(``syncengine_relay_connections_refused`` by reason,
``syncengine_relay_connections_open``).
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable

from relay.errors import OperatorError
from relay.limits import MAX_CONNECTIONS_PER_PEER, REQUEST_READ_TIMEOUT_SECONDS

__all__ = ["LOG_INTERVAL_SECONDS", "PER_PEER", "READ_TIMEOUT", "ConnectionGuard"]

# Served by relay/logformat.py (SERVED_LOGGERS), so its lines share the format.
_log = logging.getLogger("relay.connections")
#: At most one log line per reason this often; the next one says how many
#: were left unsaid (a flood of refusals must not flood the log).
LOG_INTERVAL_SECONDS = 10.0

#: Reasons a connection was closed by these rules (the metric's label values).
PER_PEER = "per_peer"
READ_TIMEOUT = "request_read_timeout"


class ConnectionGuard:
    """Per-peer connection counts and the refusal counters of one server.

    Called only from the event loop's thread (protocol callbacks), so it
    needs no lock; ``/metrics`` reads plain integers.
    """

    def __init__(
        self,
        *,
        max_per_peer: int = MAX_CONNECTIONS_PER_PEER,
        read_timeout: float = REQUEST_READ_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_per_peer < 1:
            raise OperatorError(
                "the connections allowed per peer must be at least 1",
                f"pass --max-connections-per-peer 1 or more (default {MAX_CONNECTIONS_PER_PEER})",
            )
        if not math.isfinite(read_timeout) or read_timeout <= 0:
            raise OperatorError(
                "the request read timeout must be a positive number of seconds",
                f"pass --request-read-timeout SECONDS (default {REQUEST_READ_TIMEOUT_SECONDS:g})",
            )
        self.max_per_peer = max_per_peer
        self.read_timeout = read_timeout
        self._peers: Counter[str] = Counter()
        #: Connections closed by these rules, by reason.
        self.refused: Counter[str] = Counter({PER_PEER: 0, READ_TIMEOUT: 0})
        self._clock = clock
        self._logged_at: dict[str, float] = {}
        self._unsaid: Counter[str] = Counter()

    @property
    def open(self) -> int:
        """Connections admitted and not yet closed."""
        return sum(self._peers.values())

    def admit(self, peer: str) -> bool:
        """Count a new connection of ``peer``; ``False`` (and counted as
        refused) when the peer already holds its maximum."""
        if self._peers[peer] >= self.max_per_peer:
            self._refuse(
                PER_PEER,
                f"closed a new connection: its peer address already holds {self.max_per_peer} "
                "connections (--max-connections-per-peer)",
            )
            return False
        self._peers[peer] += 1
        return True

    def release(self, peer: str) -> None:
        """An admitted connection of ``peer`` closed."""
        left = self._peers[peer] - 1
        if left > 0:
            self._peers[peer] = left
        else:
            del self._peers[peer]

    def held(self, peer: str) -> int:
        """Connections ``peer`` holds now."""
        return self._peers.get(peer, 0)

    def timed_out(self) -> None:
        """A connection did not send its whole request in time and was closed."""
        self._refuse(
            READ_TIMEOUT,
            f"closed a connection that did not send a whole request within "
            f"{self.read_timeout:g} s (--request-read-timeout)",
        )

    def _refuse(self, reason: str, line: str) -> None:
        self.refused[reason] += 1
        now = self._clock()
        last = self._logged_at.get(reason)
        if last is not None and now - last < LOG_INTERVAL_SECONDS:
            self._unsaid[reason] += 1
            return
        unsaid = self._unsaid.pop(reason, 0)
        self._logged_at[reason] = now
        if unsaid:
            line += f"; {unsaid} more since the last such line"
        _log.warning("%s", line)
