"""Counts, total, rate and ETA for long pulls and pushes, on a terminal only.

Atuin-style operator feedback: when stderr is a TTY, a long transfer shows
``pull: 12,000 of 50,000 messages (24%), 3,400/s, ETA 11 s`` on one
rewritten line (without a known total: ``pull: 12,000 messages, 3,400/s``);
when it is a pipe, a log file or a test, nothing is written (machine output
stays clean). A line appears only after the transfer has run for a moment,
so short cycles print nothing at all. The final line adds the elapsed time.
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
        #: The expected count when known (pending pushes; the relay's
        #: ``current_seq`` minus the cursor for a pull) — an estimate.
        self.total: int | None = None
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
        self._stream.write(f"\r{self.line()}\x1b[K")
        self._stream.flush()

    @property
    def elapsed(self) -> float:
        return max(self._clock() - self._started, 1e-9)

    def line(self, *, final: bool = False) -> str:
        elapsed = self.elapsed
        rate = self.count / elapsed
        if self.total is None or self.total < self.count:
            text = f"{self.label}: {self.count:,} messages, {rate:,.0f}/s"
        else:
            share = 100 * self.count // self.total if self.total else 100
            text = (
                f"{self.label}: {self.count:,} of {self.total:,} messages ({share}%), {rate:,.0f}/s"
            )
            if not final and rate > 0 and self.count < self.total:
                text += f", ETA {_duration((self.total - self.count) / rate)}"
        if final:
            text += f", {_duration(elapsed)} in all"
        return text

    def done(self) -> None:
        if self._stream is not None and self._shown_at is not None:
            self._stream.write(f"\r{self.line(final=True)}\x1b[K\n")
            self._stream.flush()


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def progress_for(stream: TextIO | None) -> Callable[[str], Progress]:
    """A factory that shows progress only when ``stream`` is a terminal."""
    tty = stream if stream is not None and stream.isatty() else None
    return lambda label: Progress(label, tty)
