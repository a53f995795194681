"""Read state across several machines sharing one relay
(read-state-synchronization.md; specs/read-state.md §1, §4, §6).

Three stores of team ``dev`` = {alice, bob} share one relay: a message
stream (:class:`FakeRelay`) and a small read-state model that max-merges
frontiers, unions exact reads and drops an exact read once it knows the
wire's sequence lies under the member's frontier. Hypothesis sends, pushes
(sometimes losing the ack), pulls, marks messages read, and runs read-state
rounds that complete, lose the relay's response, fail before the apply
commits, or crash right after prepare.

After every step: no store's read set ever shrinks, and no store reports a
message read that nobody marked read (the floor stays 0). After a quiescent
round (push and pull everywhere, then two read rounds on every store; at any
step, and always at the end) every store holds the same messages and agrees
on each member's unread set — the messages nobody marked read.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from unittest import mock

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import syncengine.store.connection as connection
from syncengine.ids import new_uuid7
from syncengine.local_store import Store
from syncengine.ops.read_records import (
    SyncReadContext,
    SyncReadExact,
    SyncReadFrontier,
    SyncReadSnapshot,
)
from syncengine.ops.read_state import PrepareReadResult, _first_unread_seq
from syncengine.store import teams as team_rows
from syncengine.store.connection import write_transaction
from tests.syncengine.ops.helpers import Classifier, FakeRelay, new_key, prepare_none

STORES = 3
MEMBERS = ("alice", "bob")
NOW = "2026-08-01T10:00:00.000000Z"

#: (recipient, body): bodies are unique, so they name a message on every store.
Read = tuple[str, str]


class ReadRelay:
    """The relay's read state: frontiers max-merged, exact reads unioned and
    collected once the stream shows the wire's sequence under the frontier."""

    def __init__(self, stream: FakeRelay, members: dict[str, str]) -> None:
        self.stream = stream
        self.members = members
        self.frontiers: dict[str, int] = {}
        self.exact: dict[str, set[str]] = {}

    def merge(self, prepared: PrepareReadResult) -> None:
        for frontier in prepared.frontiers:
            assert frontier.member_id in self.members.values()
            assert frontier.server_seq <= self.stream.tip, "a frontier beyond current_seq"
            merged = max(self.frontiers.get(frontier.member_id, 0), frontier.server_seq)
            self.frontiers[frontier.member_id] = merged
        for exact in prepared.exact:
            entry = self.stream.by_wire.get(exact.wire_id)
            assert entry is not None, "an exact read of a wire the relay never stored"
            if entry.seq > self.frontiers.get(exact.member_id, 0):
                self.exact.setdefault(exact.member_id, set()).add(exact.wire_id)
        for member_id, wires in self.exact.items():
            top = self.frontiers.get(member_id, 0)
            wires -= {w for w in wires if self.stream.by_wire[w].seq <= top}

    def page(self) -> list[SyncReadFrontier | SyncReadExact]:
        items: list[SyncReadFrontier | SyncReadExact] = []
        for member_id in sorted(self.members.values()):
            items.append(SyncReadFrontier(member_id, self.frontiers.get(member_id, 0)))
            items.extend(SyncReadExact(member_id, w) for w in sorted(self.exact.get(member_id, ())))
        return items


class ReadStateMachines(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="read-state-"))
        self.key = new_key()
        self.ids = {name: new_uuid7() for name in MEMBERS}
        self.stream = FakeRelay()
        self.relay = ReadRelay(self.stream, self.ids)
        self.classifier = Classifier(self.key)
        self.stores: list[Store] = []
        for index in range(STORES):
            store = Store(self.root / f"machine-{index}.db")
            store.init()
            store.create_team("dev", list(MEMBERS))
            with write_transaction(store.conn, store.path, "engine.roster") as conn:
                roster = [(self.ids[name], name) for name in MEMBERS]
                team_rows.adopt_roster(conn, team_rows.team_pk(conn, "dev"), roster, NOW)
            store.sync_bind(self.key)
            self.stores.append(store)
        self.marked: set[Read] = set()
        self.seen: list[set[Read]] = [set() for _ in self.stores]
        self.sent = 0

    def teardown(self) -> None:
        """Every run ends quiescent, so every run checks convergence."""
        try:
            self.quiesce()
        finally:
            for store in self.stores:
                store.close()
            shutil.rmtree(self.root, ignore_errors=True)

    # -- what a store shows ----------------------------------------------------------

    def held(self, index: int) -> set[Read]:
        return {(m.recipient, m.body) for m in self.stores[index].history("dev")}

    def unread(self, index: int) -> set[Read]:
        store = self.stores[index]
        return {(name, m.body) for name in MEMBERS for m in store.list_unread("dev", name)}

    def read_set(self, index: int) -> set[Read]:
        return self.held(index) - self.unread(index)

    # -- the message phase -----------------------------------------------------------

    @rule(machine=st.integers(0, STORES - 1), recipient=st.sampled_from(MEMBERS))
    def send(self, machine: int, recipient: str) -> None:
        self.sent += 1
        sender = "bob" if recipient == "alice" else "alice"
        self.stores[machine].send("dev", sender, recipient, f"message {self.sent}")

    def _push(self, machine: int, lose_ack: bool = False) -> None:
        store = self.stores[machine]
        candidates = list(store.sync_prepare_push(self.key, prepare_none(), 100).candidates)
        acks = self.stream.push(candidates)
        if not lose_ack:
            store.sync_reconcile_push(self.key, acks)

    @rule(machine=st.integers(0, STORES - 1), lose_ack=st.booleans())
    def push(self, machine: int, lose_ack: bool) -> None:
        self._push(machine, lose_ack)

    def _pull(self, machine: int) -> None:
        store = self.stores[machine]
        binding = store.sync_binding(self.key)
        assert binding is not None
        messages, cursor = self.classifier.page(self.stream, binding.transport_cursor)
        store.sync_apply_pull(self.key, messages, cursor)

    @rule(machine=st.integers(0, STORES - 1))
    def pull(self, machine: int) -> None:
        self._pull(machine)

    @rule(
        machine=st.integers(0, STORES - 1),
        recipient=st.sampled_from(MEMBERS),
        pick=st.integers(0, 10**6),
        consume=st.booleans(),
    )
    def mark_read(self, machine: int, recipient: str, pick: int, consume: bool) -> None:
        store = self.stores[machine]
        unread = store.list_unread("dev", recipient)
        if not unread:
            return
        message = unread[pick % len(unread)]
        if consume:
            tip = store.watch_tip([f"dev:{recipient}"])
            store.read_cursor_consume("dev", recipient, tip, [message.id])
        else:
            store.mark_read_batch("dev", recipient, [message.id])
        self.marked.add((recipient, message.body))

    # -- the read-state phase --------------------------------------------------------

    def _round(self, machine: int, fate: str = "complete") -> None:
        store = self.stores[machine]
        members = tuple((self.ids[name], name) for name in MEMBERS)
        context = SyncReadContext(0, self.stream.tip, members, MEMBERS)
        prepared = store.sync_prepare_read_state(self.key, context)
        if fate == "crash-after-prepare":
            return
        self.relay.merge(prepared)
        if fate == "response-lost":
            return
        snapshot = SyncReadSnapshot(0, self.stream.tip)
        if fate == "apply-fails":

            def die(point: str) -> None:
                if point == "read.apply.before_commit":
                    raise RuntimeError("injected failure before commit")

            before = self.read_set(machine)
            with mock.patch.object(connection, "crash_point", die):
                try:
                    store.sync_apply_read_state(self.key, snapshot, self.relay.page())
                except RuntimeError:
                    pass
                else:  # pragma: no cover - the crash point must be reached
                    raise AssertionError("read.apply.before_commit was never reached")
            assert self.read_set(machine) == before, "a failed apply left reads behind"
            return
        store.sync_apply_read_state(self.key, snapshot, self.relay.page())

    @rule(
        machine=st.integers(0, STORES - 1),
        fate=st.sampled_from(["complete", "response-lost", "apply-fails", "crash-after-prepare"]),
    )
    def read_round(self, machine: int, fate: str) -> None:
        self._round(machine, fate)

    @rule()
    def quiesce(self) -> None:
        for machine in range(STORES):
            self._push(machine)
        for machine in range(STORES):
            self._pull(machine)
        for _ in range(2):
            for machine in range(STORES):
                self._round(machine)
        everything = self.held(0)
        assert all(self.held(m) == everything for m in range(STORES)), "stores hold different"
        expected = everything - self.marked
        for machine in range(STORES):
            assert self.unread(machine) == expected, f"machine {machine} disagrees"

    # -- invariants ------------------------------------------------------------------

    @invariant()
    def read_state_never_moves_backwards_and_never_invents_a_read(self) -> None:
        for machine in range(STORES):
            now = self.read_set(machine)
            lost = self.seen[machine] - now
            assert not lost, f"machine {machine} forgot reads {sorted(lost)}"
            invented = now - self.marked
            assert not invented, f"machine {machine} reads {sorted(invented)} nobody marked"
            self.seen[machine] = now


#: The reader-side search of every uncovered message, as prepare ran it before
#: the ordered walk (issue #17): the oracle the walk must agree with.
_REFERENCE_FIRST_UNREAD = """
    SELECT min(s) FROM (
        SELECT (SELECT p.server_seq FROM sync_push AS p
                WHERE p.binding_pk = :binding AND p.local_position = m.seq
                  AND p.state = 'acked') AS s
        FROM messages AS m
        WHERE m.recipient_pk = :reader
          AND m.seq > coalesce(
                (SELECT local_position FROM read_frontiers WHERE member_pk = :reader), 0)
          AND NOT EXISTS (SELECT 1 FROM message_reads AS x
                          WHERE x.reader_pk = :reader AND x.msg_seq = m.seq)
        UNION ALL
        SELECT (SELECT q.server_seq FROM sync_quarantine AS q
                WHERE q.binding_pk = :binding AND q.local_position = m.seq
                  AND q.status = 'imported') AS s
        FROM messages AS m
        WHERE m.recipient_pk = :reader AND m.origin = 'imported'
          AND m.seq > coalesce(
                (SELECT local_position FROM read_frontiers WHERE member_pk = :reader), 0)
          AND NOT EXISTS (SELECT 1 FROM message_reads AS x
                          WHERE x.reader_pk = :reader AND x.msg_seq = m.seq)
    ) WHERE s > :after AND s <= :upto
"""


class FirstUnreadMachines(ReadStateMachines):
    """The same histories, checking after every step that the ordered walk
    for a member's first uncovered message finds what a search of the
    member's whole unread backlog finds, whatever the window (so both the
    walk and its fall-back past the window are exercised)."""

    @invariant()
    def the_ordered_walk_finds_the_first_uncovered_message(self) -> None:
        for store in self.stores:
            binding = store.sync_binding(self.key)
            assert binding is not None
            top = binding.transport_cursor
            for (reader,) in store.conn.execute("SELECT member_pk FROM members").fetchall():
                for after in sorted({0, 1, top // 2}):
                    args = {"binding": binding.pk, "reader": reader, "after": after, "upto": top}
                    expected = store.conn.execute(_REFERENCE_FIRST_UNREAD, args).fetchone()[0]
                    for window in (1, 2, 4096):
                        found = _first_unread_seq(
                            store.conn,
                            binding.pk,
                            reader,  # type: ignore[arg-type]
                            after,
                            top,
                            window,
                        )
                        assert found == expected, (after, window, found, expected)


FirstUnreadMachines.TestCase.settings = settings(
    max_examples=15, stateful_step_count=25, deadline=None
)
TestFirstUnreadWalk = FirstUnreadMachines.TestCase

ReadStateMachines.TestCase.settings = settings(
    max_examples=30, stateful_step_count=25, deadline=None
)
TestReadStateAcrossMachines = ReadStateMachines.TestCase
