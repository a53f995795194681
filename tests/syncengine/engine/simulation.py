"""A seeded simulation of three machines syncing through one fake relay.

Each seed drives three stores (one ``Engine`` each) connected to the same
:class:`FakeRelay` team (alice, bob, carol) through a random sequence of
actions — sends, push/pull/sync, reads, lost responses and proxy pages,
retention (inside and beyond what every machine pulled, the latter followed
by the operator's resync), the live wait answering honestly or announcing
heads that never come (the machine pulls as its run loop would), a lying
relay that re-serves a held message at the next sequence, and crashes (an
Engine closed and reopened, sometimes in the middle of an operation right
after the relay acted). After every step the
invariants are checked; a quiescent phase at the end checks convergence.

Everything is decided by ``random.Random(seed)``, so a failing seed and its
step log reproduce the run (``scripts/simulate.py --seeds 1 --start SEED``).
"""

from __future__ import annotations

import logging
import os
import random
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from syncengine.engine import Engine
from syncengine.engine.errors import IntegrityHalted
from syncengine.http.errors import ResyncRequired, TransientFailure
from syncengine.ids import new_uuid7
from syncengine.local_store import Store
from syncengine.ops.errors import SyncCorruptState
from tests.syncengine.engine.fake_connect import FAST, connect_fake
from tests.syncengine.engine.fakerelay import RECEIVED_AT, FakeRelay, proxy_page, reply
from wire.http_v1.messages import MessagePage, PulledMessage
from wire.outcome import Importable
from wire.profiles import open_envelope

__all__ = ["Crash", "RunStats", "Simulation", "SimulationFailure", "run_seed", "run_seeds"]

TEAM = "crew"
MEMBERS = ("alice", "bob", "carol")
MACHINES = 3

#: Relative weights of the actions a step picks from.
ACTIONS: dict[str, int] = {
    "send": 24,
    "push": 8,
    "pull": 8,
    "sync": 14,
    "mark_read": 12,
    "fault": 10,
    "retention": 3,
    "lying_relay": 4,
    "crash": 4,
    "crash_mid_op": 3,
    "live": 8,
}

#: Where a fault may be armed, and the operation that then runs into it.
FAULT_TARGETS: tuple[tuple[str, str, str], ...] = (
    ("POST", "/v1/messages", "push"),
    ("GET", "/v1/messages", "pull"),
    ("POST", "/v1/read-state/sync", "pull"),
    ("GET", "/v1/capabilities", "sync"),
    ("POST", "/v1/messages", "sync"),
)


class Crash(BaseException):
    """The process died right here (a BaseException: the engine records nothing)."""


class SimulationFailure(AssertionError):
    """An invariant broke; carries the seed and the step log to reproduce it."""

    def __init__(self, seed: int, step: int, message: str, log: list[str]) -> None:
        self.seed, self.step, self.log = seed, step, log
        super().__init__(f"seed {seed}, step {step}: {message}")

    def report(self) -> str:
        return "\n".join([str(self), "step log:", *self.log])


@dataclass
class RunStats:
    seeds: int = 0
    steps: int = 0
    seconds: float = 0.0
    actions: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    checks: Counter[str] = field(default_factory=Counter)

    def merge(self, other: RunStats) -> None:
        self.seeds += other.seeds
        self.steps += other.steps
        self.seconds += other.seconds
        self.actions.update(other.actions)
        self.outcomes.update(other.outcomes)
        self.checks.update(other.checks)

    def summary(self) -> str:
        rate = self.steps / self.seconds if self.seconds else 0.0
        lines = [f"seeds={self.seeds} steps={self.steps} time={self.seconds:.2f}s "
                 f"steps/s={rate:.1f}"]  # fmt: skip
        for title, counts in (
            ("actions", self.actions),
            ("outcomes", self.outcomes),
            ("invariant checks", self.checks),
        ):
            lines.append(f"{title}:")
            lines.extend(f"  {name:<24} {count}" for name, count in sorted(counts.items()))
        return "\n".join(lines)


@dataclass
class Fault:
    method: str
    path: str
    #: "refuse" (connection error before the relay sees it), "lose" (the relay
    #: acts, the response is lost), "proxy" (a 503 proxy page), "crash".
    kind: str


@dataclass
class Held:
    """What one store held after the previous step (for the monotonic checks)."""

    bodies: set[str] = field(default_factory=set)
    read: set[tuple[str, str]] = field(default_factory=set)
    cursor: int = 0


class Simulation:
    def __init__(self, seed: int, steps: int, root: Path) -> None:
        self.seed, self.steps, self.root = seed, steps, root
        self.rng = random.Random(seed)
        self.stats = RunStats(seeds=1)
        self.log: list[str] = []
        self.step = 0
        roster = sorted((new_uuid7(), name) for name in MEMBERS)
        self.relay = FakeRelay(roster=roster)
        self.faults: list[Fault] = []
        self.paths: list[Path] = []
        self.engines: list[Engine] = []
        for index in range(MACHINES):
            directory = root / f"m{index}"
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / "store.db"
            connect_fake(self.relay, path, team=TEAM)
            self.paths.append(path)
            self.engines.append(self._open(index))
        #: body -> (sender, recipient) of every message sent anywhere.
        self.sent: dict[str, tuple[str, str]] = {}
        self.origin: dict[str, int] = {}
        self.held = [Held() for _ in range(MACHINES)]
        #: Bodies each machine can never receive: retention dropped them first.
        self.lost: list[set[str]] = [set() for _ in range(MACHINES)]
        self.bodies_by_wire: dict[str, str] = {}
        self.observers = [Store(path) for path in self.paths]
        self.versions: list[int | None] = [None] * MACHINES
        self.sent_count = 0

    # -- plumbing -----------------------------------------------------------------

    def _open(self, index: int) -> Engine:
        return Engine(
            self.paths[index],
            transport=httpx.MockTransport(self.handle),
            client_config=FAST,
            sleep=lambda s: None,
        )

    def handle(self, request: httpx.Request) -> httpx.Response:
        """The relay behind a network that may drop, lose or proxy a request."""
        for index, fault in enumerate(self.faults):
            if fault.method == request.method and fault.path == request.url.path:
                del self.faults[index]
                if fault.kind == "refuse":
                    raise httpx.ConnectError("simulated connection refused", request=request)
                if fault.kind == "proxy":
                    return proxy_page()
                self.relay.handle(request)
                if fault.kind == "crash":
                    raise Crash(f"{request.method} {request.url.path}")
                raise httpx.ReadTimeout("simulated lost response", request=request)
        return self.relay.handle(request)

    def note(self, text: str) -> None:
        self.log.append(f"[{self.step}] {text}")

    def fail(self, message: str) -> SimulationFailure:
        return SimulationFailure(self.seed, self.step, message, self.log)

    def close(self) -> None:
        for engine in self.engines:
            engine.close()
        for observer in self.observers:
            observer.close()

    def cursor(self, index: int) -> int:
        binding = self.engines[index].store.sync_binding(self.engines[index].connection.key)
        return binding.transport_cursor if binding is not None else 0

    def relay_body(self, wire_id: str) -> str:
        body = self.bodies_by_wire.get(wire_id)
        if body is None:
            outcome = open_envelope(self.relay.by_id[wire_id].envelope)
            if not isinstance(outcome, Importable):
                raise self.fail(f"the relay holds an envelope that does not open: {outcome}")
            body = self.bodies_by_wire[wire_id] = outcome.message.body
        return body

    # -- the operator's view of an operation ----------------------------------------

    def operate(self, index: int, op: str, *, resync_now: float = 0.7) -> str:
        """Run ``op`` on machine ``index``, handling expected failures as an
        operator would; returns the outcome's name."""
        engine = self.engines[index]
        try:
            if op == "push":
                engine.push(self.rng.choice((1, 3, 10, 100)))
            elif op == "pull":
                engine.pull(self.rng.choice((1, 2, 5, 100)))
            else:
                engine.sync(self.rng.choice((1, 3, 100)), self.rng.choice((1, 2, 5, 100)))
        except TransientFailure as exc:
            return f"transient:{exc.code}"
        except SyncCorruptState:
            return "halted"
        except IntegrityHalted:
            # The operator verified the relay (the lie was one episode).
            engine.resume()
            return "integrity-halt->resumed"
        except ResyncRequired as exc:
            if self.rng.random() < resync_now:
                floor = exc.min_available_seq
                engine.resync(floor)
                return f"resync-required->resynced:{floor}"
            return "resync-required(deferred)"
        return "ok"

    # -- actions ------------------------------------------------------------------

    def act_send(self) -> str:
        index = self.rng.randrange(MACHINES)
        sender, recipient = self.rng.choice(MEMBERS), self.rng.choice(MEMBERS)
        body = f"s{self.seed}-{self.sent_count}"
        self.sent_count += 1
        self.engines[index].store.send(TEAM, sender, recipient, body)
        self.sent[body] = (sender, recipient)
        self.origin[body] = index
        return f"m{index} send {body} {sender}->{recipient}"

    def act_op(self, op: str) -> str:
        index = self.rng.randrange(MACHINES)
        return f"m{index} {op}: {self.operate(index, op)}"

    def act_live(self) -> str:
        """A machine's live wait answers (honestly, or announcing a head that
        never comes) and the machine pulls as its run loop would: a wake is
        only a hint, so every invariant holds either way (specs/live.md §5)."""
        from wire.http_v1.live import LiveWaitQuery

        index = self.rng.randrange(MACHINES)
        engine = self.engines[index]
        lie = self.rng.choice((0, 0, 0, 1, 7, 1000))
        self.relay.live_lie = lie
        client = engine.live_client(0.0, 5.0)
        try:
            after = self.cursor(index)
            answer = client.live_wait(LiveWaitQuery(after, 0, 0))
        except TransientFailure as exc:
            return f"m{index} live: transient:{exc.code}"
        finally:
            client.close()
            self.relay.live_lie = 0
        if answer.current_seq <= after:
            return f"m{index} live: nothing new (lie {lie})"
        return f"m{index} live: woken at {answer.current_seq} (lie {lie}), pull: " + self.operate(
            index, "pull"
        )

    def act_mark_read(self) -> str:
        index = self.rng.randrange(MACHINES)
        member = self.rng.choice(MEMBERS)
        store = self.engines[index].store
        unread = store.list_unread(TEAM, member)
        if not unread:
            return f"m{index} mark_read {member}: nothing unread"
        chosen = self.rng.sample(unread, self.rng.choice((1, 1, 1, min(3, len(unread)))))
        store.mark_read_batch(TEAM, member, [m.id for m in chosen])
        return f"m{index} mark_read {member}: {','.join(m.body for m in chosen)}"

    def act_fault(self) -> str:
        index = self.rng.randrange(MACHINES)
        method, path, op = self.rng.choice(FAULT_TARGETS)
        kind = self.rng.choice(("refuse", "lose", "proxy"))
        # One fault is retried away (FAST allows two attempts); two surface.
        count = self.rng.choice((1, 1, 2))
        self.faults.extend(Fault(method, path, kind) for _ in range(count))
        outcome = self.operate(index, op)
        self.faults.clear()
        return f"m{index} fault {kind}x{count} {method} {path} then {op}: {outcome}"

    def act_retention(self) -> str:
        cursors = [self.cursor(i) for i in range(MACHINES)]
        low, high = max(self.relay.floor, min(cursors)), self.relay.current_seq
        if high <= self.relay.floor:
            return "retention: skipped (nothing to drop)"
        if low > self.relay.floor and self.rng.random() < 0.75:
            floor = self.rng.randint(self.relay.floor + 1, low)
            kind = "pulled-by-all"
        else:
            floor = self.rng.randint(self.relay.floor + 1, high)
            kind = "beyond" if floor > min(cursors) else "pulled-by-all"
        for i, cursor in enumerate(cursors):
            for stored in self.relay.messages:
                if cursor < stored.seq <= floor:
                    body = self.relay_body(stored.id)
                    if body not in self.held[i].bodies:
                        self.lost[i].add(body)
        self.relay.retain_through(floor)
        return f"retention through {floor} (cursors {cursors}): {kind}"

    def act_lying_relay(self) -> str:
        def candidates() -> list[int]:
            current = self.relay.current_seq
            return [
                i
                for i in range(MACHINES)
                if self.cursor(i) < current
                and any(m.seq <= self.cursor(i) for m in self.relay.messages)
            ]

        prelude = ""
        if not candidates():
            # Give the relay a genuine next sequence: another machine pushes.
            pusher = self.rng.randrange(MACHINES)
            prelude = f"m{pusher} push first: {self.operate(pusher, 'push')}; "
        choices = candidates()
        if not choices:
            return f"{prelude}lying_relay: skipped (no machine holds a message below a next one)"
        index = self.rng.choice(choices)
        cursor = self.cursor(index)
        held = [m for m in self.relay.messages if m.seq <= cursor]
        victim = self.rng.choice(held)
        lie = MessagePage(
            self.relay.binding(),
            (PulledMessage(cursor + 1, victim.id, RECEIVED_AT, victim.envelope),),
            cursor + 1,
            False,
        )
        self.engines[index].resume()  # an earlier episode's halt was verified
        self.relay.inject("GET", "/v1/messages", lambda: reply(lie.to_obj()))
        before = set(self.bodies(index))
        try:
            self.engines[index].pull(self.rng.choice((1, 5, 100)))
        except SyncCorruptState:
            outcome = "halted"
        else:
            raise self.fail(
                f"m{index} accepted seq {victim.seq} re-served at {cursor + 1} without halting"
            )
        finally:
            self.relay.injected.clear()
        self.stats.checks["lying-relay-halts"] += 1
        if self.cursor(index) != cursor:
            raise self.fail(f"m{index} moved its cursor {cursor}->{self.cursor(index)} on a lie")
        if set(self.bodies(index)) != before:
            raise self.fail(f"m{index} changed its messages on a lie")
        self.stats.checks["lying-relay-skips-nothing"] += 1
        return (
            f"{prelude}m{index} lying_relay seq {victim.seq} re-served at {cursor + 1}: {outcome}"
        )

    def act_crash(self, mid_op: bool) -> str:
        index = self.rng.randrange(MACHINES)
        detail = "between operations"
        if mid_op:
            method, path, op = self.rng.choice(FAULT_TARGETS)
            self.faults.append(Fault(method, path, "crash"))
            try:
                outcome = self.operate(index, op)
            except Crash:
                outcome = "crashed"
            self.faults.clear()
            detail = f"after the relay answered {method} {path} during {op}: {outcome}"
        self.engines[index].close()
        self.engines[index] = self._open(index)
        return f"m{index} crash {detail}; reopened"

    # -- invariants ---------------------------------------------------------------

    def bodies(self, index: int) -> list[str]:
        return [m.body for m in self.engines[index].store.history(TEAM)]

    def check(self) -> None:
        checks = self.stats.checks
        current = self.relay.current_seq
        relay_bodies = [self.relay_body(wire_id) for wire_id in self.relay.by_id]
        if len(relay_bodies) != len(set(relay_bodies)):
            raise self.fail("the relay stores one message body under two wire IDs")
        checks["relay-no-duplicates"] += 1
        if not set(relay_bodies) <= self.sent.keys():
            raise self.fail(
                f"the relay holds unknown bodies {set(relay_bodies) - self.sent.keys()}"
            )
        checks["relay-only-sent"] += 1
        for i in range(MACHINES):
            # The checks read through an observer connection of their own: what
            # a new process would see. SQLite's data_version tells it whether any
            # other connection committed since its last look; an unchanged store
            # gives the same answers, so only the relay-dependent bound is redone.
            store = self.observers[i]
            version = store.conn.execute("PRAGMA data_version").fetchone()[0]
            if version == self.versions[i]:
                if self.held[i].cursor > current:
                    raise self.fail(f"m{i} transport cursor beyond current_seq {current}")
                checks["cursor-within-relay"] += 1
                checks["store-unchanged(skipped)"] += 1
                continue
            self.versions[i] = version
            messages = store.history(TEAM)
            bodies = [m.body for m in messages]
            held = set(bodies)
            if len(bodies) != len(held):
                dup = sorted(b for b, n in Counter(bodies).items() if n > 1)
                raise self.fail(f"m{i} holds duplicates {dup}")
            checks["store-no-duplicates"] += 1
            for m in messages:
                if self.sent.get(m.body) != (m.sender, m.recipient):
                    raise self.fail(f"m{i} holds {m.body!r} {m.sender}->{m.recipient} never sent")
            checks["store-only-sent"] += 1
            if not self.held[i].bodies <= held:
                raise self.fail(f"m{i} lost {sorted(self.held[i].bodies - held)}")
            checks["store-nothing-lost"] += 1
            unread = {(who, m.body) for who in MEMBERS for m in store.list_unread(TEAM, who)}
            read = {(m.recipient, m.body) for m in messages} - unread
            if not self.held[i].read <= read:
                raise self.fail(
                    f"m{i} made read messages unread {sorted(self.held[i].read - read)}"
                )
            checks["read-never-backwards"] += 1
            binding = store.sync_binding(self.engines[i].connection.key)
            cursor = binding.transport_cursor if binding is not None else 0
            if cursor > current:
                raise self.fail(f"m{i} transport cursor {cursor} beyond current_seq {current}")
            checks["cursor-within-relay"] += 1
            if cursor < self.held[i].cursor:
                raise self.fail(f"m{i} transport cursor went back {self.held[i].cursor}->{cursor}")
            checks["cursor-monotonic"] += 1
            if held & self.lost[i]:
                raise self.fail(f"m{i} holds {sorted(held & self.lost[i])} retention dropped")
            checks["retention-gap-exact"] += 1
            self.held[i] = Held(held, read, cursor)

    # -- the run --------------------------------------------------------------------

    def run(self) -> RunStats:
        names, weights = list(ACTIONS), list(ACTIONS.values())
        started = time.perf_counter()
        self.check()
        for step in range(1, self.steps + 1):
            self.step = step
            action = self.rng.choices(names, weights)[0]
            self.stats.actions[action] += 1
            try:
                text = self.dispatch(action)
            except SimulationFailure:
                raise
            except Exception as exc:
                self.note(f"{action}: unexpected {type(exc).__name__}: {exc}")
                raise self.fail(f"{action} raised {type(exc).__name__}: {exc}") from exc
            self.note(text)
            self.stats.outcomes[_outcome_name(action, text)] += 1
            self.check()
        self.step = self.steps + 1
        self.quiesce()
        self.stats.steps = self.steps
        self.stats.seconds = time.perf_counter() - started
        return self.stats

    def dispatch(self, action: str) -> str:
        handlers: dict[str, Callable[[], str]] = {
            "send": self.act_send,
            "push": lambda: self.act_op("push"),
            "pull": lambda: self.act_op("pull"),
            "sync": lambda: self.act_op("sync"),
            "mark_read": self.act_mark_read,
            "fault": self.act_fault,
            "retention": self.act_retention,
            "lying_relay": self.act_lying_relay,
            "crash": lambda: self.act_crash(False),
            "crash_mid_op": lambda: self.act_crash(True),
            "live": self.act_live,
        }
        return handlers[action]()

    def snapshot(self) -> Any:
        return (
            self.relay.current_seq,
            len(self.relay.by_id),
            sorted(self.relay.read_frontiers.items()),
            sorted((k, sorted(v)) for k, v in self.relay.read_exact.items()),
            [(sorted(h.bodies), sorted(h.read), h.cursor) for h in self.held],
        )

    def quiesce(self) -> None:
        """Every machine syncs, with no faults, until two rounds change nothing."""
        self.faults.clear()
        self.relay.injected.clear()
        quiet, rounds = 0, 0
        while quiet < 2:
            rounds += 1
            if rounds > 30:
                raise self.fail("the quiescent phase never settled")
            before = self.snapshot()
            for i in range(MACHINES):
                self.engines[i].resume()  # the operator verified the relay
                try:
                    self.engines[i].sync()
                except ResyncRequired as exc:
                    self.engines[i].resync(exc.min_available_seq)
                    self.note(f"quiesce m{i}: resynced to {exc.min_available_seq}")
                except Exception as exc:
                    self.note(f"quiesce m{i}: {type(exc).__name__}: {exc}")
                    raise self.fail(f"quiescent sync raised {type(exc).__name__}: {exc}") from exc
                self.check()
            quiet = quiet + 1 if self.snapshot() == before else 0
        self.note(f"quiescent after {rounds} rounds")
        self.converged()

    def converged(self) -> None:
        checks = self.stats.checks
        for i in range(MACHINES):
            if self.engines[i].status().pending_push:
                raise self.fail(f"m{i} still has messages to push after quiescence")
            expected = self.sent.keys() - self.lost[i]
            held = self.held[i].bodies
            if held != expected:
                raise self.fail(
                    f"m{i} did not converge: missing {sorted(expected - held)}, "
                    f"extra {sorted(held - expected)}"
                )
            checks["converged-messages"] += 1
        common = set.intersection(*(h.bodies for h in self.held))
        views = [{pair for pair in h.read if pair[1] in common} for h in self.held]
        for i in range(1, MACHINES):
            if views[i] != views[0]:
                raise self.fail(
                    f"m0 and m{i} disagree on read state: only m0 {sorted(views[0] - views[i])}, "
                    f"only m{i} {sorted(views[i] - views[0])}"
                )
            checks["converged-read-state"] += 1


def _outcome_name(action: str, text: str) -> str:
    """The step's outcome without its numbers: ``sync:transient``, ``fault:ok``."""
    if action in ("send", "mark_read", "crash"):
        return action
    tail = text.rsplit(": ", 1)[-1]
    for stop in (":", ";", "(", "->", " "):
        tail = tail.split(stop)[0]
    return f"{action}:{tail or 'skipped'}"


def run_seed(seed: int, steps: int, root: Path | None = None) -> RunStats:
    """One seed in ``root`` (a fresh temporary directory when omitted).

    The engine's logs are quieted for the run and restored afterwards: a
    simulation must not change what later code (or tests) log."""
    if root is None:
        shm = Path("/dev/shm")  # in memory when possible: crashes here spare the disk
        where = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
        with tempfile.TemporaryDirectory(prefix=f"sim{seed}-", dir=where) as tmp:
            return run_seed(seed, steps, Path(tmp))
    logger = logging.getLogger("syncengine")
    level = logger.level
    logger.setLevel(logging.ERROR)
    sim = Simulation(seed, steps, root)
    try:
        return sim.run()
    finally:
        sim.close()
        logger.setLevel(level)


def run_seeds(seeds: Iterable[int], steps: int) -> RunStats:
    total = RunStats()
    for seed in seeds:
        total.merge(run_seed(seed, steps))
    return total
