"""A one-shot command's total time budget (issue #14, item 2).

The relay client bounds each attempt (``ClientConfig.request_deadline``)
and each retry loop (``RetryPolicy.max_elapsed``), but a command makes many
requests: a relay answering every page slowly, and always with more to come,
could hold a scheduled ``syncengine sync`` for ever. :class:`CommandDeadline`
is handed to the engine as its ``interrupt`` and ``sleep``: the relay client
calls ``check`` before every attempt and between socket reads, and sleeps
its retry waits through ``sleep``, so the command ends with
:class:`~syncengine.engine.errors.CommandDeadlineExceeded` (exit 3) at the
first boundary after the budget is spent. Storage transactions are never cut:
the check runs only on the network side, between them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from syncengine.engine.errors import CommandDeadlineExceeded
from syncengine.engine.limits import MAX_COMMAND_DEADLINE

__all__ = ["CommandDeadline", "check_deadline_seconds"]


def check_deadline_seconds(seconds: float) -> float:
    """A usable deadline: finite, positive, at most a day (ValueError otherwise)."""
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_COMMAND_DEADLINE:
        raise ValueError(
            f"the deadline must be a number of seconds in (0, {MAX_COMMAND_DEADLINE:g}]"
        )
    return seconds


class CommandDeadline:
    """Raise :class:`CommandDeadlineExceeded` once ``seconds`` have passed."""

    def __init__(
        self,
        seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleeper: Callable[[float], None] = time.sleep,
    ) -> None:
        self.seconds = check_deadline_seconds(seconds)
        self._clock = clock
        self._sleeper = sleeper
        self._at = clock() + seconds

    def left(self) -> float:
        return self._at - self._clock()

    def check(self) -> None:
        if self.left() <= 0:
            raise self._exceeded()

    def sleep(self, seconds: float) -> None:
        """A retry wait that would end past the deadline fails at once instead."""
        if seconds >= self.left():
            raise self._exceeded()
        self._sleeper(seconds)

    def _exceeded(self) -> CommandDeadlineExceeded:
        return CommandDeadlineExceeded(
            f"the command's deadline of {self.seconds:g} s passed before it finished"
        )
