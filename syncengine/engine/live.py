"""Live delivery for ``syncengine run`` (specs/live.md §6–§8).

Between two cycles the run loop waits in :meth:`Waker.wait` instead of
sleeping the interval. The wait ends at once when

- **the relay says the team moved**: :class:`RelayWatch`, one thread per
  run, keeps one long poll open on the relay's live wait (our Stage 3
  extension, wire/http_v1/live.py) and raises ``news`` when the answer's
  head or read-state revision passes what this machine holds;
- **this store changed**: :class:`LocalChanges` reads SQLite's change
  counter (``PRAGMA data_version``, its own connection) every
  :data:`LOCAL_TICK` seconds, and only after another connection committed
  reads a fingerprint of what a cycle would send — the team's newest local
  message, the newest read mark, the agents' read frontiers. A ``send`` or a
  mark by any process (CLI, Python API, the bash driver) is pushed within a
  tick, and the engine's own commits (imports) do not wake it;
- the stop signal is set, or the interval (now a safety net) passes.

Nothing the relay says is trusted (specs/live.md §5): a wake is only a
reason to run the ordinary cycle, whose every check stays where it is. A
relay that answers at once for ever, or announces a head that never comes,
meets a spacing between relay-woken cycles that doubles from
:data:`WAKE_SPACING` up to the interval while such cycles bring nothing,
and the watch thread itself never asks again sooner than
:data:`ANSWER_SPACING` after a fruitless answer. One that holds the wait
open silently, or drips bytes, meets the client's per-attempt deadline
(the wait plus :data:`~syncengine.engine.limits.LIVE_WAIT_MARGIN`). Any
failure of the wait — a relay without the extension, an error, a timeout —
falls back to polling at the ordinary interval, and the watch retries with
backoff.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from syncengine.engine.engine import Engine
from syncengine.engine.errors import EngineError, EngineLocked, StopRequested
from syncengine.engine.limits import DEFAULT_INTERVAL, RunSettings
from syncengine.http.errors import RelayRefusal
from syncengine.store.changes import FALLBACK_TICK, StoreBell
from syncengine.store.connection import read_transaction
from wire.http_v1.live import DEFAULT_WAIT_SECONDS, LiveWaitQuery

if TYPE_CHECKING:
    from syncengine.http.client import RelayClient
    from syncengine.local_store import Store

__all__ = [
    "ANSWER_SPACING",
    "LIVE_INTERVAL",
    "LOCAL_TICK",
    "WAKE_SPACING",
    "Delivery",
    "DeliveryState",
    "LocalChanges",
    "RelayWatch",
    "WaitPuller",
    "Waker",
    "read_delivery",
    "write_delivery",
]

_log = logging.getLogger("syncengine.engine")


class StopSignal(Protocol):
    """The run loop's stop signal as this module uses it
    (:class:`syncengine.engine.runloop.StopSignal`, which imports this one)."""

    @property
    def is_set(self) -> bool: ...

    def wait(self, seconds: float) -> bool: ...

    def check(self) -> None: ...

    def interruptible_sleep(self, seconds: float) -> None: ...


#: Seconds between two reads of the store's change counter while waiting.
LOCAL_TICK = 0.05
#: The safety-net interval of a run whose relay offers the live wait: a lost
#: wake costs at most this long, never a message.
LIVE_INTERVAL = 60.0
#: The first spacing between relay-woken cycles that brought nothing new.
WAKE_SPACING = 0.25
#: The watch waits at least this long before asking again after an answer
#: that arrived with nothing new and before its time was up.
ANSWER_SPACING = 1.0
#: Backoff of the watch after failures: 1 s doubling to this cap.
RETRY_CAP = 60.0
#: How long a watch waits before asking a relay that lacks the extension again.
UNSUPPORTED_RECHECK = 300.0


#: The watch's retry waits: the run loop's own backoff rule, to RETRY_CAP.
_RETRY = RunSettings(backoff_base=1.0, backoff_cap=RETRY_CAP)


def _doubled(spacing: float, cap: float) -> float:
    """The spacing after a wake that brought nothing: from WAKE_SPACING,
    doubling, never past ``cap``."""
    return min(cap, max(WAKE_SPACING, spacing * 2))


class Delivery(enum.StrEnum):
    LIVE = "live"
    POLLING = "polling"


@dataclass(frozen=True, slots=True)
class DeliveryState:
    """How this run learns of new messages, and why (``status`` shows it)."""

    mode: Delivery
    reason: str
    since: str

    def to_obj(self) -> dict[str, Any]:
        return {"mode": self.mode.value, "reason": self.reason, "since": self.since}


def write_delivery(path: Path, state: DeliveryState) -> None:
    """Say where ``status`` reads it how this run learns of new messages:
    a private file beside the binding's lock, replaced whole."""
    fd, temp = tempfile.mkstemp(prefix=".delivery-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(state.to_obj(), handle)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def read_delivery(path: Path) -> dict[str, Any] | None:
    """What a running ``run`` last wrote (``None``: nothing, or unreadable)."""
    try:
        with path.open(encoding="utf-8") as handle:
            value = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict) or value.get("mode") not in ("live", "polling"):
        return None
    return {key: str(value.get(key, "")) for key in ("mode", "reason", "since")}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class LocalChanges:
    """Whether anything a cycle would send changed in the store since
    :meth:`mark`: the change counter first, a fingerprint only after
    another connection committed — cheap enough to ask on every ring."""

    def __init__(self, store: Store, team: str) -> None:
        self._store = store
        self.path = store.path
        self._team = team
        self._base: tuple[Any, ...] | None = None
        self._version = -1

    def fingerprint(self) -> tuple[Any, ...]:
        with read_transaction(self._store.conn, self._store.path) as conn:
            row = conn.execute(
                "SELECT (SELECT max(seq) FROM messages INDEXED BY messages_local_by_team"
                "        WHERE team_pk = t.team_pk AND origin = 'local'),"
                " (SELECT max(read_seq) FROM message_reads),"
                " (SELECT total(f.local_position) FROM read_frontiers AS f"
                "        JOIN members AS m ON m.member_pk = f.member_pk"
                "        WHERE m.team_pk = t.team_pk)"
                " FROM teams AS t WHERE t.name = ?",
                (self._team,),
            ).fetchone()
        return tuple(row) if row is not None else ()

    def mark(self) -> None:
        """Take the baseline: just before a cycle, so a change made while the
        cycle runs is seen after it (:meth:`changed`)."""
        self._version = self._store.data_version()
        self._base = self.fingerprint()

    def changed(self) -> bool:
        return self.fingerprint() != self._base

    def poll(self) -> bool:
        """One tick: the counter first (almost free), the fingerprint only
        after another connection committed."""
        version = self._store.data_version()
        if version == self._version:
            return False
        self._version = version
        return self.changed()


class RelayWatch(threading.Thread):
    """One long poll at a time on the relay's live wait, for one binding.

    ``open_client(wait)`` makes the relay client this thread owns (its own
    connection pool; its per-attempt deadline is ``wait`` plus
    :data:`~syncengine.engine.limits.LIVE_WAIT_MARGIN`). The run loop tells
    it what the store holds after every cycle (:meth:`known`); it raises :attr:`news` when the relay
    announces more, and reports every change of delivery mode to
    ``on_state``."""

    def __init__(
        self,
        open_client: Callable[[float], RelayClient],
        stop: StopSignal,
        *,
        wait_seconds: int,
        on_state: Callable[[DeliveryState], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name="syncengine-live", daemon=True)
        self._open_client = open_client
        self._halt = stop
        self._wait_seconds = wait_seconds
        self._on_state = on_state
        self._clock = clock
        self._lock = threading.Lock()
        self._head = 0
        self._read_revision = 0
        self._cycled = threading.Event()
        self.news = threading.Event()
        #: Rung with every news, so a waiter blocked on it wakes at once.
        self.bell: threading.Event | None = None
        self.state: DeliveryState | None = None

    def known(self, head: int) -> None:
        """After a cycle: the transport cursor this machine now holds."""
        with self._lock:
            self._head = max(self._head, head)
        self._cycled.set()

    def _set_state(self, mode: Delivery, reason: str) -> None:
        current = self.state
        if current is not None and (current.mode, current.reason) == (mode, reason):
            return
        self.state = DeliveryState(mode, reason, _now())
        self._on_state(self.state)

    def _pause(self, seconds: float) -> bool:
        """Sleep unless stopped; True when stopped."""
        return self._halt.wait(seconds) or self._halt.is_set

    def run(self) -> None:
        client: RelayClient | None = None
        failures = 0
        try:
            while not self._halt.is_set:
                if client is None:
                    client = self._open_client(float(self._wait_seconds))
                with self._lock:
                    after, read_after = self._head, self._read_revision
                started = self._clock()
                try:
                    answer = self._ask(client, after, read_after)
                except StopRequested:
                    return
                except Exception as exc:  # any failure of the wait: poll, retry later
                    failures += 1
                    if isinstance(exc, RelayRefusal) and exc.status in (404, 405):
                        reason = "the relay does not offer the live wait"
                        wait = UNSUPPORTED_RECHECK
                    else:
                        reason = f"the live wait failed ({type(exc).__name__}: {exc})"
                        wait = _RETRY.backoff(failures)
                    self._set_state(Delivery.POLLING, reason)
                    if self._pause(wait):
                        return
                    continue
                failures = 0
                self._set_state(Delivery.LIVE, "waiting on the relay's live wait")
                moved = answer.current_seq > after or answer.read_revision > read_after
                if moved:
                    with self._lock:
                        self._read_revision = max(self._read_revision, answer.read_revision)
                    self._cycled.clear()
                    self.news.set()
                    if self.bell is not None:
                        self.bell.set()
                    # Ask again once the loop has cycled on it (or after the
                    # wait's own length, should the loop be busy elsewhere).
                    self._cycled.wait(self._wait_seconds)
                elif self._clock() - started < min(
                    ANSWER_SPACING, self._wait_seconds
                ) and self._pause(ANSWER_SPACING):
                    # Answered early with nothing new: never a tight loop.
                    return
        finally:
            if client is not None:
                client.close()

    def _ask(self, client: RelayClient, after: int, read_after: int) -> Any:
        return client.live_wait(LiveWaitQuery(after, read_after, self._wait_seconds))


class Waker:
    """What the run loop waits on between cycles: the stop signal, the
    interval, local changes and the relay watch, with the spacing rules of
    the module docstring.

    It blocks on one bell, rung by the stop signal, by the relay watch's
    news and by :class:`~syncengine.store.changes.StoreBell` when another
    process writes the store — so an idle run wakes only when something
    happens (where the kernel cannot watch the store, the bell is polled
    every :data:`~syncengine.store.changes.FALLBACK_TICK`). ``block`` and
    ``watch_store`` exist for tests on a fake clock."""

    def __init__(
        self,
        stop: StopSignal,
        local: LocalChanges | None,
        *,
        make_watch: Callable[[], RelayWatch] | None = None,
        on_state: Callable[[DeliveryState], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        block: Callable[[float], bool] | None = None,
        watch_store: bool = True,
    ) -> None:
        self.stop = stop
        self.local = local
        self.watch: RelayWatch | None = None
        self._make_watch = make_watch
        self._on_state = on_state
        self._clock = clock
        self.bell = threading.Event()
        ring = getattr(stop, "ring", None)
        if ring is not None:
            ring(self.bell)
        self._block = block if block is not None else self.bell.wait
        self._store_bell: StoreBell | None = None
        self._tick: float | None = FALLBACK_TICK if local is not None else None
        if local is not None and watch_store:
            self._store_bell = StoreBell(local.path, self.bell)
            self._tick = self._store_bell.tick
        self._spacing = 0.0
        self._last_relay_wake = -1e18
        self._polling_said = False
        self.reason = "start"

    @property
    def live(self) -> bool:
        state = self.watch.state if self.watch is not None else None
        return state is not None and state.mode is Delivery.LIVE

    def offer(self, offered: bool | None) -> None:
        """After a cycle: whether the relay's latest capabilities offered the
        live wait (``None``: none read yet). The watch starts the first time
        it is offered; without it the run polls, and says so once."""
        if offered is None or self.watch is not None:
            return
        if offered and self._make_watch is not None:
            self.watch = self._make_watch()
            self.watch.bell = self.bell
            self.watch.start()
        elif not self._polling_said and self._on_state is not None:
            self._polling_said = True
            reason = (
                "the relay does not offer the live wait"
                if not offered
                else "live delivery is turned off (--no-live)"
            )
            self._on_state(DeliveryState(Delivery.POLLING, reason, _now()))

    def close(self) -> None:
        """Stop the store watch, and wait briefly for the relay watch (the
        stop signal unwinds its request within a read slice)."""
        if self._store_bell is not None:
            self._store_bell.close()
        if self.watch is not None and self.watch.is_alive():
            self.watch.join(timeout=2.0)

    def before_cycle(self) -> None:
        if self.local is not None:
            self.local.mark()

    def after_cycle(self, head_before: int, head_after: int, interval: float) -> bool:
        """Account for the cycle just run; True when another should run at
        once (something changed locally while it ran)."""
        if self.watch is not None:
            self.watch.known(head_after)
        if head_after > head_before:
            self._spacing = 0.0  # the stream moved: the relay's word is good again
        elif self.reason == "relay":  # woken for nothing new: the next wake waits longer
            self._spacing = _doubled(self._spacing, interval)
        return self.local is not None and self.local.changed()

    def wait(self, seconds: float) -> str:
        """Wait up to ``seconds``; returns why it ended: ``stop``,
        ``interval``, ``local`` or ``relay``."""
        deadline = self._clock() + seconds
        while True:
            if self.stop.is_set:
                return self._ended("stop")
            now = self._clock()
            remaining = deadline - now
            news = self.watch.news if self.watch is not None else None
            if remaining <= 0:
                if news is not None and news.is_set():
                    # The safety-net cycle serves the pending news too.
                    news.clear()
                    self._last_relay_wake = now
                    return self._ended("relay")
                return self._ended("interval")
            timeout = remaining
            if news is not None and news.is_set():
                ready_at = self._last_relay_wake + self._spacing
                if now >= ready_at:
                    news.clear()
                    self._last_relay_wake = now
                    return self._ended("relay")
                timeout = min(timeout, ready_at - now)
            if self._tick is not None:
                timeout = min(timeout, self._tick)
            rang = self._block(max(0.0, timeout))
            self.bell.clear()  # before the check: a later write rings again
            if (rang or self._tick is not None) and self.local is not None and self.local.poll():
                return self._ended("local")

    def _ended(self, reason: str) -> str:
        self.reason = reason
        return reason


class WaitPuller(threading.Thread):
    """For ``syncengine wait`` on a connected store (specs/live.md §7): pull
    through the engine at once, then whenever the relay's live wait says the
    team moved (every :data:`~syncengine.engine.limits.DEFAULT_INTERVAL`
    seconds on a relay without it), so a message sent on another machine is
    printed as soon as it exists — whether or not ``run`` runs here.

    Each pull takes the binding's lock for its own duration only, as any
    one-shot command does; while ``run`` holds it, ``run`` delivers and this
    thread only waits. Failures are never the waiter's: they are logged at
    debug level and retried with backoff, and the wait itself keeps watching
    the store."""

    def __init__(self, store_path: Path, team: str, stop: StopSignal) -> None:
        super().__init__(name="syncengine-wait-pull", daemon=True)
        self._store_path = store_path
        self._team = team
        self._halt = stop

    def run(self) -> None:
        try:
            engine = Engine(
                self._store_path,
                self._team,
                sleep=self._halt.interruptible_sleep,
                interrupt=self._halt.check,
            )
        except EngineError:
            return  # not connected: the local watch is all there is
        except Exception as exc:
            _log.debug("wait: no engine for %s (%s)", self._team, type(exc).__name__)
            return
        with engine:
            self._loop(engine)

    def _pull(self, engine: Any) -> None:
        try:
            with engine.lock():
                engine.pull()
        except EngineLocked:
            pass  # ``run`` holds the binding and delivers

    def _loop(self, engine: Any) -> None:
        failures = 0
        client: RelayClient | None = None
        read_after = 0
        spacing = 0.0
        announced: int | None = None
        learned_read = False
        try:
            while not self._halt.is_set:
                try:
                    self._pull(engine)
                    if announced is not None and engine.transport_cursor() < announced:
                        # The relay announced a head the pull did not reach:
                        # the next pull waits longer (a lie cannot make us spin).
                        spacing = _doubled(spacing, DEFAULT_INTERVAL)
                        if self._halt.wait(spacing):
                            return
                    else:
                        spacing = 0.0
                    announced = None
                    if not engine.client.live_offered:
                        if self._halt.wait(DEFAULT_INTERVAL):
                            return
                        continue
                    if client is None:
                        client = engine.live_client(float(DEFAULT_WAIT_SECONDS))
                    while not self._halt.is_set:
                        after = engine.transport_cursor()
                        started = time.monotonic()
                        query = LiveWaitQuery(after, read_after, DEFAULT_WAIT_SECONDS)
                        answer = client.live_wait(query)
                        if answer.current_seq > after:
                            read_after = max(read_after, answer.read_revision)
                            announced = answer.current_seq
                            break  # pull now
                        if answer.read_revision > read_after and not learned_read:
                            # The first answer teaches the team's read revision
                            # (a wait only cares for messages): ask again at once,
                            # once per wait — a relay raising it for ever meets
                            # the answer spacing.
                            read_after, learned_read = answer.read_revision, True
                            continue
                        read_after = max(read_after, answer.read_revision)
                        if time.monotonic() - started < ANSWER_SPACING and self._halt.wait(
                            ANSWER_SPACING
                        ):
                            return
                    failures = 0
                except StopRequested:
                    return
                except Exception as exc:  # the waiter keeps watching the store
                    failures += 1
                    _log.debug("wait: pull failed (%s: %s)", type(exc).__name__, exc)
                    if self._halt.wait(_RETRY.backoff(failures)):
                        return
        finally:
            if client is not None:
                client.close()
