"""Whole-attempt deadlines and prompt stops below httpx (issue #14, item 2).

httpx bounds each socket operation (connect, one read, one write), never an
attempt as a whole: a relay that sends its status line and headers one byte
a second passes every per-read timeout for hours (h11 accepts 16 KiB of
header), and a process blocked in that read does not notice SIGTERM.

This module wraps httpcore's network backend — the one place every byte of
every connection passes — so that each stream operation:

- raises :class:`AttemptDeadlineExceeded` (an ``httpcore.ReadTimeout``, so
  httpx reports it as a timeout and the retry table treats it as one) once
  the attempt's deadline, set by :meth:`AttemptGuard.attempt`, has passed;
- waits for bytes in short slices and calls the client's ``interrupt``
  between them, so the run loop's stop unwinds a blocked header read within
  a fraction of a second;
- keeps httpx's own per-operation timeouts (the shorter bound wins).

A read that times out inside a slice has consumed nothing (``recv`` either
returns bytes or raises), so slicing reads never corrupts the stream. Writes
are not sliced — a timed-out ``send`` loop may have sent part of its buffer —
their timeout is only capped at the time the attempt has left.
"""

from __future__ import annotations

import contextvars
import ssl
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import httpcore
import httpx

__all__ = ["READ_SLICE", "AttemptDeadlineExceeded", "AttemptGuard", "guard_client"]

T = TypeVar("T")

#: Longest single wait for bytes before the stop signal is looked at again.
READ_SLICE = 0.2

#: The running attempt's (deadline, its length in seconds), per thread/context.
_ATTEMPT: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "syncengine_http_attempt", default=None
)


class AttemptDeadlineExceeded(httpcore.ReadTimeout):
    """The attempt as a whole took longer than its deadline."""


class AttemptGuard:
    """The deadline and stop check one :class:`~syncengine.http.client.RelayClient`
    applies to every socket operation of its attempts."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        interrupt: Callable[[], None] | None = None,
    ) -> None:
        self._clock = clock
        self._interrupt = interrupt

    @contextmanager
    def attempt(self, seconds: float) -> Iterator[None]:
        """Every socket operation inside must finish within ``seconds`` from now."""
        token = _ATTEMPT.set((self._clock() + seconds, seconds))
        try:
            yield
        finally:
            _ATTEMPT.reset(token)

    def check(self) -> None:
        """Raise when stopped or past the attempt's deadline."""
        if self._interrupt is not None:
            self._interrupt()
        self.remaining()

    def remaining(self) -> float | None:
        """Seconds the running attempt has left (``None`` outside an attempt)."""
        running = _ATTEMPT.get()
        if running is None:
            return None
        deadline, seconds = running
        left = deadline - self._clock()
        if left <= 0:
            raise AttemptDeadlineExceeded(
                f"the relay took longer than {seconds:g} s to answer (whole-attempt deadline)"
            )
        return left

    def capped(self, timeout: float | None) -> float | None:
        """``timeout`` shortened to what the attempt has left."""
        self.check()
        left = self.remaining()
        if left is None:
            return timeout
        return left if timeout is None else min(timeout, left)

    def sliced_read(self, read: Callable[[float], T], timeout: float | None) -> T:
        """``read`` in slices of at most :data:`READ_SLICE` seconds, checking the
        stop and the deadline between them; ``timeout`` still bounds the read."""
        started = self._clock()
        while True:
            bound = self.capped(None if timeout is None else timeout - (self._clock() - started))
            if bound is not None and bound <= 0:
                raise httpcore.ReadTimeout("timed out")  # httpx's own per-read timeout
            wait = READ_SLICE if bound is None else min(READ_SLICE, bound)
            try:
                return read(wait)
            except AttemptDeadlineExceeded:
                raise
            except httpcore.ReadTimeout:
                continue  # nothing was consumed; look at stop and deadline again


class _GuardedStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, guard: AttemptGuard) -> None:
        self._inner = inner
        self._guard = guard

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._guard.sliced_read(lambda wait: self._inner.read(max_bytes, wait), timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._guard.capped(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        tls = self._inner.start_tls(ssl_context, server_hostname, self._guard.capped(timeout))
        return _GuardedStream(tls, self._guard)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _GuardedBackend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend, guard: AttemptGuard) -> None:
        self._inner = inner
        self._guard = guard

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(
            host, port, self._guard.capped(timeout), local_address, socket_options
        )
        return _GuardedStream(stream, self._guard)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_unix_socket(path, self._guard.capped(timeout), socket_options)
        return _GuardedStream(stream, self._guard)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def guard_client(client: httpx.Client, guard: AttemptGuard) -> int:
    """Install ``guard`` below every network transport of ``client`` (the
    default one and any proxy mount); returns how many were guarded.

    Transports that are not httpx's own (a test's in-memory transport) have
    no sockets and are left alone; the body reader's own checks cover them.
    httpx keeps its connection pool in ``HTTPTransport._pool`` (an httpcore
    ``ConnectionPool``, whose proxies subclass it) — if a future httpx moves
    it, this fails loudly rather than silently losing the deadline.
    """
    transports = [client._transport, *client._mounts.values()]
    guarded = 0
    for transport in transports:
        if not isinstance(transport, httpx.HTTPTransport):
            continue
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if not isinstance(backend, httpcore.NetworkBackend):
            raise RuntimeError(
                "cannot install the attempt deadline: this httpx/httpcore version keeps "
                "its network backend elsewhere"
            )
        if not isinstance(backend, _GuardedBackend):
            pool._network_backend = _GuardedBackend(backend, guard)  # type: ignore[union-attr]
        guarded += 1
    return guarded
