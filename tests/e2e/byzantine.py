"""The byzantine-relay harness (issue #14, item 4): a real relay, a lying proxy.

A :class:`Scene` has an honest *writer* machine connected straight to the
live relay and a *victim* machine connected through a
:class:`~tests.e2e.proxy.FaultProxy` that lies in one way per test (it
rewrites, withholds, delays or hand-writes the relay's answers). A test
arms a lie, lets the victim operate (:meth:`Scene.attack`), and then:

* :meth:`Scene.check` — the client's invariants, whatever the lie was:
  nothing invented (every held body was sent by a machine of the scene),
  nothing duplicated, the transport cursor never past an envelope the victim
  holds no genuine outcome for, and the victim's ``status`` truthful about
  the operation's outcome (the state the failure classifies as, ``ok``
  after a success);
* :meth:`Scene.heal` — the lie stops, an operator resumes a halted binding,
  and one honest sync must bring the victim to exactly the relay's genuine
  history, each message once: nothing was lost.

The genuine history is read through the writer's own (honest) connection.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syncengine.engine import Engine
from syncengine.engine.errors import classify
from syncengine.http import ClientConfig, RetryPolicy
from syncengine.local_store import Store
from tests.e2e.proxy import Fault, FaultProxy, fault_proxy
from tests.support.live_relay import LiveRelay
from tests.support.machines import LeanTeam, Machine, age_epoch, relay_port
from wire.age_keys import parse_identity_file
from wire.http_v1.messages import PulledMessage
from wire.outcome import Importable
from wire.profiles import Binding, OpenContext, open_envelope

__all__ = ["CAPABILITIES", "MEMBERS", "PAGES", "POST", "Attack", "Scene", "byzantine_scene"]

PAGES = "GET /v1/messages"
CAPABILITIES = "GET /v1/capabilities"
POST = "POST /v1/messages"
MEMBERS = "GET /v1/members"

#: The victim gives up quickly: two attempts, a 3 s whole-attempt deadline.
VICTIM_CONFIG = ClientConfig(
    request_deadline=3.0,
    retry=RetryPolicy(max_attempts=2, backoff_base=0.01, backoff_cap=0.01, max_elapsed=10.0),
)


@dataclass
class Attack:
    """What one operation of the victim did under a lie."""

    error: BaseException | None
    result: Any
    seconds: float

    @property
    def state(self) -> str:
        """The state the outcome must leave in ``status``."""
        return "ok" if self.error is None else classify(self.error).state.value


@dataclass
class Scene:
    live: LiveRelay
    team: LeanTeam
    proxy: FaultProxy
    writer: Machine
    victim: Machine
    sent: Counter[str] = field(default_factory=Counter)
    attacks: list[Attack] = field(default_factory=list)

    # -- acting -------------------------------------------------------------------------

    def write(self, count: int, prefix: str = "m") -> list[str]:
        """The writer sends ``count`` messages and syncs them to the relay."""
        start = len(self.sent)
        bodies = [f"{prefix}{start + i}" for i in range(count)]
        self.writer.send("alice", "bob", *bodies)
        self.sent.update(bodies)
        self.writer.sync()
        return bodies

    def victim_sends(self, *bodies: str) -> None:
        self.victim.send("bob", "alice", *bodies)
        self.sent.update(bodies)

    def lie(self, fault: Fault) -> Fault:
        self.proxy.faults.append(fault)
        return fault

    def engine(self) -> Engine:
        return Engine(self.victim.store, client_config=VICTIM_CONFIG)

    def attack(self, operation: str = "sync") -> Attack:
        """Run one victim operation (``sync``, ``pull`` or ``push``) under the lie."""
        started = time.monotonic()
        error: BaseException | None = None
        result = None
        with self.engine() as engine:
            try:
                result = getattr(engine, operation)()
            except Exception as exc:  # the outcome is what the test inspects
                error = exc
        attack = Attack(error, result, time.monotonic() - started)
        self.attacks.append(attack)
        return attack

    # -- the relay's truth --------------------------------------------------------------

    def genuine(self) -> list[tuple[int, str, str]]:
        """The relay's live history as ``(server_seq, wire_id, body)``, honestly."""
        history: list[tuple[int, str, str]] = []
        with Engine(self.writer.store) as engine:
            after = engine.client.capabilities().binding.min_available_seq
            while True:
                page = engine.client.get_messages(after, 1000)
                for pulled in page.messages:
                    history.append((pulled.server_seq, pulled.id, self._open(engine, pulled)))
                after = page.next_after
                if not page.has_more:
                    return history

    def _open(self, engine: Engine, pulled: PulledMessage) -> str:
        """A genuine envelope's body, opened with the writer's own identity."""
        identities: dict[str, object] = {}
        c = engine.connection
        if c.identity_path is not None and c.age_key_id is not None:
            identity = parse_identity_file(Path(c.identity_path).read_bytes())
            identities[c.age_key_id] = identity
        ctx = OpenContext(
            binding=Binding(c.remote_team_id, pulled.id, c.protocol_version),
            identities=identities,
        )
        outcome = open_envelope(pulled.envelope, ctx)
        assert isinstance(outcome, Importable), outcome
        return outcome.message.body

    # -- invariants ---------------------------------------------------------------------

    def bodies(self) -> list[str]:
        with Store(self.victim.store) as store:
            return [m.body for m in store.history("crew")]

    def cursor(self) -> int:
        with self.engine() as engine:
            binding = engine.store.sync_binding(engine.connection.key)
            return 0 if binding is None else binding.transport_cursor

    def state(self) -> str:
        with self.engine() as engine:
            return engine.status().engine.state

    def check(self) -> None:
        """The victim's invariants after whatever the relay said."""
        bodies = self.bodies()
        duplicated = sorted(b for b, n in Counter(bodies).items() if n > 1)
        assert not duplicated, f"the victim holds duplicates {duplicated}"
        invented = sorted(set(bodies) - set(self.sent))
        assert not invented, f"the victim holds messages nobody sent: {invented}"
        genuine = self.genuine()
        cursor = self.cursor()
        current = genuine[-1][0] if genuine else 0
        assert cursor <= current, f"transport cursor {cursor} beyond the relay's {current}"
        held = set(bodies)
        skipped = [(seq, body) for seq, _, body in genuine if seq <= cursor and body not in held]
        assert not skipped, f"cursor {cursor} passed envelopes never applied: {skipped}"
        if self.attacks:
            expected = self.attacks[-1].state
            assert self.state() == expected, (
                f"status says {self.state()!r} after an operation that ended {expected!r} "
                f"({self.attacks[-1].error!r})"
            )

    def heal(self) -> None:
        """The lie ends; an operator resumes a halt; one honest sync converges."""
        self.proxy.faults.clear()
        with Engine(self.victim.store) as engine:
            if engine.status().engine.halt_code is not None:
                assert engine.resume()
            engine.sync()
            assert engine.status().engine.state == "ok"
        genuine = sorted(body for _, _, body in self.genuine())
        assert sorted(self.bodies()) == genuine, "the victim lost or gained messages"
        assert set(genuine) == set(self.sent), "the relay lost a message a machine sent"


@contextmanager
def byzantine_scene(
    live: LiveRelay, tmp_path: Path, messages: int = 6, *, sealed: bool = False
) -> Iterator[Scene]:
    """A fresh team with ``messages`` already on the relay; the victim has
    connected (through the proxy) but not pulled yet. ``sealed`` puts both
    machines on one age-v1 epoch (``e2ee-required``)."""
    with fault_proxy(relay_port(live)) as proxy:
        team = LeanTeam(live, tmp_path)
        if sealed:
            recipients, keys = age_epoch(tmp_path, "writer", "victim")

            def join(on: LeanTeam, name: str) -> Machine:
                return on.machine(
                    name,
                    "e2ee-required",
                    key_id="epoch-1",
                    recipients_file=str(recipients),
                    identity_file=str(keys[name]),
                )

            writer, victim = join(team, "writer"), join(team.via(proxy.url), "victim")
        else:
            writer = team.machine("writer")
            victim = team.via(proxy.url).machine("victim")
        scene = Scene(live, team, proxy, writer, victim)
        if messages:
            scene.write(messages)
        yield scene
