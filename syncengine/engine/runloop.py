"""``syncengine run``: the long-lived loop (specs/engine.md §8.1).

UPSTREAM-RECORDS §5.3, with upstream's field lessons as rules:

- **catch-up**: while a push filled its limit the next cycle starts at once
  with the catch-up limit (1000) — no sleep; otherwise sleep the interval
  with ±jitter;
- **transient failures** (network, 5xx, a proxy's 503 page — upstream #814;
  a busy store) back off ``1 s · 2^(n−1)`` up to 60 s, or longer when the
  relay's ``Retry-After`` says so, and the loop carries on;
- **definitive refusals** (401, 403, 404, 422, a protocol violation, a
  binding mismatch, resync-required …) are recorded durably by the engine
  and the loop *stays up*, waiting ``refusal_wait`` before trying again, so
  an operator's fix is picked up without a restart (upstream #773);
- **stop**: SIGTERM and SIGINT set an event; a sleep — including a retry
  wait inside the relay client — wakes at once and the loop exits cleanly
  between two storage transactions;
- **one engine per binding**: the caller holds the binding's lock
  (:mod:`syncengine.engine.lock`) for the loop's lifetime;
- **live delivery** (specs/live.md §6): given a :class:`~syncengine.engine.live.Waker`,
  the wait between successful cycles ends as soon as the relay announces
  news or this store changed, and the interval becomes a safety net
  (``live_interval`` while the relay's live wait answers, the ordinary
  interval while polling). A change made while a cycle ran starts the next
  one at once.
"""

from __future__ import annotations

import logging
import random
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

from syncengine.engine.engine import Engine, SyncReport
from syncengine.engine.errors import StopRequested, classify
from syncengine.engine.limits import CATCH_UP_PUSH_LIMIT, STEADY_PUSH_LIMIT, RunSettings
from syncengine.http.errors import EngineState

if TYPE_CHECKING:
    from syncengine.engine.live import Waker

__all__ = ["CycleOutcome", "RunLoop", "StopSignal", "handle_stop_signals"]

_log = logging.getLogger("syncengine.engine")


class StopSignal:
    """A stop flag that also interrupts sleeps (the relay client's too)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._bells: list[threading.Event] = []

    def set(self) -> None:
        self._event.set()
        for bell in self._bells:
            bell.set()

    def ring(self, bell: threading.Event) -> None:
        """Also set ``bell`` when stopped (a waiter blocked on it wakes)."""
        self._bells.append(bell)
        if self.is_set:
            bell.set()

    @property
    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when stopped meanwhile."""
        return self._event.wait(max(0.0, seconds))

    def check(self) -> None:
        """For the relay client between body chunks: unwind when stopped."""
        if self.is_set:
            raise StopRequested("stop requested")

    def interruptible_sleep(self, seconds: float) -> None:
        """For :class:`RelayClient`'s retry waits: unwind when stopped."""
        if self.wait(seconds) or self.is_set:
            raise StopRequested("stop requested")


@contextmanager
def handle_stop_signals(stop: StopSignal) -> Iterator[None]:
    """Route SIGTERM and SIGINT to ``stop`` for the duration (main thread only)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        _log.info("received signal %d; stopping after the current step", signum)
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@dataclass(frozen=True, slots=True)
class CycleOutcome:
    """One cycle as the loop saw it (also what ``run --json`` prints)."""

    number: int
    ok: bool
    state: str
    wait: float
    report: SyncReport | None = None
    code: str | None = None
    message: str | None = None

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "event": "cycle",
            "cycle": self.number,
            "ok": self.ok,
            "state": self.state,
            "next_wait": round(self.wait, 3),
        }
        if self.report is not None:
            push, pull = self.report.push, self.report.pull
            obj["push"] = {
                "candidates": push.candidates,
                "stored": push.stored,
                "duplicate": push.duplicate,
                "allow_new": push.allow_new,
                "blocked_reason": push.blocked_reason,
            }
            obj["pull"] = {"received": pull.received, "outcomes": pull.outcomes}
        if self.code is not None:
            obj["error"] = {"code": self.code, "message": self.message}
        return obj


class RunLoop:
    """Cycles ``engine.sync()`` until ``stop`` is set (or ``max_cycles`` ran)."""

    def __init__(
        self,
        engine: Engine,
        stop: StopSignal,
        settings: RunSettings | None = None,
        *,
        on_cycle: Callable[[CycleOutcome], None] | None = None,
        rng: random.Random | None = None,
        waker: Waker | None = None,
        live_interval: float | None = None,
    ) -> None:
        self.engine = engine
        self.stop = stop
        self.settings = settings if settings is not None else RunSettings()
        self.on_cycle = on_cycle
        self._rng = rng if rng is not None else random.Random()
        self.waker = waker
        self.live_interval = live_interval

    def _interval(self) -> float:
        s = self.settings
        base = s.interval
        if self.live_interval is not None and self.waker is not None and self.waker.live:
            base = self.live_interval
        return base * (1 + self._rng.uniform(-s.jitter, s.jitter))

    def run(self, max_cycles: int | None = None) -> int:
        """Returns the number of cycles run."""
        failures = 0
        limit = STEADY_PUSH_LIMIT
        cycle = 0
        while not self.stop.is_set and (max_cycles is None or cycle < max_cycles):
            cycle += 1
            waker = self.waker
            try:
                if waker is not None:
                    head = self.engine.transport_cursor()
                    waker.before_cycle()
                report = self.engine.sync(push_limit=limit)
            except StopRequested:
                break
            except Exception as exc:  # every failure is recorded; the loop stays up
                failure = classify(exc)
                if failure.state is EngineState.BACKOFF:
                    failures += 1
                    wait = max(self.settings.backoff(failures), failure.retry_after or 0.0)
                else:
                    failures = 0
                    wait = self.settings.refusal_wait
                limit = STEADY_PUSH_LIMIT
                outcome = CycleOutcome(
                    cycle, False, failure.state.value, wait, None, failure.code, failure.message
                )
            else:
                failures = 0
                catching_up = report.saturated
                limit = CATCH_UP_PUSH_LIMIT if catching_up else STEADY_PUSH_LIMIT
                interval = self._interval()
                again = waker is not None and waker.after_cycle(
                    head, self.engine.transport_cursor(), interval
                )
                wait = 0.0 if catching_up or again else interval
                outcome = CycleOutcome(cycle, True, "ok", wait, report)
            if self.on_cycle is not None:
                self.on_cycle(outcome)
            if outcome.ok and waker is not None:
                waker.offer(self.engine.client.live_offered)
            if outcome.wait > 0:
                if outcome.ok and waker is not None:
                    if waker.wait(outcome.wait) == "stop":
                        break
                elif self.stop.wait(outcome.wait):
                    break
        return cycle
