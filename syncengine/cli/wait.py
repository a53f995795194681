"""``syncengine wait``: block until an agent has an unread message, print it.

An agent that would otherwise call ``inbox`` in a loop (costing a process
start and a query each time) waits here instead. A message may arrive by a
local ``send`` or through a ``pull``/``run`` in another process, so the
waiter cannot be told about it: it polls SQLite's change counter
(``PRAGMA data_version`` on its own connection, a few times a second),
which costs next to nothing, and runs the unread query only after some
other connection committed. It only ever reads (WAL readers never block a
writer), so every other process keeps sending and syncing while it waits,
and it marks nothing read unless ``--mark-read`` asks for exactly the
message it printed.

On a store whose team is connected to a relay, a message sent on another
machine is found just as fast whether or not ``run`` runs here: once the
first unread query finds nothing, a thread pulls through the engine at once
and again whenever the relay's live wait says the team moved
(:class:`syncengine.engine.live.WaitPuller`; specs/live.md §7). Only then
are the sync and HTTP modules imported: a ``wait`` that finds a message at
once, or runs on a store with no connection, costs what it always did, so
an agent may start one ``wait`` per turn.

Output is ``inbox``'s: one text line, or with ``--json`` one event-log
``message_sent`` record.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from syncengine.local_store import Store
from syncengine.store import StoreError

if TYPE_CHECKING:
    from types import FrameType

    from syncengine.store import MessageSent
    from syncengine.store.changes import StoreBell

__all__ = ["POLL_INTERVAL", "register", "wait_for_unread"]

#: Seconds between change-counter polls: a message is seen within this long
#: of its commit, and an idle waiter wakes only ~5 times a second.
POLL_INTERVAL = 0.2
#: The longest ``--timeout``: a day (a longer wait is ``--timeout 0``).
MAX_TIMEOUT = 86_400.0
EXIT_TIMED_OUT = 3
EXIT_SIGINT = 128 + signal.SIGINT  # 130, as every other command on Ctrl-C
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143

EPILOG = """\
exit codes:
  0 a message was printed   2 usage   3 timed out with nothing unread
  10/12/13 store errors (driver-interface; 13 also for an unknown team or agent)
  130 interrupted (SIGINT)   143 stopped (SIGTERM)"""


def _timeout(text: str) -> float:
    """A finite number of seconds within 0..a day: ``nan`` or ``inf`` would
    never compare as expired (or would expire at once), and a typo such as
    ``1e9`` is surely not meant."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= MAX_TIMEOUT):
        raise argparse.ArgumentTypeError(
            f"timeout must be a number of seconds within 0..{MAX_TIMEOUT:.0f} "
            f"(0 waits forever), not {text[:40]!r}"
        )
    return value


def register(subparsers: Any) -> None:
    wait = subparsers.add_parser(
        "wait",
        help="block until an agent has an unread message, then print it",
        description="Wait until AGENT of TEAM has an unread message (sent here or pulled\n"
        "by another process), print the oldest one as 'inbox' does and exit 0.\n"
        "Only reads: other processes keep sending and syncing meanwhile.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    wait.add_argument("--team", required=True)
    wait.add_argument("--agent", required=True)
    wait.add_argument(
        "--timeout",
        type=_timeout,
        default=0.0,
        metavar="SECONDS",
        help="give up after this long with exit 3 (default 0: wait forever; at most a day)",
    )
    wait.add_argument(
        "--mark-read", action="store_true", help="mark the printed message read (only that one)"
    )
    wait.add_argument("--store", metavar="PATH", help="store file (default: SYNCENGINE_STORE)")
    wait.add_argument("--json", action="store_true", help="print the message as a JSON record")
    wait.set_defaults(handler=_wait)


def wait_for_unread(
    store: Store,
    team: str,
    agent: str,
    timeout: float,
    *,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    on_idle: Callable[[], None] | None = None,
) -> MessageSent | None:
    """The oldest unread message for ``agent``, waiting up to ``timeout``
    seconds (0: forever) for one; ``None`` when the time ran out.

    The change counter is read *before* each unread query, so a commit that
    lands after the query still changes the counter and is never missed.
    """
    store.require_reader(team, agent)
    deadline = clock() + timeout if timeout else math.inf
    bells: list[StoreBell] = []
    if sleep is not None:
        given = sleep

        def nap(remaining: float) -> None:
            given(min(POLL_INTERVAL, remaining))

    else:
        # Woken by the kernel when another process writes the store (every
        # POLL_INTERVAL where it cannot watch): idle costs nothing, and a
        # pulled message is seen at once (specs/live.md §7). Made at the
        # first nap — a message found at once never pays for it — and that
        # nap returns at once, so a write before the watch began is still
        # caught by the change counter.
        def nap(remaining: float) -> None:
            if not bells:
                # start-up pin: wait loads no syncengine.store.changes
                from syncengine.store.changes import StoreBell

                bells.append(StoreBell(store.path))
                return
            bell = bells[0]
            limit = 3600.0 if not math.isfinite(remaining) else remaining
            bell.bell.wait(limit if bell.watching else min(limit, POLL_INTERVAL))
            bell.bell.clear()

    try:
        return _wait_loop(store, team, agent, deadline, nap, clock, on_idle)
    finally:
        for bell in bells:
            bell.close()


def _wait_loop(
    store: Store,
    team: str,
    agent: str,
    deadline: float,
    nap: Callable[[float], None],
    clock: Callable[[], float],
    on_idle: Callable[[], None] | None,
) -> MessageSent | None:
    version = store.data_version()
    while True:
        found = store.list_unread(team, agent, 1)
        if found:
            return found[0]
        if on_idle is not None:
            on_idle()  # once: nothing is unread yet
            on_idle = None
        while True:
            remaining = deadline - clock()
            if remaining <= 0:
                return None
            nap(remaining)
            current = store.data_version()
            if current != version:
                version = current
                break


class _Stopped(BaseException):
    """A stop signal while waiting (a BaseException: nothing may swallow it)."""

    def __init__(self, exit_code: int) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code


class _StopSignals:
    """SIGINT/SIGTERM end the wait at once while it is waiting; once a
    message was found they are held off, so a message is never printed
    without being marked read (``--mark-read``) nor half-reported."""

    def __init__(self) -> None:
        self.armed = True

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if self.armed:
            raise _Stopped(128 + signum)

    @contextmanager
    def installed(self) -> Iterator[None]:
        try:
            previous = {
                sig: signal.signal(sig, self.handle) for sig in (signal.SIGINT, signal.SIGTERM)
            }
        except ValueError:  # not the main thread (an embedding caller): leave signals alone
            previous = {}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _connected(store: Store, team: str) -> bool:
    """Whether ``team`` has a relay connection in this store (one query; no
    engine import)."""
    row = store.conn.execute(
        "SELECT 1 FROM engine_bindings AS b JOIN teams AS t ON t.team_pk = b.team_pk"
        " WHERE t.name = ?",
        (team,),
    ).fetchone()
    return row is not None


def _wait(args: argparse.Namespace) -> int:
    stops = _StopSignals()
    pulling: list[Any] = []

    def start_pulling() -> None:
        if not _connected(store, args.team):
            return
        # start-up pin: wait loads no syncengine.engine.live
        from syncengine.engine.live import WaitPuller

        # start-up pin: wait loads no syncengine.engine.runloop
        from syncengine.engine.runloop import StopSignal

        stop = StopSignal()
        puller = WaitPuller(store.path, args.team, stop)
        pulling.append(stop)
        puller.start()

    try:
        with stops.installed(), Store(args.store) as store:
            try:
                message = wait_for_unread(
                    store, args.team, args.agent, args.timeout, on_idle=start_pulling
                )
                stops.armed = False
                if message is None:
                    sys.stderr.write(
                        f"syncengine wait: nothing unread for {args.agent!r} in {args.team!r} "
                        f"within {args.timeout:g}s\n"
                    )
                    return EXIT_TIMED_OUT
                if args.json:
                    print(json.dumps(message.to_record(), ensure_ascii=False), flush=True)
                else:
                    print(f"{message.at}  {message.sender} -> {message.recipient}: {message.body}")
                    sys.stdout.flush()
                # Printed first, then marked (as ``inbox`` does): a failure in
                # between leaves the message unread, delivered again, never lost.
                if args.mark_read:
                    store.mark_read_batch(args.team, args.agent, [message.id])
            except StoreError as exc:
                sys.stderr.write(f"syncengine wait: {exc}\n")
                return exc.status.exit_code
    except _Stopped as stopped:
        return stopped.exit_code
    finally:
        for stop in pulling:  # the puller is a daemon: it ends with the process
            stop.set()
    return 0
