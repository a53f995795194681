"""What one push, pull or reprocess did: the reports the cycle steps return.

Apart from the steps (:mod:`syncengine.engine.cycle`) so that a command that
finds nothing to do can report it without importing them (issue #17,
start-up).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PullReport", "PushReport", "ReprocessReport"]


@dataclass(frozen=True, slots=True)
class PushReport:
    """What one push did. ``saturated`` drives the run loop's catch-up."""

    limit: int
    cipher: str | None
    blocked_reason: str | None
    candidates: int
    batches: int
    splits: int
    stored: int
    duplicate: int
    sealed_blocked: int
    push_cursor: int

    @property
    def allow_new(self) -> bool:
        return self.cipher is not None

    @property
    def saturated(self) -> bool:
        return self.candidates >= self.limit


@dataclass
class PullReport:
    pages: int = 0
    received: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    transport_cursor: int = 0
    capability_refreshes: int = 0
    #: The read-state phase that followed (None until it ran).
    read_state: Any = None


@dataclass
class ReprocessReport:
    pages: int = 0
    candidates: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
