"""Every number the engine chooses, named once (STYLE: limits live together).

The protocol's own numbers come from :mod:`wire.limits`; the ones here are
engine choices, each with the reason next to it (UPSTREAM-RECORDS §5.3 for
the upstream engine's values we keep or change).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from wire.limits import MAX_BATCH, MAX_PAGE_LIMIT, MAX_REQUEST_BYTES

__all__ = [
    "BATCH_BYTE_BUDGET",
    "CATCH_UP_PUSH_LIMIT",
    "DEFAULT_COMMAND_DEADLINE",
    "DEFAULT_INTERVAL",
    "LIVE_WAIT_MARGIN",
    "MAX_COMMAND_DEADLINE",
    "MAX_LOCAL_SECURITY_HISTORY",
    "MIN_INTERVAL",
    "PULL_PAGE_LIMIT",
    "REPROCESS_PAGE_LIMIT",
    "STEADY_PUSH_LIMIT",
    "RunSettings",
]

#: Candidates prepared per steady cycle (upstream: 100).
STEADY_PUSH_LIMIT = 100
#: Candidates per cycle while the previous push was full (upstream's catch-up).
CATCH_UP_PUSH_LIMIT = MAX_BATCH
#: Messages per GET page: the protocol maximum, so a backlog takes few requests.
PULL_PAGE_LIMIT = MAX_PAGE_LIMIT
#: Candidates per reprocess page (the driver contract bounds it to 1..1000).
REPROCESS_PAGE_LIMIT = 1000
#: Serialized bytes one POST batch may carry: 1.5 MiB leaves a quarter of the
#: relay's 2 MiB request cap for JSON framing we only estimate (upstream used
#: 512 KiB; a larger budget means fewer round trips for the same bytes).
BATCH_BYTE_BUDGET = MAX_REQUEST_BYTES * 3 // 4
#: v1.md "GET /v1/capabilities": local history is bounded like server history.
MAX_LOCAL_SECURITY_HISTORY = 4096

#: Seconds between successful cycles of ``run`` (upstream default 5, minimum 0.2).
DEFAULT_INTERVAL = 5.0
MIN_INTERVAL = 0.2
#: Seconds the client allows a live wait beyond the time it asked for before
#: it abandons the attempt (a relay holding the wait open silently, or
#: dripping it; specs/live.md §5).
LIVE_WAIT_MARGIN = 15.0
#: No wait of the run loop may exceed a day.
MAX_WAIT = 86400.0
#: Seconds a one-shot push/pull/sync/resync may take in all: long enough for a
#: first pull of a million messages on a slow link, short enough that a relay
#: serving endless slow pages cannot hold a scheduled job past the next one.
#: Nothing is lost when it passes: every committed page stays committed.
DEFAULT_COMMAND_DEADLINE = 900.0
MAX_COMMAND_DEADLINE = MAX_WAIT


@dataclass(frozen=True, slots=True)
class RunSettings:
    """The run loop's timing (UPSTREAM-RECORDS §5.3), injectable for tests.

    ``jitter`` is the fraction of the interval added or removed at random so
    many engines polling one relay do not synchronise. Failure backoff is
    ``backoff_base · 2^(n−1)`` capped at ``backoff_cap``; a definitive refusal
    waits ``refusal_wait`` (it cannot clear by itself, but the engine stays
    up so ``status`` keeps answering and an operator fix is picked up:
    upstream #773). A ``Retry-After`` longer than the backoff wins.
    """

    interval: float = DEFAULT_INTERVAL
    jitter: float = 0.1
    backoff_base: float = 1.0
    backoff_cap: float = 60.0
    refusal_wait: float = 60.0

    def __post_init__(self) -> None:
        for name in ("interval", "jitter", "backoff_base", "backoff_cap", "refusal_wait"):
            value = getattr(self, name)
            # NaN passes every comparison below; infinity never wakes up.
            if not math.isfinite(value):
                raise ValueError(f"{name.replace('_', '-')} must be a finite number of seconds")
            if value > MAX_WAIT:
                raise ValueError(f"{name.replace('_', '-')} must be at most {MAX_WAIT:g} s")
        if self.interval < MIN_INTERVAL:
            raise ValueError(f"interval must be at least {MIN_INTERVAL} s")
        if not 0 <= self.jitter < 1:
            raise ValueError("jitter must be a fraction in [0, 1)")
        if not 0 < self.backoff_base <= self.backoff_cap:
            raise ValueError("need 0 < backoff_base <= backoff_cap")
        if self.refusal_wait <= 0:
            raise ValueError("refusal_wait must be positive")

    def backoff(self, failures: int) -> float:
        """Wait after the ``failures``-th consecutive transient failure (n ≥ 1)."""
        exponent = max(0, failures - 1)
        return float(min(self.backoff_cap, self.backoff_base * 2 ** min(exponent, 30)))
