"""The live wait's server side: per-team wake hub, bounds, shutdown (specs/live.md).

``GET /x-syncengine/live/v1/wait`` (wire/http_v1/live.py) answers as soon as
the team's committed head passes the client's ``after`` or its read-state
revision passes ``read_after``, else when its time is up. This module holds
the waits of one relay process.

Theory of operation:

- **A waiter** is one request coroutine. It registers on its team's
  :class:`_TeamWatch` *before* its first authenticated read of the head, so a
  commit landing between that read and the first sleep is still seen. It
  then sleeps on the watch's event — an asyncio event, not a threadpool
  thread — until a wake, its next safety tick or its deadline. Database
  reads go through the threadpool like every other handler's.
- **Wakes** name a team: the HTTP handlers call :meth:`LiveHub.notify` after
  ``POST /v1/messages`` stored something or a read-state sync carried
  updates; on PostgreSQL the store's :class:`~relay.storage.base.LiveFeed`
  also delivers the other processes' commits (LISTEN/NOTIFY,
  relay/storage/pg_live.py), and ``None`` after it re-listened: every waited
  team is re-read. A single refresher task reads all pending teams' heads
  in one unauthenticated statement (:meth:`RelayStore.live_heads`) and
  publishes each to its watch: one read per burst, however many waiters.
- **A safety tick** (:data:`~relay.limits.LIVE_TICK_SECONDS`): every waiter
  re-reads its own head *with* its credential at least that often, so a
  credential revoked mid-wait is answered 401 within one tick, and a lost
  wake (a NOTIFY sent while the listener was reconnecting) costs at most one
  tick. A wait's final read at its deadline is authenticated too.
- **Bounds**: the wait lasts ``min(wait, max_wait_seconds)``; at most
  ``max_waits`` open in the process and ``max_waits_per_credential`` per
  bearer, else 429 ``live-wait-limit`` with ``Retry-After``.
- **Shutdown**: :meth:`LiveHub.shutdown` (SIGTERM, relay/server.py) answers
  every open wait at once with ``woken: false``, and any wait arriving
  later at once, so long polls never hold back a graceful exit.

House rules: every counter is changed on the event loop only (the feed's
thread hands wakes over with ``call_soon_threadsafe``); nothing here logs a
credential, and the bearer's hash is only a dictionary key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.concurrency import run_in_threadpool

from relay.errors import LiveWaitLimit, RelayError
from relay.limits import (
    LIVE_MAX_WAIT_SECONDS,
    LIVE_MAX_WAITS,
    LIVE_MAX_WAITS_PER_CREDENTIAL,
    LIVE_RETRY_AFTER_SECONDS,
    LIVE_TICK_SECONDS,
)
from relay.storage.base import LiveFeed, RelayStore
from relay.storage.records import Access, LiveHead
from wire.http_v1.live import LiveWaitQuery

__all__ = ["LiveHub", "LiveOptions", "WakeReason"]

_log = logging.getLogger("relay.live")

#: Why a wait answered: its team's head or read revision passed the client's,
#: its time ran out, or the relay is shutting down.
WakeReason = Literal["head", "read", "timeout", "shutdown"]
WAKE_REASONS: tuple[WakeReason, ...] = ("head", "read", "timeout", "shutdown")

ReadHead = Callable[[], Awaitable[LiveHead]]


@dataclass(frozen=True, slots=True)
class LiveOptions:
    """The operator's bounds on live waits (``relay serve --live-*``)."""

    max_wait_seconds: int = LIVE_MAX_WAIT_SECONDS
    max_waits: int = LIVE_MAX_WAITS
    max_waits_per_credential: int = LIVE_MAX_WAITS_PER_CREDENTIAL
    tick_seconds: float = LIVE_TICK_SECONDS


@dataclass(slots=True)
class _TeamWatch:
    """One team's open waits in this process and the newest head published to them."""

    waiters: int = 0
    head: LiveHead | None = None
    #: Set (and replaced by a fresh one) whenever a head is published.
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def publish(self, head: LiveHead) -> None:
        if self.head is None or _newer(head, self.head):
            self.head = head
        self.ring()

    def ring(self) -> None:
        """Wake every waiter sleeping on this watch."""
        event, self.changed = self.changed, asyncio.Event()
        event.set()


def _newer(a: LiveHead, b: LiveHead) -> bool:
    return (a.current_seq, a.read_revision) > (b.current_seq, b.read_revision)


def _reason(head: LiveHead, query: LiveWaitQuery) -> WakeReason | None:
    if head.current_seq > query.after:
        return "head"
    if head.read_revision > query.read_after:
        return "read"
    return None


class LiveHub:
    """The open live waits of one relay process, and how they are woken."""

    def __init__(self, store: RelayStore, options: LiveOptions | None = None) -> None:
        self.options = options or LiveOptions()
        self._store = store
        self._watches: dict[str, _TeamWatch] = {}
        self._per_credential: Counter[bytes] = Counter()
        self._open = 0
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._feed: LiveFeed | None = None
        self._pending: set[str] = set()
        self._draining = False
        #: Answers by reason, refusals (429) and head refreshes (``/metrics``).
        self.wakes: Counter[WakeReason] = Counter({reason: 0 for reason in WAKE_REASONS})
        self.refused = 0
        self.refreshes = 0

    # -- lifecycle ------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The app's lifespan: listen for other processes' wakes while serving."""
        self._loop = asyncio.get_running_loop()
        self._feed = self._store.live_feed()
        if self._feed is not None:
            self._feed.start(self._wake_from_thread)
        try:
            yield
        finally:
            self.shutdown()
            feed, self._feed = self._feed, None
            if feed is not None:
                await run_in_threadpool(feed.close)

    def shutdown(self) -> None:
        """Answer every open wait now (woken=false), and every later one at once."""
        self._closing = True
        for watch in self._watches.values():
            watch.ring()

    def shutdown_threadsafe(self) -> None:
        """:meth:`shutdown` from a signal handler or another thread."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self._closing = True
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self.shutdown)

    @property
    def open_waits(self) -> int:
        return self._open

    @property
    def listener_reconnects(self) -> int | None:
        """How often the cross-process listener reconnected; ``None`` without one."""
        feed: Any = self._feed
        reconnects = getattr(feed, "reconnects", None)
        return None if reconnects is None else int(reconnects)

    # -- wakes ----------------------------------------------------------------------------------
    def _wake_from_thread(self, team_id: str | None) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self.notify, team_id)

    def notify(self, team_id: str | None) -> None:
        """A team's head or read state moved (``None``: maybe any team's); on the loop."""
        if team_id is None:
            self._pending.update(self._watches)
        elif team_id in self._watches:
            self._pending.add(team_id)
        if self._pending and not self._draining:
            self._draining = True
            asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        """Read every pending team's head in one statement and publish; repeat while due."""
        try:
            while self._pending:
                batch = sorted(self._pending)
                self._pending.clear()
                try:
                    heads = await run_in_threadpool(self._store.live_heads, batch)
                except RelayError as exc:  # the ticks re-read each waiter's head anyway
                    _log.warning("live wake refresh failed: %s", exc.code)
                    return
                self.refreshes += 1
                for team_id, head in heads.items():
                    watch = self._watches.get(team_id)
                    if watch is not None:
                        watch.publish(head)
        finally:
            self._draining = False

    # -- the wait -------------------------------------------------------------------------------
    def _admit(self, access: Access) -> None:
        options = self.options
        scope = None
        if self._open >= options.max_waits:
            scope, limit = "relay", options.max_waits
        elif self._per_credential[access.secret_hash] >= options.max_waits_per_credential:
            scope, limit = "credential", options.max_waits_per_credential
        if scope is not None:
            self.refused += 1
            raise LiveWaitLimit(
                details={"scope": scope, "limit": limit},
                headers={"Retry-After": str(LIVE_RETRY_AFTER_SECONDS)},
                team_id=access.team_id,
            )
        self._open += 1
        self._per_credential[access.secret_hash] += 1

    def _release(self, access: Access) -> None:
        self._open -= 1
        self._per_credential[access.secret_hash] -= 1
        if self._per_credential[access.secret_hash] <= 0:
            del self._per_credential[access.secret_hash]

    async def wait(
        self, access: Access, query: LiveWaitQuery, read: ReadHead
    ) -> tuple[LiveHead, bool]:
        """Hold one wait; ``read`` authenticates and reads the team's head.

        The caller has authorized the request; ``read`` raising (401 when
        the credential was revoked meanwhile, 503 …) ends the wait with that
        error. Returns the head to answer and ``woken``.
        """
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        budget = min(query.wait, self.options.max_wait_seconds)
        if budget <= 0 or self._closing:
            head = await read()
            return self._answer(head, query, "shutdown" if self._closing else "timeout")
        self._admit(access)
        watch = self._watches.setdefault(access.team_id, _TeamWatch())
        watch.waiters += 1
        try:
            head = await read()
            deadline = loop.time() + budget
            next_check = loop.time() + self.options.tick_seconds
            while True:
                published = watch.head
                if published is not None and _newer(published, head):
                    head = published
                if _reason(head, query) is not None:
                    return self._answer(head, query, "timeout")
                if self._closing:
                    return self._answer(head, query, "shutdown")
                now = loop.time()
                if now >= deadline:
                    # The last word is an authenticated read, like every tick's.
                    return self._answer(await read(), query, "timeout")
                changed = watch.changed
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(deadline, next_check) - now):
                        await changed.wait()
                if loop.time() >= next_check and loop.time() < deadline:
                    head = await read()  # re-authorize; catch a wake that was lost
                    next_check = loop.time() + self.options.tick_seconds
        finally:
            watch.waiters -= 1
            if watch.waiters == 0:
                del self._watches[access.team_id]
            self._release(access)

    def _answer(
        self, head: LiveHead, query: LiveWaitQuery, otherwise: WakeReason
    ) -> tuple[LiveHead, bool]:
        reason = _reason(head, query)
        self.wakes[reason or otherwise] += 1
        return head, reason is not None
