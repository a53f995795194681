"""Counts and rate for long pulls and pushes, on a terminal only.

Atuin-style operator feedback: when stderr is a TTY, a long transfer shows
``pull: 12,000 messages, 3,400/s`` on one rewritten line; when it is a
pipe, a log file or a test, nothing is written (machine output stays clean).
A line appears only after the transfer has run for a moment, so short
cycles print nothing at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["Progress", "progress_for"]

#: Quiet for transfers shorter than this; then refresh at most this often.
_SHOW_AFTER = 0.5
_REFRESH = 0.2


class Progress:
    """One transfer's running count; :meth:`add` is cheap enough per page."""

    def __init__(
        self,
        label: str,
        stream: TextIO | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.count = 0
        self._stream = stream
        self._clock = clock
        self._started = clock()
        self._shown_at: float | None = None

    def add(self, n: int) -> None:
        self.count += n
        if self._stream is None:
            return
        now = self._clock()
        if now - self._started < _SHOW_AFTER:
            return
        if self._shown_at is not None and now - self._shown_at < _REFRESH:
            return
        self._shown_at = now
        self._stream.write(f"\r{self.line()}")
        self._stream.flush()

    def line(self) -> str:
        elapsed = max(self._clock() - self._started, 1e-9)
        return f"{self.label}: {self.count:,} messages, {self.count / elapsed:,.0f}/s"

    def done(self) -> None:
        if self._stream is not None and self._shown_at is not None:
            self._stream.write(f"\r{self.line()}\n")
            self._stream.flush()


def progress_for(stream: TextIO | None) -> Callable[[str], Progress]:
    """A factory that shows progress only when ``stream`` is a terminal."""
    tty = stream if stream is not None and stream.isatty() else None
    return lambda label: Progress(label, tty)
